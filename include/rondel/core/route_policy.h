// RoutePolicy: one loop's routing state for one pool (stable-spill memory, hot-key detector and
// replica table) and the per-request policy that drives route_pick with it. The daemon (one per
// worker and pool, through proxy::Router) and rondel-sim --routing run this same code.
//
// Per request: the first pick of a key observes it in the HotKeys detector, the replica table is
// rebuilt from the detector every window/4 (Ying's rule, replicas_for), and route_pick runs with
// R from the table and the SpillMemory. A retry (PickKind::kRetry) neither observes nor uses the
// memory: excluding a backend that just failed is not a spill worth remembering. A key without
// affinity (Affinity::kNone, e.g. missing_key: random) neither observes nor touches the memory,
// so random hashes cannot evict the spills of real keys. docs/routing.md has the measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/core/bounded.h"
#include "rondel/core/fleet_hot.h"
#include "rondel/core/hot_keys.h"
#include "rondel/core/hot_replicas.h"
#include "rondel/core/selector.h"
#include "rondel/core/spill_memory.h"

namespace rondel::core {

struct RoutePolicyOptions {
  RouteOptions route;           // bound, slack, probe, hysteresis, replica choice
  uint32_t spill_entries = 0;   // SpillMemory size; 0 = no stable spill
  uint32_t hot_share_pct = 0;   // hot-key rule h (HotReplicaOptions); 0 = no replicas
  uint32_t hot_capacity = 64;   // HotKeys counters per window and HotReplicas capacity
  uint64_t hot_window_ms = 10000;
  uint32_t max_replicas = 0;
  uint64_t min_count = 16;
  // R quantized to a power of two with hysteresis (quantize_replicas): group sizes of two-level
  // placement (placement_key.h), so that workers and instances that measure a group's rate a
  // little differently still choose the same set.
  bool pow2_replicas = false;
};

// R rounded down to a power of two, with hysteresis against `previous` (the R the key had in the
// last table; 0 or 1 = none). `raw` is R as replicas_for gives it (the ceiling of the demand,
// clamped to the eligible backends), `demand256` the unrounded demand (replica_demand256). A
// larger power of two is taken as soon as `raw` reaches it; `previous` is kept while the demand
// stays above previous / kQuantizeBand, so a key must lose three quarters of its share before
// it gives up a level, and a key barely hot (demand just above 1) keeps its 2 replicas until its
// demand falls to 1/2. Instances and workers each measure a key's share on their own sample:
// near a boundary they cross it at different windows, and a wide band keeps each one where it
// went, so they converge instead of flipping (docs/routing.md, "Fleets: N"). 1 when raw <= 1
// and demand256 / 256 <= previous / kQuantizeBand.
inline constexpr uint32_t kQuantizeBand = 4;
uint32_t quantize_replicas(uint32_t raw, uint64_t demand256, uint32_t previous) noexcept;

// Which pick of a request this is.
enum class PickKind : uint8_t {
  kFirst,  // the routing decision: observes the key, may use and update the spill memory
  kRetry,  // after a failed attempt (the failed backend excluded): no observation, no memory
};

// Whether the hash stands for a key whose placement matters (cache affinity).
enum class Affinity : uint8_t {
  kKey,   // a real key: hot-key detection and stable spill apply
  kNone,  // a hash with no meaning (random): plain bounded pick, no state touched
};

// One hot key as the last replica-table rebuild saw it.
struct HotKeyReplicas {
  uint64_t hash = 0;
  std::string key;      // truncated to HotKeys::kMaxKeyBytes
  uint64_t count = 0;   // lower bound of the key's requests over the detector window
  uint32_t replicas = 1;
};

// What a replica-table rebuild (every window/4, never per request) reads of the live pool:
// `count` gives the backends a hot key may be replicated over (usable, positive weight);
// `scale` (optional) how many detectors share the traffic, each seeing about 1/scale of it
// (instances of the fleet times workers): the counts are scaled by it before min_count is
// compared, and when it is above 1 the replica counts are quantized to powers of two with
// hysteresis (quantize_replicas), so that detectors that measure a key's share a little
// differently still choose the same replicas.
struct EligibleCounter {
  size_t (*count)(const void* ctx) noexcept = nullptr;
  const void* ctx = nullptr;
  uint32_t (*scale)(const void* ctx) noexcept = nullptr;
};

class RoutePolicy {
 public:
  // Allocates the SpillMemory (8 * spill_entries bytes) and the hot-key tables once.
  explicit RoutePolicy(const RoutePolicyOptions& o);

