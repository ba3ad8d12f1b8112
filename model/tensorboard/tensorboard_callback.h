// TensorBoard: Keras's TensorBoard callback, for scalars. The chief process writes TensorBoard
// event files (event_file_writer.h) that `tensorboard --logdir=DIR` shows, laid out as Keras
// lays them out, so that training and validation appear as two runs:
//
//   DIR/train/events.out.tfevents...       per step (when asked):  batch_loss, batch_<metric>,
//                                           learning_rate, gradient_global_norm, loss_scale
//                                           (only under loss scaling), step_time_ms,
//                                           all_reduce_time_ms
//                                           per epoch: epoch_loss, epoch_<metric>
//   DIR/validation/events.out.tfevents...  per epoch, with validation data: epoch_loss,
//                                           epoch_<metric> (the logs' val_ figures)
//
// batch_loss and batch_<metric> are the step logs' figures: the epoch's running means up to
// that step, as Keras logs them. Per-step scalars are at step = the count of training steps
// (1 for the first; a step loss scaling skipped counts too, so that each has its own point;
// a continued run counts on from the optimizer's iterations); per-epoch scalars at step =
// the epoch index (0 for the first), as Keras's. The per-step figures other than the logs'
// come from Sequential::last_step_stats(): gradient_global_norm is the global norm of the
// summed gradients before clipping (absent at a step loss scaling skipped, whose sums
// overflowed), step_time_ms the step's wall time, all_reduce_time_ms the time replica 0
// spent in the gradient all-reduce, waiting for the others included (StepStats).
//
// Only the chief (Distribution::is_chief) writes; on other workers every call does nothing.
// The files are flushed at each epoch's end, at the end of training, and otherwise at least
// every `flush_seconds`.
#ifndef TOWER_MODEL_TENSORBOARD_TENSORBOARD_CALLBACK_H_
#define TOWER_MODEL_TENSORBOARD_TENSORBOARD_CALLBACK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "model/callback.h"
#include "model/tensorboard/event_file_writer.h"
#include "util/statusor.h"

namespace tower {

class TensorBoard : public Callback {
 public:
  // Keras's update_freq: "epoch" (epoch scalars only; 0), "batch" (every step; 1), or a
  // number N of steps (every N-th step). Anything else is an error naming the value.
  static StatusOr<int64_t> ParseUpdateFreq(const std::string& update_freq);

  // `update_every_steps`: 0 writes epoch scalars only, N > 0 also the step scalars of every
  // N-th step.
  explicit TensorBoard(std::string log_dir, int64_t update_every_steps = 0,
                       double flush_seconds = 2);
  ~TensorBoard() override;

  Status OnTrainBegin(Sequential& model) override;
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;
  Status OnTrainEnd(Sequential& model, const History& history) override;

  const std::string& log_dir() const { return log_dir_; }
  // The event files being written (empty before OnTrainBegin, on other workers, and for
  // validation until the first epoch with validation figures).
  std::string train_path() const { return train_ ? train_->path() : ""; }
  std::string validation_path() const { return validation_ ? validation_->path() : ""; }

 private:
  std::string Subdirectory(const std::string& name) const;

  std::string log_dir_;
  int64_t update_every_steps_;
  double flush_seconds_;
  bool active_ = false;             // the chief, between OnTrainBegin and OnTrainEnd
  bool restore_norm_ = false;       // record_gradient_norm before OnTrainBegin turned it on
  bool restore_step_times_ = false;  // record_all_reduce_time, likewise
  int64_t steps_ = 0;               // training steps so far (the per-step x axis)
  std::unique_ptr<tensorboard::EventFileWriter> train_;
  std::unique_ptr<tensorboard::EventFileWriter> validation_;
};

}  // namespace tower

#endif  // TOWER_MODEL_TENSORBOARD_TENSORBOARD_CALLBACK_H_
