// KvCache (see kv_cache.h).
#include "kv_cache.h"

namespace kvsim {

uint32_t KvCache::match(std::span<const uint64_t> chain) const {
  uint32_t n = 0;
  for (uint64_t h : chain) {
    if (!blocks_.contains(h)) break;
    ++n;
  }
  return n;
}

bool KvCache::acquire(std::span<const uint64_t> chain, uint32_t anonymous) {
  uint64_t missing = 0;
  uint64_t unpinned_hits = 0;
  for (uint64_t h : chain) {
    auto it = blocks_.find(h);
    if (it == blocks_.end()) {
      ++missing;
    } else if (it->second.pins == 0) {
      ++unpinned_hits;
    }
  }
  uint64_t free_slots = capacity_ - blocks_.size() - anonymous_;
  uint64_t evictable = lru_.size() - unpinned_hits;
  if (missing + anonymous > free_slots + evictable) return false;
  for (uint64_t h : chain) {  // pin the hits first, so eviction cannot take them
    auto it = blocks_.find(h);
    if (it != blocks_.end() && it->second.pins++ == 0) lru_.erase(it->second.lru);
  }
  auto make_room = [&] {
    if (capacity_ - blocks_.size() - anonymous_ > 0) return;
    blocks_.erase(lru_.front());
    lru_.pop_front();
    ++evictions_;
  };
  for (uint64_t h : chain) {
    if (blocks_.contains(h)) continue;
    make_room();
    blocks_.emplace(h, Entry{1, {}});
  }
  for (uint32_t i = 0; i < anonymous; ++i) {
    make_room();
    ++anonymous_;
  }
  return true;
}

void KvCache::release(std::span<const uint64_t> chain, uint32_t anonymous) {
  anonymous_ -= anonymous;
  for (auto h = chain.rbegin(); h != chain.rend(); ++h) {
    auto it = blocks_.find(*h);
    if (it == blocks_.end() || it->second.pins == 0) continue;  // a duplicate hash in a chain
    if (--it->second.pins == 0) it->second.lru = lru_.insert(lru_.end(), *h);
  }
}

}  // namespace kvsim
