// Ring construction (weighted virtual nodes, capped total) and clockwise lookup and walk.
#include "rondel/core/ring.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"

namespace rondel::core {

namespace {
using u128 = unsigned __int128;
}  // namespace

// Points for each backend: w * ppw, scaled down to max(1, floor(w * max / W)) over budget.
std::vector<uint64_t> ring_point_counts(const BackendSet& set, uint32_t ppw, uint32_t max_points) {
  u128 wanted = 0;
  uint64_t weight_sum = 0;
  for (const BackendSpec& b : set.specs()) {
    wanted += static_cast<u128>(b.weight) * ppw;
    weight_sum += b.weight;
  }
  std::vector<uint64_t> counts(set.size(), 0);
  for (size_t i = 0; i < set.size(); ++i) {
    const uint32_t w = set[static_cast<BackendIndex>(i)].weight;
    if (w == 0) continue;
    if (wanted <= max_points) {
      counts[i] = uint64_t{w} * ppw;
    } else {
      counts[i] = std::max<uint64_t>(
          1, static_cast<uint64_t>(static_cast<u128>(w) * max_points / weight_sum));
    }
  }
  return counts;
}

Result<PointCounts> checked_point_counts(const BackendSet& set, uint32_t ppw, uint32_t max_points,
                                         std::string_view what) {
  if (ppw == 0) return fail("points_per_weight must be > 0");
  if (max_points == 0) return fail("max_points must be > 0");
  if (set.eligible_count() == 0) return fail("all backend weights are zero");
  PointCounts p{ring_point_counts(set, ppw, max_points), 0};
  for (uint64_t c : p.counts) p.total += c;
  if (p.total > 0xFFFFFFFFull) {
    return fail(std::string(what) + " would have more than 4294967295 points");
  }
  return p;
}

Result<Ring> Ring::build(const BackendSet& set, uint32_t points_per_weight, uint32_t max_points) {
  auto checked = checked_point_counts(set, points_per_weight, max_points, "ring");
  if (!checked) return checked.error();
  const std::vector<uint64_t>& counts = checked->counts;
  const uint64_t total = checked->total;

  // Sort key: position (32 bits) | id rank (16) | index (16): orders by (position, id).
  std::vector<uint64_t> keyed;
  keyed.reserve(total);
  std::string key;
  for (size_t i = 0; i < set.size(); ++i) {
    const auto idx = static_cast<BackendIndex>(i);
    const std::string& id = set[idx].id;
    key.assign(id);
    key.push_back('\0');
    const size_t prefix = key.size();
    const uint64_t tag = (uint64_t{set.id_rank(idx)} << 16) | idx;
    for (uint64_t j = 0; j < counts[i]; ++j) {
      char digits[24];
      const auto res = std::to_chars(digits, digits + sizeof digits, j);
      key.resize(prefix);
      key.append(digits, res.ptr);
      const uint64_t position = hash64(key) >> 32;
      keyed.push_back((position << 32) | tag);
    }
  }
  std::sort(keyed.begin(), keyed.end());

  Ring ring;
  ring.eligible_ = set.eligible_count();
  ring.positions_.resize(keyed.size());
  ring.owners_.resize(keyed.size());
  for (size_t p = 0; p < keyed.size(); ++p) {
    ring.positions_[p] = static_cast<uint32_t>(keyed[p] >> 32);
    ring.owners_[p] = static_cast<BackendIndex>(keyed[p] & 0xFFFF);
  }
  return ring;
}

uint32_t Ring::first_point(uint64_t hash) const noexcept {
  // std::lower_bound without branches on the data (conditional moves): the search over a
  // random key is otherwise dominated by ~log2(P) mispredicted branches.
  const auto h = static_cast<uint32_t>(hash >> 32);
  const uint32_t* base = positions_.data();
  size_t n = positions_.size();
  while (n > 1) {
    const size_t half = n / 2;
    base = base[half - 1] < h ? base + half : base;
    n -= half;
  }
  const auto index = static_cast<size_t>(base - positions_.data()) + (*base < h ? 1 : 0);
  return index == positions_.size() ? 0 : static_cast<uint32_t>(index);  // wrap around
}

BackendIndex Ring::owner(uint64_t hash) const noexcept {
  return owners_[first_point(hash)];
}

void Ring::start(CursorState& state, uint64_t hash) const noexcept {
  state = CursorState{};
  state.hash = hash;
  state.pos = first_point(hash);
}

BackendIndex Ring::next(CursorState& state, std::span<uint64_t> seen) const noexcept {
  const size_t n = positions_.size();
  // Loop guard: at most one full turn, and stop once every eligible backend was yielded.
  while (state.steps < n && state.yielded < eligible_) {
    const BackendIndex b = owners_[state.pos];
    ++state.steps;
    state.pos = (state.pos + 1 == n) ? 0 : state.pos + 1;
    if (!bit_test(seen, b)) {
      bit_set(seen, b);
      ++state.yielded;
      return b;
    }
  }
  return kNoBackend;
}

size_t Ring::memory_bytes() const noexcept {
  return positions_.capacity() * sizeof(uint32_t) + owners_.capacity() * sizeof(BackendIndex);
}

std::vector<double> Ring::key_shares(size_t backend_count) const {
  // Point p owns the top-32-bit hashes in (positions[p-1], positions[p]]; point 0 also owns the
  // wrap-around range after the last point.
  std::vector<uint64_t> arcs(backend_count, 0);
  const size_t n = positions_.size();
  for (size_t p = 0; p < n; ++p) {
    const uint64_t arc = p == 0 ? uint64_t{positions_[0]} + 1 + (0xFFFFFFFFull - positions_[n - 1])
                                : uint64_t{positions_[p]} - positions_[p - 1];
    arcs[owners_[p]] += arc;
  }
  std::vector<double> shares(backend_count, 0.0);
  for (size_t i = 0; i < backend_count; ++i) {
    shares[i] = static_cast<double>(arcs[i]) / 4294967296.0;
  }
  return shares;
}

}  // namespace rondel::core
