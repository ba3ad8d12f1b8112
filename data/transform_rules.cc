#include "data/transform_rules.h"

#include "data/random.h"

namespace tower::data {

namespace {

// The iteration key of repetition `repetition` under a Repeat whose iteration key is `key`.
uint64_t RepetitionKey(uint64_t key, uint64_t salt, int64_t repetition) {
  if (repetition == 0) return key;
  return MixKey(key ^ Mix64(salt), static_cast<uint64_t>(repetition));
}

}  // namespace

std::optional<uint64_t> RepeatSchedule::StartNext() {
  if (last_was_empty_ || (count_ >= 0 && started_ >= count_)) return std::nullopt;
  current_produced_ = false;
  return RepetitionKey(key_, salt_, started_++);
}

}  // namespace tower::data
