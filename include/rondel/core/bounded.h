// Bounded-load pick: the first backend in a key's preference order that is below its capacity.
//
// Source: Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads",
// arXiv:1608.01350 (2016/SODA 2018): with m requests in flight over backends of total weight W,
// backend i accepts a new request only while its load is below ceil(c * (m + 1) * w_i / W),
// c = 1 + epsilon; full backends are passed over along the key's preference order. Random
// probing instead of the clockwise walk (which cascades overflow onto ring neighbours) follows
// Chen, Coleman and Shrivastava, "Revisiting Consistent Hashing with Bounded Loads",
// arXiv:1908.08762 (2021). Integer math only, as in HAProxy's hash-balance-factor.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rondel/core/backend_set.h"
#include "rondel/core/choices.h"
#include "rondel/core/selector.h"
#include "rondel/core/spill_memory.h"

namespace rondel::core {

struct BoundedOptions {
  uint32_t balance_factor = 125;  // c as a percentage (125 = 1.25); 0 = unbounded
  uint32_t slack = 0;             // absolute extra requests allowed above the fair share
  ProbeOrder probe = ProbeOrder::kClockwise;
};

// The number of in-flight requests backend i may hold, counting the request being placed:
//   weight == 0          -> 0
//   balance_factor == 0  -> UINT32_MAX (unbounded)
//   otherwise max(1, ceil(bf * (total + 1) * w / (100 * W))), and when slack > 0 also at
//   least ceil((total + 1) * w / W) + slack.
// W below w (inconsistent input, e.g. W = 0) is treated as W = w. 128-bit intermediates, no
// overflow for any inputs; the result saturates at UINT32_MAX. Example: bf 125, total 7, w 1,
// W 4 -> ceil(1.25 * 8 / 4) = 3.
uint32_t capacity(uint64_t total_in_flight, uint32_t weight, uint64_t total_weight,
                  const BoundedOptions& o) noexcept;

// The live state a pick reads. Spans are indexed by backend index and should cover
// sel.backend_count() entries; an index past the end of `weights` counts as weight 0, past the
// end of `in_flight` as 0 requests.
struct PickInput {
  std::span<const std::atomic<uint32_t>> in_flight;  // per backend, read relaxed
  // Alternative to in_flight when the counters are not contiguous (the daemon's live backend
  // state objects outlive configuration snapshots): used instead when non-empty.
  std::span<const std::atomic<uint32_t>* const> in_flight_ptrs;
  // Effective loads (backend-reported load, core/reported_load.h: effective_load): used instead
  // of both in-flight views when non-empty; total_in_flight must then be their sum.
  std::span<const uint32_t> loads;
  std::span<const uint32_t> weights;   // effective weights (may differ from the set: slow start)
  uint64_t total_in_flight = 0;        // sum over all backends
  uint64_t total_weight = 0;           // W: sum of effective weights of backends that are up
  std::span<const uint64_t> excluded;  // bit i set = down or already tried; may be empty
  // Randomized rounding of the last places a fresh report shows (room_admits): backends whose
  // bit is set in `rounded` hold loads on a fleet's scale, where one start of this instance
  // stands for `grain` (N) requests; `coin` is this pick's random word. grain 1 or an empty
  // `rounded`: every place below the capacity is taken as it is.
  std::span<const uint64_t> rounded;
  uint32_t grain = 1;
  uint64_t coin = 0;
};

// Whether a backend at `load` takes a request under `cap` when its last places are rounded with
// `residue` (room_residue; 0: not rounded): exactly when the room cap - load exceeds it. With a
// fresh report read on a fleet's scale (each start counts for N = PickInput::grain) the residue
// is uniform in 0..N-1, so room >= N is always taken and a room below N for `room` of every N
// residues: N instances that read the same report and each start one request there fill, on
// average, exactly the room it showed, where taking every place below the cap (the ceiling)
// lets all N in and overshoots the cap by up to N - 1 (docs/algorithms.md, "Fleet scale").
// core::local_limit with the same residue bounds the claim by the same rule.
constexpr bool room_admits(uint32_t load, uint32_t cap, uint32_t residue) noexcept {
  return load < cap && cap - load > residue;
}

// The residue backend b's last places are rounded with in this pick: mix64(coin, b) % grain
// when b's bit is set in in.rounded and grain > 1, else 0 (the plain bound load < cap).
uint32_t room_residue(const PickInput& in, BackendIndex b) noexcept;

struct PickResult {
  BackendIndex backend = kNoBackend;
  BackendIndex owner = kNoBackend;  // first in the preference order, ignoring load and exclusion
  uint16_t skipped_full = 0;        // eligible backends passed over because at capacity
  uint16_t skipped_excluded = 0;    // backends passed over: excluded or effective weight 0
  bool all_full = false;            // every eligible backend was at capacity
  uint32_t capacity = 0;            // capacity of the chosen backend
  // The residue its last places were rounded with (room_residue; 0: the plain bound), which
  // the claim's bound must use too (core::local_limit).
  uint32_t residue = 0;
};

// Scratch words bounded_pick needs: 2 * sel.scratch_words() (the first half holds the selector
// cursor's scratch, the second the visited bitset of random probing).
size_t pick_scratch_words(const Selector& sel) noexcept;

// Picks a backend for `hash`. Walks the preference order (kClockwise: the selector's cursor;
// kRandom: the owner, then backends owner(mix64(hash, attempt)) for attempt = 1, 2, ... skipping
// ones already visited, switching to the cursor order after 2 * N probes that hit an
// already-visited backend; for rendezvous, whose order is already a per-key random permutation,
// kRandom is the cursor order), skips excluded backends and those of effective weight 0, and
// returns the first with in_flight < capacity. If every eligible backend is full it returns the
// least loaded one (ties: earliest in the walk) with all_full = true; if none is eligible,
// kNoBackend. Visits each backend at most once, at most one turn of the ring; never allocates,
// locks or throws. Cost: a few selector steps in the common case; worst case (all full) one full
// walk (ring O(P), Maglev O(N), rendezvous O(N^2) comparisons) plus, for kRandom on ring and
// Maglev, up to 3 * N owner() lookups. Precondition: scratch.size() >= pick_scratch_words(sel)
// (otherwise returns kNoBackend). Any thread, concurrently with others on the same Selector.
PickResult bounded_pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                        const BoundedOptions& o, std::span<uint64_t> scratch) noexcept;

