// Router: hash policy -> route state -> bounded-load pick, and the routing counters.
#include "rondel/proxy/router.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <mutex>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/core/subset.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/load_report.h"

namespace rondel::proxy {

namespace {

core::RoutePolicyOptions policy_options(const Pool& pool) {
  const config::PoolConfig& cfg = pool.config();
  core::RoutePolicyOptions o;
  o.route = pool.route_options();
  o.spill_entries = cfg.spill_memory;
  o.hot_share_pct = cfg.hot_keys.share;
  o.hot_capacity = cfg.hot_keys.capacity;
  o.hot_window_ms = cfg.hot_keys.window_ms;
  o.max_replicas = cfg.hot_keys.max_replicas;
  o.min_count = cfg.hot_keys.min_count;
  // llm_prefix: R is a tenant's set size, quantized so that workers and instances agree.
  o.pow2_replicas = cfg.hash_key.kind == config::HashKeyKind::kLlmPrefix;
  return o;
}

// Whether the pool needs per-worker route state (spill memory or hot-key replicas).
bool stateful(const config::PoolConfig& cfg) noexcept {
  return cfg.hot_keys.share > 0 || cfg.spill_memory > 0;
}

size_t eligible_of(const void* pool) noexcept {
  return static_cast<const Pool*>(pool)->eligible_count();
}

uint32_t detectors_of(const void* pool) noexcept {
  return static_cast<const Pool*>(pool)->state().detectors.load(std::memory_order_relaxed);
}

// Adds to the exclusion set every backend at max_connections_per_backend for which `worker`
// (kAnyWorker: any worker) holds no idle connection. Returns how many it added.
uint16_t exclude_at_limit(const Pool& pool, uint32_t worker, core::PickInput& in,
                          std::span<uint64_t> excluded) noexcept {
  const uint32_t max_conns = pool.config().max_connections_per_backend;
  if (max_conns == 0) return 0;
  uint16_t n = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (core::bit_test(excluded, i)) continue;
    const BackendState& st = pool.backend(static_cast<core::BackendIndex>(i));
    const size_t idle = worker == PickRequest::kAnyWorker ? st.idle_count() : st.idle_count(worker);
    if (idle == 0 && st.open_connections.load(std::memory_order_relaxed) >= max_conns) {
      core::bit_set(excluded, i);
      ++n;
    }
  }
  if (n > 0) in.excluded = excluded;
  return n;
}

uint16_t count_bits(std::span<const uint64_t> bits) noexcept {
  int n = 0;
  for (uint64_t w : bits) n += std::popcount(w);
  return static_cast<uint16_t>(n);
}

RouteDecision decision_of(const core::RouteResult& rr, RouteKey::Kind kind) noexcept {
  RouteDecision d;
  d.backend = rr.pick.backend;
  d.owner = kind == RouteKey::Kind::kKey ? rr.pick.owner : core::kNoBackend;
  d.home = rr.home;
  d.reason = rr.reason;
  d.skipped_full = rr.pick.skipped_full;
  d.skipped_excluded = rr.pick.skipped_excluded;
  d.hops = static_cast<uint16_t>(d.skipped_full + d.skipped_excluded);
  d.replicas = rr.replicas;
  d.all_full = rr.pick.all_full;
  return d;
}

core::Affinity affinity_of(const RouteKey& k) noexcept {
  return k.kind == RouteKey::Kind::kKey ? core::Affinity::kKey : core::Affinity::kNone;
}

// With load_report on or a fleet of N > 1, the pick compares effective loads on the fleet's
// scale (reported while fresh, else N times local): one buffer per thread, grown to the
// largest pool once. Returns the effective loads `in` now reads (this thread's buffer), empty
// when the pick reads the counters themselves.
std::span<uint32_t> use_reported_loads(const Pool& pool, uint64_t now_ms, core::PickInput& in) {
  if (!reads_fleet_loads(pool)) return {};
  thread_local std::vector<uint32_t> loads;
  thread_local std::vector<uint64_t> rounded;
  fill_effective_loads(pool, now_ms, loads, rounded, in);
  return std::span<uint32_t>(loads.data(), pool.size());
}

// A pick whose claim lost a race (another worker filled the backend in between) is made again,
// at most this many times; then the last pick's backend is taken as it is. Each lost race means
// some other claim succeeded, so the re-picks end quickly in practice (one or two on 2 workers).
constexpr uint32_t kMaxClaimRaces = 8;

// Claims the place `p` chose, as InFlightSlot::take_below against the capacity the pick
// compared (through local_limit_of, with the rounding residue the pick used, when it read
// reported loads). An all-full pick, which
// knowingly goes over the bound to the least loaded backend, and `force` take it unconditionally.
bool claim_place(const Pool& pool, const core::PickResult& p, uint64_t now_ms, bool force,
                 uint32_t cost, InFlightSlot& slot) noexcept {
  BackendState& b = pool.backend(p.backend);
  PoolState& ps = pool.state();
  const bool by_cost = pool.config().load_by == config::LoadBy::kPromptSize;
  const uint64_t limit = p.all_full || force
                             ? UINT64_MAX
                             : local_limit_of(pool, p.backend, now_ms, p.capacity, p.residue);
  if (by_cost) {
    slot = InFlightSlot::take_cost_below(b.in_flight, ps.total_in_flight, b.in_flight_cost,
                                         ps.total_in_flight_cost, cost, limit);
  } else if (limit == UINT64_MAX) {
    slot = InFlightSlot::take(b.in_flight, ps.total_in_flight);
  } else {
    slot = InFlightSlot::take_below(b.in_flight, ps.total_in_flight, limit);
  }
  return slot.held();
}

}  // namespace

