// KvCache: one simulated server's KV-cache blocks: K slots, hashed prompt blocks kept after
// their requests end and evicted least recently used first, blocks of running requests pinned.
//
// A slot holds either a hashed prompt block (pinned by the running requests that use it, or
// unpinned in the LRU list, still a hit for the next request that shares it) or an anonymous
// block (a running request's partial last prompt block and its output tokens). Like vLLM's
// prefix cache, a released request's blocks join the LRU list last block first, so the tail of
// a prompt is evicted before its shared head. Single-threaded; no I/O.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

namespace kvsim {

class KvCache {
 public:
  explicit KvCache(uint32_t capacity_blocks) : capacity_(capacity_blocks) {}

  // Number of leading blocks of `chain` held now (pinned or not). No state change. O(blocks).
  uint32_t match(std::span<const uint64_t> chain) const;

  // Pins every block of `chain` (held blocks are hits, the others are inserted, evicting the
  // least recently used unpinned blocks) and reserves `anonymous` more slots. Returns false and
  // changes nothing when that does not fit beside the pinned blocks. O(blocks).
  bool acquire(std::span<const uint64_t> chain, uint32_t anonymous);

  // Undoes one acquire of the same arguments: unpins the chain's blocks (an unpinned block joins
  // the LRU list, the chain's last block first) and frees the anonymous slots.
  void release(std::span<const uint64_t> chain, uint32_t anonymous);

  uint32_t capacity() const { return capacity_; }
  // Slots pinned by running requests (hashed and anonymous): what vLLM reports as KV usage.
  uint32_t in_use() const { return static_cast<uint32_t>(blocks_.size() - lru_.size()) + anonymous_; }
  // Hashed blocks held, pinned or not.
  uint32_t hashed() const { return static_cast<uint32_t>(blocks_.size()); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint32_t pins = 0;
    std::list<uint64_t>::iterator lru;  // valid while pins == 0
  };

  uint32_t capacity_;
  uint32_t anonymous_ = 0;
  uint64_t evictions_ = 0;
  std::unordered_map<uint64_t, Entry> blocks_;
  std::list<uint64_t> lru_;  // unpinned hashed blocks, front = least recently used
};

}  // namespace kvsim