  // Routes `hash` (`key`: its bytes, for the hot-key report; may be empty) at time `now_ms`
  // (any monotonic unit that hot_window_ms is in) through `sel` with the live state `in`:
  // observe() then pick() with memory_for(kind, affinity). Allocates only when it rebuilds the
  // replica table (top-K, every window/4, when the hot-key rule is on); never locks or throws.
  // One thread: the policy must not be shared. Precondition: scratch.size() >=
  // pick_scratch_words(sel).
  RouteResult route(const Selector& sel, const PlacementKey& pk, std::string_view key,
                    const PickInput& in,
                    uint64_t now_ms, PickKind kind, Affinity affinity, EligibleCounter eligible,
                    std::span<uint64_t> scratch);

  // The hot-key step of route(): advances the detector to `now_ms`, observes the key on a first
  // pick with affinity, rebuilds the table when window/4 has passed, and returns R for `hash`
  // (1 when the rule is off or the hash has no affinity). `group`: `hash` is a group's (a
  // tenant's), which top_groups() then lists.
  uint32_t observe(uint64_t hash, std::string_view key, uint64_t now_ms, PickKind kind,
                   Affinity affinity, EligibleCounter eligible, bool group = false);
  // The spill memory a pick of this kind may use and update, or nullptr.
  SpillMemory* memory_for(PickKind kind, Affinity affinity) noexcept {
    return affinity == Affinity::kKey && kind == PickKind::kFirst && opt_.spill_entries > 0
               ? &memory_
               : nullptr;
  }
  // The pick step of route(): route_pick with R = `replicas` and `memory` (nullptr: none). No
  // allocation.
  RouteResult pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                   uint32_t replicas,
                   SpillMemory* memory, std::span<uint64_t> scratch) noexcept;

  // Same options except the table sizes (spill_entries, hot_capacity, hot_window_ms)?
  bool same_shape(const RoutePolicyOptions& o) const noexcept;
  // Takes new options of the same shape, forgets every remembered spill (backend indices may
  // have changed meaning) and the replica table, and rebuilds the table at the next request.
  void reset(const RoutePolicyOptions& o) noexcept;

  // Hot keys (R > 1) of the last rebuild, hottest first, and the requests its counts cover.
  const std::vector<HotKeyReplicas>& hot() const noexcept { return hot_; }
  uint64_t hot_window_total() const noexcept { return hot_total_; }
  // Every key the detector held at the last rebuild with its count (lower bound), R > 1 or not:
  // what this detector adds to the fleet's counts (fleet_hot.h).
  const HotCounts& top_counts() const noexcept { return top_counts_; }
  // The groups among them (observed with group = true), heaviest first: the tenants balanced
  // group homes spread (group_homes.h).
  const std::vector<HotCount>& top_groups() const noexcept { return top_groups_; }
  // Incremented by each rebuild (a caller publishing hot() compares it).
  uint64_t rebuilds() const noexcept { return rebuilds_; }
  // A lower bound of `hash`'s requests the detector has counted over its window, now.
  uint64_t count_of(uint64_t hash) const noexcept { return detector_.count(hash); }
  // R for `hash` from the current table (1 when not hot).
  uint32_t replicas(uint64_t hash) const noexcept { return table_.replicas(hash); }
  const SpillMemory& memory() const noexcept { return memory_; }
  const RoutePolicyOptions& options() const noexcept { return opt_; }

 private:
  void rebuild(size_t eligible, uint32_t scale);

  RoutePolicyOptions opt_;
  HotReplicaOptions replica_options_;
  SpillMemory memory_;
  HotKeys detector_;
  HotReplicas table_;
  HotReplicas previous_;  // quantized replicas: the last table, for the hysteresis
  std::vector<HotKeyReplicas> hot_;
  HotCounts top_counts_;
  std::vector<HotCount> top_groups_;
  uint64_t hot_total_ = 0;
  uint64_t rebuilds_ = 0;
  uint64_t next_rebuild_ms_ = 0;
  uint64_t sequence_ = 0;  // round-robin replica choice
};

}  // namespace rondel::core