InFlightSlot take_slot(const Pool& pool, core::BackendIndex i, uint32_t cost) noexcept {
  BackendState& b = pool.backend(i);
  PoolState& ps = pool.state();
  if (pool.config().load_by == config::LoadBy::kPromptSize) {
    return InFlightSlot::take_cost(b.in_flight, ps.total_in_flight, b.in_flight_cost,
                                   ps.total_in_flight_cost, cost);
  }
  return InFlightSlot::take(b.in_flight, ps.total_in_flight);
}

uint32_t request_cost(const http::RequestHead& head, uint64_t read) noexcept {
  const uint64_t bytes = head.framing == http::Framing::kLength ? head.content_length : read;
  return static_cast<uint32_t>(std::clamp<uint64_t>((bytes + 1023) / 1024, 1, kMaxRequestCost));
}

namespace {

// After a lost claim on `b`: the pick's snapshot of reported loads gets b's load as it is now
// (the live in-flight view needs nothing: the next pick reads the counters again).
void refresh_load(const Pool& pool, core::BackendIndex b, uint64_t now_ms,
                  std::span<uint32_t> loads, core::PickInput& in) noexcept {
  if (loads.empty()) return;
  const uint32_t now = effective_load_of(pool, b, now_ms);
  in.total_in_flight = in.total_in_flight + now - std::min<uint64_t>(loads[b], in.total_in_flight);
  loads[b] = now;
}

// Whether the pool balances its tenants' homes (llm_prefix, tenant_homes: balanced).
bool balances_homes(const config::PoolConfig& cfg) noexcept {
  return cfg.hash_key.kind == config::HashKeyKind::kLlmPrefix &&
         cfg.llm_prefix.tenant_homes == config::TenantHomes::kBalanced && cfg.hot_keys.share > 0;
}

// A tenant joins the balanced set at this many requests over the detector's window, counted on
// the fleet's scale, and leaves after this many rebuilds (4 a window) without a request: a
// tenant's home moves only when tenants arrive or go quiet (docs/routing.md).
constexpr uint64_t kTenantJoin = 1;
constexpr uint32_t kTenantIdleRebuilds = 8;

// The balanced homes (core/group_homes.h) of the active tenants, each taking R slots, over the
// current placement's usable backends. At each rebuild (window/4) and join, never per request.
std::vector<core::GroupHome> tenant_homes(const Pool& pool, const core::RoutePolicy& policy,
                                          const core::ActiveGroups& active,
                                          const core::HotReplicas* fleet) {
  std::vector<core::GroupSize> groups;
  for (uint64_t g : active.members()) {
    const uint32_t r = fleet != nullptr ? fleet->replicas(g) : policy.replicas(g);
    groups.push_back({pool.placement_hash(core::PlacementVersion::kCurrent, g), r});
  }
  const core::Selector& sel = pool.selector(core::PlacementVersion::kCurrent);
  std::vector<uint64_t> excluded(core::bitset_words(pool.size()), 0);
  for (size_t i = 0; i < pool.size(); ++i) {
    const auto b = static_cast<core::BackendIndex>(i);
    if (pool.effective_weight(b) == 0 || !pool.backend(b).usable()) core::bit_set(excluded, i);
  }
  std::vector<uint64_t> scratch(sel.scratch_words());
  return core::balance_group_homes(sel, groups, excluded, scratch);
}

// The rank of `group`'s home in `homes` (ascending by group), 0 when it has none.
uint32_t home_rank(const std::vector<core::GroupHome>& homes, uint64_t group) noexcept {
  auto it = std::lower_bound(homes.begin(), homes.end(), group,
                             [](const core::GroupHome& h, uint64_t g) { return h.group < g; });
  return it != homes.end() && it->group == group ? it->rank : 0;
}

// R of `hash` in the fleet's shared table when there is one, else in the replica table the
// workers last published (1 when not hot).
uint32_t published_replicas(const PoolState& ps, uint64_t hash) {
  std::lock_guard<std::mutex> lock(ps.hot_mu);
  if (ps.fleet_hot != nullptr) return ps.fleet_hot->replicas(hash);
  for (const auto& h : ps.hot) {
    if (h.hash == hash) return h.replicas;
  }
  return 1;
}

// Restricts `in` to the subset's members (core::restrict_to_subset: the exclusion set gains the
// non-members, W and the in-flight total become the members'). W then counts down members too:
// like Pool::pick_input, take them out, on the rare path only (some backend of the pool down).
void restrict_to(const Pool& pool, const core::Subset& subset, core::PickInput& in,
                 std::span<uint64_t> excluded) noexcept {
  core::restrict_to_subset(subset, in, excluded);
  if (pool.state().unusable.load(std::memory_order_acquire) == 0) return;
  for (size_t i = 0; i < pool.size(); ++i) {
    const auto b = static_cast<core::BackendIndex>(i);
    if (subset.contains(b) && !pool.backend(b).usable() && i < in.weights.size()) {
      in.total_weight -= std::min<uint64_t>(in.total_weight, in.weights[i]);
    }
  }
}

const core::Subset* subset_of(const Pool& pool, uint8_t subset) noexcept {
  return subset < pool.subset_count() ? &pool.subset(subset) : nullptr;
}

// A request without a key (or with missing_key: least_in_flight) goes to the least loaded
// eligible backend (with load_report, by the effective loads use_reported_loads put in
// `in.loads`); there is no bound to keep, so its claim takes the slot unconditionally.
RouteDecision route_keyless(const Pool& pool, const PickRequest& rq, core::PickInput& in,
                            std::span<uint64_t> excluded, uint16_t at_limit,
                            const core::Subset* subset, InFlightSlot* claim) noexcept {
  if (subset != nullptr) restrict_to(pool, *subset, in, excluded);
  RouteDecision d;
  d.backend = pool.least_loaded(excluded, in.loads);
  d.hops = static_cast<uint16_t>(count_bits(rq.tried) + at_limit);
  d.skipped_excluded = d.hops;
  if (claim != nullptr && d.backend != core::kNoBackend) {
    *claim = take_slot(pool, d.backend, rq.cost);
  }
  return d;
}

}  // namespace