// ---------------------------------------------------------------------------------------------
// Routing-quality pick: bounded loads plus stable spill, hysteresis and hot-key replicas.
// docs/routing.md explains each policy with measured curves.
//
// * Noise-aware capacity: BoundedOptions::slack (see capacity()): an absolute margin above the
//   fair share, so that random fluctuation at low concurrency (a dozen requests per backend)
//   does not push a key off its home.
// * Stable spill and hysteresis (needs a SpillMemory): a key that spilled is remembered with
//   the backend it went to. While its home stays at or above cap_home - hysteresis, the key
//   keeps going to that backend (if it has room), so one successor's cache holds it; it returns
//   home once home.in_flight + hysteresis < cap_home.
// * Hot-key replicas (RouteRequest::replicas = R > 1, computed by the caller, e.g. from
//   HotReplicas): the key is spread over the first R eligible backends of its preference order,
//   choosing among those with room the least loaded (in-flight per unit of weight; ties: earliest
//   in the order, so home first) or the one at sequence % R (round robin), then overflowing along
//   the preference order. Replica keys never touch the SpillMemory.
// ---------------------------------------------------------------------------------------------

struct RouteOptions {
  BoundedOptions bounded;  // factor, slack, probe: as bounded_pick
  // A remembered spill returns home only when home.in_flight + hysteresis < cap_home (0: as soon
  // as home has room, which is bounded_pick's rule). Needs a SpillMemory to have any effect.
  uint32_t hysteresis = 0;
  ReplicaChoice replica_choice = ReplicaChoice::kLeastLoaded;
};

// Per-request inputs of route_pick.
struct RouteRequest {
  uint32_t replicas = 1;  // R, clamped to [1, kMaxReplicas] and to the eligible backends found
  uint64_t sequence = 0;  // kRoundRobin: the walk over the R candidates starts at sequence % R
  static constexpr uint32_t kMaxReplicas = 64;
};

enum class RouteReason : uint8_t {
  kHome,     // served by home: the first eligible backend of the key's preference order
  kReplica,  // hot key served by one of its first R eligible backends other than home
  kSticky,   // remembered spill target (home still at or above cap_home - hysteresis)
  kSpill,    // home (or all R replicas) full: first backend with room along the probe order
  kAllFull,  // every eligible backend at capacity: the least loaded one
  kNone,     // no eligible backend (pick.backend == kNoBackend)
};

struct RouteResult {
  PickResult pick;                 // backend, owner, skip counts, capacity (as bounded_pick)
  BackendIndex home = kNoBackend;  // first eligible backend of the preference order
  RouteReason reason = RouteReason::kNone;
  uint16_t replicas = 1;           // R actually used (1 for cold keys)
};

// Routes `hash`. With memory == nullptr, rq.replicas == 1 and o.hysteresis == 0 this is exactly
// bounded_pick(sel, hash, in, o.bounded, scratch) (reason/home added). With a SpillMemory the
// pick consults it first (O(1)) and updates it: stores the target of a kSpill, erases the entry
// when the key goes home. Never chooses a backend at or above its capacity while another
// eligible backend has room (kAllFull picks the least loaded, as bounded_pick). Never allocates,
// locks or throws; cost: bounded_pick's, plus for R > 1 a walk to the R-th eligible backend and
// R load reads. Precondition: scratch.size() >= pick_scratch_words(sel) (else kNone). Thread:
// any, but `memory` must not be shared between threads (one SpillMemory per worker loop).
RouteResult route_pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                       const RouteOptions& o, const RouteRequest& rq, SpillMemory* memory,
                       std::span<uint64_t> scratch) noexcept;

}  // namespace rondel::core
