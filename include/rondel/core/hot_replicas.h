// HotReplicas: how many replicas each hot key is spread over, as a fixed-size table the routing
// pick reads per request (hash -> R), rebuilt periodically from a hot-key detector (HotKeys).
//
// Why: under skew (Zipf) a few keys carry a large share of the traffic. Bounded loads then spill
// whatever key arrives when the hot key's home is full, mostly cold keys, each a likely cache
// miss. Spreading only the hot keys over their first R distinct successors (R growing with the
// key's rate) keeps every cold key on its home: a hot key costs R cache copies, a handful of
// objects in total. The replica chosen per request is decided by route_pick (bounded.h).
//
// Rule: a key with a share p of the requests over the detector's window, with N eligible
// backends, gets R = ceil(p * N / h) replicas where h = hot_share_pct / 100 is the share of one
// backend's fair share (1/N) that a single replica of one key may carry; R is clamped to
// [1, min(max_replicas, N)]. Example: N = 4, h = 10%: a key above 2.5% of all requests gets 2
// replicas, above 5% gets 3, above 7.5% all 4. Integer math only.
//
// Thread-safety: replicas() is a read-only lookup (any thread, if no one rebuilds concurrently);
// clear()/set() mutate. The daemon rebuilds one table per worker loop, or publishes an immutable
// one per refresh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rondel::core {

struct HotReplicaOptions {
  uint32_t hot_share_pct = 10;  // h in per cent of one backend's fair share; 0 = never replicate
  uint32_t max_replicas = 0;    // upper bound on R; 0 = the number of eligible backends
  uint64_t min_count = 16;      // keys counted fewer times in the window are never replicated
};

// R for a key counted `count` times among `total` requests, with `eligible` backends up.
// Returns 1 when the rule is disabled, total == 0, eligible <= 1 or count < min_count.
// 128-bit intermediates: no overflow for any input.
uint32_t replicas_for(uint64_t count, uint64_t total, size_t eligible,
                      const HotReplicaOptions& o) noexcept;

// The demand behind R, unrounded: count * N * 100 / (total * h) in 1/256 units (R is its
// ceiling, clamped), saturating at UINT64_MAX; 0 where replicas_for returns 1 for a reason other
// than the share (rule off, total 0, eligible <= 1, count below min_count). For quantized R
// with hysteresis (route_policy.h, quantize_replicas), which compares it with powers of two.
uint64_t replica_demand256(uint64_t count, uint64_t total, size_t eligible,
                           const HotReplicaOptions& o) noexcept;

class HotReplicas {
 public:
  // Room for `capacity` hot keys (open addressing over 2 * capacity rounded up to a power of
  // two slots). Allocates once, here.
  explicit HotReplicas(size_t capacity = 64);

  // Forgets every key. O(slots).
  void clear() noexcept;
  // Records R for `hash`; R <= 1 is ignored (returns true). Returns false when the table already
  // holds `capacity` keys. O(1) expected.
  bool set(uint64_t hash, uint32_t replicas) noexcept;
  // R for `hash`: 1 when the key is not hot. O(1) expected, no allocation.
  uint32_t replicas(uint64_t hash) const noexcept;

  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return capacity_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t replicas = 0;  // 0 = empty
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace rondel::core
