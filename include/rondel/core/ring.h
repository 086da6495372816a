// Ring: a weighted consistent-hash ring (ketama-style) stored in 6 bytes per point.
//
// Source: Karger et al., "Consistent hashing and random trees", STOC 1997; the weighted
// virtual-node layout follows libketama / nginx `hash ... consistent`, and the compact
// struct-of-arrays layout follows Cloudflare's pingora-ketama (6-byte points).
//
// Layout. Backend i with weight w_i > 0 gets p_i = w_i * points_per_weight points. If the total
// would exceed max_points, p_i = max(1, floor(w_i * max_points / W)) (W = sum of weights > 0),
// so the ring holds at most max_points + eligible points (nginx once reported a 2.6 GB ring from
// one weight=1000000; here memory stays <= 6 * (max_points + N) bytes). Point j of a backend sits
// at the top 32 bits of hash64(id + '\0' + decimal(j)); the NUL separator keeps "a1"+"0" apart
// from "a"+"10". Points are sorted by (position, id), so colliding positions resolve the same way
// whatever the input order. No floating point anywhere: placement is identical on every platform.
//
// Storage: positions (uint32, sorted) and owners (uint16) in two arrays: 6 bytes per point
// (100 backends x 160 points = 96 KB; the default cap of 2^20 points is 6 MB). Why not fewer: a
// 4-byte point (24-bit position + 8-bit owner) caps the set at 256 backends and the circle at
// 2^24 = 16.7M positions; with 160k points the birthday bound gives ~760 colliding pairs
// (k^2 / 2^25), each silently shifting a key range to whichever id sorts first, and arcs become
// quantised to 1/16.7M of the key space. 5 bytes (32-bit position + 8-bit owner) keeps the
// positions but caps backends at 256. 6 bytes is the smallest layout with no such limits here.
//
// Lookup: upper 32 bits of the key hash, first point with position >= it (wrapping to point 0):
// O(log P) binary search over a contiguous uint32 array. Walk: clockwise from there, each
// distinct backend once, at most one full turn (P steps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/result.h"

namespace rondel::core {

// Virtual points per backend index (0 for weight 0): w * ppw, or max(1, floor(w * max / W))
// when the total would exceed max_points. Shared by the ring and the skeleton rendezvous.
std::vector<uint64_t> ring_point_counts(const BackendSet& set, uint32_t ppw, uint32_t max_points);

// ring_point_counts with the checks both placements make first, and the total. Errors:
// "points_per_weight must be > 0", "max_points must be > 0", "all backend weights are zero",
// "<what> would have more than 4294967295 points" (what: "ring", "skeleton").
struct PointCounts {
  std::vector<uint64_t> counts;  // by backend index
  uint64_t total = 0;
};
Result<PointCounts> checked_point_counts(const BackendSet& set, uint32_t ppw, uint32_t max_points,
                                         std::string_view what);

class Ring {
 public:
  // Builds the ring. Errors: "points_per_weight must be > 0", "max_points must be > 0",
  // "all backend weights are zero". Cost: O(P log P) time, 14 bytes per point transiently.
  static Result<Ring> build(const BackendSet& set, uint32_t points_per_weight, uint32_t max_points);

  // The natural owner of `hash`: O(log P), no allocation.
  BackendIndex owner(uint64_t hash) const noexcept;
  // Index of the first point at or after the top 32 bits of `hash` (0 after the last point).
  uint32_t first_point(uint64_t hash) const noexcept;
  // Starts a clockwise walk (state.pos = first point index).
  void start(CursorState& state, uint64_t hash) const noexcept;
  // Next not-yet-seen backend clockwise, marking it in `seen`; kNoBackend after a full turn or
  // once all `eligible` backends were yielded. Each call costs O(points skipped).
  BackendIndex next(CursorState& state, std::span<uint64_t> seen) const noexcept;

  size_t points() const noexcept { return positions_.size(); }
  size_t eligible_count() const noexcept { return eligible_; }
  std::span<const uint32_t> positions() const noexcept { return positions_; }
  std::span<const BackendIndex> owners() const noexcept { return owners_; }
  size_t memory_bytes() const noexcept;
  // Arc length owned by each backend, as a fraction of the circle (sums to 1).
  std::vector<double> key_shares(size_t backend_count) const;

 private:
  Ring() = default;
  std::vector<uint32_t> positions_;
  std::vector<BackendIndex> owners_;
  size_t eligible_ = 0;
};

}  // namespace rondel::core
