// Weighted rendezvous (highest-random-weight) scoring, owner, top-k and walk.
#include "rondel/core/rendezvous.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"

namespace rondel::core {

Result<Rendezvous> Rendezvous::build(const BackendSet& set) {
  if (set.eligible_count() == 0) return fail("all backend weights are zero");
  Rendezvous r;
  r.index_.reserve(set.eligible_count());
  r.id_hash_.reserve(set.eligible_count());
  r.weight_.reserve(set.eligible_count());
  for (BackendIndex i : set.by_id()) {
    if (set[i].weight == 0) continue;
    r.index_.push_back(i);
    r.id_hash_.push_back(set.id_hash(i));
    r.weight_.push_back(static_cast<double>(set[i].weight));
  }
  return r;
}

double Rendezvous::score(size_t slot, uint64_t hash) const noexcept {
  // u in (0, 1): 53 random bits plus a half, so ln(u) is finite and strictly negative.
  const uint64_t x = mix64(hash, id_hash_[slot]);
  const double u = (static_cast<double>(x >> 11) + 0.5) * 0x1p-53;
  return weight_[slot] / -std::log(u);
}

BackendIndex Rendezvous::owner(uint64_t hash) const noexcept {
  // Slots are in id order and only a strictly higher score replaces: ties go to the smaller id.
  size_t best = 0;
  double best_score = score(0, hash);
  for (size_t s = 1; s < index_.size(); ++s) {
    const double v = score(s, hash);
    if (v > best_score) {
      best_score = v;
      best = s;
    }
  }
  return index_[best];
}

size_t Rendezvous::top_k(uint64_t hash, std::span<BackendIndex> out) const noexcept {
  const size_t k = std::min({out.size(), index_.size(), kTopKMax});
  if (k == 0) return 0;
  double scores[kTopKMax];
  size_t filled = 0;
  for (size_t s = 0; s < index_.size(); ++s) {
    const double v = score(s, hash);
    if (filled == k && !(v > scores[k - 1])) continue;
    // Insertion: after every entry with score >= v (earlier slot = smaller id wins ties).
    size_t at = filled < k ? filled : k - 1;
    while (at > 0 && scores[at - 1] < v) {
      scores[at] = scores[at - 1];
      out[at] = out[at - 1];
      --at;
    }
    scores[at] = v;
    out[at] = index_[s];
    if (filled < k) ++filled;
  }
  return filled;
}

size_t Rendezvous::scratch_words(size_t backend_count) const noexcept {
  return bitset_words(backend_count) + index_.size();
}

void Rendezvous::start(CursorState& state, uint64_t hash) const noexcept {
  state = CursorState{};
  state.hash = hash;
}

BackendIndex Rendezvous::next(CursorState& state, std::span<uint64_t> scratch,
                              size_t backend_count) const noexcept {
  const size_t n = index_.size();
  if (state.yielded >= n) return kNoBackend;
  const size_t bit_words = bitset_words(backend_count);
  const std::span<uint64_t> seen = scratch.first(bit_words);
  const std::span<uint64_t> cached = scratch.subspan(bit_words, n);
  if (state.phase == 0) {
    // Scores are positive doubles, so their bit patterns order like the values.
    for (size_t s = 0; s < n; ++s) cached[s] = std::bit_cast<uint64_t>(score(s, state.hash));
    state.phase = 1;
  }
  size_t best = n;
  uint64_t best_bits = 0;
  for (size_t s = 0; s < n; ++s) {
    if (bit_test(seen, index_[s])) continue;
    if (best == n || cached[s] > best_bits) {
      best = s;
      best_bits = cached[s];
    }
  }
  if (best == n) return kNoBackend;
  bit_set(seen, index_[best]);
  ++state.yielded;
  return index_[best];
}

size_t Rendezvous::memory_bytes() const noexcept {
  return index_.capacity() * sizeof(BackendIndex) + id_hash_.capacity() * sizeof(uint64_t) +
         weight_.capacity() * sizeof(double);
}

}  // namespace rondel::core
