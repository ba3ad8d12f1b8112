// DeviceStream: the ordered queue of work of one logical device, and the copies in and out
// of its memory.
//
// Every logical GPU has its own CUDA stream (two virtual GPUs on one card run
// independently); a logical CPU's stream runs everything at once, on the calling thread
// (parallelism comes from replicas, one thread each). Kernels are enqueued on a device's
// stream; copies go through the methods below, so the code that moves tensors between
// devices needs no #ifdef and no knowledge of CUDA.
#ifndef TOWER_DEVICE_STREAM_H_
#define TOWER_DEVICE_STREAM_H_

#include <cstddef>

#include "util/status.h"

namespace tower {

class DeviceStream {
 public:
  virtual ~DeviceStream() = default;

  // True when the device's memory is host memory that the CPU may read and write directly
  // (logical CPUs; test GPUs). Then every copy below is a plain memcpy.
  virtual bool host_addressable() const = 0;

  // Host → this device. The host buffer may be reused as soon as this returns.
  virtual Status CopyFromHost(void* device_dst, const void* host_src, size_t bytes) = 0;
  // This device → host, after all work queued so far; the data is there when it returns.
  virtual Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  // Within this device, queued after the work so far.
  virtual Status CopyWithinDevice(void* dst, const void* src, size_t bytes) = 0;
  // From `src_stream`'s device into this one (another logical device, maybe on the same
  // card), ordered after the work queued on both streams; later work on either stream is
  // ordered after the copy, so `src` may be freed and reused at once.
  virtual Status CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                              size_t bytes) = 0;
  // Sets `bytes` bytes to zero, queued after the work so far.
  virtual Status Zero(void* dst, size_t bytes) = 0;
  // Waits until all work queued so far has finished; reports any asynchronous error.
  virtual Status Synchronize() = 0;

  // A small read that waits for the work queued before it and for nothing queued after:
  // StartRead queues the copy of `bytes` (at most kMaxEarlyReadBytes) from `device_src`;
  // FinishRead waits for that copy alone and writes the bytes to `host_dst`. Work queued
  // between the two may still run when FinishRead returns (how a one-GPU training step
  // reads its loss after forward and returns while backward runs). One read at a time per
  // stream: a StartRead drops a read not finished; a FinishRead with none started is an
  // error. Called by the thread that queues the stream's work.
  static constexpr size_t kMaxEarlyReadBytes = 64;
  virtual Status StartRead(const void* device_src, size_t bytes) = 0;
  virtual Status FinishRead(void* host_dst) = 0;

  // The platform's own handle (cudaStream_t for CUDA; nullptr for host streams).
  virtual void* native_handle() const = 0;

  // Traces (util/trace.h): the work queued between BeginTracedWork and EndTracedWork goes
  // on the trace as `name` (a string that outlives the trace), timed on the device, on the
  // calling replica's stream lane. Host streams run their work synchronously on the
  // replica's own lane already: nothing to do.
  virtual void BeginTracedWork() {}
  virtual void EndTracedWork(const char* name) {}
};

// What every stream keeps of its early read (DeviceStream::StartRead / FinishRead): one at a
// time, of 1 to kMaxEarlyReadBytes bytes, and the errors for anything else.
class EarlyRead {
 public:
  // Drops any read not finished; refuses a size out of range (then no read is started).
  Status Start(size_t bytes);
  // The started read's size in `*bytes`, and no read started any more; an error when none was.
  Status Finish(size_t* bytes);

 private:
  size_t bytes_ = 0;
  bool started_ = false;
};

// A stream over host memory: everything happens synchronously on the calling thread.
class HostStream : public DeviceStream {
 public:
  bool host_addressable() const override { return true; }
  Status CopyFromHost(void* device_dst, const void* host_src, size_t bytes) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  Status CopyWithinDevice(void* dst, const void* src, size_t bytes) override;
  Status CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                      size_t bytes) override;
  Status Zero(void* dst, size_t bytes) override;
  Status Synchronize() override { return OkStatus(); }
  // At once: a host stream has nothing queued.
  Status StartRead(const void* device_src, size_t bytes) override;
  Status FinishRead(void* host_dst) override;
  void* native_handle() const override { return nullptr; }

 private:
  alignas(8) unsigned char read_[kMaxEarlyReadBytes];
  EarlyRead reading_;
};

}  // namespace tower

#endif  // TOWER_DEVICE_STREAM_H_
