// The kernel launch: cudaemu::LaunchKernel(kernel, "kernel", grid, block, shared, stream,
// args...) does what kernel<<<grid, block, shared, stream>>>(args...) does. Launch sites are
// written with a macro that expands to the one or the other, e.g.
//
//   #ifdef CUDAEMU
//   #define TOWER_LAUNCH(kernel, grid, block, shared, stream, ...) \
//     ::cudaemu::LaunchKernel(kernel, #kernel, grid, block, shared, stream, __VA_ARGS__)
//   #else ...
//
// (a kernel template is named with its arguments: BinaryKernel<AddOp>).
#ifndef CUDAEMU_KERNEL_LAUNCH_H_
#define CUDAEMU_KERNEL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudaemu {
namespace internal {

// Checks the configuration and the stream, counts the launch and enqueues `body` (one kernel
// thread: the kernel called with its copied arguments) to run for every thread of the grid on
// the stream's worker. Errors are recorded as the calling thread's last error. `pointers`:
// the kernel's pointer arguments; one into another device's memory, without peer access
// enabled from the launching device, makes the kernel fault (cudaErrorIllegalAddress), as the
// GPU's memory system would when the kernel touched it.
void LaunchGrid(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                cudaStream_t stream, std::vector<const void*> pointers,
                std::function<void()> body);

// Adds `value` to `pointers` when it is a pointer to data.
template <typename T>
void AddIfDataPointer(const T& value, std::vector<const void*>* pointers) {
  if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>) {
    pointers->push_back(const_cast<const void*>(static_cast<const volatile void*>(value)));
  }
}

}  // namespace internal

// kernel<<<grid, block, shared_bytes, stream>>>(args...): the arguments are converted to the
// kernel's parameter types and copied now; launch errors (cudaErrorInvalidConfiguration,
// cudaErrorInvalidResourceHandle for an unknown stream, the context's sticky error) are
// recorded for cudaGetLastError, and faults of the kernel itself (cudaErrorLaunchFailure)
// surface at a later synchronisation, as on a GPU. Every kernel thread gets its own copy of
// the parameters.
template <typename... Params, typename... Args>
void LaunchKernel(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block,
                  size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "a kernel launched with the wrong number of arguments");
  using Copies = std::tuple<std::decay_t<Params>...>;
  static_assert(std::is_constructible_v<Copies, Args&&...>,
                "a kernel argument does not convert to its parameter's type");
  Copies copies(std::forward<Args>(args)...);
  std::vector<const void*> pointers;
  std::apply([&](const auto&... value) { (internal::AddIfDataPointer(value, &pointers), ...); },
             copies);
  internal::LaunchGrid(name, grid, block, shared_bytes, stream, std::move(pointers),
                       [kernel, copies = std::move(copies)]() { std::apply(kernel, copies); });
}

}  // namespace cudaemu

#endif  // CUDAEMU_KERNEL_LAUNCH_H_
