#include "strategy/collectives/in_process_all_reduce.h"

#include <algorithm>
#include <cstring>

#if defined(__clang__)
#define TOWER_LOOP_NO_ALIASING _Pragma("clang loop vectorize(assume_safety)")
#else
#define TOWER_LOOP_NO_ALIASING _Pragma("GCC ivdep")
#endif

namespace tower {
namespace {

// out_k[i] = Σ_j in_j[i] (j in replica order) for every k, in one pass for N buffers: N loads,
// N−1 adds and N stores per element, no temporary. The buffers are distinct tensors (they
// never overlap), which lets the loop be vectorised.
template <int N>
void SumIntoAllFixed(float* const* buffers, int64_t begin, int64_t end) {
  float* b[N];
  for (int k = 0; k < N; ++k) b[k] = buffers[k];
  TOWER_LOOP_NO_ALIASING
  for (int64_t i = begin; i < end; ++i) {
    float sum = b[0][i];
    for (int k = 1; k < N; ++k) sum += b[k][i];
    for (int k = 0; k < N; ++k) b[k][i] = sum;
  }
}

// Sums n float arrays element-wise into every one of them: out_k[i] = Σ_j in_j[i] for all k,
// summed in replica order (every replica count and slicing gives the same bits).
// Up to 8 replicas: one fused pass. More: blocks of 512 floats keep the partial sum in L1.
void SumIntoAll(float* const* buffers, int n, int64_t begin, int64_t end) {
  switch (n) {
    case 2: return SumIntoAllFixed<2>(buffers, begin, end);
    case 3: return SumIntoAllFixed<3>(buffers, begin, end);
    case 4: return SumIntoAllFixed<4>(buffers, begin, end);
    case 5: return SumIntoAllFixed<5>(buffers, begin, end);
    case 6: return SumIntoAllFixed<6>(buffers, begin, end);
    case 7: return SumIntoAllFixed<7>(buffers, begin, end);
    case 8: return SumIntoAllFixed<8>(buffers, begin, end);
    default: break;
  }
  constexpr int64_t kBlock = 512;
  alignas(64) float sum[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    const float* first = buffers[0] + i;
    for (int64_t j = 0; j < len; ++j) sum[j] = first[j];
    for (int k = 1; k < n; ++k) {
      const float* in = buffers[k] + i;
      for (int64_t j = 0; j < len; ++j) sum[j] += in[j];
    }
    for (int k = 0; k < n; ++k) std::memcpy(buffers[k] + i, sum, len * sizeof(float));
  }
}

// sum[j] = Σ_k buffers[k][begin + j] for j < len (len ≤ kHandOverBlock), in replica order:
// the bits SumIntoAll writes.
constexpr int64_t kHandOverBlock = 2048;  // 8 KB: the sum stays in L1 for the update
void SumBlock(float* const* buffers, int n, int64_t begin, int64_t len, float* sum) {
  const float* first = buffers[0] + begin;
  for (int64_t j = 0; j < len; ++j) sum[j] = first[j];
  for (int k = 1; k < n; ++k) {
    const float* in = buffers[k] + begin;
    for (int64_t j = 0; j < len; ++j) sum[j] += in[j];
  }
}

// A sum of at most this many elements per replica, times the replica count, is done whole
// by the last replica to arrive, before it opens the barrier: the others wait for it
// instead of meeting a second time. What a meeting costs grows with the replicas (each
// arrival is a line from another core; with more replicas than cores, a fiber switch), what
// one replica's whole sum costs more per element does not. Measured with allreduce_bench on
// 2026-11-26, split against whole in alternating runs: whole won at 2 replicas up to 4 KB
// each (8 KB lost, 2.0 against 1.7 µs), at 4 up to 8 KB (3.1-3.9 against 4.0-4.4 µs), at 8
// up to 16 KB (7.8-8.0 against 10.8-11.5 µs; 32 KB lost).
constexpr int64_t kSummedWholeElementsPerReplica = 512;
// What the last replica to arrive decided (ReplicaBarrier's word): every replica sums a
// slice; it summed the lists whole; it found them mismatched (InProcessAllReduce::decision_).
constexpr uint64_t kSplit = 0;
constexpr uint64_t kSummedWhole = 1;
constexpr uint64_t kRefused = 2;

}  // namespace

InProcessAllReduce::InProcessAllReduce(std::vector<std::string> replica_names,
                                       std::chrono::milliseconds timeout, bool spin)
    : names_(replica_names),
      barrier_(std::move(replica_names), timeout, spin),
      published_(names_.size()),
      flat_(names_.size()),
      published_parts_(names_.size()),
      tree_lists_(names_.size()),
      plans_(names_.size()),
      scratch_(names_.size()) {}

void InProcessAllReduce::Publish(int replica, Span<Tensor* const> tensors) {
  // Each field is written only when it changes: a step's tensors usually come back at the
  // same addresses (the allocator reuses them), and a line left unwritten stays in the
  // summing replica's cache instead of crossing cores again.
  if (published_[replica].data() != tensors.data() ||
      published_[replica].size() != tensors.size()) {
    published_[replica] = tensors;
  }
  FlatList& flat = flat_[replica];
  const uint64_t fingerprint = TensorLayoutFingerprint(tensors);
  if (flat.fingerprint != fingerprint) flat.fingerprint = fingerprint;
  // Keeps its capacity: no allocation once sized.
  if (flat.tensors.size() != tensors.size()) flat.tensors.resize(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const FlatTensor now{static_cast<float*>(tensors[t]->raw_data()), tensors[t]->num_elements()};
    FlatTensor& was = flat.tensors[t];
    if (was.data != now.data || was.count != now.count) was = now;
  }
}

Status InProcessAllReduce::CheckFolded(int replica, size_t folded) const {
  // One replica's list against its group's first (a line of its own thread's), or every
  // replica's (the last to arrive, summing the lists whole, checks for all).
  const size_t first = replica < 0 ? static_cast<size_t>(fold_groups_)
                                   : static_cast<size_t>(replica);
  const size_t end = replica < 0 ? flat_.size() : first + 1;
  for (size_t r = first; r < end && r >= static_cast<size_t>(fold_groups_); ++r) {
    const size_t leader = r % static_cast<size_t>(fold_groups_);
    for (size_t t = 0; t < folded; ++t) {
      if (flat_[r].tensors[t].data != flat_[leader].tensors[t].data) {
        return InvalidArgumentError("all-reduce of folded gradients: " + names_[r] +
                                    " passed another tensor " + std::to_string(t) + " than " +
                                    names_[leader] + ", the first of its group (a bug of "
                                    "the caller: folded replicas pass their group's sums)");
      }
    }
  }
  return OkStatus();
}

Status InProcessAllReduce::CheckPublished(int replica, size_t folded, bool for_all) const {
  for (const FlatList& flat : flat_) {
    if (flat.fingerprint != flat_[0].fingerprint) return CheckAll();
  }
  if (folded > 0) TOWER_RETURN_IF_ERROR(CheckFolded(for_all ? -1 : replica, folded));
  // One layout: this replica's list stands for all of them.
  const Span<Tensor* const>& mine = published_[replica];
  for (size_t t = 0; t < mine.size(); ++t) TOWER_RETURN_IF_ERROR(CheckSummable(replica, t));
  return OkStatus();
}

Status InProcessAllReduce::CheckAll() const {
  for (size_t r = 0; r < published_.size(); ++r) {
    TOWER_RETURN_IF_ERROR(CheckAgainstFirst(static_cast<int>(r)));
  }
  return OkStatus();
}

Status InProcessAllReduce::CheckAgainstFirst(int replica) const {
  const Span<Tensor* const>& mine = published_[replica];
  const Span<Tensor* const>& first = published_[0];
  if (mine.size() != first.size()) {
    return InvalidArgumentError("all-reduce mismatch: " + names_[replica] + " passed " +
                                std::to_string(mine.size()) + " tensors, " + names_[0] +
                                " passed " + std::to_string(first.size()));
  }
  for (size_t t = 0; t < mine.size(); ++t) {
    const Tensor& a = *first[t];
    const Tensor& b = *mine[t];
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
      return InvalidArgumentError(
          "all-reduce mismatch at tensor " + std::to_string(t) + ": " + names_[0] + " has " +
          std::string(DTypeName(a.dtype())) + a.shape().ToString() + ", " + names_[replica] +
          " has " + std::string(DTypeName(b.dtype())) + b.shape().ToString());
    }
    TOWER_RETURN_IF_ERROR(CheckSummable(replica, t));
  }
  return OkStatus();
}

