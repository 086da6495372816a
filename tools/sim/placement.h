// One placement under test (a core Selector or jump hash) behind a uniform owner lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "options.h"
#include "rondel/core/backend_set.h"
#include "rondel/core/jump.h"
#include "rondel/core/result.h"
#include "rondel/core/selector.h"

namespace rondel::sim {

// SimBackend is one backend of a simulated pool: a stable global number (so that owners can be
// compared across pools that differ by one backend) plus the spec handed to the core.
struct SimBackend {
  uint32_t global = 0;
  core::BackendSpec spec;
};

// Returns the backend of global number g: id "10.0.<g/256>.<g%256>:8080", the given weight.
SimBackend make_backend(uint32_t g, uint32_t weight);

// Placement owns a built Selector (or the bucket count for jump hash) for one pool and maps the
// core's BackendIndex back to the pool's global numbers, because a BackendSet may order its
// backends differently from the list it was given.
class Placement {
 public:
  // Builds the placement; for jump, bucket b is pool[b]. Returns the core's error, if any.
  static core::Result<Placement> build(AlgoChoice algo, const std::vector<SimBackend>& pool,
                                       const SimOptions& opt);

  // Returns the global number of the owner of `hash`. O(1) or O(log points) except rendezvous
  // (O(N)).
  uint32_t owner_global(uint64_t hash) const noexcept {
    return selector_ ? global_of_index_[selector_->owner(hash)]
                     : global_of_index_[static_cast<size_t>(
                           core::jump_hash(hash, static_cast<int32_t>(global_of_index_.size())))];
  }

  // Returns the core's own index of the owner of `hash` (what the data path would use).
  uint32_t owner_index(uint64_t hash) const noexcept {
    return selector_ ? selector_->owner(hash)
                     : static_cast<uint32_t>(core::jump_hash(
                           hash, static_cast<int32_t>(global_of_index_.size())));
  }

  const core::Selector* selector() const noexcept { return selector_ ? &*selector_ : nullptr; }
  const core::BackendSet* backend_set() const noexcept { return set_.get(); }
  const std::vector<uint32_t>& global_of_index() const noexcept { return global_of_index_; }
  double build_seconds() const noexcept { return build_seconds_; }

 private:
  std::unique_ptr<core::BackendSet> set_;  // Heap-held: its address outlives moves.
  std::optional<core::Selector> selector_;
  std::vector<uint32_t> global_of_index_;
  double build_seconds_ = 0.0;
};

// Returns the SelectorOptions the simulator uses for `algo` (not jump).
core::SelectorOptions selector_options(AlgoChoice algo, const SimOptions& opt);

}  // namespace rondel::sim
