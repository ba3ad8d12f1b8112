#include "strategy/collectives/cuda/tree_sum_kernel.h"

#include "device/cuda/kernel_launch.h"

namespace tower::cuda {
namespace {

// Grid-stride over elements; each thread evaluates the whole plan for its element in
// registers (local memory past them): memory traffic is one read per input, one write per
// output.
__global__ void TreeSumKernel(TreeSumArgs args, int64_t count) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    float slot[kMaxTreeInputs + kMaxTreeSteps];
    for (int s = 0; s < args.num_inputs; ++s) slot[s] = args.inputs[s][i];
    for (int k = 0; k < args.num_steps; ++k) {
      slot[args.steps[k][0]] = __fadd_rn(slot[args.steps[k][1]], slot[args.steps[k][2]]);
    }
    const float root = slot[args.root];
    for (int o = 0; o < args.num_outputs; ++o) args.outputs[o][i] = root;
  }
}

}  // namespace

cudaError_t LaunchTreeSum(const TreeSumArgs& args, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 4096 ? blocks : 4096);
  return TOWER_LAUNCH_KERNEL(TreeSumKernel, grid, kThreads, 0, stream, args, count);
}

}  // namespace tower::cuda
