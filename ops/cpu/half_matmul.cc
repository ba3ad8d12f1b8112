#include "ops/cpu/half_matmul.h"

#include <dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "device/intra_op.h"
#include "ops/dtype.h"

// oneDNN (Debian's build) runs its kernels on OpenMP. Each call here is one block of a
// product that our own intra-op threads already split, so OpenMP must not fan out again
// (two replicas on two cores would otherwise start four spinning threads).
extern "C" void omp_set_num_threads(int threads);

namespace tower::cpu {
namespace {

using dnnl::memory;

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// One block of a product, as oneDNN describes it: shapes, strides (in elements) and types.
struct BlockKey {
  int64_t m, n, k;
  int64_t a_rows_stride, a_cols_stride, b_rows_stride, b_cols_stride, c_stride;
  memory::data_type in, out;
  bool operator<(const BlockKey& o) const {
    return std::tie(m, n, k, a_rows_stride, a_cols_stride, b_rows_stride, b_cols_stride,
                    c_stride, in, out) < std::tie(o.m, o.n, o.k, o.a_rows_stride,
                                                  o.a_cols_stride, o.b_rows_stride,
                                                  o.b_cols_stride, o.c_stride, o.in, o.out);
  }
};

struct Block {
  memory::desc a, b, c, scratchpad;
  dnnl::matmul primitive;
  size_t scratchpad_bytes = 0;
};

// Primitives are made once per block shape (oneDNN compiles a kernel for each: ~1 ms) and
// then executed from any thread (oneDNN primitives are safe to execute concurrently).
const Block& BlockFor(const BlockKey& key) {
  static std::mutex mu;
  static std::map<BlockKey, Block>* blocks = new std::map<BlockKey, Block>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = blocks->find(key);
  if (it != blocks->end()) return it->second;
  Block block;
  block.a = memory::desc({key.m, key.k}, key.in, {key.a_rows_stride, key.a_cols_stride});
  block.b = memory::desc({key.k, key.n}, key.in, {key.b_rows_stride, key.b_cols_stride});
  block.c = memory::desc({key.m, key.n}, key.out, {key.c_stride, 1});
  // The scratchpad is ours (one per thread, below): oneDNN's own is shared by every
  // primitive of the process, and two threads running blocks of one product at once would
  // write into each other's.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(block.a, block.b, block.c),
                                               attr, Engine());
  block.scratchpad = pd.scratchpad_desc();
  block.scratchpad_bytes = block.scratchpad.get_size();
  block.primitive = dnnl::matmul(pd);
  return blocks->emplace(key, std::move(block)).first->second;
}

struct HalfJob {
  const void* a;  // 16-bit (bf16) or float32 (float16 widened)
  const void* b;
  void* c;
  int64_t m, n, k;
  bool transpose_a, transpose_b;
  size_t in_size, out_size;  // bytes per element
  memory::data_type in, out;
  int chunks;
};

// Columns [begin, end) of the product.
void ProductColumns(const HalfJob& job, int64_t begin, int64_t end) {
  thread_local bool single_threaded = false;
  if (!single_threaded) {
    omp_set_num_threads(1);
    single_threaded = true;
  }
  // a is [m, k] (or stored [k, m]); b is [k, n] (or stored [n, k]): strides of op(a), op(b).
  BlockKey key;
  key.m = job.m;
  key.n = end - begin;
  key.k = job.k;
  key.a_rows_stride = job.transpose_a ? 1 : job.k;
  key.a_cols_stride = job.transpose_a ? job.m : 1;
  key.b_rows_stride = job.transpose_b ? 1 : job.n;
  key.b_cols_stride = job.transpose_b ? job.k : 1;
  key.c_stride = job.n;
  key.in = job.in;
  key.out = job.out;
  const Block& block = BlockFor(key);
  // The block's first column of op(b): column `begin` of b, or row `begin` of stored bᵀ.
  const char* b = static_cast<const char*>(job.b) +
                  (job.transpose_b ? begin * job.k : begin) * job.in_size;
  char* c = static_cast<char*>(job.c) + begin * job.out_size;
  // This thread's stream, and its scratchpad, grown to the largest block it has run
  // (64-byte aligned); both go with the thread.
  thread_local dnnl::stream stream(Engine());
  thread_local std::vector<uint64_t> scratch;
  if (scratch.size() * sizeof(uint64_t) < block.scratchpad_bytes + 64) {
    scratch.resize((block.scratchpad_bytes + 64) / sizeof(uint64_t) + 1);
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(scratch.data());
  void* scratch_aligned = reinterpret_cast<void*>((base + 63) & ~uintptr_t{63});
  memory a_mem(block.a, Engine(), const_cast<void*>(job.a));
  memory b_mem(block.b, Engine(), const_cast<char*>(b));
  memory c_mem(block.c, Engine(), c);
  memory scratch_mem(block.scratchpad, Engine(), scratch_aligned);
  block.primitive.execute(stream, {{DNNL_ARG_SRC, a_mem},
                                    {DNNL_ARG_WEIGHTS, b_mem},
                                    {DNNL_ARG_DST, c_mem},
                                    {DNNL_ARG_SCRATCHPAD, scratch_mem}});
  stream.wait();
}

// Column blocks start at multiples of 64 (whole cache lines of bf16 and of float32 output).
constexpr int64_t kColumnAlign = 64;
constexpr double kMinChunkFlops = 2e6;

void ProductChunk(void* context, int chunk) {
  const HalfJob& job = *static_cast<const HalfJob*>(context);
  auto start = [&](int c) -> int64_t {
    if (c == job.chunks) return job.n;
    return kColumnAlign * ((2 * c * job.n + job.chunks * kColumnAlign) /
                           (2 * job.chunks * kColumnAlign));
  };
  ProductColumns(job, start(chunk), start(chunk + 1));
}

memory::data_type OneDnnType(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return memory::data_type::bf16;
    case DType::kFloat16: return memory::data_type::f16;
    default: return memory::data_type::f32;
  }
}

}  // namespace

