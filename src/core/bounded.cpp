// Bounded-load pick over any Selector: capacity in integer math, clockwise or random probing;
// route_pick adds stable spill, hysteresis and hot-key replicas on top.
#include "rondel/core/bounded.h"

#include <algorithm>
#include <limits>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"

namespace rondel::core {

namespace {

using u128 = unsigned __int128;

uint32_t saturate32(u128 v) noexcept {
  return v > std::numeric_limits<uint32_t>::max() ? std::numeric_limits<uint32_t>::max()
                                                  : static_cast<uint32_t>(v);
}

u128 ceil_div(u128 num, u128 den) noexcept {
  return num / den + (num % den != 0 ? 1 : 0);
}

// The state of one pick: evaluates candidates in walk order and remembers the fallback.
class Picker {
 public:
  Picker(const PickInput& in, const BoundedOptions& o) noexcept : in_(in), o_(o) {}

  // Considers backend b; returns true when it is chosen (the walk stops).
  bool consider(BackendIndex b) noexcept {
    if (bit_test(in_.excluded, b) || weight(b) == 0) {
      ++result_.skipped_excluded;
      return false;
    }
    const uint32_t cap = cap_of(b);
    const uint32_t load = load_of(b);
    const uint32_t residue = room_residue(in_, b);
    if (room_admits(load, cap, residue)) {
      result_.backend = b;
      result_.capacity = cap;
      result_.residue = residue;
      return true;
    }
    if (load < cap && declined_ == kNoBackend) {
      // Below the cap but its rounding declined: taken, as a plain place, if nothing admits.
      declined_ = b;
      declined_cap_ = cap;
      declined_skipped_ = result_.skipped_full;
    }
    ++result_.skipped_full;
    if (fallback_ == kNoBackend || load < fallback_load_) {
      fallback_ = b;
      fallback_load_ = load;
      fallback_cap_ = cap;
    }
    return false;
  }

  // Load of b: the effective loads when given, else the in-flight count from whichever view
  // the caller filled.
  uint32_t load_of(BackendIndex b) const noexcept {
    if (!in_.loads.empty()) return b < in_.loads.size() ? in_.loads[b] : 0;
    if (!in_.in_flight_ptrs.empty()) {
      return b < in_.in_flight_ptrs.size() ? in_.in_flight_ptrs[b]->load(std::memory_order_relaxed)
                                           : 0;
    }
    return b < in_.in_flight.size() ? in_.in_flight[b].load(std::memory_order_relaxed) : 0;
  }

  // Whether b may be chosen at all: not excluded and of effective weight > 0.
  bool eligible(BackendIndex b) const noexcept {
    return !bit_test(in_.excluded, b) && weight(b) != 0;
  }
  uint32_t cap_of(BackendIndex b) const noexcept {
    return capacity(in_.total_in_flight, weight(b), in_.total_weight, o_);
  }
  // Whether b at `load` under `cap` takes this request: below the cap, and for a backend read
  // on a fleet's scale, by room_admits with this pick's residue for b.
  bool has_room(BackendIndex b) const noexcept {
    return room_admits(load_of(b), cap_of(b), room_residue(in_, b));
  }
  uint32_t weight(BackendIndex b) const noexcept {
    return b < in_.weights.size() ? in_.weights[b] : 0;
  }
  // Chooses b (which the caller checked has room) without a walk.
  PickResult choose(BackendIndex b, BackendIndex owner) noexcept {
    result_.backend = b;
    result_.capacity = cap_of(b);
    result_.residue = room_residue(in_, b);
    result_.owner = owner;
    return result_;
  }

  PickResult finish(BackendIndex owner) noexcept {
    result_.owner = owner;
    if (result_.backend == kNoBackend && declined_ != kNoBackend) {
      // Every backend with room lost its rounding: the first of them in the walk, as a place
      // below its cap (never an all-full pick, which would claim without a bound).
      result_.backend = declined_;
      result_.capacity = declined_cap_;
      result_.residue = 0;
      result_.skipped_full = declined_skipped_;
      return result_;
    }
    if (result_.backend == kNoBackend && fallback_ != kNoBackend) {
      result_.backend = fallback_;
      result_.capacity = fallback_cap_;
      result_.all_full = true;
    }
    return result_;
  }

