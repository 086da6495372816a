// SpillMemory: direct-mapped {tag, backend, epoch} table with O(1) invalidation.
#include "rondel/core/spill_memory.h"

#include <algorithm>
#include <bit>

namespace rondel::core {

SpillMemory::SpillMemory(size_t entries)
    : table_(std::bit_ceil(std::max<size_t>(entries, 1))), mask_(table_.size() - 1) {}

BackendIndex SpillMemory::find(uint64_t hash) const noexcept {
  const Entry& e = table_[slot(hash)];
  return e.epoch == epoch_ && e.tag == tag(hash) ? e.backend : kNoBackend;
}

void SpillMemory::store(uint64_t hash, BackendIndex backend) noexcept {
  table_[slot(hash)] = Entry{tag(hash), backend, epoch_};
}

void SpillMemory::erase(uint64_t hash) noexcept {
  Entry& e = table_[slot(hash)];
  if (e.epoch == epoch_ && e.tag == tag(hash)) e.epoch = 0;
}

void SpillMemory::invalidate() noexcept {
  if (++epoch_ == 0) {
    std::fill(table_.begin(), table_.end(), Entry{});
    epoch_ = 1;
  }
}

size_t SpillMemory::live() const noexcept {
  return static_cast<size_t>(
      std::count_if(table_.begin(), table_.end(), [&](const Entry& e) { return e.epoch == epoch_; }));
}

}  // namespace rondel::core
