// The summation tree of deterministic mode on the GPU (strategy/collectives/summation_tree.h): one
// kernel
// evaluates a SumPlan element by element over device buffers, with the same additions, in
// the same association, as RunSumPlan on the host — so every path gives the same bits.
// Plain C++ + CUDA runtime types, so that nvcc compiles the .cu file without the project's
// C++ headers.
#ifndef TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_KERNEL_H_
#define TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tower::cuda {

// Limits of one launch (the arguments travel by value, ~1.2 KB).
constexpr int kMaxTreeInputs = 64;   // partial sums read
constexpr int kMaxTreeSteps = 64;    // additions
constexpr int kMaxTreeOutputs = 32;  // buffers the root is written to

// One tensor's evaluation: slot s < num_inputs is inputs[s]; step k writes slot
// num_inputs + k = slot steps[k][1] + slot steps[k][2] (steps[k][0] names that slot); the
// root, slot `root`, goes to every outputs[o].
struct TreeSumArgs {
  const float* inputs[kMaxTreeInputs];
  float* outputs[kMaxTreeOutputs];
  int16_t steps[kMaxTreeSteps][3];
  int num_inputs = 0;
  int num_steps = 0;
  int num_outputs = 0;
  int root = 0;
};

// For i in [0, count): every input's element i is read before any output's element i is
// written (an output may be an input). Each addition is rounded once (__fadd_rn: no FMA
// contraction, no reassociation). Launched on `stream`.
cudaError_t LaunchTreeSum(const TreeSumArgs& args, int64_t count, cudaStream_t stream);

}  // namespace tower::cuda

#endif  // TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_KERNEL_H_
