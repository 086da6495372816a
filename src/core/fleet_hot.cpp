// FleetHot: merging the instances' hot-key counts and the table they agree on.
#include "rondel/core/fleet_hot.h"

#include <algorithm>
#include <bit>


namespace rondel::core {

namespace {

bool heavier(const HotCount& a, const HotCount& b) noexcept {
  return a.count != b.count ? a.count > b.count : a.hash < b.hash;
}

}  // namespace

HotCounts merge_hot_counts(std::span<const HotCounts> parts, size_t limit) {
  HotCounts out;
  std::vector<HotCount> all;
  for (const HotCounts& p : parts) {
    out.total += p.total;
    all.insert(all.end(), p.keys.begin(), p.keys.end());
  }
  std::sort(all.begin(), all.end(),
            [](const HotCount& a, const HotCount& b) { return a.hash < b.hash; });
  for (const HotCount& k : all) {
    if (!out.keys.empty() && out.keys.back().hash == k.hash) {
      out.keys.back().count += k.count;
    } else {
      out.keys.push_back(k);
    }
  }
  std::sort(out.keys.begin(), out.keys.end(), heavier);
  if (out.keys.size() > limit) out.keys.resize(limit);
  return out;
}

std::vector<HotCount> build_fleet_table(const HotCounts& merged, size_t eligible,
                                        const HotReplicaOptions& o, HotReplicas& out) {
  out.clear();
  std::vector<HotCount> hot;
  for (const HotCount& k : merged.keys) {
    const uint32_t r = std::bit_floor(replicas_for(k.count, merged.total, eligible, o));
    if (r <= 1) continue;
    if (!out.set(k.hash, r)) break;
    hot.push_back(k);
  }
  return hot;
}

}  // namespace rondel::core
