#include "strategy/collectives/mpi/cross_process_all_reduce.h"

#include <cstring>

#include "strategy/step/distribution.h"
#include "ops/cpu/cpu_kernels.h"

namespace tower {
namespace {

int64_t TotalElements(Span<Tensor* const> tensors) {
  int64_t total = 0;
  for (const Tensor* t : tensors) total += t->num_elements();
  return total;
}

}  // namespace

CrossProcessAllReduce::CrossProcessAllReduce(std::unique_ptr<CrossDeviceOps> local,
                                             MpiWorld* world,
                                             std::vector<std::string> replica_names,
                                             std::chrono::milliseconds timeout, bool spin,
                                             DType wire_dtype)
    : local_(std::move(local)),
      world_(world),
      timeout_(timeout),
      names_(replica_names),
      // The other replicas wait here while replica 0 runs the cross-process step, which has
      // the deadline `timeout` of its own and, on expiry, aborts this barrier with the error
      // that names the missing worker. Waiting twice as long lets that error, not a local
      // "replica 0 never arrived", be the one every replica reports.
      barrier_(replica_names, 2 * timeout, spin),
      published_(replica_names.size()),
      wire_dtype_(wire_dtype),
      published_parts_(replica_names.size()) {}

void CrossProcessAllReduce::Abort(const Status& reason) {
  local_->Abort(reason);
  barrier_.Abort(reason);
}

void CrossProcessAllReduce::Reset() {
  local_->Reset();
  barrier_.Reset();
}

Status CrossProcessAllReduce::CrossThenShare(int replica, Span<Tensor* const> tensors,
                                             const std::function<Status()>& cross) {
  if (replica == 0) {
    const Status status = cross();
    if (!status.ok()) {
      barrier_.Abort(status);
      return status;
    }
  }
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  Status copied;
  if (replica != 0) {
    for (size_t t = 0; t < tensors.size() && copied.ok(); ++t) {
      copied = tensors[t]->CopyFrom(*published_[0][t]);
    }
  }
  if (!copied.ok()) barrier_.Abort(copied);
  // Replica 0's tensors must outlive the others' copies.
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  return copied;
}

Status CrossProcessAllReduce::RunAllReduce(int replica, Span<Tensor* const> tensors,
                                           const AllReduceOptions& options) {
  if (options.tree != nullptr) return SumTree(replica, *options.tree, tensors);
  return Sum(replica, tensors);
}

Status CrossProcessAllReduce::Sum(int replica, Span<Tensor* const> tensors) {
  TOWER_RETURN_IF_ERROR(local_->AllReduce(replica, tensors));
  published_[replica] = tensors;
  return CrossThenShare(replica, tensors, [&]() -> Status {
    // Every tensor in one message: pack, sum across workers, unpack.
    TOWER_ASSIGN_OR_RETURN(const int64_t count, PackToStaging(tensors));
    const std::string what = "all-reduce of " + std::to_string(tensors.size()) + " tensors (" +
                             std::to_string(count) + " floats)";
    if (wire_dtype_ != DType::kFloat32 && world_->size() > 1) {
      TOWER_RETURN_IF_ERROR(SumAcrossWorkersIn16Bits(count, what));
    } else {
      TOWER_RETURN_IF_ERROR(world_->AllReduceSum(staging_.data(), count,
                                                 TensorLayoutFingerprint(tensors), timeout_,
                                                 what));
      // What a ring all-reduce sends to others (reduce-scatter, then all-gather); at 2
      // workers every all-reduce algorithm sends this.
      const int64_t workers = world_->size();
      bytes_sent_ += 2 * (workers - 1) * count * static_cast<int64_t>(sizeof(float)) / workers;
    }
    return UnpackFromStaging(tensors);
  });
}

Status CrossProcessAllReduce::SumAcrossWorkersIn16Bits(int64_t count, const std::string& what) {
  const int workers = world_->size();
  const int me = world_->rank();
  // Worker w owns elements ReplicaRows(count, workers, w) (the one rule of contiguous
  // splits, strategy/step/distribution.h).
  std::vector<int> range_first(workers), range_count(workers), mine_from(workers),
      mine_offsets(workers);
  for (int w = 0; w < workers; ++w) {
    const RowRange range = ReplicaRows(count, workers, w);
    range_first[w] = static_cast<int>(range.first);
    range_count[w] = static_cast<int>(range.count);
  }
  const int my_count = range_count[me];
  for (int w = 0; w < workers; ++w) {
    mine_from[w] = my_count;
    mine_offsets[w] = w * my_count;
  }
  // Everything in 16 bits (rounded once), worker w's range to worker w.
  wire_send_.resize(static_cast<size_t>(count));
  cpu::NarrowFromFloat(wire_dtype_, staging_.data(), wire_send_.data(), count);
  wire_receive_.resize(static_cast<size_t>(my_count) * workers);
  TOWER_RETURN_IF_ERROR(world_->AllToAll(wire_send_.data(), range_count, range_first,
                                         wire_receive_.data(), mine_from, mine_offsets, timeout_,
                                         what + " in " + std::string(DTypeName(wire_dtype_))));
  // My range's sum, in float32, in rank order, rounded once into the gathered buffer.
  std::vector<float> wide(static_cast<size_t>(my_count));
  std::vector<float> sum(static_cast<size_t>(my_count), 0.0f);
  for (int w = 0; w < workers; ++w) {
    cpu::WidenToFloat(wire_dtype_, wire_receive_.data() + static_cast<size_t>(w) * my_count,
                      wide.data(), my_count);
    for (int i = 0; i < my_count; ++i) sum[i] += wide[i];
  }
  wire_sums_.resize(static_cast<size_t>(count));
  cpu::NarrowFromFloat(wire_dtype_, sum.data(), wire_sums_.data() + range_first[me], my_count);
  TOWER_RETURN_IF_ERROR(world_->AllGatherInPlace(wire_sums_.data(), range_count, range_first,
                                                 timeout_, what + " (gathering the sums)"));
  cpu::WidenToFloat(wire_dtype_, wire_sums_.data(), staging_.data(), count);
  // Sent to others: every range but mine once (all-to-all), mine to every other worker.
  bytes_sent_ += static_cast<int64_t>(sizeof(uint16_t)) *
                 ((count - my_count) + static_cast<int64_t>(my_count) * (workers - 1));
  return OkStatus();
}

Status CrossProcessAllReduce::SumTree(int replica, const PartialSums& mine,
                                      Span<Tensor* const> roots) {
  published_parts_[replica] = &mine;
  published_[replica] = roots;
  // Replica 0 reads every local replica's partial sums: all must have published them.
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  return CrossThenShare(replica, roots, [&]() -> Status { return CrossTree(roots); });
}

Status CrossProcessAllReduce::HostCovers(int leaves, const std::vector<TreeNode>& my_cover,
                                         int64_t elements) {
  // 1. This process's partial sums on the host, node after node, each the tensors end to end.
  size_t local_nodes = 0;
  for (const PartialSums* part : published_parts_) local_nodes += part->nodes.size();
  local_nodes_.resize(local_nodes * elements);
  std::vector<const float*> inputs;
  for (const PartialSums* part : published_parts_) {
    for (const std::vector<Tensor*>& node : part->values) {
      float* out = local_nodes_.data() + inputs.size() * elements;
      inputs.push_back(out);
      for (const Tensor* t : node) {
        TOWER_RETURN_IF_ERROR(t->ToHostBytes(out));
        out += t->num_elements();
      }
    }
  }
  // 2. This process's largest subtrees.
  TOWER_ASSIGN_OR_RETURN(const SumPlan* cover_plan,
                         cover_plan_.Get(leaves, published_parts_, my_cover));
  cover_.resize(my_cover.size() * elements);
  std::vector<float*> covers;
  for (size_t k = 0; k < my_cover.size(); ++k) covers.push_back(cover_.data() + k * elements);
  RunSumPlan(*cover_plan, inputs.data(), covers.data(), 1, 0, elements);
  return OkStatus();
}

StatusOr<int64_t> CrossProcessAllReduce::PackToStaging(Span<Tensor* const> tensors) {
  staging_.resize(static_cast<size_t>(TotalElements(tensors)));
  int64_t offset = 0;
  for (const Tensor* t : tensors) {
    TOWER_RETURN_IF_ERROR(t->ToHostBytes(staging_.data() + offset));
    offset += t->num_elements();
  }
  return offset;
}

Status CrossProcessAllReduce::UnpackFromStaging(Span<Tensor* const> tensors) {
  int64_t offset = 0;
  for (Tensor* t : tensors) {
    TOWER_RETURN_IF_ERROR(
        t->device()->stream().CopyFromHost(t->raw_data(), staging_.data() + offset, t->bytes()));
    offset += t->num_elements();
  }
  return OkStatus();
}

Status CrossProcessAllReduce::CrossTree(Span<Tensor* const> roots) {
  const int local = static_cast<int>(published_parts_.size());
  TOWER_RETURN_IF_ERROR(CheckTreeContributions(published_parts_, published_, names_,
                                               /*need_host_memory=*/false));
  const int leaves = published_parts_[0]->num_leaves;
  const int workers = world_->size();
  const int me = world_->rank();
  const int replicas = workers * local;
  // Worker w's leaves, and the largest subtrees inside them (what it sends).
  auto worker_leaves = [&](int w) {
    const RowRange first = ReplicaRows(leaves, replicas, w * local);
    const RowRange last = ReplicaRows(leaves, replicas, (w + 1) * local - 1);
    return TreeNode{static_cast<int>(first.first), static_cast<int>(last.end())};
  };
  const TreeNode my_leaves = worker_leaves(me);
  const std::vector<TreeNode> my_cover = CoverNodes(leaves, my_leaves.first, my_leaves.end);
  int64_t elements = 0;
  for (const Tensor* t : roots) elements += t->num_elements();
  if (elements * static_cast<int64_t>(leaves) > (int64_t{1} << 31) - 1) {
    return InvalidArgumentError("tree all-reduce across workers: " + std::to_string(elements) +
                                " floats in " + std::to_string(leaves) + " subtrees exceed "
                                "MPI's int counts; use smaller gradient buckets");
  }
  TOWER_RETURN_IF_ERROR(HostCovers(leaves, my_cover, elements));
  std::vector<float*> covers;
  for (size_t k = 0; k < my_cover.size(); ++k) covers.push_back(cover_.data() + k * elements);
  // 3. Worker w evaluates the tree on elements [range(w), range(w + 1)): it gets every
  // worker's subtrees there.
  auto range = [&](int w) { return elements * w / workers; };
  const int64_t my_length = range(me + 1) - range(me);
  std::vector<int> send_counts(workers), send_offsets(workers), receive_counts(workers),
      receive_offsets(workers);
  std::vector<PartialSums> all(workers);
  send_.resize(my_cover.size() * elements);
  int64_t sent = 0;
  int64_t received = 0;
  for (int w = 0; w < workers; ++w) {
    const int64_t length = range(w + 1) - range(w);
    send_offsets[w] = static_cast<int>(sent);
    for (size_t k = 0; k < my_cover.size(); ++k) {
      std::memcpy(send_.data() + sent, covers[k] + range(w), length * sizeof(float));
      sent += length;
    }
    send_counts[w] = static_cast<int>(sent) - send_offsets[w];
    const TreeNode theirs = worker_leaves(w);
    all[w].num_leaves = leaves;
    all[w].nodes = CoverNodes(leaves, theirs.first, theirs.end);
    receive_offsets[w] = static_cast<int>(received);
    receive_counts[w] = static_cast<int>(all[w].nodes.size() * my_length);
    received += receive_counts[w];
  }
  received_.resize(received);
  const std::string what = "tree all-reduce of " + std::to_string(roots.size()) + " tensors (" +
                           std::to_string(elements) + " floats)";
  TOWER_RETURN_IF_ERROR(world_->AllToAll(send_.data(), send_counts, send_offsets,
                                         received_.data(), receive_counts, receive_offsets,
                                         timeout_, what + ", exchange"));
  // 4. The roots of my range, from every worker's subtrees in leaf order.
  std::vector<const PartialSums*> all_parts;
  std::vector<const float*> subtrees;
  for (int w = 0; w < workers; ++w) {
    all_parts.push_back(&all[w]);
    for (size_t k = 0; k < all[w].nodes.size(); ++k) {
      subtrees.push_back(received_.data() + receive_offsets[w] + k * my_length);
    }
  }
  const TreeNode root{0, leaves};
  TOWER_ASSIGN_OR_RETURN(const SumPlan* root_plan,
                         root_plan_.Get(leaves, all_parts, Span<const TreeNode>(&root, 1)));
  staging_.resize(elements);
  float* my_roots = staging_.data() + range(me);
  // The plan reads element i of each input at inputs[s] + i: point them at my range's start.
  RunSumPlan(*root_plan, subtrees.data(), &my_roots, 1, 0, my_length);
  // 5. Everyone gets every range.
  std::vector<int> counts(workers), offsets(workers);
  for (int w = 0; w < workers; ++w) {
    offsets[w] = static_cast<int>(range(w));
    counts[w] = static_cast<int>(range(w + 1) - range(w));
  }
  TOWER_RETURN_IF_ERROR(world_->AllGatherInPlace(staging_.data(), counts, offsets, timeout_,
                                                 what + ", gather"));
  return UnpackFromStaging(roots);
}

Status CrossProcessAllReduce::Broadcast(int replica, Span<Tensor* const> tensors) {
  published_[replica] = tensors;
  return CrossThenShare(replica, tensors, [&]() -> Status {
    TOWER_ASSIGN_OR_RETURN(const int64_t count, PackToStaging(tensors));
    TOWER_RETURN_IF_ERROR(world_->Broadcast(staging_.data(), count * sizeof(float), 0, timeout_,
                                            "broadcast of " + std::to_string(tensors.size()) +
                                                " tensors from rank 0"));
    return UnpackFromStaging(tensors);
  });
}

}  // namespace tower