 private:
  const PickInput& in_;
  const BoundedOptions& o_;
  PickResult result_;
  BackendIndex fallback_ = kNoBackend;
  uint32_t fallback_load_ = 0;
  uint32_t fallback_cap_ = 0;
  BackendIndex declined_ = kNoBackend;  // first backend below its cap whose rounding declined
  uint32_t declined_cap_ = 0;
  uint16_t declined_skipped_ = 0;       // full backends walked past before it
};

}  // namespace

uint32_t room_residue(const PickInput& in, BackendIndex b) noexcept {
  if (in.grain <= 1 || !bit_test(in.rounded, b)) return 0;
  return static_cast<uint32_t>(mix64(in.coin, b) % in.grain);
}

uint32_t capacity(uint64_t total_in_flight, uint32_t weight, uint64_t total_weight,
                  const BoundedOptions& o) noexcept {
  if (weight == 0) return 0;
  if (o.balance_factor == 0) return std::numeric_limits<uint32_t>::max();
  const u128 w = weight;
  const u128 big_w = std::max<uint64_t>(total_weight, weight);
  const u128 m1 = u128{total_in_flight} + 1;
  // bf < 2^32, m1 <= 2^64, w < 2^32: the product is below 2^128.
  u128 cap = ceil_div(u128{o.balance_factor} * m1 * w, 100 * big_w);
  if (cap < 1) cap = 1;
  if (o.slack > 0) {
    const u128 fair = ceil_div(m1 * w, big_w) + o.slack;
    cap = std::max(cap, fair);
  }
  return saturate32(cap);
}

size_t pick_scratch_words(const Selector& sel) noexcept {
  return 2 * sel.scratch_words();
}

PickResult bounded_pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                        const BoundedOptions& o, std::span<uint64_t> scratch) noexcept {
  const uint64_t hash = key.hash;
  const size_t words = sel.scratch_words();
  if (scratch.size() < 2 * words) return PickResult{};
  const std::span<uint64_t> cursor_scratch = scratch.first(words);
  Picker picker(in, o);

  // Rendezvous orders are already an independent pseudo-random permutation per key, which is
  // what random probing emulates on a ring (Chen et al. probe randomly to stop overflow from
  // cascading onto ring neighbours; rendezvous has no neighbours). Its own walk also avoids an
  // O(N) owner() per probe, so kRandom uses the walk there.
  // A grouped key's order is its own walk (placement_key.h): probed in that order too.
  if (o.probe == ProbeOrder::kClockwise || sel.algorithm() == Algorithm::kRendezvous ||
      key.grouped()) {
    Selector::Cursor c = sel.cursor(key, cursor_scratch);
    const BackendIndex owner = c.next();  // the walk starts at the natural owner
    for (BackendIndex b = owner; b != kNoBackend; b = c.next()) {
      if (picker.consider(b)) break;
    }
    return picker.finish(owner);
  }
  const BackendIndex owner = sel.owner(hash);

  // Random probing: the owner, then owner(mix64(hash, attempt)); each backend considered once.
  const std::span<uint64_t> visited = scratch.subspan(words, bitset_words(sel.backend_count()));
  std::fill(visited.begin(), visited.end(), uint64_t{0});
  const size_t n = sel.eligible_count();
  bit_set(visited, owner);
  size_t seen = 1;
  if (picker.consider(owner)) return picker.finish(owner);
  size_t misses = 0;
  for (uint64_t attempt = 1; seen < n && misses < 2 * n; ++attempt) {
    const BackendIndex b = sel.owner(mix64(hash, attempt));
    if (bit_test(visited, b)) {
      ++misses;
      continue;
    }
    bit_set(visited, b);
    ++seen;
    if (picker.consider(b)) return picker.finish(owner);
  }
  if (seen < n) {
    // Termination: the cursor yields each remaining backend once, in the selector's order.
    Selector::Cursor c = sel.cursor(hash, cursor_scratch);
    for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) {
      if (bit_test(visited, b)) continue;
      if (picker.consider(b)) break;
    }
  }
  return picker.finish(owner);
}

