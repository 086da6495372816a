// SkeletonRendezvous: hierarchical rendezvous hashing over a fixed virtual skeleton, O(log N)
// per pick, stored as one array of nodes.
//
// Source: the skeleton-based hierarchical variant of rendezvous hashing (Wikipedia, "Rendezvous
// hashing", skeleton-based variant; Yao, Mohapatra et al.): HRW is applied level by level over
// a virtual hierarchy instead of over all N backends. Here the hierarchy is a fixed 16-ary
// prefix tree over the 64-bit hash space: level l groups points by bits [60 - 4l, 64 - 4l) of
// their hash, for at most kLevels levels. It depends on nothing but the hash space, so adding or
// removing a backend never relabels a cluster.
//
// Points: backend i contributes points_per_weight * w_i virtual points (capped in total as the
// ring's, see ring.h) at hashes mix64(hash64(id), kSkeletonPointSeed + j). A lookup descends
// from the root; at each cluster it scores every non-empty child c with mix64(key, label(c))
// (label = the child's prefix and level, mixed once at build) and takes the highest (unweighted
// HRW over the fixed skeleton), until it reaches a cluster whose points all belong to one
// backend. Points that share all 60 prefix bits are scored against each other by their own
// hashes.
//
// Properties (tests/unit/core/skeleton_rendezvous_test.cpp): adding a backend only moves keys
// to it, removing one only moves its keys (a cluster that becomes non-empty wins only the keys
// it now scores highest for, and it holds only the new backend's points; a cluster that stays
// non-empty is unchanged above the new points). Weights: each non-empty child of a cluster gets
// an equal share of its keys, so one point's share varies with the occupancy around it (like a
// ring arc); a backend's share is proportional to its point count up to that noise, which
// shrinks as 1/sqrt(points) (measured in docs/algorithms.md).
//
// Costs: owner visits ~log16(P) + 1 clusters and scores at most 16 children in each (one mix64
// per child, no log()). Memory: 12 bytes per child entry and 8 per cluster, about 1.2 entries
// per point. Walk (preference order beyond the owner): Maglev's (rehash_walk.h), rehash the key and
// take owner(mix64(hash, attempt)) for attempt = 1, 2, ..., skipping backends already yielded,
// which draws fallbacks in proportion to their share; after 4 * N probes a deterministic scan of
// the rest in id order from slot hash mod N. A full walk costs at most 5 * N steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/result.h"

namespace rondel::core {

inline constexpr uint64_t kSkeletonPointSeed = 0x736b656c65746f6eull;  // "skeleton"

class SkeletonRendezvous {
 public:
  static constexpr unsigned kFanoutBits = 4;  // 16 children per cluster
  static constexpr unsigned kLevels = 15;     // 60 prefix bits

  // Errors: "points_per_weight must be > 0", "max_points must be > 0", "all backend weights are
  // zero", "skeleton would have more than 4294967295 points".
  static Result<SkeletonRendezvous> build(const BackendSet& set, uint32_t points_per_weight,
                                          uint32_t max_points);

  // The owner of `hash`: O(log16 P) clusters, at most 16 mixes each; never allocates.
  BackendIndex owner(uint64_t hash) const noexcept;
  void start(CursorState& state, uint64_t hash) const noexcept;
  // Next backend of the preference order: rehash_walk_next over owner(); `seen` is the caller's
  // bitset of backend_count bits, cleared before start.
  BackendIndex next(CursorState& state, std::span<uint64_t> seen) const noexcept;

  size_t points() const noexcept { return points_; }
  size_t clusters() const noexcept { return first_.size(); }
  size_t eligible_count() const noexcept { return by_id_.size(); }
  size_t memory_bytes() const noexcept;
  // Exact share of the key space of each backend index, for uniformly distributed key hashes:
  // every non-empty child of a cluster gets 1 / (its non-empty children) of the cluster's share
  // (HRW over independent scores). Allocates; O(entries).
  std::vector<double> key_shares(size_t backend_count) const;

 private:
  SkeletonRendezvous() = default;
  struct Point {
    uint64_t hash;
    BackendIndex backend;
  };
  // Builds the cluster over sorted points [lo, hi) at `level`; returns its child reference.
  uint32_t build_cluster(std::span<const Point> pts, unsigned level);

  static constexpr uint32_t kLeaf = 0x80000000u;  // child reference: kLeaf | backend index
  // Cluster c's children are entries [first_[c], first_[c] + count_[c]).
  std::vector<uint32_t> first_;
  std::vector<uint32_t> count_;
  std::vector<uint64_t> label_;  // per child entry: mix64_prepare(label), scored against the key
  std::vector<uint32_t> child_;  // per child entry: cluster index or kLeaf | backend
  uint32_t root_ = 0;            // child reference of the whole tree
  size_t points_ = 0;
  std::vector<BackendIndex> by_id_;  // eligible backends in id order (the walk's final scan)
};

}  // namespace rondel::core
