// Bounded-load pick over any Selector: capacity in integer math, clockwise or random probing.
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
    const uint32_t cap = capacity(in_.total_in_flight, weight(b), in_.total_weight, o_);
    const uint32_t load = load_of(b);
    if (load < cap) {
      result_.backend = b;
      result_.capacity = cap;
      return true;
    }
    ++result_.skipped_full;
    if (fallback_ == kNoBackend || load < fallback_load_) {
      fallback_ = b;
      fallback_load_ = load;
      fallback_cap_ = cap;
    }
    return false;
  }

  // In-flight count of b, from whichever view the caller filled.
  uint32_t load_of(BackendIndex b) const noexcept {
    if (!in_.in_flight_ptrs.empty()) {
      return b < in_.in_flight_ptrs.size() ? in_.in_flight_ptrs[b]->load(std::memory_order_relaxed)
                                           : 0;
    }
    return b < in_.in_flight.size() ? in_.in_flight[b].load(std::memory_order_relaxed) : 0;
  }

  PickResult finish(BackendIndex owner) noexcept {
    result_.owner = owner;
    if (result_.backend == kNoBackend && fallback_ != kNoBackend) {
      result_.backend = fallback_;
      result_.capacity = fallback_cap_;
      result_.all_full = true;
    }
    return result_;
  }

 private:
  uint32_t weight(BackendIndex b) const noexcept {
    return b < in_.weights.size() ? in_.weights[b] : 0;
  }

  const PickInput& in_;
  const BoundedOptions& o_;
  PickResult result_;
  BackendIndex fallback_ = kNoBackend;
  uint32_t fallback_load_ = 0;
  uint32_t fallback_cap_ = 0;
};

}  // namespace

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

PickResult bounded_pick(const Selector& sel, uint64_t hash, const PickInput& in,
                        const BoundedOptions& o, std::span<uint64_t> scratch) noexcept {
  const size_t words = sel.scratch_words();
  if (scratch.size() < 2 * words) return PickResult{};
  const std::span<uint64_t> cursor_scratch = scratch.first(words);
  Picker picker(in, o);

  // Rendezvous orders are already an independent pseudo-random permutation per key, which is
  // what random probing emulates on a ring (Chen et al. probe randomly to stop overflow from
  // cascading onto ring neighbours; rendezvous has no neighbours). Its own walk also avoids an
  // O(N) owner() per probe, so kRandom uses the walk there.
  if (o.probe == ProbeOrder::kClockwise || sel.algorithm() == Algorithm::kRendezvous) {
    Selector::Cursor c = sel.cursor(hash, cursor_scratch);
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

}  // namespace rondel::core
