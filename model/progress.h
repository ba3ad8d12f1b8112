// The Keras-like progress line of Fit and Evaluate:
//   Epoch 1/10
//   32/32 [==============================] - 0s 1ms/step - loss: 0.2551 - mae: 0.4012
// On a terminal the line is redrawn in place (at most every 50 ms); elsewhere (a file, a
// pipe, CI) only the finished line of each epoch is written, so logs stay readable.
#ifndef TOWER_MODEL_PROGRESS_H_
#define TOWER_MODEL_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "model/logs.h"

namespace tower {

class ProgressBar {
 public:
  // `interactive`: redraw in place (a terminal). `verbose`: 0 silent, 1 bar, 2 one line
  // per epoch.
  ProgressBar(std::ostream* out, bool interactive, int verbose);

  void BeginEpoch(int epoch, int epochs, int64_t steps_in_epoch /* -1 unknown */);
  void Update(int64_t step, const Logs& logs);  // step: 1-based within the epoch
  void EndEpoch(int64_t steps, const Logs& logs);

  // "0.1234" style values, "1ms/step" style times: shared with tests.
  static std::string FormatLogs(const Logs& logs);
  static std::string FormatStepTime(double seconds_per_step);
  // Whether standard output is a terminal.
  static bool StdoutIsTerminal();

 private:
  std::string Line(int64_t step, const Logs& logs, bool finished) const;

  std::ostream* out_;
  bool interactive_;
  int verbose_;
  int64_t steps_in_epoch_ = -1;
  std::chrono::steady_clock::time_point epoch_start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tower

#endif  // TOWER_MODEL_PROGRESS_H_