RouteKey route_key(const config::PoolConfig& cfg, const http::RequestHead& head,
                   std::string_view client_ip, uint64_t random) noexcept {
  std::string_view key;
  if (extract_key(cfg.hash_key, head, client_ip, key)) {
    uint64_t hash = core::hash64(key);
    uint64_t chunk = 0;
    if (cfg.range_chunk > 0 && request_chunk(head, cfg.range_chunk, chunk)) {
      hash = chunk_hash(hash, chunk);
    }
    return RouteKey{RouteKey::Kind::kKey, hash, key};
  }
  switch (cfg.missing_key) {
    case config::MissingKeyPolicy::kHashUri:
      extract_key(config::HashKey{config::HashKeyKind::kUri, {}}, head, client_ip, key);
      return RouteKey{RouteKey::Kind::kKey, core::hash64(key), key};
    case config::MissingKeyPolicy::kRandom:
      return RouteKey{RouteKey::Kind::kRandom, random, {}};
    case config::MissingKeyPolicy::kReject:
      return RouteKey{RouteKey::Kind::kReject, 0, {}};
    case config::MissingKeyPolicy::kLeastInFlight:
      break;
  }
  return RouteKey{};
}

// Per-worker route state of one pool.
struct Router::PoolRoute {
  explicit PoolRoute(const Pool& pool)
      : policy(policy_options(pool)),
        active(pool.config().hot_keys.capacity, kTenantIdleRebuilds),
        generation(pool.generation()) {}
  core::RoutePolicy policy;
  core::ActiveGroups active;  // the tenants balanced homes spread (balances_homes)
  uint64_t generation = 0;  // generation of the pool this state was last set up for
  uint64_t published = 0;   // policy.rebuilds() last published to PoolState::hot
  // The fleet's table (PoolState::fleet_hot) as of fleet_version; nullptr = use the policy's.
  std::shared_ptr<const core::HotReplicas> fleet;
  uint64_t fleet_version = 0;
  // Balanced tenant homes (balances_homes), ascending by group, as of policy rebuild homes_at.
  std::vector<core::GroupHome> homes;
  uint64_t homes_at = 0;

