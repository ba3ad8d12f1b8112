#include "model/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace tower {

ProgressBar::ProgressBar(std::ostream* out, bool interactive, int verbose)
    : out_(out), interactive_(interactive), verbose_(verbose) {}

bool ProgressBar::StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

std::string ProgressBar::FormatLogs(const Logs& logs) {
  std::string text;
  // "loss" first, as Keras prints it, then the rest by name.
  auto append = [&text](const std::string& key, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), " - %s: %.4g", key.c_str(), value);
    if (std::fabs(value) >= 1e-3 && std::fabs(value) < 1e5) {
      std::snprintf(buffer, sizeof(buffer), " - %s: %.4f", key.c_str(), value);
    }
    text += buffer;
  };
  auto loss = logs.find("loss");
  if (loss != logs.end()) append("loss", loss->second);
  for (const auto& [key, value] : logs) {
    if (key != "loss") append(key, value);
  }
  return text;
}

std::string ProgressBar::FormatStepTime(double seconds_per_step) {
  char buffer[32];
  if (seconds_per_step >= 1) {
    std::snprintf(buffer, sizeof(buffer), "%.0fs/step", seconds_per_step);
  } else if (seconds_per_step >= 1e-3) {
    std::snprintf(buffer, sizeof(buffer), "%.0fms/step", seconds_per_step * 1e3);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.0fus/step", seconds_per_step * 1e6);
  }
  return buffer;
}

void ProgressBar::BeginEpoch(int epoch, int epochs, int64_t steps_in_epoch) {
  steps_in_epoch_ = steps_in_epoch;
  epoch_start_ = std::chrono::steady_clock::now();
  last_draw_ = epoch_start_ - std::chrono::seconds(1);
  if (verbose_ == 1) *out_ << "Epoch " << epoch + 1 << "/" << epochs << "\n" << std::flush;
}

std::string ProgressBar::Line(int64_t step, const Logs& logs, bool finished) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  std::string line;
  if (steps_in_epoch_ > 0) {
    const std::string total = std::to_string(steps_in_epoch_);
    std::string count = std::to_string(step);
    count.insert(0, total.size() > count.size() ? total.size() - count.size() : 0, ' ');
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * std::min<int64_t>(step, steps_in_epoch_) /
                                        steps_in_epoch_);
    std::string bar(kWidth, '.');
    for (int i = 0; i < filled; ++i) bar[i] = '=';
    if (!finished && filled < kWidth) bar[filled] = '>';
    line = count + "/" + total + " [" + bar + "]";
  } else {
    line = std::to_string(step);
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), " - %.0fs ", elapsed);
  line += seconds + FormatStepTime(step > 0 ? elapsed / step : 0.0) + FormatLogs(logs);
  return line;
}

void ProgressBar::Update(int64_t step, const Logs& logs) {
  if (verbose_ != 1 || !interactive_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  *out_ << "\r" << Line(step, logs, false) << std::flush;
}

void ProgressBar::EndEpoch(int64_t steps, const Logs& logs) {
  if (verbose_ == 0) return;
  if (verbose_ == 1 && interactive_) *out_ << "\r";
  *out_ << Line(steps, logs, true) << "\n" << std::flush;
}

}  // namespace tower
