// StreamTracer: the work a GPU stream ran while a trace was recording (util/trace.h), timed
// on the device with CUDA events: a pair of events around each traced piece of work (an
// op's kernels), resolved into trace events on the stream's lane once the stream has passed
// them. Device times are placed on the host's steady clock through a reference event,
// recorded and waited for (the stream idle) when the trace started.
#ifndef TOWER_DEVICE_CUDA_STREAM_TRACER_H_
#define TOWER_DEVICE_CUDA_STREAM_TRACER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace tower {

class StreamTracer {
 public:
  StreamTracer() = default;
  StreamTracer(const StreamTracer&) = delete;
  StreamTracer& operator=(const StreamTracer&) = delete;
  ~StreamTracer();

  // Around work queued on `stream` by the calling replica (whose lane the events take).
  // Errors of the timing events are dropped: a trace must never fail the work it watches.
  void Begin(cudaStream_t stream);
  void End(cudaStream_t stream, const char* name);
  // Turns every pair the stream has passed into trace events, in order; `all` after the
  // stream was synchronised (every pair then has).
  void Flush(bool all);

 private:
  struct Pending {
    cudaEvent_t begin;
    cudaEvent_t end;
    const char* name;
    int lane;
  };
  cudaEvent_t TakeEvent();
  // Resolves the front pairs whose end the stream has passed; with `all`, every pair.
  void FlushLocked(bool all);

  std::mutex mu_;
  cudaEvent_t reference_ = nullptr;
  int64_t reference_host_ns_ = 0;      // steady clock when the stream reached reference_
  int64_t reference_trace_start_ = 0;  // the trace (trace::StartSteadyNs) it was made for
  cudaEvent_t open_ = nullptr;         // Begin's event, until End
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
};

}  // namespace tower

#endif  // TOWER_DEVICE_CUDA_STREAM_TRACER_H_