  // After the detector has observed rq: at each rebuild, the active tenants' counts (join and
  // leave); between rebuilds, a tenant that is not active joins as soon as it is seen, so a new
  // tenant's home is balanced from its first request. The homes are recomputed at each rebuild
  // (the backends' weights or health may have changed too) and at each join; allocates only
  // then. Recomputing at once costs a fleet some agreement while its instances learn the tenants
  // in different orders, and placing newcomers by hash until the set is quiet costs far more
  // where the hashes pile tenants up (docs/routing.md, "How balanced tenant homes got there").
  void refresh_homes(const Pool& pool, const PickRequest& rq) {
    const uint64_t scale = std::max<uint32_t>(detectors_of(&pool), 1);
    bool changed = false;
    if (homes_at != policy.rebuilds()) {
      homes_at = policy.rebuilds();
      active.update(policy.top_groups(), scale, kTenantJoin);
      changed = true;
    } else if (rq.key.grouped && rq.kind == core::PickKind::kFirst &&
               !active.contains(rq.key.group) &&
               policy.count_of(rq.key.group) * scale >= kTenantJoin) {
      changed = active.join(rq.key.group);
    }
    if (!changed) return;
    homes = tenant_homes(pool, policy, active, fleet.get());
    if (rq.worker != PickRequest::kAnyWorker) {
      std::lock_guard<std::mutex> lock(pool.state().hot_mu);
      pool.state().homes = homes;
    }
  }
};

Router::Router() = default;
Router::~Router() = default;