Status InProcessAllReduce::CheckSummable(int replica, size_t t) const {
  const Tensor& b = *published_[replica][t];
  if (b.dtype() != DType::kFloat32) {
    return InvalidArgumentError("all-reduce sums float32 tensors; tensor " + std::to_string(t) +
                                " is " + std::string(DTypeName(b.dtype())));
  }
  if (!b.device()->stream().host_addressable()) {
    return InvalidArgumentError("the in-process all-reduce needs host memory, but " +
                                names_[replica] + " holds tensor " + std::to_string(t) + " on " +
                                b.device()->full_name());
  }
  return OkStatus();
}

Status InProcessAllReduce::RunAllReduce(int replica, Span<Tensor* const> tensors,
                                        const AllReduceOptions& options) {
  if (options.tree != nullptr) return SumTree(replica, *options.tree, tensors);
  return Sum(replica, tensors, options.handed, options.first_gradient, options.sink,
             options.folded);
}

Status InProcessAllReduce::CheckSupported(const AllReduceOptions& options) const {
  if (options.folded > 0 && (fold_groups_ <= 0 || options.fold_groups != fold_groups_)) {
    return InvalidArgumentError("the in-process all-reduce: " + std::to_string(options.folded) +
                                " folded tensors (AllReduceOptions::folded) from " +
                                std::to_string(options.fold_groups) + " groups, but " +
                                (fold_groups_ <= 0 ? std::string("folding is not enabled")
                                                   : "it folds " + std::to_string(fold_groups_)));
  }
  return OkStatus();
}

