// Logging to stderr (or a sink a test installs), one line per message.
//
//   TOWER_LOG(INFO) << "Using MirroredStrategy with devices (" << names << ")";
//
// Lines look like "I 10:42:07.123 context.cc:88] message". Under several processes each
// process sets a prefix ("[rank 1] ") that starts every line it writes.
#ifndef TOWER_UTIL_LOGGING_H_
#define TOWER_UTIL_LOGGING_H_

#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace tower {

enum class LogSeverity { kInfo = 0, kWarning = 1, kError = 2 };

// Receives finished lines (without the trailing newline).
using LogSink = std::function<void(LogSeverity, std::string_view line)>;

// Replaces the sink (nullptr restores stderr) and returns the previous one.
LogSink SetLogSink(LogSink sink);
// Messages below `severity` are dropped. Default: kInfo.
void SetMinLogSeverity(LogSeverity severity);
LogSeverity MinLogSeverity();
// Text put at the start of every line, e.g. "[rank 1] ". Default: empty.
void SetLogPrefix(std::string prefix);

// Writes `line` as is (after the prefix): for lines whose exact form users rely on, such
// as TensorFlow's "Executing op MatMul in device /job:localhost/...".
void LogRaw(LogSeverity severity, std::string_view line);

// While alive, captures every line logged by any thread instead of writing it out.
class ScopedLogCapture {
 public:
  ScopedLogCapture();
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;
  // Everything captured so far, one line per message, each ending in '\n'.
  std::string text() const;

 private:
  struct State;
  State* state_;
  LogSink previous_;
};

namespace internal {

class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  std::ostringstream stream_;
};

}  // namespace internal
}  // namespace tower

#define TOWER_LOG_SEVERITY_INFO ::tower::LogSeverity::kInfo
#define TOWER_LOG_SEVERITY_WARNING ::tower::LogSeverity::kWarning
#define TOWER_LOG_SEVERITY_ERROR ::tower::LogSeverity::kError

#define TOWER_LOG(severity) \
  ::tower::internal::LogMessage(TOWER_LOG_SEVERITY_##severity, __FILE__, __LINE__).stream()

#endif  // TOWER_UTIL_LOGGING_H_