Router::PoolRoute* Router::state_for(const Pool& pool, bool& current) {
  const uint32_t slot = pool.state().slot;
  if (slot >= by_slot_.size()) by_slot_.resize(slot + 1);
  std::unique_ptr<PoolRoute>& st = by_slot_[slot];
  current = true;
  if (!st) {
    st = std::make_unique<PoolRoute>(pool);
  } else if (pool.generation() < st->generation) {
    current = false;  // a request still on an older snapshot: its indices are not ours
  } else if (pool.generation() > st->generation) {
    const core::RoutePolicyOptions o = policy_options(pool);
    if (st->policy.same_shape(o)) {
      st->policy.reset(o);  // indices may have changed meaning: forget spills, rebuild R
      st->generation = pool.generation();
    } else {
      st = std::make_unique<PoolRoute>(pool);
    }
  }
  return st.get();
}

Router::PoolRoute* Router::observe(const Pool& pool, const PickRequest& rq,
                                   core::Affinity affinity, uint32_t& replicas,
                                   core::SpillMemory*& memory) {
  PoolState& ps = pool.state();
  bool current = true;
  PoolRoute* st = state_for(pool, current);
  // A grouped key's detector watches its group (a tenant's rate sets its set's size R); its
  // own hash keeps the spill memory. The plain-key path is unchanged.
  const uint64_t observed = rq.key.grouped ? rq.key.group : rq.key.hash;
  const std::string_view text = rq.key.grouped ? rq.key.group_key : rq.key.key;
  replicas = st->policy.observe(observed, text, rq.now_ms, rq.kind, affinity,
                                {&eligible_of, &pool, &detectors_of}, rq.key.grouped);
  if (st->published != st->policy.rebuilds() && rq.worker != PickRequest::kAnyWorker) {
    st->published = st->policy.rebuilds();
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    ps.hot = st->policy.hot();  // allocates: once per rebuild (window/4)
    ps.hot_window_total = st->policy.hot_window_total();
    if (ps.worker_counts.size() <= rq.worker) ps.worker_counts.resize(rq.worker + 1);
    ps.worker_counts[rq.worker] = st->policy.top_counts();
  }
  // The fleet's shared table, when the daemon has one for this epoch, decides R instead.
  if (const uint64_t v = ps.fleet_hot_version.load(std::memory_order_acquire);
      v != st->fleet_version) {
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    st->fleet = ps.fleet_hot;
    st->fleet_version = ps.fleet_hot_version.load(std::memory_order_relaxed);
  }
  if (st->fleet != nullptr && affinity == core::Affinity::kKey) {
    replicas = st->fleet->replicas(observed);
  }
  if (current && balances_homes(pool.config())) st->refresh_homes(pool, rq);
  memory = current ? st->policy.memory_for(rq.kind, affinity) : nullptr;
  return st;
}

