// Rendezvous: weighted highest-random-weight hashing, no table, O(N) per pick.
//
// Source: Thaler and Ravishankar, "Using name-based mappings to increase hit rates", IEEE/ACM
// ToN 1998 (HRW); the weighted score -w / ln(u) is from Schindelhauer and Schomaker, "Weighted
// distributed hash tables", SPAA 2005 (their "logarithmic method", min -ln(u) / w): with u
// uniform in (0,1), backend i wins with probability
// exactly w_i / W, and removing or adding one backend moves only the keys it wins or loses.
//
// Score of backend i for a key: u = ((mix64(key_hash, hash64(id_i)) >> 11) + 0.5) / 2^53, which
// lies strictly inside (0,1); score = w_i / -ln(u). Higher score first; equal scores (same
// double) go to the smaller id, which makes the order independent of input order. Doubles are
// deterministic on one machine (IEEE-754, same libm); across C libraries a last-ulp difference
// in log() could flip a near-tie with probability ~2^-50 per comparison. With equal weights
// the order depends only on the integer mix (log is monotone), so it is exact everywhere.
//
// Costs: owner O(N) (N mixes and logs, ~10 ns each); memory 18 bytes per eligible backend.
// Walk: the first step computes all N scores into the caller's scratch, every next step is an
// O(N) scan of the cached scores for the best one not yet yielded: O(N^2) comparisons for a full
// walk (1M comparisons at N = 1000, about 1 ms; a bounded pick normally stops after 1-3 steps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/result.h"

namespace rondel::core {

class Rendezvous {
 public:
  // Errors: "all backend weights are zero".
  static Result<Rendezvous> build(const BackendSet& set);

  BackendIndex owner(uint64_t hash) const noexcept;
  // The score of eligible slot e (slots are in id order) for `hash`; exposed for tests.
  double score(size_t slot, uint64_t hash) const noexcept;
  // Fills out[0..k) with the k = min(out.size(), N) highest-scoring backends, best first, in one
  // O(N * k) pass without scratch. Precondition: out.size() <= kTopKMax.
  static constexpr size_t kTopKMax = 32;
  size_t top_k(uint64_t hash, std::span<BackendIndex> out) const noexcept;

  // Walk: scratch = [seen bitset of bitset_words(backend_count) words][N cached scores].
  size_t scratch_words(size_t backend_count) const noexcept;
  void start(CursorState& state, uint64_t hash) const noexcept;
  BackendIndex next(CursorState& state, std::span<uint64_t> scratch,
                    size_t backend_count) const noexcept;

  size_t eligible_count() const noexcept { return index_.size(); }
  // The backend in eligible slot `slot` (slots are in id order).
  BackendIndex slot_index(size_t slot) const noexcept { return index_[slot]; }
  size_t memory_bytes() const noexcept;

 private:
  Rendezvous() = default;
  // Eligible backends (weight > 0) in id order, as parallel arrays.
  std::vector<BackendIndex> index_;
  std::vector<uint64_t> id_hash_;
  std::vector<double> weight_;
};

}  // namespace rondel::core
