// Router: the one routing entry point of rondel. The hash policy (hash_key and missing_key)
// turns a request into a RouteKey; Router::route turns a RouteKey into a backend through the
// pool's placement, the worker's route state (spill memory, hot-key replicas: core::RoutePolicy)
// and the bounded-load walk, with down, already-tried and at-connection-limit backends in the
// walk's exclusion set. The data path, /api/route (Router::explain) and rondel-sim --routing
// (core::RoutePolicy) run this code; routing outcomes are counted here and in count_served only.
// A request selected into a subset (config `subsets`) walks the same placement with the
// subset's non-members excluded, so it lands where a pool of the members alone would place it
// (ring, rendezvous: core/subset.h), and its natural owner is the subset's owner.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/bounded.h"
#include "rondel/core/route_policy.h"
#include "rondel/http/message.h"
#include "rondel/proxy/inflight_slot.h"
#include "rondel/proxy/pool.h"

namespace rondel::proxy {

// What the hash policy made of a request.
struct RouteKey {
  enum class Kind : uint8_t {
    kKey,          // the key (or the missing_key: hash_uri fallback): placement by its hash
    kRandom,       // no key, missing_key: random: a random hash, no affinity, never a spill
    kLeastLoaded,  // no key, missing_key: least_in_flight: the least loaded backend
    kReject,       // no key, missing_key: reject: answer 400
  };
  Kind kind = Kind::kLeastLoaded;
  uint64_t hash = 0;     // kKey: hash64(key); kRandom: the random hash
  std::string_view key;  // kKey: the key bytes (a view into the head or client_ip); else empty
  // A key of a group (llm_prefix: the conversation of a tenant; core/placement_key.h): the
  // group's hash picks a set of R backends (R from the hot-key detector, which watches groups),
  // `hash` the home inside it. group_key names the group for the detector (hash text only).
  bool grouped = false;
  uint64_t group = 0;
  std::string_view group_key;

