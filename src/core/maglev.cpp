// Maglev table construction (weighted turns, id order) and lookup with rehash fallbacks.
#include "rondel/core/maglev.h"

#include <algorithm>
#include <string>

#include "rondel/core/hash.h"
#include "rondel/core/rehash_walk.h"

namespace rondel::core {

bool Maglev::is_prime(uint32_t n) noexcept {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint64_t d = 3; d * d <= n; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

Result<Maglev> Maglev::build(const BackendSet& set, uint32_t table_size) {
  const size_t n = set.eligible_count();
  if (n == 0) return fail("all backend weights are zero");
  const std::string m_text = std::to_string(table_size);
  if (table_size > kMaglevMaxTableSize) {
    return fail("maglev table size " + m_text + " exceeds " + std::to_string(kMaglevMaxTableSize));
  }
  if (!is_prime(table_size)) return fail("maglev table size " + m_text + " is not prime");
  if (table_size < n) {
    return fail("maglev table size " + m_text +
                " is smaller than the number of backends with weight > 0 (" + std::to_string(n) +
                ")");
  }

  struct Turn {
    BackendIndex index;
    uint32_t weight;
    uint64_t skip;
    uint64_t next;    // next permutation entry to try: (offset + j * skip) mod M
    uint64_t credit;  // accumulated weight not yet spent on turns
  };
  const uint64_t m = table_size;
  std::vector<Turn> turns;
  turns.reserve(n);
  uint32_t max_weight = 0;
  Maglev mg;
  mg.by_id_.reserve(n);
  for (BackendIndex i : set.by_id()) {
    const uint32_t w = set[i].weight;
    if (w == 0) continue;
    const std::string& id = set[i].id;
    const uint64_t offset = hash64(id, kMaglevSeed1) % m;
    const uint64_t skip = hash64(id, kMaglevSeed2) % (m - 1) + 1;
    turns.push_back(Turn{i, w, skip, offset, 0});
    mg.by_id_.push_back(i);
    max_weight = std::max(max_weight, w);
  }

  mg.table_.assign(table_size, kNoBackend);
  uint64_t filled = 0;
  // Each round the heaviest backends take one turn and the others w / w_max on average. M prime
  // and 1 <= skip < M make each permutation a full cycle, so an empty entry is always found.
  while (filled < m) {
    for (Turn& t : turns) {
      t.credit += t.weight;
      while (t.credit >= max_weight && filled < m) {
        t.credit -= max_weight;
        while (mg.table_[t.next] != kNoBackend) t.next = (t.next + t.skip) % m;
        mg.table_[t.next] = t.index;
        t.next = (t.next + t.skip) % m;
        ++filled;
      }
      if (filled == m) break;
    }
  }
  return mg;
}

void Maglev::start(CursorState& state, uint64_t hash) const noexcept {
  state = CursorState{};
  state.hash = hash;
}

BackendIndex Maglev::next(CursorState& state, std::span<uint64_t> seen) const noexcept {
  return rehash_walk_next(state, seen, by_id_, [this](uint64_t h) noexcept { return owner(h); });
}

size_t Maglev::memory_bytes() const noexcept {
  return table_.capacity() * sizeof(BackendIndex) + by_id_.capacity() * sizeof(BackendIndex);
}

std::vector<double> Maglev::key_shares(size_t backend_count) const {
  std::vector<double> shares(backend_count, 0.0);
  for (BackendIndex b : table_) shares[b] += 1.0;
  for (double& s : shares) s /= static_cast<double>(table_.size());
  return shares;
}

}  // namespace rondel::core