Status InProcessAllReduce::Sum(int replica, Span<Tensor* const> tensors, size_t handed,
                               size_t first_gradient, SummedGradientSink* sink,
                               size_t folded) {
  const int n = static_cast<int>(names_.size());
  if (n == 1) {
    // One replica: its tensors are the sums.
    for (size_t t = 0; t < handed; ++t) {
      sink->Consume(first_gradient + t, 0, tensors[t]->num_elements(), tensors[t]->data<float>());
    }
    return OkStatus();
  }
  int64_t total = 0;
  for (const Tensor* t : tensors) total += t->num_elements();
  Publish(replica, tensors);
  // The last replica to arrive decides for all how the sum is split: its own list small, it
  // checks every list and sums them whole before it opens the barrier (one meeting); else
  // every replica checks and sums a slice after it (two). One replica's decision, so a
  // small list on one replica and a large one on another is the same mismatch on all, never
  // a hang; and one that reads no other core's data when it splits.
  auto decide = [&]() -> uint64_t {
    if (total > kSummedWholeElementsPerReplica * n) return kSplit;
    Status check = CheckPublished(replica, folded, /*for_all=*/true);
    if (!check.ok()) {
      decision_ = std::move(check);  // written only then: see decision_
      return kRefused;
    }
    SumSlice(tensors, 0, total, handed, first_gradient, sink, folded);
    return kSummedWhole;
  };
  uint64_t decided = kSplit;
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica, decide, &decided));
  if (decided == kSummedWhole) return OkStatus();
  if (decided == kRefused) return decision_;
  // Every replica checks the lists before touching another replica's memory, so all of
  // them return the same error on a mismatch and none reads past a smaller tensor. They
  // still meet once more: the lists must outlive everyone's check.
  const Status check = CheckPublished(replica, folded, /*for_all=*/false);
  if (!check.ok()) {
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    return check;
  }
  // This replica's share of the elements of all tensors laid end to end.
  SumSlice(tensors, total * replica / n, total * (replica + 1) / n, handed, first_gradient,
           sink, folded);
  return barrier_.Wait(replica);
}

