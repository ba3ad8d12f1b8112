// EventFileWriter: one TensorBoard event file, written the way TensorFlow's summary writers
// write theirs, so that `tensorboard --logdir` reads it as it reads Keras's.
//
// The file is DIR/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n> (TensorBoard picks
// up files whose name holds "tfevents"; <n> counts the writers this process has opened, so
// that two in the same second never share a file). It is a TFRecord file of serialized Event
// messages (event.proto): each record is
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   `length` bytes of the Event   | uint32 masked CRC-32C of those bytes
//
// (data/tfrecord.h writes the framing). The first record is an Event whose file_version is
// "brain.Event:2"; each later one holds a Summary of scalars of one step.
//
// Writes are buffered in memory and reach the file on Flush, on Close, and at the first write
// after `flush_seconds` have passed since the last flush (so that a running TensorBoard sees
// the run advance). Every I/O error is a Status naming the file; after one, the writer keeps
// returning it.
#ifndef TOWER_MODEL_TENSORBOARD_EVENT_FILE_WRITER_H_
#define TOWER_MODEL_TENSORBOARD_EVENT_FILE_WRITER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"
#include "util/statusor.h"

namespace tower {
namespace tensorboard {

class Event;

class EventFileWriter {
 public:
  // Creates `dir` (and its parents) if needed, and a new event file in it holding the
  // file_version record (flushed: the file is complete from the start).
  static StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                           double flush_seconds = 2);
  // Closes the file; an error here is lost (call Close to see it).
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // The file's path: `dir`/events.out.tfevents....
  const std::string& path() const { return path_; }

  // One Event at `step` whose Summary holds the value of `tag`. `wall_time`: seconds since
  // the Unix epoch (WallTime()).
  Status WriteScalar(const std::string& tag, int64_t step, float value, double wall_time);
  // One Event at `step` holding every (tag, value) of `values`, in order (none: nothing is
  // written).
  Status WriteScalars(int64_t step, const std::vector<std::pair<std::string, float>>& values,
                      double wall_time);
  // Hands the buffered records to the file (no fsync: TensorBoard reads them from here on).
  Status Flush();
  // Flushes and closes the file; later writes are refused. Closing twice is OK.
  Status Close();

  // Seconds since the Unix epoch, now (an Event's wall_time).
  static double WallTime();

 private:
  EventFileWriter(std::string path, int fd, double flush_seconds);
  Status WriteEvent(const Event& event);
  Status Fail(Status status);

  std::string path_;
  int fd_;
  std::chrono::duration<double> flush_interval_;
  std::chrono::steady_clock::time_point last_flush_;
  std::string buffer_;  // whole records not yet written to the file
  std::string scratch_;  // one serialized Event
  // Tags whose first value (carrying the "scalars" plugin metadata) is in the file already.
  std::set<std::string> tags_described_;
  Status error_;  // the first I/O error, returned by every later call
};

}  // namespace tensorboard
}  // namespace tower

#endif  // TOWER_MODEL_TENSORBOARD_EVENT_FILE_WRITER_H_
