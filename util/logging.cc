#include "util/logging.h"

#include <sys/time.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <utility>

namespace tower {
namespace {

struct LoggingState {
  std::mutex mu;
  LogSink sink;         // Guarded by mu; empty = stderr.
  std::string prefix;   // Guarded by mu.
  std::atomic<int> min_severity{0};
};

LoggingState& Logging() {
  static LoggingState* const state = new LoggingState();  // Never destroyed: logging
  return *state;                                          // works during exit.
}

char SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo: return 'I';
    case LogSeverity::kWarning: return 'W';
    case LogSeverity::kError: return 'E';
  }
  return '?';
}

void Emit(LogSeverity severity, std::string_view body) {
  LoggingState& state = Logging();
  if (static_cast<int>(severity) < state.min_severity.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(state.mu);
  std::string line = state.prefix;
  line.append(body.data(), body.size());
  if (state.sink) {
    state.sink(severity, line);
  } else {
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
}

}  // namespace

LogSink SetLogSink(LogSink sink) {
  LoggingState& state = Logging();
  std::lock_guard<std::mutex> lock(state.mu);
  std::swap(state.sink, sink);
  return sink;
}

void SetMinLogSeverity(LogSeverity severity) {
  Logging().min_severity.store(static_cast<int>(severity), std::memory_order_relaxed);
}

LogSeverity MinLogSeverity() {
  return static_cast<LogSeverity>(Logging().min_severity.load(std::memory_order_relaxed));
}

void SetLogPrefix(std::string prefix) {
  LoggingState& state = Logging();
  std::lock_guard<std::mutex> lock(state.mu);
  state.prefix = std::move(prefix);
}

void LogRaw(LogSeverity severity, std::string_view line) { Emit(severity, line); }

struct ScopedLogCapture::State {
  std::mutex mu;
  std::string text;
};

ScopedLogCapture::ScopedLogCapture() : state_(new State()) {
  State* state = state_;
  previous_ = SetLogSink([state](LogSeverity, std::string_view line) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->text.append(line.data(), line.size());
    state->text.push_back('\n');
  });
}

ScopedLogCapture::~ScopedLogCapture() {
  SetLogSink(std::move(previous_));
  delete state_;
}

std::string ScopedLogCapture::text() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->text;
}

namespace internal {

LogMessage::LogMessage(LogSeverity severity, const char* file, int line)
    : severity_(severity) {
  timeval now;
  gettimeofday(&now, nullptr);
  tm local;
  localtime_r(&now.tv_sec, &local);
  char clock[32];
  std::snprintf(clock, sizeof(clock), "%02d:%02d:%02d.%03d", local.tm_hour, local.tm_min,
                local.tm_sec, static_cast<int>(now.tv_usec / 1000));
  std::string_view path(file);
  const size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  stream_ << SeverityLetter(severity) << ' ' << clock << ' ' << path << ':' << line << "] ";
}

LogMessage::~LogMessage() { Emit(severity_, stream_.str()); }

}  // namespace internal
}  // namespace tower
