#include "ops/eager.h"

#include <vector>

#include "util/trace.h"

namespace tower {

const OpKernels& KernelsOf(std::string_view op) { return KernelRegistry::Global().Op(op); }

StatusOr<Tensor> RunSingle(const OpKernels& op, Span<const Tensor* const> inputs,
                           const OutputSpec& spec, const void* attrs,
                           const RunOptions& options) {
  Tensor out;
  Tensor* outputs[] = {&out};
  TOWER_RETURN_IF_ERROR(RunOp(op, inputs, Span<const OutputSpec>(&spec, 1), attrs,
                              Span<Tensor* const>(outputs, 1), options));
  return out;
}

Status RunOp(const OpKernels& op, Span<const Tensor* const> inputs,
             Span<const OutputSpec> specs, const void* attrs, Span<Tensor* const> outputs,
             const RunOptions& options) {
  TOWER_CHECK(specs.size() == outputs.size()) << op.name() << ": specs and outputs differ";
  // The inputs' context and device (all inputs share a context; the first one's device
  // stands for them, as replicas keep all of a step's tensors on their device).
  Device* input_device = nullptr;
  for (const Tensor* input : inputs) {
    if (!input->valid()) {
      return InvalidArgumentError(op.name() + ": an input is an empty Tensor handle");
    }
    if (input_device == nullptr) {
      input_device = input->device();
    } else if (input->device()->context() != input_device->context()) {
      return InvalidArgumentError(op.name() + ": inputs come from two different Contexts");
    }
  }
  Context* context = input_device != nullptr ? input_device->context()
                     : options.context != nullptr ? options.context
                     : options.pinned != nullptr  ? options.pinned->context()
                                                  : &Context::Default();
  const std::string_view log_name = options.log_name.empty() ? op.name() : options.log_name;

  Device* device = options.pinned;
  if (device != nullptr) {
    if (!op.HasKernelFor(*device)) {
      return NotFoundError(op.name() + " has no kernel for " + device->full_name() +
                           "; it has kernels for: " + op.DescribeKernels());
    }
    LogPlacement(*context, log_name, *device);
  } else {
    TOWER_ASSIGN_OR_RETURN(device, PlaceOp(*context, log_name, op, input_device));
  }
  const KernelFn kernel = op.Find(*device);

  // Inputs not on the device are copied there; most calls need no copy and allocate
  // nothing here. The logical CPUs share host memory: a CPU kernel reads another CPU's
  // input in place (TensorFlow's CPU-to-CPU copy is a reference too), which is how
  // replicas that share their variables read them.
  constexpr size_t kInline = 8;
  const Tensor* placed_inline[kInline];
  std::vector<const Tensor*> placed_heap;
  const Tensor** placed = placed_inline;
  if (inputs.size() > kInline) {
    placed_heap.resize(inputs.size());
    placed = placed_heap.data();
  }
  std::vector<Tensor> copies;
  for (size_t i = 0; i < inputs.size(); ++i) {
    placed[i] = inputs[i];
    const Device* from = inputs[i]->device();
    if (from != device && !(from->is_cpu() && device->is_cpu())) {
      if (copies.empty()) copies.reserve(inputs.size());
      TOWER_ASSIGN_OR_RETURN(Tensor copy, inputs[i]->CopyTo(device));
      copies.push_back(std::move(copy));
      placed[i] = &copies.back();
    }
  }

  // Outputs are written only when the kernel succeeds.
  Tensor results_inline[2];
  std::vector<Tensor> results_heap;
  Tensor* results = results_inline;
  if (specs.size() > 2) {
    results_heap.resize(specs.size());
    results = results_heap.data();
  }
  Tensor* result_ptrs_inline[2];
  std::vector<Tensor*> result_ptrs_heap(specs.size() > 2 ? specs.size() : 0);
  Tensor** result_ptrs = specs.size() > 2 ? result_ptrs_heap.data() : result_ptrs_inline;
  for (size_t i = 0; i < specs.size(); ++i) {
    TOWER_ASSIGN_OR_RETURN(results[i], Tensor::Empty(device, specs[i].shape, specs[i].dtype));
    result_ptrs[i] = &results[i];
  }
  const KernelContext kernel_context{device, Span<const Tensor* const>(placed, inputs.size()),
                                     Span<Tensor* const>(result_ptrs, specs.size()), attrs};
  // While a trace records, a GPU's work is timed on its stream (device/stream.h).
  DeviceStream* const traced_stream =
      trace::Recording() && !device->stream().host_addressable() ? &device->stream() : nullptr;
  if (traced_stream != nullptr) traced_stream->BeginTracedWork();
  Status status = kernel(kernel_context);
  if (traced_stream != nullptr) traced_stream->EndTracedWork(op.name().c_str());
  if (!status.ok()) return status.WithContext(op.name() + " on " + device->full_name());
  for (size_t i = 0; i < specs.size(); ++i) *outputs[i] = std::move(results[i]);
  return OkStatus();
}

}  // namespace tower
