// HotReplicas: the R-per-hot-key rule and its open-addressing lookup table.
#include "rondel/core/hot_replicas.h"

#include <algorithm>
#include <bit>

namespace rondel::core {

uint32_t replicas_for(uint64_t count, uint64_t total, size_t eligible,
                      const HotReplicaOptions& o) noexcept {
  if (o.hot_share_pct == 0 || total == 0 || eligible <= 1 || count < o.min_count) return 1;
  using u128 = unsigned __int128;
  // R = ceil(count * N * 100 / (total * h)).
  const u128 num = u128{count} * eligible * 100;
  const u128 den = u128{total} * o.hot_share_pct;
  u128 r = num / den + (num % den != 0 ? 1 : 0);
  u128 limit = eligible;
  if (o.max_replicas != 0) limit = std::min<u128>(limit, o.max_replicas);
  r = std::clamp<u128>(r, 1, limit);
  return static_cast<uint32_t>(r);
}

uint64_t replica_demand256(uint64_t count, uint64_t total, size_t eligible,
                           const HotReplicaOptions& o) noexcept {
  if (o.hot_share_pct == 0 || total == 0 || eligible <= 1 || count < o.min_count) return 0;
  using u128 = unsigned __int128;
  const u128 d = u128{count} * eligible * 100 * 256 / (u128{total} * o.hot_share_pct);
  return d > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(d);
}

HotReplicas::HotReplicas(size_t capacity)
    : slots_(std::bit_ceil(std::max<size_t>(2 * capacity, 2))),
      mask_(slots_.size() - 1),
      capacity_(std::max<size_t>(capacity, 1)) {}

void HotReplicas::clear() noexcept {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

bool HotReplicas::set(uint64_t hash, uint32_t replicas) noexcept {
  if (replicas <= 1) return true;
  for (size_t i = static_cast<size_t>(hash) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.replicas != 0 && s.hash == hash) {
      s.replicas = replicas;
      return true;
    }
    if (s.replicas == 0) {
      if (size_ == capacity_) return false;
      s = Slot{hash, replicas};
      ++size_;
      return true;
    }
  }
}

uint32_t HotReplicas::replicas(uint64_t hash) const noexcept {
  // At most half the slots are used, so the probe always meets an empty slot.
  for (size_t i = static_cast<size_t>(hash) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.replicas == 0) return 1;
    if (s.hash == hash) return s.replicas;
  }
}

}  // namespace rondel::core
