// RoutePolicy: the per-loop routing state (spill memory, hot keys, replicas) around route_pick.
#include "rondel/core/route_policy.h"

#include <algorithm>
#include <bit>

namespace rondel::core {

namespace {

HotReplicaOptions replica_options_of(const RoutePolicyOptions& o) noexcept {
  HotReplicaOptions r;
  r.hot_share_pct = o.hot_share_pct;
  r.max_replicas = o.max_replicas;
  r.min_count = o.min_count;
  return r;
}

}  // namespace

uint32_t quantize_replicas(uint32_t raw, uint64_t demand256, uint32_t previous) noexcept {
  const uint32_t up = raw <= 1 ? 1 : std::bit_floor(raw);
  using u128 = unsigned __int128;
  if (previous > up && u128{demand256} * kQuantizeBand > u128{previous} * 256) return previous;
  return up;
}

RoutePolicy::RoutePolicy(const RoutePolicyOptions& o)
    : opt_(o),
      replica_options_(replica_options_of(o)),
      memory_(std::max<uint32_t>(o.spill_entries, 1)),
      detector_(std::max<uint32_t>(o.hot_capacity, 1), std::max<uint64_t>(o.hot_window_ms, 1)),
      table_(std::max<uint32_t>(o.hot_capacity, 1)),
      previous_(std::max<uint32_t>(o.hot_capacity, 1)) {}

bool RoutePolicy::same_shape(const RoutePolicyOptions& o) const noexcept {
  return o.spill_entries == opt_.spill_entries && o.hot_capacity == opt_.hot_capacity &&
         o.hot_window_ms == opt_.hot_window_ms;
}

void RoutePolicy::reset(const RoutePolicyOptions& o) noexcept {
  opt_ = o;
  replica_options_ = replica_options_of(o);
  memory_.invalidate();
  table_.clear();
  previous_.clear();
  top_counts_ = {};
  top_groups_.clear();
  next_rebuild_ms_ = 0;  // N or the rule may have changed: rebuild at the next request
}

void RoutePolicy::rebuild(size_t eligible, uint32_t scale) {
  const bool quantize = opt_.pow2_replicas || scale > 1;
  std::swap(table_, previous_);
  table_.clear();
  const uint64_t total = detector_.total();
  HotReplicaOptions ro = replica_options_;
  // min_count is a count of the whole fleet's requests: this detector sees 1/scale of them.
  if (scale > 1) ro.min_count = (ro.min_count + scale - 1) / scale;
  hot_.clear();
  top_counts_.total = total;
  top_counts_.keys.clear();
  top_groups_.clear();
  for (const HotKeys::Entry& e : detector_.top(table_.capacity())) {
    top_counts_.keys.push_back({e.hash, e.count - e.error});
    if (e.group) top_groups_.push_back({e.hash, e.count - e.error});
    uint32_t r = replicas_for(e.count - e.error, total, eligible, ro);
    if (quantize) {
      const uint32_t prev = previous_.replicas(e.hash);
      // The previous R is kept only while it still fits the eligible backends and max_replicas.
      size_t limit = std::max<size_t>(eligible, 1);
      if (ro.max_replicas != 0) limit = std::min<size_t>(limit, ro.max_replicas);
      const uint32_t fit = static_cast<uint32_t>(std::bit_floor(limit));
      r = quantize_replicas(r, replica_demand256(e.count - e.error, total, eligible, ro),
                            std::min(prev, fit));
    }
    if (r <= 1) continue;
    table_.set(e.hash, r);
    hot_.push_back({e.hash, e.key, e.count - e.error, r});
  }
  hot_total_ = total;
  ++rebuilds_;
}

uint32_t RoutePolicy::observe(uint64_t hash, std::string_view key, uint64_t now_ms,
                             PickKind kind, Affinity affinity, EligibleCounter eligible,
                             bool group) {
  if (opt_.hot_share_pct == 0) return 1;
  const bool keyed = affinity == Affinity::kKey;
  detector_.advance(now_ms);
  if (keyed && kind == PickKind::kFirst) detector_.observe(hash, key, 1, group);
  if (now_ms >= next_rebuild_ms_) {
    rebuild(eligible.count != nullptr ? eligible.count(eligible.ctx) : 0,
            eligible.scale != nullptr ? eligible.scale(eligible.ctx) : 1);
    next_rebuild_ms_ = now_ms + std::max<uint64_t>(1, opt_.hot_window_ms / 4);
  }
  return keyed ? table_.replicas(hash) : 1;
}

RouteResult RoutePolicy::pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                              uint32_t replicas, SpillMemory* memory,
                              std::span<uint64_t> scratch) noexcept {
  RouteRequest rq;
  rq.replicas = replicas;
  rq.sequence = sequence_++;
  return route_pick(sel, key, in, opt_.route, rq, memory, scratch);
}

RouteResult RoutePolicy::route(const Selector& sel, const PlacementKey& pk, std::string_view key,
                               const PickInput& in, uint64_t now_ms, PickKind kind,
                               Affinity affinity, EligibleCounter eligible,
                               std::span<uint64_t> scratch) {
  const uint32_t replicas = observe(pk.hash, key, now_ms, kind, affinity, eligible);
  return pick(sel, pk, in, replicas, memory_for(kind, affinity), scratch);
}

}  // namespace rondel::core