void InProcessAllReduce::SumSlice(Span<Tensor* const> tensors, int64_t begin, int64_t end,
                                  size_t handed, size_t first_gradient,
                                  SummedGradientSink* sink, size_t folded) {
  const int n = static_cast<int>(names_.size());
  float* buffers[64];
  std::vector<float*> heap;
  float** ptrs = buffers;
  if (n > 64) {
    heap.resize(n);
    ptrs = heap.data();
  }
  int64_t offset = 0;
  for (size_t t = 0; t < tensors.size() && offset < end; ++t) {
    const int64_t count = tensors[t]->num_elements();
    const int64_t lo = std::max(begin, offset);
    const int64_t hi = std::min(end, offset + count);
    if (lo < hi) {
      // A folded tensor is one per group: the others' lists hold the same buffers.
      const int lists = t < folded ? fold_groups_ : n;
      for (int k = 0; k < lists; ++k) ptrs[k] = flat_[k].tensors[t].data;
      if (t < handed) {
        alignas(64) float sum[kHandOverBlock];
        for (int64_t i = lo - offset; i < hi - offset; i += kHandOverBlock) {
          const int64_t len = std::min(kHandOverBlock, hi - offset - i);
          SumBlock(ptrs, lists, i, len, sum);
          sink->Consume(first_gradient + t, i, i + len, sum);
        }
      } else if (lists > 1) {
        SumIntoAll(ptrs, lists, lo - offset, hi - offset);
      }
    }
    offset += count;
  }
}

void InProcessAllReduce::PublishTree(int replica, const PartialSums& mine,
                                      Span<Tensor* const> roots) {
  // As Publish: each field written only when it changes.
  if (published_parts_[replica] != &mine) published_parts_[replica] = &mine;
  if (published_[replica].data() != roots.data() || published_[replica].size() != roots.size()) {
    published_[replica] = roots;
  }
  TreeList& list = tree_lists_[replica];
  const uint64_t fingerprint = TreeContributionFingerprint(mine, roots);
  if (list.fingerprint != fingerprint) list.fingerprint = fingerprint;
  const size_t tensors = roots.size();
  const size_t nodes = mine.values.size();
  // Keep their capacity: no allocation once sized.
  if (list.inputs.size() != nodes * tensors) list.inputs.resize(nodes * tensors);
  if (list.roots.size() != tensors) list.roots.resize(tensors);
  for (size_t k = 0; k < nodes; ++k) {
    const std::vector<Tensor*>& values = mine.values[k];
    for (size_t t = 0; t < tensors; ++t) {
      // A list of another length is a mismatch the check refuses before anyone reads it.
      float* data = t < values.size() ? static_cast<float*>(values[t]->raw_data()) : nullptr;
      if (list.inputs[k * tensors + t] != data) list.inputs[k * tensors + t] = data;
    }
  }
  for (size_t t = 0; t < tensors; ++t) {
    float* data = static_cast<float*>(roots[t]->raw_data());
    if (list.roots[t] != data) list.roots[t] = data;
  }
}

Status InProcessAllReduce::CheckTree(int replica, const SumPlan** plan) {
  Fingerprinter every;  // every replica's fingerprint, in replica order
  for (const TreeList& list : tree_lists_) every.Mix(list.fingerprint);
  const uint64_t key = every.value();
  Scratch& scratch = scratch_[replica];
  if (scratch.plan != nullptr && scratch.checked == key) {
    *plan = scratch.plan;
    return OkStatus();
  }
  scratch.plan = nullptr;
  TOWER_RETURN_IF_ERROR(CheckTreeContributions(published_parts_, published_, names_,
                                               /*need_host_memory=*/true));
  const int leaves = published_parts_[replica]->num_leaves;
  const TreeNode root{0, leaves};
  StatusOr<const SumPlan*> planned =
      plans_[replica].Get(leaves, published_parts_, Span<const TreeNode>(&root, 1));
  TOWER_RETURN_IF_ERROR(planned.status());
  scratch.checked = key;
  scratch.plan = *planned;
  *plan = *planned;
  return OkStatus();
}

