// The linear-regression example, built by CMake against an installed Tower: a Dense(1) model
// learns y = 3x + 2 under a MirroredStrategy of two logical CPUs.
#include <cstdio>
#include <memory>

#include "data/dataset.h"
#include "device/config.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"

int main() {
  // Two logical CPUs, so that the strategy has two replicas on any machine.
  const auto cpus = tower::config::ListPhysicalDevices("CPU");
  TOWER_CHECK_OK(tower::config::SetLogicalDeviceConfiguration(
      cpus[0], std::vector<tower::LogicalDeviceConfiguration>(2)));
  auto strategy = tower::MirroredStrategy::Create();
  TOWER_CHECK_OK(strategy.status());

  tower::data::SyntheticOptions linreg;
  linreg.name = "linreg";
  linreg.rows = 2000;
  auto dataset = tower::data::Dataset::Synthetic(linreg);
  TOWER_CHECK_OK(dataset.status());

  tower::Sequential model({tower::Dense(1)});
  {
    auto scope = (*strategy)->Scope();
    TOWER_CHECK_OK(model.Compile(tower::MeanSquaredErrorLoss(), tower::SGD(0.2f)));
  }
  tower::FitOptions fit;
  fit.epochs = 5;
  fit.verbose = 0;
  auto history = model.Fit(dataset->Shuffle(2000, 1).Batch(32), fit);
  TOWER_CHECK_OK(history.status());
  const float w = (*model.trainable_variables()[0]->Read())[0];
  const float b = (*model.trainable_variables()[1]->Read())[0];
  std::printf("%d replicas: w=%.2f b=%.2f\n", (*strategy)->num_replicas_in_sync(), w, b);
  return 0;
}
