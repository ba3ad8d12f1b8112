// A trace of GPU replicas (2 virtual GPUs of one card): each replica's stream gets a lane of
// its own whose events are the ops' kernels, timed with CUDA events, in stream order, inside
// the traced window. Runs on cudaemu here (and on a real GPU where there is one).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/synthetic.h"
#include "device/context.h"
#include "model/callback.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "model/trace_callback.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/gpu.h"
#include "tests/testing/gpu_contexts.h"
#include "util/trace.h"

namespace tower {
namespace {

// Notes when the trace stopped: it runs after StepTrace, whose OnBatchEnd of the last traced
// step stops the trace. Every event in the file was recorded before that, so every stream
// event had ended by then. In µs on the trace's clock (one worker: the file's origin is this
// process's start).
class NoteTraceStop : public Callback {
 public:
  explicit NoteTraceStop(int64_t last_step) : last_step_(last_step) {}
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override {
    if (step == last_step_) stopped_us_ = (trace::NowNs() - trace::StartSteadyNs()) / 1e3;
    return OkStatus();
  }
  double stopped_us() const { return stopped_us_; }

 private:
  const int64_t last_step_;
  double stopped_us_ = -1;
};

TEST(GpuTraceTest, EachReplicasStreamHasALaneOfTimedKernels) {
  auto context = testing::RealGpuContext(2);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  ScopedDefaultContext use(*context);
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 24 * 8;
  mlp.seed = 5;
  const data::Dataset dataset = data::Dataset::Synthetic(mlp)->Batch(24);
  Sequential model({Dense(64, "tanh"), Dense(32, "relu"), Dense(1)}, 11);
  MirroredStrategyOptions options;
  options.context = context.get();
  std::vector<Device*> gpus = *context->Devices("GPU");
  for (int r = 0; r < 2; ++r) options.devices.push_back(gpus[r]->full_name());
  auto strategy = std::move(MirroredStrategy::Create(options)).value();
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f)));
  }
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/gpu_trace.json";
  FitOptions fit;
  fit.epochs = 1;
  fit.verbose = 0;
  auto stop = std::make_shared<NoteTraceStop>(3);
  fit.callbacks = {std::make_shared<StepTrace>(path, 2, 3), stop};
  TOWER_CHECK_OK(model.Fit(dataset, fit).status());

  std::ifstream file(path);
  const nlohmann::json trace = nlohmann::json::parse(file);
  std::map<int, std::vector<nlohmann::json>> lanes;
  std::map<int, std::string> names;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "X") lanes[event.at("tid")].push_back(event);
    if (event.at("ph") == "M" && event.at("name") == "thread_name") {
      names[event.at("tid")] = event.at("args").at("name");
    }
  }
  // Steps 2 and 3 on the replicas' lanes: the stream's work starts after the first of them
  // began (nothing runs before it is enqueued) and ends before the trace stopped (only work
  // the host had seen finish was recorded). Not inside the steps' host spans: a
  // step's last kernels (the update) may still run after its host span ended, which is the
  // point of an asynchronous stream.
  double first = 1e300, last = -1e300;
  for (int replica = 0; replica < 2; ++replica) {
    for (const nlohmann::json& event : lanes[replica]) {
      if (event.at("cat") != "step") continue;
      first = std::min(first, event.at("ts").get<double>());
      last = std::max(last, event.at("ts").get<double>() + event.at("dur").get<double>());
    }
  }
  ASSERT_LT(first, last);
  ASSERT_LT(last, stop->stopped_us());
  for (int replica = 0; replica < 2; ++replica) {
    const int lane = trace::StreamLane(replica);
    ASSERT_TRUE(lanes.count(lane)) << "no stream events of replica " << replica;
    EXPECT_THAT(names[lane], ::testing::HasSubstr("replica " + std::to_string(replica) + " stream"));
    std::vector<nlohmann::json>& events = lanes[lane];
    std::sort(events.begin(), events.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a.at("ts").get<double>() < b.at("ts").get<double>();
    });
    int matmuls = 0;
    double previous_end = -1e300;
    for (const nlohmann::json& event : events) {
      EXPECT_EQ(event.at("cat"), "stream");
      const double ts = event.at("ts"), dur = event.at("dur");
      EXPECT_GE(dur, 0);
      // A stream runs its work in order: no two of its events overlap.
      EXPECT_GE(ts, previous_end - 0.002) << event.dump();
      previous_end = ts + dur;
      // Inside [first traced step began, trace stopped], with 1 ms of slack for the meeting
      // of the stream's clock and the host's.
      EXPECT_GE(ts, first - 1000) << event.dump();
      EXPECT_LE(ts + dur, stop->stopped_us() + 1000) << event.dump();
      matmuls += event.at("name") == "MatMul";
    }
    // 3 layers forward and 2 products each backward (the first layer's input gradient is
    // not needed), per step: at least 3 per step.
    EXPECT_GE(matmuls, 6) << "replica " << replica;
  }
}

}  // namespace
}  // namespace tower