Status HalfMatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                  Tensor& c) {
  const int64_t m = c.shape().dim(0);
  const int64_t n = c.shape().dim(1);
  const int64_t k = transpose_a ? a.shape().dim(0) : a.shape().dim(1);
  if (m == 0 || n == 0) return OkStatus();
  if (k == 0) {
    std::memset(c.raw_data(), 0, c.bytes());  // +0 in every type
    return OkStatus();
  }
  HalfJob job{a.raw_data(), b.raw_data(), c.raw_data(), m, n, k, transpose_a, transpose_b,
              DTypeSize(a.dtype()), DTypeSize(c.dtype()), OneDnnType(a.dtype()),
              OneDnnType(c.dtype()), 1};
  // float16: no fast kernel here; widened to float32 (exactly), multiplied in float32, and
  // the output rounded once. A float16 output goes through a float32 buffer.
  std::vector<float> wide_a, wide_b, wide_c;
  if (a.dtype() == DType::kFloat16) {
    auto widen = [](const Tensor& t, std::vector<float>* out) {
      const uint16_t* x = static_cast<const uint16_t*>(t.raw_data());
      out->resize(static_cast<size_t>(t.num_elements()));
      for (size_t i = 0; i < out->size(); ++i) (*out)[i] = Float16ToFloat(x[i]);
    };
    widen(a, &wide_a);
    widen(b, &wide_b);
    job.a = wide_a.data();
    job.b = wide_b.data();
    job.in = memory::data_type::f32;
    job.in_size = sizeof(float);
    if (c.dtype() == DType::kFloat16) {
      wide_c.resize(static_cast<size_t>(m * n));
      job.c = wide_c.data();
      job.out = memory::data_type::f32;
      job.out_size = sizeof(float);
    }
  }
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(k);
  if (flops >= 2 * kMinChunkFlops) {
    const int64_t wanted = std::min<int64_t>(CurrentIntraOpThreads(),
                                             static_cast<int64_t>(flops / kMinChunkFlops));
    job.chunks = static_cast<int>(std::max<int64_t>(1, std::min(wanted, n / kColumnAlign)));
  }
  try {
    if (job.chunks > 1) {
      ParallelFor(job.chunks, ProductChunk, &job);
    } else {
      ProductColumns(job, 0, n);
    }
  } catch (const dnnl::error& e) {
    return InternalError("MatMul in " + std::string(DTypeName(a.dtype())) + ": oneDNN: " +
                         e.what());
  }
  if (!wide_c.empty()) {
    uint16_t* out = static_cast<uint16_t*>(c.raw_data());
    for (size_t i = 0; i < wide_c.size(); ++i) out[i] = FloatToFloat16(wide_c[i]);
  }
  return OkStatus();
}

}  // namespace tower::cpu
