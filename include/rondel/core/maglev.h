// Maglev: a lookup table of M (prime) entries filled from per-backend permutations, O(1) pick.
//
// Source: Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load Balancer",
// NSDI 2016, section 3.4 (Pseudocode 1). For backend i: offset = h1(id) mod M,
// skip = h2(id) mod (M - 1) + 1, permutation[j] = (offset + j * skip) mod M, with
// h1 = hash64(id, kMaglevSeed1) and h2 = hash64(id, kMaglevSeed2). M prime makes every
// permutation a full cycle.
//
// Weights (a documented extension of the paper's round-robin fill). Backends take turns in id
// order, so the table never depends on input order. Every round, each backend adds its weight to
// an integer credit and takes one turn per whole w_max of credit (credit -= w_max). A backend of
// the largest weight therefore takes exactly one turn per round and a backend of weight w takes
// w / w_max turns per round on average; each backend ends within about one turn of
// M * w_i / W entries. A turn claims the first still-empty entry of the backend's permutation.
// All integer arithmetic; the fill is O(M log M) expected (paper), at most M rounds.
//
// Lookup: table[hash mod M], O(1): one 64-bit modulo and one load. Memory: 2 bytes per entry
// (65537 entries = 128 KB) plus 2 bytes per eligible backend.
//
// Preference order beyond the owner (the paper defines none): rehash the key, probe
// table[mix64(hash, attempt) mod M] for attempt = 1, 2, ..., skipping backends already yielded;
// this draws backends in proportion to their table share, so fallbacks are weighted and keyed.
// After 4 * N probes in total (N = eligible backends) the walk switches to a deterministic scan
// of the remaining backends in id order starting at slot hash mod N. A full walk therefore costs
// at most 5 * N steps; the first fallbacks are almost always found by rehashing. The walk is
// rehash_walk_next (rehash_walk.h), shared with SkeletonRendezvous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/result.h"

namespace rondel::core {

inline constexpr uint64_t kMaglevSeed1 = 0x6d61676c65763131ull;  // "maglev11"
inline constexpr uint64_t kMaglevSeed2 = 0x6d61676c65763232ull;  // "maglev22"
// Largest accepted table size (32 MB of table); the paper uses 65537 and suggests M >= 100 N.
inline constexpr uint32_t kMaglevMaxTableSize = 1u << 24;

class Maglev {
 public:
  // Errors: "all backend weights are zero", "maglev table size M is not prime",
  // "maglev table size M is smaller than the number of backends with weight > 0 (N)",
  // "maglev table size M exceeds 16777216".
  static Result<Maglev> build(const BackendSet& set, uint32_t table_size);

  BackendIndex owner(uint64_t hash) const noexcept { return table_[hash % table_.size()]; }
  void start(CursorState& state, uint64_t hash) const noexcept;
  // rehash_walk_next over owner(); `seen` as there.
  BackendIndex next(CursorState& state, std::span<uint64_t> seen) const noexcept;

  size_t points() const noexcept { return table_.size(); }
  size_t eligible_count() const noexcept { return by_id_.size(); }
  std::span<const BackendIndex> table() const noexcept { return table_; }
  size_t memory_bytes() const noexcept;
  // Table entries owned by each backend / M.
  std::vector<double> key_shares(size_t backend_count) const;

  static bool is_prime(uint32_t n) noexcept;

 private:
  Maglev() = default;
  std::vector<BackendIndex> table_;
  std::vector<BackendIndex> by_id_;  // eligible backends in id order (for the final scan)
};

}  // namespace rondel::core
