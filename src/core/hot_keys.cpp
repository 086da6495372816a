// HotKeys: Space-Saving (Metwally et al., ICDT 2005) with an indexed min-heap, over two windows.
#include "rondel/core/hot_keys.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace rondel::core {

namespace {

// Home bucket of a key hash in a table of mask + 1 buckets. The hash is already well mixed
// (xxHash); the multiply only protects against callers passing small sequential values.
inline size_t home(uint64_t hash, size_t mask) noexcept {
  return static_cast<size_t>((hash * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

}  // namespace

HotKeys::Summary::Summary(size_t capacity)
    : slots_(std::max<size_t>(capacity, 1)),
      heap_(),
      index_(std::bit_ceil(2 * std::max<size_t>(capacity, 1)), kEmpty) {
  heap_.reserve(slots_.size());
}

void HotKeys::Summary::clear() noexcept {
  size_ = 0;
  total_ = 0;
  heap_.clear();
  std::fill(index_.begin(), index_.end(), kEmpty);
}

uint32_t HotKeys::Summary::lookup(uint64_t hash) const noexcept {
  size_t mask = index_.size() - 1;
  for (size_t i = home(hash, mask), n = 0; n <= mask; i = (i + 1) & mask, ++n) {
    uint32_t s = index_[i];
    if (s == kEmpty) return kEmpty;
    if (slots_[s].hash == hash) return s;
  }
  return kEmpty;  // unreachable: the table is never more than half full
}

void HotKeys::Summary::index_insert(uint64_t hash, uint32_t slot) noexcept {
  size_t mask = index_.size() - 1;
  size_t i = home(hash, mask);
  while (index_[i] != kEmpty) i = (i + 1) & mask;
  index_[i] = slot;
}

// Linear-probing deletion by backward shift (Knuth, TAOCP vol. 3, 6.4, Algorithm R): no
// tombstones, so lookups stay short however many keys come and go.
void HotKeys::Summary::index_erase(uint64_t hash) noexcept {
  size_t mask = index_.size() - 1;
  size_t i = home(hash, mask);
  for (size_t n = 0; n <= mask; ++n, i = (i + 1) & mask) {
    if (index_[i] == kEmpty) return;
    if (slots_[index_[i]].hash == hash) break;
  }
  if (index_[i] == kEmpty || slots_[index_[i]].hash != hash) return;
  index_[i] = kEmpty;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (index_[j] == kEmpty) return;
    size_t k = home(slots_[index_[j]].hash, mask);
    // Move the entry at j into the hole at i unless its home lies cyclically in (i, j].
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (!stays) {
      index_[i] = index_[j];
      index_[j] = kEmpty;
      i = j;
    }
  }
}

void HotKeys::Summary::heap_swap(uint32_t a, uint32_t b) noexcept {
  std::swap(heap_[a], heap_[b]);
  slots_[heap_[a]].heap_pos = a;
  slots_[heap_[b]].heap_pos = b;
}

void HotKeys::Summary::sift_down(uint32_t pos) noexcept {
  uint32_t n = static_cast<uint32_t>(heap_.size());
  for (;;) {
    uint32_t l = 2 * pos + 1, r = l + 1, m = pos;
    if (l < n && slots_[heap_[l]].count < slots_[heap_[m]].count) m = l;
    if (r < n && slots_[heap_[r]].count < slots_[heap_[m]].count) m = r;
    if (m == pos) return;
    heap_swap(pos, m);
    pos = m;
  }
}

void HotKeys::Summary::observe(uint64_t hash, std::string_view key, uint64_t weight,
                               bool group) noexcept {
  total_ += weight;
  uint32_t s = lookup(hash);
  if (s != kEmpty) {
    slots_[s].count += weight;
    sift_down(slots_[s].heap_pos);
    return;
  }
  uint64_t base = 0;
  if (full()) {
    // Evict the key with the smallest count; the newcomer inherits it as its error.
    s = heap_[0];
    base = slots_[s].count;
    index_erase(slots_[s].hash);
  } else {
    s = static_cast<uint32_t>(size_++);
    heap_.push_back(s);
    slots_[s].heap_pos = static_cast<uint32_t>(heap_.size() - 1);
  }
  Slot& slot = slots_[s];
  slot.hash = hash;
  slot.count = base + weight;
  slot.error = base;
  slot.group = group;
  slot.key_len = static_cast<uint8_t>(std::min(key.size(), kMaxKeyBytes));
  // An empty key may have a null data(): memcpy's pointers must be valid even for 0 bytes.
  if (slot.key_len != 0) std::memcpy(slot.key, key.data(), slot.key_len);
  index_insert(hash, s);
  if (base > 0) {
    sift_down(slot.heap_pos);
  } else {
    // A fresh slot at the end of the heap: its count (weight) may be below its parents'.
    uint32_t pos = slot.heap_pos;
    while (pos > 0) {
      uint32_t parent = (pos - 1) / 2;
      if (slots_[heap_[parent]].count <= slots_[heap_[pos]].count) break;
      heap_swap(pos, parent);
      pos = parent;
    }
  }
}

bool HotKeys::Summary::find(uint64_t hash, uint64_t& count, uint64_t& error) const noexcept {
  uint32_t s = lookup(hash);
  if (s == kEmpty) return false;
  count = slots_[s].count;
  error = slots_[s].error;
  return true;
}

HotKeys::HotKeys(size_t capacity, uint64_t window_ms)
    : windows_{Summary(capacity), Summary(capacity)}, window_ms_(std::max<uint64_t>(window_ms, 1)) {}

void HotKeys::advance(uint64_t now_ms) noexcept {
  if (!started_) {
    started_ = true;
    window_start_ = now_ms;
    return;
  }
  if (now_ms < window_start_ + window_ms_) return;
  uint64_t elapsed = (now_ms - window_start_) / window_ms_;
  if (elapsed >= 2) {
    windows_[0].clear();
    windows_[1].clear();
  } else {
    current_ ^= 1;
    windows_[current_].clear();
  }
  window_start_ += elapsed * window_ms_;
}

void HotKeys::observe(uint64_t hash, std::string_view key, uint64_t weight, bool group) noexcept {
  if (weight == 0) return;
  windows_[current_].observe(hash, key, weight, group);
}

uint64_t HotKeys::count(uint64_t hash) const noexcept {
  uint64_t sum = 0;
  for (const Summary& w : windows_) {
    uint64_t c = 0, e = 0;
    if (w.find(hash, c, e)) sum += c - e;
  }
  return sum;
}

void HotKeys::clear() noexcept {
  windows_[0].clear();
  windows_[1].clear();
}

std::vector<HotKeys::Entry> HotKeys::top(size_t k) const {
  std::vector<Entry> all;
  if (k == 0) return all;
  const Summary& cur = windows_[current_];
  const Summary& prev = windows_[current_ ^ 1];
  all.reserve(cur.size() + prev.size());
  auto add = [&](const Summary& own, const Summary& other, bool skip_shared) {
    uint64_t other_min = other.min_count();
    for (size_t i = 0; i < own.size(); ++i) {
      const auto& s = own.slot(i);
      uint64_t c = 0, e = 0;
      bool in_other = other.find(s.hash, c, e);
      if (in_other && skip_shared) continue;  // already merged from the other side
      Entry en;
      en.hash = s.hash;
      en.key.assign(s.key, s.key_len);
      en.group = s.group;
      en.count = s.count + (in_other ? c : other_min);
      en.error = s.error + (in_other ? e : other_min);
      all.push_back(std::move(en));
    }
  };
  add(cur, prev, false);
  add(prev, cur, true);
  auto by_weight = [](const Entry& a, const Entry& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.error != b.error) return a.error < b.error;
    return a.hash < b.hash;
  };
  if (all.size() > k) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                      by_weight);
    all.resize(k);
  } else {
    std::sort(all.begin(), all.end(), by_weight);
  }
  return all;
}

}  // namespace rondel::core
