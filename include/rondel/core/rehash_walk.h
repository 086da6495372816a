// rehash_walk_next: the one preference walk of the table selectors (Maglev, SkeletonRendezvous)
// beyond their owner, a function of the selector's owner() and its eligible backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rondel/core/backend_set.h"
#include "rondel/core/bitset.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/hash.h"

namespace rondel::core {

// The next backend of the preference order of state.hash, or kNoBackend once every eligible
// backend was yielded. The order: owner(hash) first (phase 0); then owner(mix64(hash, attempt))
// for attempt = 1, 2, ... (phase 1, `steps` counts the probes), skipping backends already in
// `seen`, which draws fallbacks in proportion to their key share, keyed; after 4 * N probes in
// total (N = by_id.size()) a deterministic scan of by_id from slot hash mod N (phase 2, `pos`
// counts the slots), skipping `seen`. A full walk costs at most 5 * N owner calls and N scan
// steps, never allocates.
// Preconditions: `state` was reset by value with state.hash set (the selectors' start());
// `by_id` holds the eligible backends in id order (non-empty) and owner() returns one of them;
// `seen` is the caller's bitset of backend_count bits, cleared before the walk began. Every
// yielded backend is set in `seen`. The sequence is part of placement: a change moves keys
// (the pinned tables in tests/unit/core hold it).
template <class OwnerFn>
BackendIndex rehash_walk_next(CursorState& state, std::span<uint64_t> seen,
                              std::span<const BackendIndex> by_id, OwnerFn owner) noexcept {
  const size_t n = by_id.size();
  if (state.yielded >= n) return kNoBackend;
  if (state.phase == 0) {
    state.phase = 1;
    const BackendIndex b = owner(state.hash);
    bit_set(seen, b);
    ++state.yielded;
    return b;
  }
  if (state.phase == 1) {
    const uint64_t budget = 4 * uint64_t{n};
    while (state.steps < budget) {
      ++state.steps;
      const BackendIndex b = owner(mix64(state.hash, state.steps));
      if (!bit_test(seen, b)) {
        bit_set(seen, b);
        ++state.yielded;
        return b;
      }
    }
    state.phase = 2;
    state.pos = 0;
  }
  const uint64_t first = state.hash % n;
  while (state.pos < n) {
    const BackendIndex b = by_id[(first + state.pos) % n];
    ++state.pos;
    if (!bit_test(seen, b)) {
      bit_set(seen, b);
      ++state.yielded;
      return b;
    }
  }
  return kNoBackend;
}

}  // namespace rondel::core
