// The progress thread of non-blocking communicators and the policy that decides when an
// operation returns ncclInProgress (progress.h).
#include "cudaemu/nccl/progress.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

namespace cudaemu::nccl {
namespace {

struct Policy {
  enum Kind { kSetup, kAlways, kRandom, kNever };
  Kind kind = kSetup;
  double probability = 0.5;  // kRandom
};

bool ParsePolicy(const std::string& text, Policy* policy) {
  Policy parsed;
  if (text == "setup") {
    parsed.kind = Policy::kSetup;
  } else if (text == "always") {
    parsed.kind = Policy::kAlways;
  } else if (text == "never") {
    parsed.kind = Policy::kNever;
  } else if (text == "random" || text.rfind("random:", 0) == 0) {
    parsed.kind = Policy::kRandom;
    if (text.size() > 7) {
      char* end = nullptr;
      parsed.probability = std::strtod(text.c_str() + 7, &end);
      if (*end != '\0' || !(parsed.probability >= 0 && parsed.probability <= 1)) return false;
    }
  } else {
    return false;
  }
  *policy = parsed;
  return true;
}

struct PolicyState {
  std::mutex mu;
  bool overridden = false;
  Policy policy;
  std::mt19937_64 random{internal::EmulationSeed() ^ 0x6e63636cULL};
};

PolicyState& State() {
  static PolicyState* const state = new PolicyState();  // never destroyed
  return *state;
}

Policy EnvironmentPolicy() {
  static const Policy policy = [] {
    Policy p;
    const char* text = std::getenv("CUDAEMU_NCCL_IN_PROGRESS");
    if (text != nullptr && text[0] != '\0' && !ParsePolicy(text, &p)) {
      std::fprintf(stderr,
                   "cudaemu NCCL: ignoring CUDAEMU_NCCL_IN_PROGRESS=\"%s\": expected setup, "
                   "always, never or random[:P] with 0 <= P <= 1; using setup\n",
                   text);
    }
    return p;
  }();
  return policy;
}

// One thread for the whole process, as NCCL's group jobs run off the caller's thread: jobs in
// the order they were handed over.
class ProgressThread {
 public:
  static ProgressThread& Get() {
    static ProgressThread* const thread = new ProgressThread();  // never destroyed (detached)
    return *thread;
  }

  void Hold(bool held) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = held;
    }
    cv_.notify_one();
  }

  void Add(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  ProgressThread() { std::thread([this] { Loop(); }).detach(); }

  void Loop() {
    std::mt19937_64 random(internal::EmulationSeed() ^ 0x70726f67ULL);
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty() && !held_; });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50 + random() % 450));
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool held_ = false;  // HoldProgress
};

}  // namespace

bool ReturnsInProgress(const std::vector<std::shared_ptr<Member>>& members, Operation operation) {
  bool nonblocking = false;
  bool connecting = false;
  {
    std::lock_guard<std::mutex> lock(Mu());
    for (const auto& member : members) {
      nonblocking = nonblocking || !member->blocking;
      connecting = connecting || !member->connected;
    }
  }
  if (!nonblocking) return false;
  PolicyState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  const Policy policy = state.overridden ? state.policy : EnvironmentPolicy();
  switch (policy.kind) {
    case Policy::kSetup:
      return operation == Operation::kFinalize || connecting;
    case Policy::kAlways:
      return true;
    case Policy::kRandom:
      return std::uniform_real_distribution<double>(0, 1)(state.random) < policy.probability;
    default:
      return false;
  }
}

void IssueLater(const std::vector<std::shared_ptr<Member>>& members, std::function<void()> issue) {
  {
    std::lock_guard<std::mutex> lock(Mu());
    for (const auto& member : members) ++member->issuing;
  }
  ProgressThread::Get().Add([members, issue = std::move(issue)] {
    issue();
    std::lock_guard<std::mutex> lock(Mu());
    for (const auto& member : members) --member->issuing;
    Cv().notify_all();
  });
}

ncclResult_t EnsureReadyLocked(Member& member, const char* function, std::string* reason) {
  if (member.issuing == 0) return ncclSuccess;
  *reason = std::string(function) + ": rank " + std::to_string(member.rank) +
            ": Attempt to use communicator before the previous operation returned "
            "ncclSuccess (it returned ncclInProgress: poll ncclCommGetAsyncError until it "
            "is no longer ncclInProgress first)";
  if (member.usage_error == ncclSuccess) {
    member.usage_error = ncclInvalidArgument;
    member.usage_reason = *reason;
  }
  return ncclInvalidArgument;
}

void HoldProgress(bool held) { ProgressThread::Get().Hold(held); }

bool OverrideInProgressPolicy(const char* policy) {
  PolicyState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  if (policy == nullptr) {
    state.overridden = false;
    return true;
  }
  Policy parsed;
  if (!ParsePolicy(policy, &parsed)) return false;
  state.policy = parsed;
  state.overridden = true;
  return true;
}

}  // namespace cudaemu::nccl
