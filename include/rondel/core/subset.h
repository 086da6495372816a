// Subset: the backends of a set that carry every label of a required label set, as a
// membership bitset, so that one placement structure serves every subset instead of one ring
// per label combination (2^k rings for k labels).
//
// Cloudflare's write-up tells how a handful of server features (compliance, special caching),
// each combination with its own ring, grew one service's ring memory to 6 GB. Here a subset is
// 8 bytes per 64 backends, built once per subset that is used, and a lookup walks the one
// structure skipping non-members. For the ring and rendezvous the result is exactly the
// placement of a structure built from the members alone (ring: the members' points are the same
// points, at the same positions, in the same order; rendezvous: the highest score among the
// members), so a subset's keys are as stable and as balanced as on its own ring. For Maglev the
// walk is consistent but is not the table the members alone would fill.
//
// Cost of a lookup: ring O(log P) for the first point plus the points walked until one belongs
// to a member: P/Pm expected (Pm = the members' points), at most one turn (P). So for large
// subsets it stays O(log P); what bounds the walk for a tiny subset is the members' share of the
// points: a subset holding 1/64 of the points walks 64 points (~60 ns) on average.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/bounded.h"
#include "rondel/core/selector.h"

namespace rondel::core {

// Labels of one backend as a bit mask (label j = bit j; at most kMaxLabels distinct labels).
using LabelMask = uint64_t;
inline constexpr size_t kMaxLabels = 64;

class Subset {
 public:
  // The backends i with (labels[i] & required) == required and weight > 0 in `set`.
  // `labels` is indexed by backend index (a missing entry: no labels). Allocates the bitsets.
  static Subset build(const BackendSet& set, std::span<const LabelMask> labels, LabelMask required);

  LabelMask required() const noexcept { return required_; }
  std::span<const uint64_t> members() const noexcept { return members_; }
  // The complement over the set's indices: the exclusion set a walk over the subset uses.
  std::span<const uint64_t> non_members() const noexcept { return non_members_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool contains(BackendIndex i) const noexcept;
  uint64_t total_weight() const noexcept { return total_weight_; }
  size_t memory_bytes() const noexcept { return 16 * members_.size(); }

 private:
  LabelMask required_ = 0;
  std::vector<uint64_t> members_;
  std::vector<uint64_t> non_members_;
  size_t size_ = 0;
  uint64_t total_weight_ = 0;
};

// The owner of `hash` within `subset`: the first member of the key's preference order in `sel`
// (ring: a direct walk over the points; others: the selector's cursor). kNoBackend for an empty
// subset. Never allocates. Precondition: scratch.size() >= sel.scratch_words().
BackendIndex subset_owner(const Selector& sel, const PlacementKey& key, const Subset& subset,
                          std::span<uint64_t> scratch) noexcept;

// Restricts a pick input to `subset`: the exclusion set becomes in.excluded | non-members
// (written to `excluded`, at least bitset_words(backends) words, which may alias in.excluded),
// W the sum of `in.weights` over the members, and the in-flight total the members' sum (of
// their effective loads when `in.loads` is given), so that
// bounded_pick's capacity is computed over the subset. O(backends / 64 + members).
void restrict_to_subset(const Subset& subset, PickInput& in, std::span<uint64_t> excluded) noexcept;

}  // namespace rondel::core
