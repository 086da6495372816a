// Selector: builds the chosen placement structure and dispatches lookups and walks to it.
#include "rondel/core/selector.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"

namespace rondel::core {

Result<Selector> Selector::build(const BackendSet& set, const SelectorOptions& opts) {
  const size_t n = set.size();
  const size_t e = set.eligible_count();
  switch (opts.algorithm) {
    case Algorithm::kRing: {
      auto r = Ring::build(set, opts.points_per_weight, opts.max_points);
      if (!r) return r.error();
      return Selector(std::move(r).value(), opts.algorithm, n, e);
    }
    case Algorithm::kRendezvous: {
      auto r = Rendezvous::build(set);
      if (!r) return r.error();
      return Selector(std::move(r).value(), opts.algorithm, n, e);
    }
    case Algorithm::kMaglev: {
      auto r = Maglev::build(set, opts.maglev_table_size);
      if (!r) return r.error();
      return Selector(std::move(r).value(), opts.algorithm, n, e);
    }
    case Algorithm::kSkeletonRendezvous: {
      auto r = SkeletonRendezvous::build(set, opts.points_per_weight, opts.max_points);
      if (!r) return r.error();
      return Selector(std::move(r).value(), opts.algorithm, n, e);
    }
  }
  return fail("unknown placement algorithm");
}

BackendIndex Selector::owner(uint64_t hash) const noexcept {
  switch (impl_.index()) {
    case 0:
      return std::get_if<Ring>(&impl_)->owner(hash);
    case 1:
      return std::get_if<Rendezvous>(&impl_)->owner(hash);
    case 3:
      return std::get_if<SkeletonRendezvous>(&impl_)->owner(hash);
    default:
      return std::get_if<Maglev>(&impl_)->owner(hash);
  }
}

size_t Selector::scratch_words() const noexcept {
  if (const Rendezvous* r = rendezvous()) return r->scratch_words(backend_count_);
  return bitset_words(backend_count_);
}

Selector::Cursor Selector::cursor(uint64_t hash, std::span<uint64_t> scratch) const noexcept {
  Cursor c;
  const size_t words = scratch_words();
  assert(scratch.size() >= words);
  if (scratch.size() < words) return c;
  c.sel_ = this;
  c.scratch_ = scratch.first(words);
  std::fill_n(scratch.begin(), bitset_words(backend_count_), uint64_t{0});
  start_walk(c.state_, hash);
  return c;
}

void Selector::start_walk(CursorState& state, uint64_t hash) const noexcept {
  switch (impl_.index()) {
    case 0:
      std::get_if<Ring>(&impl_)->start(state, hash);
      break;
    case 1:
      std::get_if<Rendezvous>(&impl_)->start(state, hash);
      break;
    case 3:
      std::get_if<SkeletonRendezvous>(&impl_)->start(state, hash);
      break;
    default:
      std::get_if<Maglev>(&impl_)->start(state, hash);
      break;
  }
}

BackendIndex Selector::walk_next(CursorState& state, std::span<uint64_t> scratch) const noexcept {
  switch (impl_.index()) {
    case 0:
      return std::get_if<Ring>(&impl_)->next(state, scratch);
    case 1:
      return std::get_if<Rendezvous>(&impl_)->next(state, scratch, backend_count_);
    case 3:
      return std::get_if<SkeletonRendezvous>(&impl_)->next(state, scratch);
    default:
      return std::get_if<Maglev>(&impl_)->next(state, scratch);
  }
}

BackendIndex Selector::Cursor::next() noexcept {
  if (sel_ == nullptr) return kNoBackend;
  if (group_ != Cursor::Group::kNone) return next_grouped();
  return sel_->walk_next(state_, scratch_);
}

Selector::Cursor Selector::cursor(const PlacementKey& key,
                                  std::span<uint64_t> scratch) const noexcept {
  if (!key.grouped()) return cursor(key.hash, scratch);
  std::array<BackendIndex, PlacementKey::kMaxGroup> set{};
  size_t n = preference(key.group,
                        std::span<BackendIndex>(set.data(), key.group_rank + key.group_size));
  if (key.group_rank > 0) {  // the set starts at the group's balanced home (group_homes.h)
    const size_t skip = std::min<size_t>(key.group_rank, n > 0 ? n - 1 : 0);
    std::copy(set.begin() + static_cast<std::ptrdiff_t>(skip),
              set.begin() + static_cast<std::ptrdiff_t>(n), set.begin());
    n -= skip;
  }
  Cursor c = cursor(key.hash, scratch);
  if (c.sel_ == nullptr || n == 0) return c;
  c.members_ = set;
  c.member_count_ = static_cast<uint8_t>(n);
  c.key_hash_ = key.hash;
  c.group_ = Cursor::Group::kMembers;
  return c;
}

bool Selector::Cursor::is_member(BackendIndex b) const noexcept {
  for (uint8_t i = 0; i < member_count_; ++i) {
    if (members_[i] == b) return true;
  }
  return false;
}

BackendIndex Selector::Cursor::next_grouped() noexcept {
  if (group_ == Cursor::Group::kMembers) {
    BackendIndex b = members_[0];  // a set of one: its member comes first, no walk needed
    if (member_count_ > 1) {
      do {
        b = sel_->walk_next(state_, scratch_);
      } while (b != kNoBackend && !is_member(b));
    }
    if (b != kNoBackend && ++members_yielded_ < member_count_) return b;
    // The last member: the others follow in the key's order, walked again from its start.
    group_ = Cursor::Group::kOthers;
    std::fill_n(scratch_.begin(), bitset_words(sel_->backend_count_), uint64_t{0});
    sel_->start_walk(state_, key_hash_);
    if (b != kNoBackend) return b;
  }
  for (BackendIndex b = sel_->walk_next(state_, scratch_); b != kNoBackend;
       b = sel_->walk_next(state_, scratch_)) {
    if (!is_member(b)) return b;
  }
  return kNoBackend;
}

BackendIndex Selector::owner(const PlacementKey& key, std::span<uint64_t> scratch) const noexcept {
  if (!key.grouped()) return owner(key.hash);
  return cursor(key, scratch).next();
}

size_t Selector::preference(uint64_t hash, std::span<BackendIndex> out) const noexcept {
  if (out.empty()) return 0;
  if (out.size() == 1) {
    out[0] = owner(hash);
    return 1;
  }
  if (const Rendezvous* r = rendezvous(); r != nullptr && out.size() <= Rendezvous::kTopKMax) {
    return r->top_k(hash, out);
  }
  // Ring, Maglev and skeleton walks need only the bitset; rendezvous (k > 32) walks with cached scores,
  // which would not fit a fixed stack buffer for large N, so it repeats top-k style scans.
  if (rendezvous() == nullptr) {
    std::array<uint64_t, bitset_words(kMaxBackends)> bits;  // 8 KB
    Cursor c = cursor(hash, std::span<uint64_t>(bits.data(), bits.size()));
    size_t count = 0;
    while (count < out.size()) {
      const BackendIndex b = c.next();
      if (b == kNoBackend) break;
      out[count++] = b;
    }
    return count;
  }
  // Rendezvous with k > 32: selection by repeated passes, each finding the best score below the
  // previous one (ties broken by id order, so (score, slot) pairs strictly decrease).
  const Rendezvous& r = *rendezvous();
  const size_t k = std::min(out.size(), r.eligible_count());
  double prev_score = 0;
  size_t prev_slot = 0;
  for (size_t count = 0; count < k; ++count) {
    size_t best = r.eligible_count();
    double best_score = 0;
    for (size_t s = 0; s < r.eligible_count(); ++s) {
      const double v = r.score(s, hash);
      const bool below_prev = count == 0 || v < prev_score || (v == prev_score && s > prev_slot);
      if (!below_prev) continue;
      if (best == r.eligible_count() || v > best_score) {
        best = s;
        best_score = v;
      }
    }
    out[count] = r.slot_index(best);
    prev_score = best_score;
    prev_slot = best;
  }
  return k;
}

size_t Selector::memory_bytes() const noexcept {
  switch (impl_.index()) {
    case 0:
      return std::get_if<Ring>(&impl_)->memory_bytes();
    case 1:
      return std::get_if<Rendezvous>(&impl_)->memory_bytes();
    case 3:
      return std::get_if<SkeletonRendezvous>(&impl_)->memory_bytes();
    default:
      return std::get_if<Maglev>(&impl_)->memory_bytes();
  }
}

size_t Selector::points() const noexcept {
  if (const Ring* r = ring()) return r->points();
  if (const Maglev* m = maglev()) return m->points();
  if (const SkeletonRendezvous* k = skeleton()) return k->points();
  return 0;
}

std::vector<double> Selector::key_shares() const {
  if (const Ring* r = ring()) return r->key_shares(backend_count_);
  if (const Maglev* m = maglev()) return m->key_shares(backend_count_);
  if (const SkeletonRendezvous* k = skeleton()) return k->key_shares(backend_count_);
  constexpr size_t kSamples = 65536;
  std::vector<double> shares(backend_count_, 0.0);
  for (uint64_t j = 0; j < kSamples; ++j) shares[owner(mix64(j, kShareSampleSeed))] += 1.0;
  for (double& s : shares) s /= static_cast<double>(kSamples);
  return shares;
}

}  // namespace rondel::core
