// LRU cache model: a list in recency order plus a hash index into it.
#include "lru_cache.h"

namespace rondel::test_backend {

bool LruCache::lookup(std::string_view key) {
  if (capacity_ == 0) return false;
  if (auto it = index_.find(key); it != index_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    return true;
  }
  if (index_.size() >= capacity_) {
    index_.erase(std::string_view(order_.back()));
    order_.pop_back();
  }
  order_.emplace_front(key);
  index_.emplace(std::string_view(order_.front()), order_.begin());
  return false;
}

void LruCache::clear() noexcept {
  index_.clear();
  order_.clear();
}

}  // namespace rondel::test_backend
