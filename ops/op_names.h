// The name of every op, as the kernel registry and the placement log know it.
#ifndef TOWER_OPS_OP_NAMES_H_
#define TOWER_OPS_OP_NAMES_H_

#include <string_view>

namespace tower::op_names {

inline constexpr char kMatMul[] = "MatMul";
inline constexpr char kMatMulAdd[] = "MatMulAdd";
inline constexpr char kFusedMatMul[] = "FusedMatMul";
inline constexpr char kBiasAdd[] = "BiasAdd";
inline constexpr char kAdd[] = "Add";
inline constexpr char kSub[] = "Sub";
inline constexpr char kMul[] = "Mul";
inline constexpr char kScale[] = "Scale";
inline constexpr char kAxpy[] = "Axpy";
inline constexpr char kClipByValue[] = "ClipByValue";
inline constexpr char kAddN[] = "AddN";
inline constexpr char kReduceSum[] = "ReduceSum";
inline constexpr char kReduceMean[] = "ReduceMean";
inline constexpr char kRelu[] = "Relu";
inline constexpr char kReluGrad[] = "ReluGrad";
inline constexpr char kSigmoid[] = "Sigmoid";
inline constexpr char kSigmoidGrad[] = "SigmoidGrad";
inline constexpr char kTanh[] = "Tanh";
inline constexpr char kTanhGrad[] = "TanhGrad";
inline constexpr char kSoftmax[] = "Softmax";
inline constexpr char kSoftmaxGrad[] = "SoftmaxGrad";
inline constexpr char kMeanSquaredError[] = "MeanSquaredError";
inline constexpr char kMeanSquaredErrorGrad[] = "MeanSquaredErrorGrad";
inline constexpr char kSparseSoftmaxCrossEntropy[] = "SparseSoftmaxCrossEntropy";
inline constexpr char kSparseSoftmaxCrossEntropyGrad[] = "SparseSoftmaxCrossEntropyGrad";
inline constexpr char kFill[] = "Fill";
inline constexpr char kConcat[] = "Concat";
inline constexpr char kCast[] = "Cast";
inline constexpr char kRandomUniform[] = "RandomUniform";
inline constexpr char kRandomNormal[] = "RandomNormal";
inline constexpr char kApplySgd[] = "ApplySgd";
inline constexpr char kApplyAdam[] = "ApplyAdam";
// Not a kernel: the placement log name of a constant made from host data (TensorFlow's).
inline constexpr char kEagerConst[] = "_EagerConst";

// Ops that deliberately have no GPU kernel (like TensorFlow's tf.cast): placed on a
// GPU, they fall back to the CPU.
inline bool IsCpuOnly(std::string_view op) { return op == kCast; }

}  // namespace tower::op_names

#endif  // TOWER_OPS_OP_NAMES_H_
