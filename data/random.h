// Deterministic randomness for pipelines: keys derived by mixing, draws from Philox.
//
// A pipeline never holds a stateful global generator. Each shuffle draws from a counter-based
// stream keyed by (its seed, the iteration key), and the iteration key is derived from the
// epoch (and the repetition, under Repeat), so an order depends only on those numbers, never
// on timing or threads.
#ifndef TOWER_DATA_RANDOM_H_
#define TOWER_DATA_RANDOM_H_

#include <cstdint>

#include "util/philox.h"

namespace tower::data {

// SplitMix64's finaliser: a bijection of 64-bit words that spreads every input bit.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A key for the pair (a, b); MixKey(a, b) != MixKey(b, a) in general.
inline uint64_t MixKey(uint64_t a, uint64_t b) { return Mix64(a ^ Mix64(b ^ 0x6A09E667F3BCC909ull)); }

// The iteration key of pass `epoch` over a dataset (Dataset::MakeIterator(epoch)).
inline uint64_t EpochKey(int64_t epoch) {
  return MixKey(0x243F6A8885A308D3ull, static_cast<uint64_t>(epoch));
}

// 64-bit draws: draw d is words 2·(d%2), 2·(d%2)+1 of Philox block d/2 under `key`.
class RandomStream {
 public:
  explicit RandomStream(uint64_t key) : key_(key) {}

  uint64_t Next() {
    if (lane_ == 2) {
      block_ = philox::Generate(key_, counter_++);
      lane_ = 0;
    }
    const uint64_t value =
        (static_cast<uint64_t>(block_.v[2 * lane_]) << 32) | block_.v[2 * lane_ + 1];
    ++lane_;
    return value;
  }

  // Uniform in [0, n) for n >= 1: the high word of a 64×64-bit product (bias below n/2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  philox::Block block_{};
  int lane_ = 2;
};

}  // namespace tower::data

#endif  // TOWER_DATA_RANDOM_H_
