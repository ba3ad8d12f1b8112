// Single-thread iteration throughput of a few pipelines (batches/s and ns per row).
//   bazel run //tests/data:iterate_throughput
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "util/check.h"

namespace tower::data {
namespace {

// Busy work standing in for a training step.
void Spin(std::chrono::microseconds duration) {
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
  }
}

void Measure(const std::string& name, const Dataset& dataset, double seconds,
             std::chrono::microseconds step = std::chrono::microseconds(0)) {
  TOWER_CHECK_OK(dataset.status());
  int64_t batches = 0;
  int64_t rows = 0;
  double checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  for (int64_t epoch = 0; elapsed < seconds; ++epoch) {
    StatusOr<std::unique_ptr<Iterator>> iterator = dataset.MakeIterator(epoch);
    TOWER_CHECK_OK(iterator.status());
    while (true) {
      StatusOr<std::optional<Batch>> batch = (*iterator)->Next();
      TOWER_CHECK_OK(batch.status());
      if (!batch->has_value()) break;
      ++batches;
      rows += (*batch)->rows;
      checksum += (*batch)->targets[0];
      if (step.count() > 0) Spin(step);
      if ((batches & 1023) == 0) {
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (elapsed >= seconds) break;
      }
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("%-52s %12.0f batches/s %8.1f ns/row  (checksum %.3g)\n", name.c_str(),
              batches / elapsed, elapsed * 1e9 / rows, checksum);
}

// All rows of a finite dataset as one batch.
Batch AllRows(const Dataset& dataset) {
  StatusOr<std::unique_ptr<Iterator>> iterator = dataset.Batch(1 << 30).MakeIterator();
  TOWER_CHECK_OK(iterator.status());
  StatusOr<std::optional<Batch>> batch = (*iterator)->Next();
  TOWER_CHECK_OK(batch.status());
  return std::move(batch->value());
}

int Main() {
  const double seconds = 1.0;
  SyntheticOptions linreg_options;
  linreg_options.name = "linreg";
  const Dataset linreg = *Dataset::Synthetic(linreg_options);
  SyntheticOptions mlp_options;
  mlp_options.name = "mlp";
  const Dataset mlp = *Dataset::Synthetic(mlp_options);

  // The same rows in memory: 1M linreg rows, 16k mlp rows.
  SyntheticOptions finite = linreg_options;
  finite.rows = 1 << 20;
  const Batch linreg_rows = AllRows(*Dataset::Synthetic(finite));
  const Dataset linreg_tensors =
      *Dataset::FromTensors(linreg_rows.features, 1, linreg_rows.targets, 1);
  finite = mlp_options;
  finite.rows = 1 << 14;
  const Batch mlp_rows = AllRows(*Dataset::Synthetic(finite));
  const Dataset mlp_tensors = *Dataset::FromTensors(mlp_rows.features, 256, mlp_rows.targets, 1);

  Measure("Synthetic(linreg).Batch(64)", linreg.Batch(64), seconds);
  Measure("FromTensors(linreg 1M rows).Batch(64)", linreg_tensors.Batch(64), seconds);
  Measure("FromTensors(linreg 1M).Shuffle(1M).Batch(64)",
          linreg_tensors.Shuffle(1 << 20, 1).Batch(64), seconds);
  Measure("FromTensors(linreg 1M).Shuffle(1024).Batch(64)",
          linreg_tensors.Shuffle(1024, 1).Batch(64), seconds);
  Measure("FromTensors(linreg 1M).Batch(64).Prefetch(2)", linreg_tensors.Batch(64).Prefetch(2),
          seconds);
  Measure("Synthetic(linreg).Batch(64).Prefetch(2)", linreg.Batch(64).Prefetch(2), seconds);
  Measure("Synthetic(mlp).Batch(256)", mlp.Batch(256), seconds);
  Measure("FromTensors(mlp 16k rows).Batch(256)", mlp_tensors.Batch(256), seconds);
  Measure("FromTensors(mlp 16k).Shuffle(16k).Batch(256)", mlp_tensors.Shuffle(1 << 14, 1).Batch(256),
          seconds);
  // A consumer that works 300 µs per batch: Prefetch overlaps the generation with it.
  const std::chrono::microseconds step(300);
  Measure("Synthetic(mlp).Batch(256), 300us step", mlp.Batch(256), seconds, step);
  Measure("Synthetic(mlp).Batch(256).Prefetch(2), 300us step", mlp.Batch(256).Prefetch(2), seconds,
          step);
  return 0;
}

}  // namespace
}  // namespace tower::data

int main() { return tower::data::Main(); }
