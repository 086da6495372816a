// FleetHot: one hot-key replica table that every instance of a fleet computes alike, from the
// counts each instance publishes (server/fleet_hot.h carries them through etcd).
//
// Why: each instance (and each worker) detects hot keys on its own share of the traffic, so near
// a level boundary their replica counts differ by sampling noise alone (docs/routing.md, "Fleets:
// N": 54-86% of keys agreed at 10,000 requests/s). Summing every instance's counts of one epoch
// gives all instances the same input, and a pure function of the same input gives the same R.
//
// Pure: no I/O, no clock; allocation only in the merge and the table build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/hot_replicas.h"

namespace rondel::core {

struct HotCount {
  uint64_t hash = 0;
  uint64_t count = 0;  // a lower bound of the key's requests over the detector's window
  bool operator==(const HotCount&) const = default;
};

// One detector's (a worker's), one instance's or the whole fleet's counts over a window.
struct HotCounts {
  uint64_t total = 0;          // requests the counts are out of
  std::vector<HotCount> keys;  // heaviest first (ties: smaller hash first), no hash twice
  bool operator==(const HotCounts&) const = default;
};

// The sum of `parts`: totals added, counts added by hash (a key missing from a part counts 0
// there), heaviest first (ties: smaller hash), at most `limit` keys. The result does not depend
// on the order of `parts`. O(sum of sizes * log).
HotCounts merge_hot_counts(std::span<const HotCounts> parts, size_t limit);

// The fleet's replica table from `merged` (merge_hot_counts of every instance's counts of one
// epoch): R = replicas_for(count, total, eligible, o) (min_count compared with the fleet's
// count) rounded down to a power of two. No hysteresis: a table that depended on the tables
// before it would differ on an instance that joined later; the detectors' windows already
// smooth the counts over time. Fills `out` (cleared first; keys past its capacity are left
// out) and returns the keys with R > 1 in `merged`'s order.
std::vector<HotCount> build_fleet_table(const HotCounts& merged, size_t eligible,
                                        const HotReplicaOptions& o, HotReplicas& out);

}  // namespace rondel::core
