// Subsets over one placement structure: membership bitsets and the walk that skips non-members.
#include "rondel/core/subset.h"

#include <algorithm>
#include <atomic>

#include "rondel/core/bitset.h"

namespace rondel::core {

Subset Subset::build(const BackendSet& set, std::span<const LabelMask> labels, LabelMask required) {
  Subset s;
  s.required_ = required;
  const size_t words = bitset_words(set.size());
  s.members_.assign(words, 0);
  s.non_members_.assign(words, 0);
  for (size_t i = 0; i < set.size(); ++i) {
    const LabelMask have = i < labels.size() ? labels[i] : 0;
    const uint32_t w = set[static_cast<BackendIndex>(i)].weight;
    if ((have & required) == required && w > 0) {
      bit_set(s.members_, i);
      ++s.size_;
      s.total_weight_ += w;
    } else {
      bit_set(s.non_members_, i);
    }
  }
  return s;
}

bool Subset::contains(BackendIndex i) const noexcept {
  return bit_test(members_, i);
}

BackendIndex subset_owner(const Selector& sel, const PlacementKey& key, const Subset& subset,
                          std::span<uint64_t> scratch) noexcept {
  if (subset.empty()) return kNoBackend;
  const uint64_t hash = key.hash;
  if (const Ring* ring = sel.ring(); ring != nullptr && !key.grouped()) {
    const std::span<const BackendIndex> owners = ring->owners();
    const size_t n = owners.size();
    size_t pos = ring->first_point(hash);
    for (size_t step = 0; step < n; ++step) {
      if (bit_test(subset.members(), owners[pos])) return owners[pos];
      if (++pos == n) pos = 0;
    }
    return kNoBackend;
  }
  Selector::Cursor c = sel.cursor(key, scratch);
  for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) {
    if (subset.contains(b)) return b;
  }
  return kNoBackend;
}

void restrict_to_subset(const Subset& subset, PickInput& in,
                        std::span<uint64_t> excluded) noexcept {
  const std::span<const uint64_t> non = subset.non_members();
  const std::span<const uint64_t> before = in.excluded;
  for (size_t w = 0; w < non.size() && w < excluded.size(); ++w) {
    excluded[w] = non[w] | (w < before.size() ? before[w] : 0);
  }
  in.excluded = excluded.first(std::min(non.size(), excluded.size()));
  uint64_t weight = 0, in_flight = 0;
  const std::span<const uint64_t> members = subset.members();
  for (size_t w = 0; w < members.size(); ++w) {
    for (uint64_t bits = members[w]; bits != 0; bits &= bits - 1) {
      const size_t i = 64 * w + static_cast<size_t>(__builtin_ctzll(bits));
      weight += i < in.weights.size() ? in.weights[i] : 0;
      if (!in.loads.empty()) {  // backend-reported load: the members' effective loads
        if (i < in.loads.size()) in_flight += in.loads[i];
      } else if (!in.in_flight_ptrs.empty()) {
        if (i < in.in_flight_ptrs.size())
          in_flight += in.in_flight_ptrs[i]->load(std::memory_order_relaxed);
      } else if (i < in.in_flight.size()) {
        in_flight += in.in_flight[i].load(std::memory_order_relaxed);
      }
    }
  }
  in.total_weight = weight;
  in.total_in_flight = in_flight;
}

}  // namespace rondel::core
