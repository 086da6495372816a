// A pool as one configuration snapshot sees it: its backends, its placement and its policy.
//
// Immutable after build except for the live BackendState objects it points to. The pick reads
// the in-flight counts through `in_flight_ptrs` and never allocates (scratch is the caller's).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/backend_set.h"
#include "rondel/core/bounded.h"
#include "rondel/core/result.h"
#include "rondel/core/selector.h"
#include "rondel/proxy/backend_state.h"

namespace rondel::proxy {

// Pool-wide live state shared across snapshots by pool name.
struct PoolState {
  std::atomic<uint64_t> total_in_flight{0};
  std::atomic<uint32_t> unusable{0};  // backends currently down or ejected
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> spilled{0};    // requests not served by their natural owner
  std::atomic<uint64_t> all_full{0};   // picks that found every eligible backend full
  std::atomic<uint64_t> no_backend{0}; // requests answered 503: no eligible backend
};

class Pool {
 public:
  static core::Result<std::unique_ptr<Pool>> build(const config::PoolConfig& cfg,
                                                   BackendRegistry& registry,
                                                   std::shared_ptr<PoolState> state);

  const config::PoolConfig& config() const noexcept { return cfg_; }
  const std::string& name() const noexcept { return cfg_.name; }
  const core::Selector& selector() const noexcept { return selector_; }
  const core::BackendSet& set() const noexcept { return set_; }
  size_t size() const noexcept { return backends_.size(); }
  BackendState& backend(core::BackendIndex i) const noexcept { return *backends_[i]; }
  PoolState& state() const noexcept { return *state_; }
  const core::BoundedOptions& bounded() const noexcept { return bounded_; }

  // Words of scratch the caller must provide to pick(): excluded bitset + pick scratch.
  size_t scratch_words() const noexcept { return excluded_words_ + pick_words_; }
  size_t excluded_words() const noexcept { return excluded_words_; }

  // Bounded-load pick for `hash`, skipping backends that are unusable and those whose bit is
  // set in `tried` (excluded_words() words). Does not change in-flight counts. No allocation.
  core::PickResult pick(uint64_t hash, std::span<const uint64_t> tried,
                        std::span<uint64_t> scratch) const noexcept;
  // Least-loaded usable backend not in `tried` (for requests without a hash key).
  core::BackendIndex least_loaded(std::span<const uint64_t> tried) const noexcept;

 private:
  Pool(core::BackendSet set, core::Selector selector)
      : set_(std::move(set)), selector_(std::move(selector)) {}
  config::PoolConfig cfg_;
  core::BackendSet set_;
  core::Selector selector_;
  core::BoundedOptions bounded_;
  std::vector<std::shared_ptr<BackendState>> backends_;
  std::vector<const std::atomic<uint32_t>*> in_flight_ptrs_;
  std::vector<uint32_t> weights_;
  uint64_t total_weight_ = 0;
  std::shared_ptr<PoolState> state_;
  size_t excluded_words_ = 0;
  size_t pick_words_ = 0;
};

}  // namespace rondel::proxy