RouteDecision Router::route(const Pool& pool, const PickRequest& rq, std::span<uint64_t> scratch,
                           InFlightSlot* claim) {
  PoolState& ps = pool.state();
  const core::Subset* subset = subset_of(pool, rq.subset);
  if (subset != nullptr && rq.kind == core::PickKind::kFirst) {
    pool.subset_counters(rq.subset).requests.fetch_add(1, std::memory_order_relaxed);
  }
  if (pool.empty()) {
    // A pool whose names resolved to nothing (its selector holds only a placeholder): 503.
    ps.no_backend.fetch_add(1, std::memory_order_relaxed);
    if (subset != nullptr)
      pool.subset_counters(rq.subset).unavailable.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  const std::span<uint64_t> excluded = scratch.first(pool.excluded_words());
  const std::span<uint64_t> pick_scratch = scratch.subspan(pool.excluded_words());
  core::PickInput in;
  pool.pick_input(in, rq.tried, excluded);
  const std::span<uint32_t> loads = use_reported_loads(pool, rq.now_ms, in);
  const uint16_t at_limit = exclude_at_limit(pool, rq.worker, in, excluded);
  RouteDecision d;
  if (!rq.key.walks()) {
    d = route_keyless(pool, rq, in, excluded, at_limit, subset, claim);
  } else {
    const core::Affinity affinity = affinity_of(rq.key);
    const core::PlacementVersion version = pool.placement_of(rq.key.hash);
    const core::Selector& sel = pool.selector(version);
    const uint64_t hash = pool.placement_hash(version, rq.key.hash);
    if (version == core::PlacementVersion::kPrevious) pool.previous_input(in);
    if (subset != nullptr) restrict_to(pool, *subset, in, excluded);
    uint32_t replicas = 1;
    core::SpillMemory* memory = nullptr;
    PoolRoute* st = stateful(pool.config()) ? observe(pool, rq, affinity, replicas, memory) : nullptr;
    // A grouped key: R sizes its group's set, and the pick inside is the key's own (no replica
    // choice by load, which would move a conversation between turns).
    const uint64_t group = rq.key.grouped ? pool.placement_hash(version, rq.key.group) : 0;
    const uint32_t rank = st != nullptr && version == core::PlacementVersion::kCurrent
                              ? home_rank(st->homes, group)
                              : 0;
    const core::PlacementKey key = rq.key.grouped
                                       ? core::PlacementKey(hash, group, replicas, rank)
                                       : core::PlacementKey(hash);
    if (rq.key.grouped) replicas = 1;
    // The pick and its claim: the backend's count is raised only while it is below the capacity
    // the pick compared, so workers picking at once cannot both take a backend's last place.
    core::RouteResult rr;
    for (uint32_t race = 0;; ++race) {
      rr = st != nullptr ? st->policy.pick(sel, key, in, replicas, memory, pick_scratch)
                         : core::route_pick(sel, key, in, pool.route_options(),
                                            core::RouteRequest{}, nullptr, pick_scratch);
      if (claim == nullptr || rr.pick.backend == core::kNoBackend ||
          claim_place(pool, rr.pick, rq.now_ms, race == kMaxClaimRaces, rq.cost, *claim)) {
        break;
      }
      refresh_load(pool, rr.pick.backend, rq.now_ms, loads, in);
    }
    d = decision_of(rr, rq.key.kind);
    d.placement = version;
    if (subset != nullptr && rq.key.kind == RouteKey::Kind::kKey) {
      // The natural owner within the subset: a pool of the members alone would place it there.
      d.owner = core::subset_owner(sel, key, *subset, pick_scratch);
    }
    if (rq.key.grouped) d.replicas = static_cast<uint16_t>(key.group_size);
    if (rq.kind == core::PickKind::kFirst) {
      ps.placement_routed[static_cast<size_t>(version)].fetch_add(1, std::memory_order_relaxed);
    }
    if (rq.kind == core::PickKind::kFirst && rq.key.kind == RouteKey::Kind::kKey) {
      ps.routed[static_cast<size_t>(d.reason)].fetch_add(1, std::memory_order_relaxed);
      record_decision(pool, rq.key.hash, d);
    }
    if (d.all_full) ps.all_full.fetch_add(1, std::memory_order_relaxed);
  }
  if (d.backend == core::kNoBackend) {
    ps.no_backend.fetch_add(1, std::memory_order_relaxed);
    if (subset != nullptr)
      pool.subset_counters(rq.subset).unavailable.fetch_add(1, std::memory_order_relaxed);
  }
  return d;
}

RouteDecision Router::explain(const Pool& pool, uint64_t hash, uint8_t subset_index) {
  RouteKey k;
  k.kind = RouteKey::Kind::kKey;
  k.hash = hash;
  return explain(pool, k, subset_index);
}

RouteDecision Router::explain(const Pool& pool, const RouteKey& key, uint8_t subset_index) {
  const uint64_t hash = key.hash;
  if (pool.empty()) return {};
  std::vector<uint64_t> scratch(pool.scratch_words());
  const std::span<uint64_t> excluded = std::span<uint64_t>(scratch).first(pool.excluded_words());
  const std::span<uint64_t> pick_scratch =
      std::span<uint64_t>(scratch).subspan(pool.excluded_words());
  core::PickInput in;
  pool.pick_input(in, {}, excluded);
  const auto now = std::chrono::steady_clock::now().time_since_epoch();  // uv_now's clock
  use_reported_loads(pool, std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), in);
  exclude_at_limit(pool, PickRequest::kAnyWorker, in, excluded);
  const core::PlacementVersion version = pool.placement_of(hash);
  const core::Selector& sel = pool.selector(version);
  const uint64_t placed = pool.placement_hash(version, hash);
  if (version == core::PlacementVersion::kPrevious) pool.previous_input(in);
  const core::Subset* subset = subset_of(pool, subset_index);
  if (subset != nullptr) restrict_to(pool, *subset, in, excluded);
  core::RouteResult rr;
  const uint64_t observed = key.grouped ? key.group : hash;
  uint32_t replicas =
      pool.config().hot_keys.share > 0 ? published_replicas(pool.state(), observed) : 1;
  const uint64_t group = key.grouped ? pool.placement_hash(version, key.group) : 0;
  uint32_t rank = 0;
  if (key.grouped && version == core::PlacementVersion::kCurrent) {
    std::lock_guard<std::mutex> lock(pool.state().hot_mu);
    rank = home_rank(pool.state().homes, group);
  }
  const core::PlacementKey pk =
      key.grouped ? core::PlacementKey(placed, group, replicas, rank) : core::PlacementKey(placed);
  if (key.grouped) replicas = 1;
  if (!stateful(pool.config())) {
    rr = core::route_pick(sel, pk, in, pool.route_options(), core::RouteRequest{}, nullptr,
                          pick_scratch);
  } else {
    core::RoutePolicy scratch_policy(policy_options(pool));  // empty spill memory
    rr = scratch_policy.pick(
        sel, pk, in, replicas,
        scratch_policy.memory_for(core::PickKind::kFirst, core::Affinity::kKey), pick_scratch);
  }
  RouteDecision d = decision_of(rr, RouteKey::Kind::kKey);
  d.placement = version;
  if (key.grouped) d.replicas = static_cast<uint16_t>(pk.group_size);
  if (subset != nullptr) d.owner = core::subset_owner(sel, pk, *subset, pick_scratch);
  return d;
}

