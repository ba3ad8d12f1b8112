// NodePool and PoolAllocator: free lists for the nodes of std::set / std::unordered_map, so
// that a container whose elements come and go at a steady rate stops calling malloc once it
// has seen its largest size. Nodes of up to 128 bytes are carved from slabs of 64 and reused
// (by size class of 16 bytes); anything larger (a hash table's bucket array) goes to
// operator new. Not thread-safe: the containers' owner serialises them (the BFC allocator
// holds its lock). Memory is returned when the pool is destroyed, which must be after every
// container using it.
#ifndef TOWER_UTIL_NODE_POOL_H_
#define TOWER_UTIL_NODE_POOL_H_

#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

namespace tower {

class NodePool {
 public:
  NodePool() = default;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;
  ~NodePool() {
    for (void* slab : slabs_) ::operator delete(slab);
  }

  void* AllocateNode(size_t bytes) {
    if (bytes == 0 || bytes > kMaxNodeBytes) return ::operator new(bytes);
    FreeNode*& head = free_[Class(bytes)];
    if (head == nullptr) AddSlab(Class(bytes));
    FreeNode* node = head;
    head = node->next;
    return node;
  }

  void DeallocateNode(void* p, size_t bytes) {
    if (bytes == 0 || bytes > kMaxNodeBytes) {
      ::operator delete(p);
      return;
    }
    FreeNode*& head = free_[Class(bytes)];
    head = new (p) FreeNode{head};
  }

 private:
  static constexpr size_t kGranule = 16;  // operator new's alignment here
  static constexpr size_t kMaxNodeBytes = 128;
  static constexpr size_t kNodesPerSlab = 64;
  struct FreeNode {
    FreeNode* next;
  };
  static size_t Class(size_t bytes) { return (bytes + kGranule - 1) / kGranule; }

  void AddSlab(size_t size_class) {
    const size_t node_bytes = size_class * kGranule;
    char* slab = static_cast<char*>(::operator new(node_bytes * kNodesPerSlab));
    slabs_.push_back(slab);
    FreeNode*& head = free_[size_class];
    for (size_t i = kNodesPerSlab; i-- > 0;) head = new (slab + i * node_bytes) FreeNode{head};
  }

  FreeNode* free_[kMaxNodeBytes / kGranule + 1] = {};
  std::vector<void*> slabs_;
};

// The standard-library allocator over a pool: a NodePool, or anything with the same
// AllocateNode / DeallocateNode (a device allocator's record pool). Stateful: containers
// compare equal only over the same pool.
template <typename T, typename Pool = NodePool>
class PoolAllocator {
 public:
  using value_type = T;
  // A container assigned from another takes its pool along (containers are built empty
  // without a pool, then assigned, e.g. the elements of a std::array).
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  static_assert(alignof(T) <= 16, "PoolAllocator serves alignments up to 16");

  // No pool yet: only for a container that is assigned one before its first element.
  PoolAllocator() : pool_(nullptr) {}
  explicit PoolAllocator(Pool* pool) : pool_(pool) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<U, Pool>& other) : pool_(other.pool()) {}
  template <typename U>
  struct rebind {
    using other = PoolAllocator<U, Pool>;
  };

  T* allocate(size_t n) { return static_cast<T*>(pool_->AllocateNode(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { pool_->DeallocateNode(p, n * sizeof(T)); }
  Pool* pool() const { return pool_; }

  template <typename U>
  bool operator==(const PoolAllocator<U, Pool>& other) const { return pool_ == other.pool(); }
  template <typename U>
  bool operator!=(const PoolAllocator<U, Pool>& other) const { return pool_ != other.pool(); }

 private:
  Pool* pool_;
};

}  // namespace tower

#endif  // TOWER_UTIL_NODE_POOL_H_
