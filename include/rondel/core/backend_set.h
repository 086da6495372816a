// BackendSet: the validated list of backends (id, weight) that every placement structure is built
// from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/core/result.h"

namespace rondel::core {

// One backend as configured: a stable id (usually "host:port") and a relative weight.
// Weight 0 means drained: the backend is present (it keeps its index) but is never placed.
struct BackendSpec {
  std::string id;
  uint32_t weight = 1;
};

// Index of a backend in its set: the caller's input order (the daemon's backend i is index i).
using BackendIndex = uint16_t;
inline constexpr BackendIndex kNoBackend = 0xFFFF;
inline constexpr size_t kMaxBackends = 65535;

// An immutable, validated set of backends. Indices follow the caller's order, but every
// placement structure built from it depends only on the (id, weight) pairs, never on that order
// (ties are broken by id, compared bytewise as unsigned chars). Cheap to move; read-only use
// from any thread.
class BackendSet {
 public:
  // Validates and builds the set. Errors: "no backends" (empty), "backend #N has an empty id",
  // "duplicate backend id 'X'", "more than 65535 backends". All-zero weights are accepted here
  // (Selector::build rejects them).
  static Result<BackendSet> create(std::vector<BackendSpec> specs);

  size_t size() const noexcept { return specs_.size(); }
  // Precondition: i < size().
  const BackendSpec& operator[](BackendIndex i) const noexcept { return specs_[i]; }
  std::span<const BackendSpec> specs() const noexcept { return specs_; }
  // Sum of all weights (drained backends contribute 0).
  uint64_t total_weight() const noexcept { return total_weight_; }
  // hash64(id) with seed 0, precomputed. Precondition: i < size().
  uint64_t id_hash(BackendIndex i) const noexcept { return id_hashes_[i]; }
  // The backend with this id, O(log n) binary search, no allocation.
  std::optional<BackendIndex> find(std::string_view id) const noexcept;

  // Added for placement: indices sorted by id (bytewise), and each index's position in that order.
  std::span<const BackendIndex> by_id() const noexcept { return by_id_; }
  BackendIndex id_rank(BackendIndex i) const noexcept { return id_rank_[i]; }
  // Number of backends with weight > 0.
  size_t eligible_count() const noexcept { return eligible_count_; }

 private:
  BackendSet() = default;

  std::vector<BackendSpec> specs_;
  std::vector<uint64_t> id_hashes_;
  std::vector<BackendIndex> by_id_;
  std::vector<BackendIndex> id_rank_;
  uint64_t total_weight_ = 0;
  size_t eligible_count_ = 0;
};

}  // namespace rondel::core
