#include "util/trace.h"

#include <memory>
#include <mutex>

#include "util/fiber.h"

namespace tower {
namespace trace {
namespace internal {
std::atomic<bool> recording{false};
}  // namespace internal

namespace {

// One recording thread's events. The registry keeps it after its thread ends (a replica
// thread may end before Stop).
struct Buffer {
  std::mutex mu;
  std::vector<Event> events;  // guarded by mu
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Buffer>> buffers;  // guarded by mu
  int64_t start_steady_ns = 0;
  int64_t start_unix_ns = 0;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

Buffer& ThisThreadsBuffer() {
  thread_local std::shared_ptr<Buffer> buffer;
  if (buffer == nullptr) {
    buffer = std::make_shared<Buffer>();
    buffer->events.reserve(4096);
    Registry& registry = TheRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.buffers.push_back(buffer);
  }
  return *buffer;
}

// Set lanes are stored plus one, so that a fiber's or thread's first (zeroed) value means
// kMainLane.
FiberLocal<int>& LaneSlot() {
  static FiberLocal<int>* lane = new FiberLocal<int>();
  return *lane;
}

}  // namespace

const char* CategoryName(Category category) {
  switch (category) {
    case Category::kStep: return "step";
    case Category::kForward: return "forward";
    case Category::kBackward: return "backward";
    case Category::kAllReduce: return "all-reduce";
    case Category::kWorkers: return "across workers";
    case Category::kWait: return "wait";
    case Category::kOptimizer: return "optimizer";
    case Category::kData: return "data";
    case Category::kStream: return "stream";
  }
  return "?";
}

int CurrentLane() { return LaneSlot().Get() + kMainLane; }

LaneScope::LaneScope(int lane) : previous_(CurrentLane()) {
  LaneSlot().Get() = lane - kMainLane;
}

LaneScope::~LaneScope() { LaneSlot().Get() = previous_ - kMainLane; }

namespace internal {
void Record(const Event& event) {
  Buffer& buffer = ThisThreadsBuffer();
  std::lock_guard<std::mutex> lock(buffer.mu);
  buffer.events.push_back(event);
}
}  // namespace internal

void Span::End() {
  event_.duration_ns = NowNs() - event_.start_ns;
  event_.lane = CurrentLane();
  // A span that began before Stop and ends after it still belongs to the trace: Stop only
  // collects what was recorded by then, and the next Start drops the rest.
  internal::Record(event_);
}

void RecordComplete(const char* name, Category category, int lane, int arg, int64_t bytes,
                    int64_t start_ns, int64_t duration_ns) {
  internal::Record(Event{name, category, lane, arg, bytes, start_ns, duration_ns});
}

void Start() {
  Registry& registry = TheRegistry();
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    std::vector<std::shared_ptr<Buffer>> alive;
    for (std::shared_ptr<Buffer>& buffer : registry.buffers) {
      {
        std::lock_guard<std::mutex> buffer_lock(buffer->mu);
        buffer->events.clear();
      }
      // Only the registry holds a buffer whose thread has ended.
      if (buffer.use_count() > 1) alive.push_back(std::move(buffer));
    }
    registry.buffers = std::move(alive);
    registry.start_steady_ns = NowNs();
    registry.start_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  }
  internal::recording.store(true, std::memory_order_release);
}

std::vector<Event> Stop() {
  internal::recording.store(false, std::memory_order_release);
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<Event> all;
  for (const std::shared_ptr<Buffer>& buffer : registry.buffers) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mu);
    all.insert(all.end(), buffer->events.begin(), buffer->events.end());
    buffer->events.clear();
  }
  return all;
}

int64_t StartSteadyNs() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return registry.start_steady_ns;
}

int64_t StartUnixNs() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return registry.start_unix_ns;
}

}  // namespace trace
}  // namespace tower
