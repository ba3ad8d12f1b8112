#include "model/tensorboard/event_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "data/tfrecord.h"
#include "model/tensorboard/event.pb.h"
#include "util/file.h"

namespace tower {
namespace tensorboard {
namespace {

// What TensorBoard expects in the first record of every event file.
constexpr char kFileVersion[] = "brain.Event:2";
// The plugin that shows simple_value scalars.
constexpr char kScalarsPlugin[] = "scalars";

// Writers opened by this process so far: the <n> of the file name.
std::atomic<int> writers_opened{0};

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host = name;
  for (char& c : host) {
    if (c == '/') c = '_';  // never a path separator in the file name
  }
  return host;
}

// StatusFromErrno's "<what>: <strerror>", then what to do about it.
Status IoError(int error, const std::string& what, const std::string& remedy) {
  const Status status = StatusFromErrno(error, what);
  return Status(status.code(), status.message() + " (" + remedy + ")");
}

}  // namespace

double EventFileWriter::WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                   double flush_seconds) {
  if (dir.empty()) {
    return InvalidArgumentError("TensorBoard: the log directory is empty: give one");
  }
  if (const Status made = MakeDirectories(dir); !made.ok()) {
    return Status(made.code(), "TensorBoard: cannot create the log directory '" + dir +
                                   "': " + made.message() +
                                   " (give a directory that can be created and written to)");
  }
  const std::string prefix = dir + (dir.back() == '/' ? "" : "/") + "events.out.tfevents." +
                             std::to_string(static_cast<int64_t>(WallTime())) + "." +
                             HostName() + "." + std::to_string(::getpid()) + ".";
  // O_EXCL: a file of another writer is never appended to; on a clash the next <n> is tried.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string path = prefix + std::to_string(writers_opened.fetch_add(1));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int open_error = errno;
      if (open_error == EEXIST) continue;
      return IoError(open_error, "TensorBoard: cannot create the event file '" + path + "'",
                     "give a log directory that can be written to");
    }
    std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, fd, flush_seconds));
    Event event;
    event.set_wall_time(WallTime());
    event.set_file_version(kFileVersion);
    TOWER_RETURN_IF_ERROR(writer->WriteEvent(event));
    TOWER_RETURN_IF_ERROR(writer->Flush());
    return writer;
  }
  return AlreadyExistsError("TensorBoard: every event file name tried in '" + dir +
                            "' exists already (" + prefix + "*)");
}

EventFileWriter::EventFileWriter(std::string path, int fd, double flush_seconds)
    : path_(std::move(path)),
      fd_(fd),
      flush_interval_(flush_seconds),
      last_flush_(std::chrono::steady_clock::now()) {}

EventFileWriter::~EventFileWriter() { Close().IgnoreError(); }

Status EventFileWriter::Fail(Status status) {
  if (error_.ok()) error_ = status;
  return status;
}

Status EventFileWriter::WriteScalar(const std::string& tag, int64_t step, float value,
                                    double wall_time) {
  return WriteScalars(step, {{tag, value}}, wall_time);
}

Status EventFileWriter::WriteScalars(int64_t step,
                                     const std::vector<std::pair<std::string, float>>& values,
                                     double wall_time) {
  if (values.empty()) return error_;
  Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  Summary* summary = event.mutable_summary();
  for (const auto& [tag, number] : values) {
    Summary::Value* value = summary->add_value();
    value->set_tag(tag);
    value->set_simple_value(number);
    // TensorBoard remembers a tag's plugin from its first value in a file.
    if (tags_described_.insert(tag).second) {
      value->mutable_metadata()->mutable_plugin_data()->set_plugin_name(kScalarsPlugin);
    }
  }
  TOWER_RETURN_IF_ERROR(WriteEvent(event));
  if (std::chrono::steady_clock::now() - last_flush_ >= flush_interval_) return Flush();
  return OkStatus();
}

Status EventFileWriter::WriteEvent(const Event& event) {
  TOWER_RETURN_IF_ERROR(error_);
  if (fd_ < 0) {
    return FailedPreconditionError("TensorBoard: the event file '" + path_ +
                                   "' is closed: nothing more can be written to it");
  }
  scratch_.clear();
  if (!event.SerializeToString(&scratch_)) {
    return Fail(InternalError("TensorBoard: could not serialize an event for '" + path_ + "'"));
  }
  data::AppendTfRecord(scratch_, &buffer_);
  return OkStatus();
}

Status EventFileWriter::Flush() {
  TOWER_RETURN_IF_ERROR(error_);
  if (fd_ < 0) return OkStatus();
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      return Fail(IoError(error, "TensorBoard: writing the event file '" + path_ + "'",
                          "free some space, or log to another directory"));
    }
    if (n == 0) {
      return Fail(IoError(EIO, "TensorBoard: writing the event file '" + path_ + "'",
                          "log to another directory"));
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  last_flush_ = std::chrono::steady_clock::now();
  return OkStatus();
}

Status EventFileWriter::Close() {
  if (fd_ < 0) return error_;
  Status flushed = Flush();
  const int fd = fd_;
  fd_ = -1;
  // close() can report a deferred write error (NFS); EINTR still closes on Linux.
  if (::close(fd) != 0) {
    const int error = errno;
    if (error != EINTR && flushed.ok()) {
      flushed = Fail(IoError(error, "TensorBoard: closing the event file '" + path_ + "'",
                             "its last events may be lost; log to another directory"));
    }
  }
  return flushed;
}

}  // namespace tensorboard
}  // namespace tower
