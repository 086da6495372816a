// Balanced group homes: which position of its own preference order each active group (an
// inference tenant of two-level placement, placement_key.h) takes as its home, so that the
// groups spread evenly over the backends instead of where their hashes fall.
//
// Why: with few heavy groups, hashing alone piles them unevenly (16 tenants on 8 backends by
// rendezvous: 0 to 4 a backend), and the per-request bound only acts once a backend is already
// full, by which time its queue has formed (docs/routing.md, "Balanced tenant homes").
//
// Rule: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2016) applied to
// the groups themselves. A group of size R (its set of R backends, placement_key.h) takes R
// slots; the cap is ceil(slots / eligible backends) plus floor(slots / eligible / 4) (no slack
// at a few groups a backend, a quarter above it with many, where it saves moves when groups come
// and go). The groups are placed in rounds: in round r, every group not yet placed, in
// ascending hash order, takes the run of R consecutive positions of its own preference order
// that starts at rank r, if that run's backends are all eligible and below the cap (a newcomer
// then displaces fewer groups than when each group in turn takes its first run with room:
// group_homes_test measures both). Its home is named by the rank (position) where that run starts, so it depends only on the
// selector, the exclusion set and the set of (group, R): instances and workers that see the same
// active groups choose the same homes. A group that fits nowhere (possible only when runs of
// consecutive positions collide) keeps rank 0. No I/O, no clock; allocates its result, one count
// per backend and each group's order (at most PlacementKey::kMaxGroup positions).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/fleet_hot.h"
#include "rondel/core/selector.h"

namespace rondel::core {

struct GroupSize {
  uint64_t group = 0;
  uint32_t size = 1;  // R, clamped to [1, PlacementKey::kMaxGroup]
};

struct GroupHome {
  uint64_t group = 0;
  uint8_t rank = 0;  // position of the home in the group's own preference order
  bool operator==(const GroupHome&) const = default;
};

// The largest rank a home may have (PlacementKey::group_rank's range).
inline constexpr uint8_t kMaxGroupRank = 63;

// Homes of `groups` (any order; a hash listed twice counts once), in ascending hash order.
// `excluded`: backend bitset of backends that take no group (empty = none). `scratch`: at least
// sel.scratch_words() words.
std::vector<GroupHome> balance_group_homes(const Selector& sel, std::span<const GroupSize> groups,
                                           std::span<const uint64_t> excluded,
                                           std::span<uint64_t> scratch);

// The active groups: a sticky set, so that the homes above change only when a group arrives or
// goes quiet, not when its count wobbles around a threshold. Fed once per detector rebuild with
// that detector's group counts: a group joins when its count, times `scale` (the detector sees
// 1/scale of the fleet's requests), reaches `join`; a member the counts do not list at all for
// `idle` updates in a row leaves. At most `capacity` members: when full, a newcomer takes the
// place of the member silent longest, if any is silent, else waits. Deterministic: instances
// whose detectors list the same groups hold the same set. Allocates only in its constructor.
class ActiveGroups {
 public:
  ActiveGroups(size_t capacity, uint32_t idle);
  // One rebuild's counts. Returns whether the members changed.
  bool update(std::span<const HotCount> counts, uint64_t scale, uint64_t join_at);
  // Whether `group` is a member. O(log members), no allocation.
  bool contains(uint64_t group) const noexcept;
  // Adds `group` now (between rebuilds, once its count reaches the threshold), as update()
  // would. Returns whether it joined (false: a member already, or full with no member silent).
  bool join(uint64_t group) noexcept;
  // The members, ascending.
  std::span<const uint64_t> members() const noexcept { return {hashes_.data(), size_}; }
  void clear() noexcept { size_ = 0; }

 private:
  bool remove_silent(uint32_t idle) noexcept;
  void insert(uint64_t group) noexcept;

  size_t size_ = 0;
  uint32_t idle_;
  std::vector<uint64_t> hashes_;   // [0, size_): ascending
  std::vector<uint32_t> silent_;   // updates in a row each member was not listed
};

}  // namespace rondel::core
