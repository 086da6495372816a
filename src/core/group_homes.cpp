// balance_group_homes: bounded loads over groups (group_homes.h).
#include "rondel/core/group_homes.h"

#include <algorithm>
#include <array>

#include "rondel/core/bitset.h"

namespace rondel::core {

namespace {

// ceil(slots / eligible), plus a quarter of the fair share (rounded down) as slack: none for a
// few groups a backend, where one group more is a large imbalance, and growing with the groups a
// backend, where hashing is already nearly even and the slack saves moves when groups come and
// go (group_homes_test measures them).
uint64_t slot_cap(uint64_t slots, size_t eligible) {
  const uint64_t fair = (slots + eligible - 1) / eligible;
  return std::max<uint64_t>(1, fair + slots / eligible / 4);
}

}  // namespace

std::vector<GroupHome> balance_group_homes(const Selector& sel, std::span<const GroupSize> groups,
                                           std::span<const uint64_t> excluded,
                                           std::span<uint64_t> scratch) {
  std::vector<GroupSize> order(groups.begin(), groups.end());
  for (GroupSize& g : order) g.size = std::clamp<uint32_t>(g.size, 1, PlacementKey::kMaxGroup);
  // Ascending hash, whatever the sizes: one group's R changing then moves only the groups after
  // it that compete for the same backends. A hash listed twice counts once, with its largest size.
  std::sort(order.begin(), order.end(), [](const GroupSize& x, const GroupSize& y) {
    return x.group != y.group ? x.group < y.group : x.size > y.size;
  });
  std::vector<GroupSize> unique;
  unique.reserve(order.size());
  for (const GroupSize& g : order) {
    if (std::none_of(unique.begin(), unique.end(),
                     [&](const GroupSize& u) { return u.group == g.group; }))
      unique.push_back(g);
  }
  const size_t n = sel.backend_count();
  size_t eligible = 0;
  for (size_t b = 0; b < n; ++b) {
    if (excluded.empty() || !bit_test(excluded, b)) ++eligible;
  }
  eligible = std::min(eligible, sel.eligible_count());
  uint64_t slots = 0;
  for (const GroupSize& g : unique) slots += std::min<size_t>(g.size, std::max<size_t>(eligible, 1));
  const uint64_t cap = slot_cap(slots, std::max<size_t>(eligible, 1));
  std::vector<uint32_t> held(n, 0);
  std::vector<GroupHome> homes;
  homes.reserve(unique.size());
  // Each group's preference order, as far as a home may lie.
  std::vector<std::array<BackendIndex, PlacementKey::kMaxGroup>> pos(unique.size());
  std::vector<uint8_t> len(unique.size(), 0);
  for (size_t gi = 0; gi < unique.size(); ++gi) {
    Selector::Cursor c = sel.cursor(unique[gi].group, scratch);
    for (BackendIndex b = c.next(); b != kNoBackend && len[gi] < pos[gi].size(); b = c.next())
      pos[gi][len[gi]++] = b;
  }
  // Takes the run of R positions starting at rank r for group gi if its backends all have room.
  constexpr int kUnplaced = -1;
  std::vector<int> rank(unique.size(), kUnplaced);
  auto take = [&](size_t gi, size_t r) {
    const size_t end = r + unique[gi].size;
    if (end > len[gi]) return;
    for (size_t i = r; i < end; ++i) {
      const BackendIndex b = pos[gi][i];
      if ((!excluded.empty() && bit_test(excluded, b)) || held[b] >= cap) return;
    }
    for (size_t i = r; i < end; ++i) ++held[pos[gi][i]];
    rank[gi] = static_cast<int>(r);
  };
  // In rounds: every group first tries its own first run (in hash order), then the ones still
  // unplaced their second, and so on. A newcomer then displaces only groups that compete for its
  // backends in the same round.
  for (size_t r = 0; eligible > 0 && r <= kMaxGroupRank; ++r) {
    for (size_t gi = 0; gi < unique.size(); ++gi)
      if (rank[gi] == kUnplaced) take(gi, r);
  }
  for (size_t gi = 0; gi < unique.size(); ++gi) {
    homes.push_back(
        {unique[gi].group, rank[gi] == kUnplaced ? uint8_t{0} : static_cast<uint8_t>(rank[gi])});
  }
  std::sort(homes.begin(), homes.end(),
            [](const GroupHome& x, const GroupHome& y) { return x.group < y.group; });
  return homes;
}

ActiveGroups::ActiveGroups(size_t capacity, uint32_t idle)
    : idle_(std::max<uint32_t>(idle, 1)),
      hashes_(std::max<size_t>(capacity, 1)),
      silent_(std::max<size_t>(capacity, 1)) {}

bool ActiveGroups::remove_silent(uint32_t idle) noexcept {
  size_t out = 0;
  for (size_t i = 0; i < size_; ++i) {
    if (silent_[i] >= idle) continue;
    hashes_[out] = hashes_[i];
    silent_[out] = silent_[i];
    ++out;
  }
  const bool changed = out != size_;
  size_ = out;
  return changed;
}

void ActiveGroups::insert(uint64_t group) noexcept {
  size_t i = size_;
  for (; i > 0 && hashes_[i - 1] > group; --i) {
    hashes_[i] = hashes_[i - 1];
    silent_[i] = silent_[i - 1];
  }
  hashes_[i] = group;
  silent_[i] = 0;
  ++size_;
}

bool ActiveGroups::contains(uint64_t group) const noexcept {
  const std::span<const uint64_t> m = members();
  return std::binary_search(m.begin(), m.end(), group);
}

bool ActiveGroups::join(uint64_t group) noexcept {
  if (contains(group)) return false;
  if (size_ == hashes_.size()) {
    // Full: the member silent longest gives way, if any is silent at all.
    size_t oldest = 0;
    for (size_t i = 1; i < size_; ++i) {
      if (silent_[i] > silent_[oldest]) oldest = i;
    }
    if (silent_[oldest] == 0) return false;
    silent_[oldest] = UINT32_MAX;
    remove_silent(UINT32_MAX);
  }
  insert(group);
  return true;
}

bool ActiveGroups::update(std::span<const HotCount> counts, uint64_t scale, uint64_t join_at) {
  const auto first = hashes_.begin();
  const auto last = first + static_cast<std::ptrdiff_t>(size_);
  for (size_t i = 0; i < size_; ++i) ++silent_[i];
  for (const HotCount& c : counts) {  // members listed are heard from
    auto it = std::lower_bound(first, last, c.hash);
    if (it != last && *it == c.hash && c.count > 0) silent_[static_cast<size_t>(it - first)] = 0;
  }
  bool changed = remove_silent(idle_);
  for (const HotCount& c : counts) {
    if (c.count * std::max<uint64_t>(scale, 1) >= std::max<uint64_t>(join_at, 1) && join(c.hash))
      changed = true;
  }
  return changed;
}

}  // namespace rondel::core