namespace {

// The key's home: the backend the pick chooses when no backend is full, i.e. the owner when it
// is eligible, else the first eligible backend of the probe order (found by an unbounded pick:
// rare, only while the owner is down or drained).
BackendIndex home_of(const Selector& sel, const PlacementKey& key, BackendIndex owner,
                     const Picker& picker,
                     const PickInput& in, const BoundedOptions& o,
                     std::span<uint64_t> scratch) noexcept {
  if (owner != kNoBackend && picker.eligible(owner)) return owner;
  BoundedOptions unbounded = o;
  unbounded.balance_factor = 0;
  return bounded_pick(sel, key, in, unbounded, scratch).backend;
}

RouteReason reason_of(const PickResult& pr) noexcept {
  if (pr.backend == kNoBackend) return RouteReason::kNone;
  if (pr.all_full) return RouteReason::kAllFull;
  return pr.skipped_full > 0 ? RouteReason::kSpill : RouteReason::kHome;
}

// Hot key: choose among the first R eligible backends of the preference order.
RouteResult replica_pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                         const RouteOptions& o, const RouteRequest& rq, uint32_t want,
                         std::span<uint64_t> cursor_scratch) noexcept {
  RouteResult rr;
  Picker picker(in, o.bounded);
  BackendIndex cand[RouteRequest::kMaxReplicas];
  uint32_t k = 0;
  uint16_t skipped_excluded = 0;
  Selector::Cursor c = sel.cursor(key, cursor_scratch);
  const BackendIndex owner = c.next();
  for (BackendIndex b = owner; b != kNoBackend; b = c.next()) {
    if (!picker.eligible(b)) {
      ++skipped_excluded;
      continue;
    }
    cand[k++] = b;
    if (k == want) break;
  }
  if (k == 0) {
    rr.pick.owner = owner;
    rr.pick.skipped_excluded = skipped_excluded;
    return rr;
  }
  rr.home = cand[0];
  rr.replicas = static_cast<uint16_t>(k);
  BackendIndex best = kNoBackend;
  uint32_t best_load = 0, best_weight = 1;
  uint16_t full = 0;
  if (o.replica_choice == ReplicaChoice::kLeastLoaded) {
    for (uint32_t j = 0; j < k; ++j) {
      const BackendIndex b = cand[j];
      const uint32_t load = picker.load_of(b);
      if (!picker.has_room(b)) {
        ++full;
        continue;
      }
      const uint32_t w = picker.weight(b);
      // load / w < best_load / best_weight, in integers (strict: ties keep the earlier one).
      if (best == kNoBackend || uint64_t{load} * best_weight < uint64_t{best_load} * w) {
        best = b;
        best_load = load;
        best_weight = w;
      }
    }
  } else {
    const uint32_t start = static_cast<uint32_t>(rq.sequence % k);
    for (uint32_t j = 0; j < k && best == kNoBackend; ++j) {
      const BackendIndex b = cand[(start + j) % k];
      if (picker.has_room(b)) {
        best = b;
      } else {
        ++full;
      }
    }
  }
  if (best != kNoBackend) {
    rr.pick = picker.choose(best, owner);
    rr.pick.skipped_excluded = skipped_excluded;
    rr.pick.skipped_full = full;
    rr.reason = best == rr.home ? RouteReason::kHome : RouteReason::kReplica;
    return rr;
  }
  // Every replica is full: overflow along the rest of the preference order (the cursor resumes
  // after the last candidate), falling back to the least loaded of all.
  for (uint32_t j = 0; j < k; ++j) picker.consider(cand[j]);
  for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) {
    if (picker.consider(b)) break;
  }
  rr.pick = picker.finish(owner);
  rr.pick.skipped_excluded = static_cast<uint16_t>(rr.pick.skipped_excluded + skipped_excluded);
  rr.reason = reason_of(rr.pick);
  return rr;
}

}  // namespace

RouteResult route_pick(const Selector& sel, const PlacementKey& key, const PickInput& in,
                       const RouteOptions& o, const RouteRequest& rq, SpillMemory* memory,
                       std::span<uint64_t> scratch) noexcept {
  const uint64_t hash = key.hash;
  const size_t words = sel.scratch_words();
  if (scratch.size() < 2 * words) return RouteResult{};
  const std::span<uint64_t> cursor_scratch = scratch.first(words);
  const uint32_t want = std::clamp<uint32_t>(rq.replicas, 1, RouteRequest::kMaxReplicas);
  if (want > 1) return replica_pick(sel, key, in, o, rq, want, cursor_scratch);

  Picker picker(in, o.bounded);
  RouteResult rr;
  const BackendIndex remembered = memory != nullptr ? memory->find(hash) : kNoBackend;
  if (remembered != kNoBackend) {
    const BackendIndex owner = sel.owner(key, cursor_scratch);
    const BackendIndex home = home_of(sel, key, owner, picker, in, o.bounded, scratch);
    if (home != kNoBackend && remembered != home && remembered < sel.backend_count() &&
        picker.eligible(remembered)) {
      const uint64_t home_load = picker.load_of(home);
      if (home_load + o.hysteresis < picker.cap_of(home) && picker.has_room(home)) {
        memory->erase(hash);  // home has room below its cap minus the margin: come back
        rr.pick = picker.choose(home, owner);
        rr.home = home;
        rr.reason = RouteReason::kHome;
        return rr;
      }
      if (picker.has_room(remembered)) {
        rr.pick = picker.choose(remembered, owner);  // stable spill
        rr.home = home;
        rr.reason = RouteReason::kSticky;
        return rr;
      }
    } else {
      memory->erase(hash);  // stale: it names home itself, or a backend now down
    }
  }

  rr.pick = bounded_pick(sel, key, in, o.bounded, scratch);
  rr.reason = reason_of(rr.pick);
  if (rr.pick.backend == kNoBackend) return rr;
  rr.home = home_of(sel, key, rr.pick.owner, picker, in, o.bounded, scratch);
  if (memory != nullptr) {
    if (rr.reason == RouteReason::kSpill) {
      memory->store(hash, rr.pick.backend);
    } else if (remembered != kNoBackend && rr.pick.backend == rr.home) {
      memory->erase(hash);
    }
  }
  return rr;
}

}  // namespace rondel::core
