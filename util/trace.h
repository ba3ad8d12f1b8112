// Trace: spans of what each replica, the input pipeline and each GPU stream did, recorded
// only while a trace is running (Start .. Stop) and written in Chrome's Trace Event Format
// (model/trace_callback.h merges the workers' into one file).
//
//   { trace::Span span("forward", layer_index); ... }   // a complete event on this lane
//
// Off (the usual case) a Span costs one relaxed atomic load. On, each event is appended to
// a buffer of the recording thread (a mutex of its own, never contended but by Stop), so
// replicas never wait on each other to record.
//
// Lanes: each event carries the lane of the thread or replica fiber that recorded it
// (LaneScope, set by the strategy around each replica's work): replica r of this process
// records on lane r, the training loop and the input pipeline on kMainLane; events timed
// on a GPU stream go to StreamLane(r).
#ifndef TOWER_UTIL_TRACE_H_
#define TOWER_UTIL_TRACE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tower {
namespace trace {

// What an event is about (Chrome's "cat").
enum class Category : uint8_t {
  kStep,       // one training step of a replica
  kForward,    // a layer's forward (arg: layer index)
  kBackward,   // a layer's backward (arg: layer index)
  kAllReduce,  // a gradient bucket's sum (arg: bucket index; bytes)
  kWorkers,    // a collective among the workers, inside a replica's sum (bytes)
  kWait,       // waiting for other replicas or workers at a barrier
  kOptimizer,  // the update
  kData,       // the input pipeline (reading, shuffling, batching, sharding)
  kStream,     // work on a GPU stream, timed with CUDA events
};
const char* CategoryName(Category category);

// The lane of the training loop's thread and the input pipeline.
constexpr int kMainLane = -1;
// The lane of replica r's GPU stream.
constexpr int StreamLane(int replica) { return 1000 + replica; }

struct Event {
  const char* name;  // a string literal (or one that outlives the trace)
  Category category;
  int32_t lane;
  int32_t arg;       // layer or bucket index; -1: none
  int64_t bytes;     // -1: none
  int64_t start_ns;  // steady clock
  int64_t duration_ns;
};

namespace internal {
extern std::atomic<bool> recording;
void Record(const Event& event);
}  // namespace internal

// Whether a trace is running.
inline bool Recording() { return internal::recording.load(std::memory_order_relaxed); }

// Nanoseconds on the steady clock (what events carry).
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The lane events of this thread or replica fiber go to (kMainLane unless set).
int CurrentLane();
// Sets this thread's (or replica fiber's) lane while alive. Nests.
class LaneScope {
 public:
  explicit LaneScope(int lane);
  ~LaneScope();
  LaneScope(const LaneScope&) = delete;
  LaneScope& operator=(const LaneScope&) = delete;

 private:
  int previous_;
};

// A complete event from construction to destruction, on the current lane; nothing when no
// trace is running at construction.
class Span {
 public:
  explicit Span(const char* name, Category category, int arg = -1, int64_t bytes = -1) {
    if (Recording()) {
      event_ = Event{name, category, 0, arg, bytes, NowNs(), 0};
      active_ = true;
    }
  }
  ~Span() {
    if (active_) End();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void End();
  Event event_;
  bool active_ = false;
};

// An event whose times were measured elsewhere (a GPU stream's, from CUDA events).
void RecordComplete(const char* name, Category category, int lane, int arg, int64_t bytes,
                    int64_t start_ns, int64_t duration_ns);

// Starts recording (dropping whatever an earlier trace left); Stop ends it and returns every
// thread's events, in no particular order. Called by one thread, between steps.
void Start();
std::vector<Event> Stop();
// The steady-clock and Unix times (ns) of the running or last trace's Start, to place
// steady-clock events on a clock other hosts share.
int64_t StartSteadyNs();
int64_t StartUnixNs();

}  // namespace trace
}  // namespace tower

#endif  // TOWER_UTIL_TRACE_H_
