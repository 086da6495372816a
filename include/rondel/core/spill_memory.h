// SpillMemory: a small fixed-size table remembering, per key hash, which backend a spilled key
// went to, so that a routing pick can keep a spilled key on one successor (stable spill) and
// bring it home only once home has room below its cap (hysteresis). See route_pick (bounded.h)
// and docs/routing.md.
//
// Layout: direct-mapped, a power-of-two number of 8-byte entries {tag, backend, epoch}. The slot
// is the low bits of the key hash, the tag its upper 32 bits; a colliding key simply overwrites
// the slot (the evicted key then walks its preference order again, which is always correct).
// invalidate() forgets every entry in O(1) by bumping the epoch (the table is cleared once every
// 65535 invalidations, when the epoch wraps). Memory is allocated once, at construction.
//
// Thread-safety: none. One SpillMemory per event-loop worker (each worker remembers the spills
// it made; workers may disagree for a while, which costs at most an extra cache copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rondel/core/backend_set.h"

namespace rondel::core {

class SpillMemory {
 public:
  static constexpr size_t kDefaultEntries = 4096;

  // `entries` is rounded up to a power of two (at least 1). Allocates 8 * entries bytes.
  explicit SpillMemory(size_t entries = kDefaultEntries);

  // The backend remembered for `hash`, or kNoBackend. O(1), no allocation.
  BackendIndex find(uint64_t hash) const noexcept;
  // Remembers `backend` for `hash` (overwriting whatever key held the slot). O(1).
  void store(uint64_t hash, BackendIndex backend) noexcept;
  // Forgets `hash` if it is the key held by its slot. O(1).
  void erase(uint64_t hash) noexcept;
  // Forgets every entry (call when backend indices change meaning, e.g. on a reload that
  // rebuilt the backend set). O(1) amortised.
  void invalidate() noexcept;

  // Number of live entries (O(entries): for metrics and tests, not the data path).
  size_t live() const noexcept;
  size_t entries() const noexcept { return table_.size(); }

 private:
  struct Entry {
    uint32_t tag = 0;
    BackendIndex backend = kNoBackend;
    uint16_t epoch = 0;  // 0 never matches: the live epoch is 1..65535
  };
  static_assert(sizeof(Entry) == 8);

  size_t slot(uint64_t hash) const noexcept { return static_cast<size_t>(hash) & mask_; }
  static uint32_t tag(uint64_t hash) noexcept { return static_cast<uint32_t>(hash >> 32); }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  uint16_t epoch_ = 1;
};

}  // namespace rondel::core
