// PlacementKey: what a preference order is computed from: a key's hash, and optionally a group
// the key belongs to, whose first R backends the key prefers (two-level placement).
//
// Two-level placement (hash_key: llm_prefix, docs/algorithms.md "Two-level placement"): a group
// (the tenant of an inference request, the hash of its system prompt) owns the first R backends
// of its own preference order, its set; a key of that group (the conversation) prefers the set's
// members in the key's own preference order, then every other backend in the key's order. So:
//   - with R = 1 every key of the group starts on the group's owner, and keys that spill go on
//     along their own orders (a spilled conversation has a stable second home of its own);
//   - growing R to R' moves only the keys whose first member in their order is a new member:
//     about (R' - R) / R' of the group's keys (the sets are nested: the first R of one order);
//   - it depends only on backend ids, weights, the group hash and the key hash, like every
//     placement, so instances and workers that agree on R agree on every key.
// A group may also start its set past the head of its order (group_rank, the home that balanced
// group homes chose for it, group_homes.h): the set is then positions [rank, rank + R) of the
// group's order.
// A plain key (R = 0) is a plain preference order; a uint64_t converts to one.
#pragma once

#include <cstdint>

namespace rondel::core {

struct PlacementKey {
  // The largest set a group can own (the same bound as hot-key replicas).
  static constexpr uint32_t kMaxGroup = 64;

  uint64_t hash = 0;        // the key's hash: its own order, its spill memory
  uint64_t group = 0;       // the group's hash: its set (only when group_size > 0)
  uint32_t group_size = 0;  // R: the set's size, clamped to [1, kMaxGroup]; 0 = a plain key
  uint32_t group_rank = 0;  // where the set starts in the group's order (rank + R <= kMaxGroup)

  constexpr PlacementKey() noexcept = default;
  // A plain key. Implicit: every placement function taking a key takes a plain hash.
  constexpr PlacementKey(uint64_t h) noexcept : hash(h) {}  // NOLINT(google-explicit-constructor)
  constexpr PlacementKey(uint64_t h, uint64_t g, uint32_t r) noexcept
      : hash(h), group(g), group_size(r == 0 ? 0 : (r > kMaxGroup ? kMaxGroup : r)) {}
  constexpr PlacementKey(uint64_t h, uint64_t g, uint32_t r, uint32_t rank) noexcept
      : PlacementKey(h, g, r) {
    group_rank = group_size == 0 ? 0 : (rank > kMaxGroup - group_size ? kMaxGroup - group_size : rank);
  }

  constexpr bool grouped() const noexcept { return group_size > 0; }
};

}  // namespace rondel::core