void InProcessAllReduce::SumTreeSlice(int replica, const SumPlan& plan, Span<Tensor* const> roots,
                                      int64_t begin, int64_t end) {
  const int n = static_cast<int>(names_.size());
  const size_t tensors = roots.size();
  std::vector<const float*>& inputs = scratch_[replica].inputs;
  std::vector<float*>& outputs = scratch_[replica].outputs;
  outputs.resize(n);
  int64_t offset = 0;
  for (size_t t = 0; t < tensors && offset < end; ++t) {
    const int64_t count = roots[t]->num_elements();
    const int64_t lo = std::max(begin, offset);
    const int64_t hi = std::min(end, offset + count);
    if (lo < hi) {
      // Every replica's nodes in replica order: the plan's inputs.
      inputs.clear();
      for (const TreeList& list : tree_lists_) {
        const size_t nodes = list.inputs.size() / tensors;  // tensors > 0 in this loop
        for (size_t k = 0; k < nodes; ++k) inputs.push_back(list.inputs[k * tensors + t]);
      }
      for (int k = 0; k < n; ++k) outputs[k] = tree_lists_[k].roots[t];
      RunSumPlan(plan, inputs.data(), outputs.data(), n, lo - offset, hi - offset);
    }
    offset += count;
  }
}

Status InProcessAllReduce::SumTree(int replica, const PartialSums& mine,
                                   Span<Tensor* const> roots) {
  const int n = static_cast<int>(names_.size());
  if (n == 1 && mine.nodes.size() == 1 && mine.nodes[0] == TreeNode{0, mine.num_leaves} &&
      mine.values.size() == 1 && mine.values[0].size() == roots.size()) {
    // One replica (on any device, a GPU's too) holds the root already: it only moves.
    for (size_t t = 0; t < roots.size(); ++t) {
      if (roots[t]->raw_data() != mine.values[0][t]->raw_data()) {
        TOWER_RETURN_IF_ERROR(roots[t]->CopyFrom(*mine.values[0][t]));
      }
    }
    return OkStatus();
  }
  int64_t total = 0;
  for (const Tensor* t : roots) total += t->num_elements();
  PublishTree(replica, mine, roots);
  // As in Sum: the last replica to arrive decides for all. A small sum it checks and
  // evaluates whole before it opens the barrier (one meeting); else every replica checks
  // and evaluates its slice of the elements after it (two).
  const SumPlan* plan = nullptr;
  auto decide = [&]() -> uint64_t {
    if (total > kSummedWholeElementsPerReplica * n) return kSplit;
    Status check = CheckTree(replica, &plan);
    if (!check.ok()) {
      decision_ = std::move(check);
      return kRefused;
    }
    SumTreeSlice(replica, *plan, roots, 0, total);
    return kSummedWhole;
  };
  uint64_t decided = kSplit;
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica, decide, &decided));
  if (decided == kSummedWhole) return OkStatus();
  if (decided == kRefused) return decision_;
  const Status check = CheckTree(replica, &plan);
  if (!check.ok()) {
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    return check;
  }
  SumTreeSlice(replica, *plan, roots, total * replica / n, total * (replica + 1) / n);
  return barrier_.Wait(replica);
}

Status InProcessAllReduce::Broadcast(int replica, Span<Tensor* const> tensors) {
  const int n = static_cast<int>(names_.size());
  if (n == 1) return OkStatus();
  Publish(replica, tensors);
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  const Status check = CheckPublished(replica, /*folded=*/0, /*for_all=*/false);
  if (!check.ok()) {
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    return check;
  }
  if (replica != 0) {
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t]->bytes() > 0) {
        std::memcpy(tensors[t]->raw_data(), published_[0][t]->raw_data(), tensors[t]->bytes());
      }
    }
  }
  return barrier_.Wait(replica);
}

}  // namespace tower
