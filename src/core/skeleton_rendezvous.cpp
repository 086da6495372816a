// Skeleton rendezvous construction (points grouped by a fixed 16-ary prefix tree), descent and
// rehash walk.
#include "rondel/core/skeleton_rendezvous.h"

#include <algorithm>

#include "rondel/core/hash.h"
#include "rondel/core/rehash_walk.h"
#include "rondel/core/ring.h"

namespace rondel::core {

namespace {

constexpr uint64_t kLabelSeed = 0x736b656c6c61626cull;  // "skellabl"

// The label of the cluster holding the points whose top `bits` hash bits equal `prefix`: the
// prefix with a sentinel bit above it (so prefixes of different lengths differ), mixed.
uint64_t cluster_label(uint64_t prefix, unsigned bits) noexcept {
  return mix64(prefix | (uint64_t{1} << bits), kLabelSeed);
}

}  // namespace

Result<SkeletonRendezvous> SkeletonRendezvous::build(const BackendSet& set,
                                                     uint32_t points_per_weight,
                                                     uint32_t max_points) {
  auto checked = checked_point_counts(set, points_per_weight, max_points, "skeleton");
  if (!checked) return checked.error();
  const std::vector<uint64_t>& counts = checked->counts;
  const uint64_t total = checked->total;

  SkeletonRendezvous sk;
  std::vector<Point> pts;
  pts.reserve(total);
  for (BackendIndex i : set.by_id()) {
    if (set[i].weight == 0) continue;
    sk.by_id_.push_back(i);
    for (uint64_t j = 0; j < counts[i]; ++j) {
      pts.push_back(Point{mix64(set.id_hash(i), kSkeletonPointSeed + j), i});
    }
  }
  // Equal hashes (probability ~P^2 / 2^65) order by id rank, so the result ignores input order.
  std::sort(pts.begin(), pts.end(), [&set](const Point& a, const Point& b) {
    return a.hash != b.hash ? a.hash < b.hash : set.id_rank(a.backend) < set.id_rank(b.backend);
  });
  sk.points_ = pts.size();
  sk.root_ = sk.build_cluster(pts, 0);
  return sk;
}

uint32_t SkeletonRendezvous::build_cluster(std::span<const Point> pts, unsigned level) {
  const BackendIndex only = pts.front().backend;
  if (std::all_of(pts.begin(), pts.end(), [only](const Point& p) { return p.backend == only; })) {
    return kLeaf | only;  // every descent into this cluster ends at `only`
  }
  const auto cluster = static_cast<uint32_t>(first_.size());
  first_.push_back(static_cast<uint32_t>(label_.size()));
  count_.push_back(0);
  // Children: runs of equal prefix one level down; below the last level, single points.
  std::vector<std::span<const Point>> groups;
  const unsigned bits = kFanoutBits * (level + 1);
  for (size_t lo = 0; lo < pts.size();) {
    size_t hi = lo + 1;
    if (level < kLevels) {
      const uint64_t prefix = pts[lo].hash >> (64 - bits);
      while (hi < pts.size() && (pts[hi].hash >> (64 - bits)) == prefix) ++hi;
      label_.push_back(mix64_prepare(cluster_label(prefix, bits)));
    } else {
      label_.push_back(mix64_prepare(mix64(pts[lo].hash, kLabelSeed)));
    }
    groups.push_back(pts.subspan(lo, hi - lo));
    lo = hi;
  }
  count_[cluster] = static_cast<uint32_t>(groups.size());
  child_.resize(label_.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t ref = build_cluster(groups[g], level + 1);
    child_[first_[cluster] + g] = ref;
  }
  return cluster;
}

BackendIndex SkeletonRendezvous::owner(uint64_t hash) const noexcept {
  uint32_t ref = root_;
  // Each step goes one level down; the depth is at most kLevels + 2.
  while ((ref & kLeaf) == 0) {
    const uint32_t first = first_[ref];
    const uint32_t end = first + count_[ref];
    uint32_t best = first;
    // mix64(hash, label) with the label's half prepared at build: inline, no call per child.
    uint64_t best_score = mix64_finish(hash ^ label_[first]);
    for (uint32_t e = first + 1; e < end; ++e) {
      const uint64_t s = mix64_finish(hash ^ label_[e]);
      if (s > best_score) {  // ties keep the earlier (smaller prefix) child
        best_score = s;
        best = e;
      }
    }
    ref = child_[best];
  }
  return static_cast<BackendIndex>(ref & 0xFFFF);
}

void SkeletonRendezvous::start(CursorState& state, uint64_t hash) const noexcept {
  state = CursorState{};
  state.hash = hash;
}

BackendIndex SkeletonRendezvous::next(CursorState& state, std::span<uint64_t> seen) const noexcept {
  return rehash_walk_next(state, seen, by_id_, [this](uint64_t h) noexcept { return owner(h); });
}

std::vector<double> SkeletonRendezvous::key_shares(size_t backend_count) const {
  std::vector<double> shares(backend_count, 0.0);
  struct Item {
    uint32_t ref;
    double share;
  };
  std::vector<Item> stack{{root_, 1.0}};
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    if ((it.ref & kLeaf) != 0) {
      shares[it.ref & 0xFFFF] += it.share;
      continue;
    }
    const double each = it.share / count_[it.ref];
    for (uint32_t e = first_[it.ref]; e < first_[it.ref] + count_[it.ref]; ++e) {
      stack.push_back({child_[e], each});
    }
  }
  return shares;
}

size_t SkeletonRendezvous::memory_bytes() const noexcept {
  return first_.capacity() * sizeof(uint32_t) + count_.capacity() * sizeof(uint32_t) +
         label_.capacity() * sizeof(uint64_t) + child_.capacity() * sizeof(uint32_t) +
         by_id_.capacity() * sizeof(BackendIndex);
}

}  // namespace rondel::core