void Router::count_served(const Pool& pool, core::BackendIndex backend,
                          core::BackendIndex owner) noexcept {
  if (!is_spill(owner, backend)) return;
  pool.backend(backend).counters.spill_in.fetch_add(1, std::memory_order_relaxed);
  pool.state().spilled.fetch_add(1, std::memory_order_relaxed);
}

// PoolState::recent entry: the hash's upper 24 bits (the key's tag), the backend's id tag
// (Pool::id_tag, 32 bits) and reason + 1 (so that an entry is never 0).
void Router::record_decision(const Pool& pool, uint64_t hash, const RouteDecision& d) noexcept {
  if (d.backend == core::kNoBackend) return;
  const uint64_t rec = (hash >> 40) << 40 | uint64_t{pool.id_tag(d.backend)} << 8 |
                       (static_cast<uint64_t>(d.reason) + 1);
  pool.state().recent[hash & (PoolState::kRecentDecisions - 1)].store(rec,
                                                                      std::memory_order_relaxed);
}

LastDecision Router::last_decision(const Pool& pool, uint64_t hash) noexcept {
  const uint64_t rec =
      pool.state().recent[hash & (PoolState::kRecentDecisions - 1)].load(std::memory_order_relaxed);
  LastDecision last;
  if (rec == 0 || (rec >> 40) != (hash >> 40)) return last;
  last.found = true;
  last.reason = static_cast<core::RouteReason>((rec & 0xff) - 1);
  const auto tag = static_cast<uint32_t>(rec >> 8);
  for (size_t i = 0; i < pool.size(); ++i) {
    if (pool.id_tag(static_cast<core::BackendIndex>(i)) == tag) {
      last.backend = static_cast<core::BackendIndex>(i);
      break;
    }
  }
  return last;
}

const core::RoutePolicy* Router::find(const Pool& pool) const noexcept {
  const uint32_t slot = pool.state().slot;
  return slot < by_slot_.size() && by_slot_[slot] ? &by_slot_[slot]->policy : nullptr;
}

}  // namespace rondel::proxy
