#include "device/cuda/stream_tracer.h"

#include "util/trace.h"

namespace tower {

StreamTracer::~StreamTracer() {
  for (const Pending& pending : pending_) {
    cudaEventDestroy(pending.begin);
    cudaEventDestroy(pending.end);
  }
  for (cudaEvent_t event : free_) cudaEventDestroy(event);
  if (open_ != nullptr) cudaEventDestroy(open_);
  if (reference_ != nullptr) cudaEventDestroy(reference_);
}

cudaEvent_t StreamTracer::TakeEvent() {
  if (!free_.empty()) {
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  if (cudaEventCreate(&event) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return event;
}

void StreamTracer::Begin(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t trace_start = trace::StartSteadyNs();
  if (reference_ == nullptr || reference_trace_start_ != trace_start) {
    // A new trace: a new reference point, taken with the stream idle so that the host's
    // clock after the wait is the device's time of the event.
    FlushLocked(/*all=*/false);
    if (reference_ == nullptr) reference_ = TakeEvent();
    if (reference_ == nullptr || cudaEventRecord(reference_, stream) != cudaSuccess ||
        cudaEventSynchronize(reference_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    reference_host_ns_ = trace::NowNs();
    reference_trace_start_ = trace_start;
  }
  if (open_ == nullptr) open_ = TakeEvent();
  if (open_ != nullptr && cudaEventRecord(open_, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    free_.push_back(open_);
    open_ = nullptr;
  }
}

void StreamTracer::End(cudaStream_t stream, const char* name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_ == nullptr) return;
  cudaEvent_t end = TakeEvent();
  if (end == nullptr || cudaEventRecord(end, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    if (end != nullptr) free_.push_back(end);
    return;
  }
  pending_.push_back(Pending{open_, end, name, trace::StreamLane(trace::CurrentLane())});
  open_ = nullptr;
  FlushLocked(/*all=*/false);
}

void StreamTracer::Flush(bool all) {
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked(all);
}

void StreamTracer::FlushLocked(bool all) {
  size_t done = 0;
  for (; done < pending_.size(); ++done) {
    const Pending& pending = pending_[done];
    if (!all && cudaEventQuery(pending.end) != cudaSuccess) {
      (void)cudaGetLastError();  // cudaErrorNotReady: not yet
      break;
    }
    float from_reference_ms = 0, duration_ms = 0;
    if (cudaEventElapsedTime(&from_reference_ms, reference_, pending.begin) == cudaSuccess &&
        cudaEventElapsedTime(&duration_ms, pending.begin, pending.end) == cudaSuccess) {
      trace::RecordComplete(pending.name, trace::Category::kStream, pending.lane, -1, -1,
                            reference_host_ns_ + static_cast<int64_t>(from_reference_ms * 1e6),
                            static_cast<int64_t>(duration_ms * 1e6));
    } else {
      (void)cudaGetLastError();
    }
    free_.push_back(pending.begin);
    free_.push_back(pending.end);
  }
  pending_.erase(pending_.begin(), pending_.begin() + done);
}

}  // namespace tower
