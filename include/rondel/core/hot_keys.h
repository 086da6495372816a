// HotKeys: a fixed-memory, approximate top-K of the heaviest keys of a stream over a sliding
// window (which keys spill most, which keys are hot), with no I/O and no clock of its own.
//
// Source: Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k Elements
// in Data Streams", ICDT 2005 (the Space-Saving algorithm). A summary of m counters keeps every
// key whose weight exceeds (stream weight) / m; a key not monitored replaces the counter with the
// smallest count c_min, inherits count c_min + weight and records error c_min, so for a monitored
// key the true weight lies in [count - error, count]. Here the minimum is found with an indexed
// binary min-heap (O(log m) per observation) and keys with an open-addressing table keyed by the
// 64-bit key hash (two keys with the same hash are one key: the hash is the routing identity).
//
// Sliding window: two summaries of `window_ms` each, "current" and "previous". advance(now)
// turns current into previous when its window ended (both are cleared after two idle windows),
// so top() covers between one and two windows of the most recent traffic. top() merges the two
// summaries keeping the Space-Saving guarantee: a key missing from a full summary counts that
// summary's c_min into both its count and its error.
//
// Memory is fixed at construction: 2 * capacity entries of ~100 bytes plus the hash tables.
// Not thread-safe: one owner (the daemon's loop thread) calls everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rondel::core {

class HotKeys {
 public:
  static constexpr size_t kMaxKeyBytes = 64;  // keys are stored truncated to this many bytes

  struct Entry {
    uint64_t hash = 0;
    std::string key;     // the first kMaxKeyBytes bytes of the key, as observed
    uint64_t count = 0;  // upper bound of the key's weight over the window
    uint64_t error = 0;  // count - error is a lower bound
    bool group = false;  // observed as a group (a tenant of two-level placement, placement_key.h)
  };

  // `capacity` counters per window (at least 1; the top-k is reliable for k well below it: a
  // few times k is the usual choice). `window_ms` > 0 is the length of one window.
  HotKeys(size_t capacity, uint64_t window_ms);

  // Moves the window forward to `now_ms` (any monotonic clock; calls with an earlier time are
  // ignored). O(capacity) when a window turns over, O(1) otherwise.
  void advance(uint64_t now_ms) noexcept;

  // Adds `weight` (> 0; 0 is ignored) to the key with hash `hash`. `key` is copied truncated to
  // kMaxKeyBytes when the key enters the summary, with `group` (Entry::group). O(log capacity),
  // no allocation.
  void observe(uint64_t hash, std::string_view key, uint64_t weight = 1,
               bool group = false) noexcept;

  // The (at most) k keys with the largest count over the window, largest first (ties: smaller
  // error first, then smaller hash). Allocates; O(capacity log capacity).
  std::vector<Entry> top(size_t k) const;

  // A lower bound of `hash`'s weight over the windows top() covers (0 when not monitored).
  // O(1), no allocation.
  uint64_t count(uint64_t hash) const noexcept;

  // Forgets everything (both windows).
  void clear() noexcept;

  // Total weight observed over the windows top() covers (the denominator of a key's share).
  // O(1).
  uint64_t total() const noexcept { return windows_[0].total() + windows_[1].total(); }

  size_t capacity() const noexcept { return windows_[0].capacity(); }
  uint64_t window_ms() const noexcept { return window_ms_; }

 private:
  // One Space-Saving summary.
  class Summary {
   public:
    explicit Summary(size_t capacity);
    void observe(uint64_t hash, std::string_view key, uint64_t weight, bool group) noexcept;
    void clear() noexcept;
    size_t capacity() const noexcept { return slots_.size(); }
    size_t size() const noexcept { return size_; }
    bool full() const noexcept { return size_ == slots_.size(); }
    uint64_t min_count() const noexcept { return full() ? slots_[heap_[0]].count : 0; }
    uint64_t total() const noexcept { return total_; }  // weight observed since clear()
    // Count and error of `hash`, or false when not monitored.
    bool find(uint64_t hash, uint64_t& count, uint64_t& error) const noexcept;

    struct Slot {
      uint64_t hash = 0;
      uint64_t count = 0;
      uint64_t error = 0;
      uint32_t heap_pos = 0;
      uint8_t key_len = 0;
      bool group = false;
      char key[kMaxKeyBytes];
    };
    const Slot& slot(size_t i) const noexcept { return slots_[i]; }

   private:
    static constexpr uint32_t kEmpty = UINT32_MAX;
    uint32_t lookup(uint64_t hash) const noexcept;  // slot index or kEmpty
    void index_insert(uint64_t hash, uint32_t slot) noexcept;
    void index_erase(uint64_t hash) noexcept;
    void sift_down(uint32_t pos) noexcept;
    void heap_swap(uint32_t a, uint32_t b) noexcept;

    std::vector<Slot> slots_;
    std::vector<uint32_t> heap_;   // slot indexes, min-heap by count
    std::vector<uint32_t> index_;  // open addressing (linear probing), power of two, kEmpty free
    size_t size_ = 0;
    uint64_t total_ = 0;
  };

  Summary windows_[2];
  int current_ = 0;
  uint64_t window_ms_;
  uint64_t window_start_ = 0;
  bool started_ = false;
};

}  // namespace rondel::core