  // Whether the bounded-load walk places the request (kKey, kRandom).
  bool walks() const noexcept { return kind == Kind::kKey || kind == Kind::kRandom; }
  // Rebuilds a RouteKey from its parts as an exchange stores them (walks, key, hash): a walked
  // request with an empty key is kRandom (the hash policy never yields an empty key).
  static RouteKey of(bool walks, std::string_view key, uint64_t hash) noexcept {
    if (!walks) return RouteKey{};
    RouteKey k;
    k.kind = key.empty() ? Kind::kRandom : Kind::kKey;
    k.hash = hash;
    k.key = key;
    return k;
  }
};

// The hash policy: the key of `head` under cfg.hash_key (hash_key.h: an empty value counts as
// missing, absolute-form targets are keyed by their origin form, IPv4-mapped IPv6 sources as
// IPv4), and when it is missing, cfg.missing_key. With cfg.range_chunk > 0 a request with one
// single byte range hashes as chunk_hash(hash64(key), first byte / range_chunk) (hash_key.h),
// so the walk, retries, hot keys, spill memory and counters all see one key per chunk.
// `random` seeds the hash of kRandom. No allocation; O(size of the head).
RouteKey route_key(const config::PoolConfig& cfg, const http::RequestHead& head,
                   std::string_view client_ip, uint64_t random) noexcept;

// The one definition of a spill: a request placed by its key and served by a backend other than
// the key's natural owner (the first backend of its preference order, whatever its load or
// health), for any reason: owner full, down, at its connection limit or failed, a hot-key
// replica or a remembered spill. Random-hash and least-loaded requests have no owner.
constexpr bool is_spill(core::BackendIndex owner, core::BackendIndex backend) noexcept {
  return owner != core::kNoBackend && backend != core::kNoBackend && owner != backend;
}

// The decision of one pick.
struct RouteDecision {
  core::BackendIndex backend = core::kNoBackend;  // kNoBackend: no eligible backend (503)
  core::BackendIndex owner = core::kNoBackend;    // natural owner (kKey only)
  core::BackendIndex home = core::kNoBackend;     // first eligible backend of the order
  core::RouteReason reason = core::RouteReason::kNone;  // why `backend` (walked requests)
  uint16_t hops = 0;              // backends passed over: full, excluded (down, tried, limit)
  uint16_t skipped_full = 0;      // ... of which at their bounded-load capacity
  uint16_t skipped_excluded = 0;  // ... of which excluded or of weight 0
  uint16_t replicas = 1;          // R used (hot keys)
  bool all_full = false;          // every eligible backend at capacity: least loaded taken
  // Walked requests: the placement that placed the key (gradual migration; kCurrent without a
  // `previous` placement). owner and home are that placement's.
  core::PlacementVersion placement = core::PlacementVersion::kCurrent;
};

// Inputs of one pick.
struct PickRequest {
  static constexpr uint32_t kAnyWorker = UINT32_MAX;
  RouteKey key;
  std::span<const uint64_t> tried;  // pool.excluded_words() words: backends already tried
  core::PickKind kind = core::PickKind::kFirst;
  uint64_t now_ms = 0;
  // A backend at max_connections_per_backend is excluded unless this worker (kAnyWorker: any
  // worker) holds an idle connection to it.
  uint32_t worker = kAnyWorker;
  // The subset the request was selected into (Pool::select_subset): the walk, the bound (W and
  // the in-flight total over its members), retries and the connection limit stay inside it.
  uint8_t subset = Pool::kNoSubset;
  // What the request counts for in the bound of a pool with `load_by: prompt_size` (its body's
  // KiB, at least 1; request_cost); ignored otherwise.
  uint32_t cost = 1;
};

// A request's cost for `load_by: prompt_size`: ceil(bytes / 1 KiB), at least 1, at most
// kMaxRequestCost, where bytes is the Content-Length when the body has one, else `read` (the
// body bytes read before routing, e.g. by an llm_prefix key).
inline constexpr uint32_t kMaxRequestCost = 1u << 20;  // 1 GiB
uint32_t request_cost(const http::RequestHead& head, uint64_t read) noexcept;

// A place on backend i of `pool` without a bound check (the stale-connection retry on the same
// backend): InFlightSlot::take, or take_cost with `cost` for `load_by: prompt_size`.
InFlightSlot take_slot(const Pool& pool, core::BackendIndex i, uint32_t cost) noexcept;

// The last recorded decision for a key (PoolState::recent), resolved in a given snapshot.
struct LastDecision {
  bool found = false;
  core::RouteReason reason = core::RouteReason::kNone;
  core::BackendIndex backend = core::kNoBackend;  // kNoBackend: that backend is not in the pool
};

// One per Worker: its route state per pool (indexed by PoolState::slot), touched only on its
// loop thread, so the pick takes no lock. Each worker detects hot keys on the requests it sees
// (connections are spread evenly, so the shares are the same) and remembers its own spills
// (workers may disagree for a while: at most an extra cache copy).
class Router {
 public:
  Router();
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Routes one pick of a request through `pool` (through the placement the key's hash selects
  // when the pool migrates from a `previous` one: Pool::placement_of), with this worker's route
  // state of the pool (created on first use; on the first request under a newer configuration
  // generation it is reset: spills forgotten, replica table rebuilt; a request still on an older
  // snapshot is routed without spill memory). A first pick counts the decision (PoolState::routed,
  // recent); every pick counts all_full and no_backend. No allocation in steady state (the state's
  // creation and the replica rebuild every window/4 allocate); cost O(backends) more only while
  // max_connections_per_backend is set. Loop thread of the owning worker only.
  // With `claim`, the pick also takes the request's in-flight slot on the chosen backend
  // (*claim, held whenever a backend is returned), checking the capacity and raising the count
  // in one compare-and-swap (InFlightSlot::take_below): when another worker filled the backend
  // between the pick's read and the claim, the pick is made again (counted once), so the bound
  // holds over all workers. An all-full pick and a keyless one take their slot as they are.
  // Without `claim` (tests, explain) nothing is taken.
  // Precondition: scratch.size() >= pool.scratch_words().
  RouteDecision route(const Pool& pool, const PickRequest& rq, std::span<uint64_t> scratch,
                      InFlightSlot* claim = nullptr);

  // What a first pick for `hash` would give now on a worker that has no memory of the key: the
  // same code as route(), with a scratch spill memory and R from the replica table the workers
  // last published; counts nothing. Allocates (the scratch state). Any thread.
  // With `subset`, as a request selected into that subset.
  static RouteDecision explain(const Pool& pool, uint64_t hash,
                               uint8_t subset = Pool::kNoSubset);
  // The same for a key as the hash policy made it (a grouped llm_prefix key: its group's R as
  // the workers last published it).
  static RouteDecision explain(const Pool& pool, const RouteKey& key,
                               uint8_t subset = Pool::kNoSubset);

  // The one counting site of spills: once per exchange that reached a backend, with the final
  // backend and the key's owner (is_spill). Any thread.
  static void count_served(const Pool& pool, core::BackendIndex backend,
                           core::BackendIndex owner) noexcept;

  // Records the decision for the explain API (by backend id, so it survives reloads) and
  // reads it back, resolved in `pool`'s snapshot.
  static void record_decision(const Pool& pool, uint64_t hash, const RouteDecision& d) noexcept;
  static LastDecision last_decision(const Pool& pool, uint64_t hash) noexcept;

  // This worker's route state of `pool`, or nullptr if it has routed nothing there (tests).
  const core::RoutePolicy* find(const Pool& pool) const noexcept;

 private:
  struct PoolRoute;
  PoolRoute* state_for(const Pool& pool, bool& current);
  // The stateful policy's per-request step (hot-key window, spill memory): sets R and the spill
  // memory the pick uses, publishes a rebuilt replica table, and returns the pool's route state.
  PoolRoute* observe(const Pool& pool, const PickRequest& rq, core::Affinity affinity,
                     uint32_t& replicas, core::SpillMemory*& memory);
  std::vector<std::unique_ptr<PoolRoute>> by_slot_;
};

}  // namespace rondel::proxy
