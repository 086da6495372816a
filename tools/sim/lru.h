// LruCache: the per-backend object cache of the routing replay (fixed capacity, LRU eviction).
#pragma once

#include <cstdint>
#include <vector>

namespace rondel::sim {

// LruCache holds up to `capacity` object numbers (< keys) in least-recently-used order, as an
// intrusive doubly linked list over per-key slots: O(1) per access, 12 bytes per possible key.
class LruCache {
 public:
  LruCache(uint64_t capacity, uint64_t keys)
      : capacity_(capacity), prev_(keys, kNil), next_(keys, kNil), in_(keys, 0) {}

  // Looks `key` up; a hit moves it to the front, a miss inserts it there (evicting the least
  // recently used object when full). Returns whether it was a hit.
  bool access(uint32_t key) {
    if (capacity_ == 0) return false;
    if (in_[key]) {
      unlink(key);
      push_front(key);
      return true;
    }
    if (size_ == capacity_) {
      const uint32_t victim = tail_;
      unlink(victim);
      in_[victim] = 0;
      --size_;
    }
    push_front(key);
    in_[key] = 1;
    ++size_;
    return false;
  }

  uint64_t size() const { return size_; }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;

  void unlink(uint32_t k) {
    if (prev_[k] != kNil) next_[prev_[k]] = next_[k]; else head_ = next_[k];
    if (next_[k] != kNil) prev_[next_[k]] = prev_[k]; else tail_ = prev_[k];
    prev_[k] = next_[k] = kNil;
  }

  void push_front(uint32_t k) {
    prev_[k] = kNil;
    next_[k] = head_;
    if (head_ != kNil) prev_[head_] = k; else tail_ = k;
    head_ = k;
  }

  uint64_t capacity_;
  uint64_t size_ = 0;
  uint32_t head_ = kNil;
  uint32_t tail_ = kNil;
  std::vector<uint32_t> prev_, next_;
  std::vector<uint8_t> in_;
};

}  // namespace rondel::sim
