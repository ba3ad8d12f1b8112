// Launchers of the hand-written CUDA kernels (ops/cuda/*.cu): flat functions over raw device
// pointers, so that nvcc sees none of the project's C++ headers and the glue
// (ops/cuda/cuda_kernels.cc) sees no device code.
//
// Every launcher enqueues its work on `stream` and returns the launch's error
// (cudaGetLastError); errors of the kernels themselves surface at the next synchronisation.
// The calling thread's current CUDA device must be the stream's. Tensors are float32 and
// row-major; a tensor of zero elements launches nothing. Results do not depend on the GPU
// model: grids are sized from the tensor shapes only, and no float is accumulated with
// atomics, so every launch is bitwise reproducible.
#ifndef TOWER_OPS_CUDA_LAUNCHERS_H_
#define TOWER_OPS_CUDA_LAUNCHERS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tower::gpu {

// ---- elementwise.cu ------------------------------------------------------------------------

// out[n] = a[n] + b[n]; Sub and Mul alike.
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchSub(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchMul(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// out[n] = alpha · x[n]
cudaError_t LaunchScale(const float* x, float alpha, float* out, int64_t n, cudaStream_t stream);
// out[n] = x below min → min, above max → max, else x (a NaN stays NaN).
cudaError_t LaunchClipByValue(const float* x, float min, float max, float* out, int64_t n,
                              cudaStream_t stream);
// out[n] = alpha · x[n] + y[n], the product rounded before the sum (as on the CPU).
cudaError_t LaunchAxpy(float alpha, const float* x, const float* y, float* out, int64_t n,
                       cudaStream_t stream);
// out[n] = inputs[0][n] + inputs[1][n] + ... + inputs[count − 1][n], added in that order in
// float (bitwise the CPU's result). `inputs` is a host array of `count` >= 1 device pointers.
cudaError_t LaunchAddN(const float* const* inputs, int64_t count, float* out, int64_t n,
                       cudaStream_t stream);
// out[rows, c] = x[rows, c] + bias[c]
cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* out, int64_t rows, int64_t c,
                          cudaStream_t stream);
// out[n] = value
cudaError_t LaunchFill(float* out, float value, int64_t n, cudaStream_t stream);

// y[n] = max(x, 0)
cudaError_t LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx[n] = x > 0 ? dy : 0
cudaError_t LaunchReluGrad(const float* dy, const float* x, float* dx, int64_t n,
                           cudaStream_t stream);
// y[n] = 1 / (1 + e^−x)
cudaError_t LaunchSigmoid(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx[n] = dy · y · (1 − y), y = sigmoid(x)
cudaError_t LaunchSigmoidGrad(const float* dy, const float* y, float* dx, int64_t n,
                              cudaStream_t stream);
// y[n] = tanh(x)
cudaError_t LaunchTanh(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx[n] = dy · (1 − y²), y = tanh(x)
cudaError_t LaunchTanhGrad(const float* dy, const float* y, float* dx, int64_t n,
                           cudaStream_t stream);
// grad[n] = (pred[n] − target[n]) · factor   (factor = 2 · loss scale)
cudaError_t LaunchMeanSquaredErrorGrad(const float* pred, const float* target, float factor,
                                       float* grad, int64_t n, cudaStream_t stream);

// ---- reduce.cu -----------------------------------------------------------------------------
// Sums accumulate in double (as the CPU kernels do), block by block in a fixed tree order,
// then a second pass adds the blocks' partial sums in a fixed order. `workspace` is device
// memory for the partial sums: at least the ...WorkspaceDoubles() count of doubles, 8-byte
// aligned; it may be nullptr when that count is 0.

// Doubles of workspace that the "all elements" sums below need for n elements.
int64_t SumAllWorkspaceDoubles(int64_t n);
// out[] = (Σ x[n]) / divisor, rounded once to float. n == 0 gives 0 / divisor.
cudaError_t LaunchSumAll(const float* x, int64_t n, double divisor, double* workspace, float* out,
                         cudaStream_t stream);
// out[] = scale · Σ (pred[n] − target[n])², each square rounded to float (as on the CPU).
cudaError_t LaunchSquaredErrorSum(const float* pred, const float* target, int64_t n, double scale,
                                  double* workspace, float* out, cudaStream_t stream);
// out[] = scale · Σ values[n], for per-row losses computed in double.
cudaError_t LaunchSumDoubles(const double* values, int64_t n, double scale, double* workspace,
                             float* out, cudaStream_t stream);

// Doubles of workspace for LaunchSumRows on x[rows, cols] (0 when one pass suffices).
int64_t SumRowsWorkspaceDoubles(int64_t rows, int64_t cols);
// out[cols] = (Σ_i x[i, cols]) / divisor: the sum along the batch (first) dimension.
cudaError_t LaunchSumRows(const float* x, int64_t rows, int64_t cols, double divisor,
                          double* workspace, float* out, cudaStream_t stream);

// ---- nn.cu ---------------------------------------------------------------------------------
// One warp per row, numerically stable (the row's maximum is subtracted before exp); the
// normaliser Σ exp is accumulated in double as on the CPU.
//
// The cross-entropy kernels check the labels: for a row whose label is outside [0, c) they
// read none of its logits, write none of its gradient (its row loss is 0), and atomicMin()
// its index into `*first_bad_row`, which the caller sets to ~0 (all ones) beforehand. After
// the launch `*first_bad_row` is the lowest offending row, the one the CPU kernel reports,
// or still ~0 when every label is valid.

// A row index as atomicMin takes it.
using RowIndex = unsigned long long;  // NOLINT(runtime/int)

// y[n, c] = softmax of each row of logits[n, c]
cudaError_t LaunchSoftmax(const float* logits, float* y, int64_t n, int64_t c, cudaStream_t stream);
// dx[n, c] = y · (dy − Σ_j dy_j · y_j), per row
cudaError_t LaunchSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t n, int64_t c,
                              cudaStream_t stream);
// row_loss[n] = logsumexp(logits[i, :]) − logits[i, labels[i]], in double; 0 for a bad label.
// Sum them with LaunchSumDoubles.
cudaError_t LaunchCrossEntropyRowLosses(const float* logits, const int32_t* labels, int64_t n,
                                        int64_t c, double* row_loss, RowIndex* first_bad_row,
                                        cudaStream_t stream);
// grad[n, c] = (softmax(logits[i, :]) − one_hot(labels[i])) · scale
cudaError_t LaunchCrossEntropyGrad(const float* logits, const int32_t* labels, int64_t n, int64_t c,
                                   float scale, float* grad, RowIndex* first_bad_row,
                                   cudaStream_t stream);

// ---- random.cu -----------------------------------------------------------------------------
// Element i is philox::Uniform / philox::Normal(seed, i, ...) (util/philox.h): bitwise the
// CPU kernels' values.

// out[n] uniform in [lo, hi)
cudaError_t LaunchRandomUniform(uint64_t seed, float lo, float hi, float* out, int64_t n,
                                cudaStream_t stream);
// out[n] normal with `mean` and `stddev`
cudaError_t LaunchRandomNormal(uint64_t seed, float mean, float stddev, float* out, int64_t n,
                               cudaStream_t stream);

// ---- training.cu ---------------------------------------------------------------------------
// In place. Products are rounded before they are added (no fused multiply-add), as the CPU
// kernels round them: SGD updates are bitwise the CPU's (Adam's up to the CPU's approximate
// vectorised sqrt).

// var[n] −= learning_rate · grad[n]
cudaError_t LaunchApplySgd(float* var, const float* grad, float learning_rate, int64_t n,
                           cudaStream_t stream);
// Keras's momentum SGD (attrs::Sgd): velocity[n] = momentum · velocity − lr · grad;
// var[n] += velocity, or with Nesterov var += momentum · velocity − lr · grad.
cudaError_t LaunchApplySgdMomentum(float* var, float* velocity, const float* grad,
                                   float learning_rate, float momentum, bool nesterov, int64_t n,
                                   cudaStream_t stream);
// Adam (attrs::Adam): m += (1 − β1)(g − m); v += (1 − β2)(g² − v);
// var −= decay · var (AdamW; skipped when decay is 0); var −= alpha · m / (√v + ε).
// All of var, m, v, grad are [n].
cudaError_t LaunchApplyAdam(float* var, float* m, float* v, const float* grad, float alpha,
                            float beta1, float beta2, float epsilon, float decay, int64_t n,
                            cudaStream_t stream);

}  // namespace tower::gpu

#endif  // TOWER_OPS_CUDA_LAUNCHERS_H_
