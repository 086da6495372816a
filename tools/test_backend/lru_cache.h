// LruCache models a cache of a fixed number of objects keyed by request target, to make a
// backend's latency depend on whether requests for a key keep landing on it.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rondel::test_backend {

class LruCache {
 public:
  // A cache of `capacity` objects; capacity 0 never hits and stores nothing.
  explicit LruCache(uint64_t capacity) : capacity_(capacity) {}

  // Looks `key` up: on a hit marks it most recently used and returns true; on a miss inserts it
  // (evicting the least recently used object when full) and returns false.
  // Cost: O(1) expected; a miss allocates one list node and copies the key.
  bool lookup(std::string_view key);

  // Forgets every object.
  void clear() noexcept;

  uint64_t size() const noexcept { return index_.size(); }

 private:
  uint64_t capacity_;
  std::list<std::string> order_;  // Most recently used first; nodes are stable, so views into them are too.
  std::unordered_map<std::string_view, std::list<std::string>::iterator> index_;
};

}  // namespace rondel::test_backend
