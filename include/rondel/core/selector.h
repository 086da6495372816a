// Selector: one immutable placement structure (ring, rendezvous, skeleton rendezvous or Maglev)
// answering "which backends, in which order, for this key hash".
//
// Built once per backend set (on reload), then shared read-only by every thread. Lookups and
// walks never allocate, lock or throw. Health and load are not stored here: callers filter while
// walking (see bounded.h). Placement depends only on the (id, weight) pairs of the set, never on
// their order; backends of weight 0 are never returned.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/choices.h"
#include "rondel/core/cursor_state.h"
#include "rondel/core/maglev.h"
#include "rondel/core/placement_key.h"
#include "rondel/core/rendezvous.h"
#include "rondel/core/result.h"
#include "rondel/core/ring.h"
#include "rondel/core/skeleton_rendezvous.h"

namespace rondel::core {

struct SelectorOptions {
  Algorithm algorithm = Algorithm::kRing;
  uint32_t points_per_weight = 160;    // ring, skeleton: points per unit of weight
  uint32_t max_points = 1u << 20;      // ring, skeleton: cap on total points
  uint32_t maglev_table_size = 65537;  // maglev: prime M, at least the number of backends
};

class Selector {
 public:
  // Builds the structure for `set` (which need not outlive the Selector). Errors: "all backend
  // weights are zero" and the per-algorithm option errors of ring.h / maglev.h.
  static Result<Selector> build(const BackendSet& set, const SelectorOptions& opts);

  // The natural owner of `hash` (always a weight > 0 backend). Ring O(log P), Maglev O(1),
  // rendezvous O(N), skeleton rendezvous O(16 log16 P).
  BackendIndex owner(uint64_t hash) const noexcept;

  // Writes the first min(out.size(), eligible_count()) distinct backends of the preference order
  // (owner first) to `out` and returns how many. Uses an 8 KB stack bitset, no heap. Cost: ring
  // O(log P + points walked), Maglev and skeleton O(k) lookups expected,
  // rendezvous O(N * k).
  size_t preference(uint64_t hash, std::span<BackendIndex> out) const noexcept;

  // A lazy walk over the preference order: yields every backend with weight > 0 exactly once,
  // then kNoBackend. It borrows the selector and the scratch (both must outlive it); the scratch
  // (at least scratch_words() words) is overwritten when the cursor is made and as it walks.
  // A scratch that is too small gives a cursor that yields nothing (and asserts in debug builds).
  class Cursor {
   public:
    Cursor() = default;
    BackendIndex next() noexcept;

   private:
    friend class Selector;
    // A grouped key's walk: its group's members in the key's order, then the others.
    BackendIndex next_grouped() noexcept;
    bool is_member(BackendIndex b) const noexcept;
    const Selector* sel_ = nullptr;
    std::span<uint64_t> scratch_;
    CursorState state_;
    // Grouped keys only (PlacementKey::grouped()).
    enum class Group : uint8_t { kNone, kMembers, kOthers };
    Group group_ = Group::kNone;
    uint8_t member_count_ = 0;
    uint8_t members_yielded_ = 0;
    uint64_t key_hash_ = 0;
    std::array<BackendIndex, PlacementKey::kMaxGroup> members_{};
  };
  Cursor cursor(uint64_t hash, std::span<uint64_t> scratch) const noexcept;
  // The walk of a placement key: a plain key's preference order, or for a grouped key
  // (placement_key.h) the first group_size backends of the group's order, taken in the key's
  // order, then every other backend in the key's order. Each backend with weight > 0 once.
  // Grouped: O(R) more per step and one more pass of the key's order (rendezvous O(N) each).
  Cursor cursor(const PlacementKey& key, std::span<uint64_t> scratch) const noexcept;
  // The first backend of cursor(key): owner(key.hash) for a plain key.
  BackendIndex owner(const PlacementKey& key, std::span<uint64_t> scratch) const noexcept;
  // Words of scratch a cursor needs: bitset_words(backend_count()) for ring and Maglev, plus
  // eligible_count() cached scores for rendezvous.
  size_t scratch_words() const noexcept;

  size_t backend_count() const noexcept { return backend_count_; }
  size_t eligible_count() const noexcept { return eligible_count_; }
  Algorithm algorithm() const noexcept { return algorithm_; }
  // Heap bytes held by the structure (excluding sizeof(Selector)).
  size_t memory_bytes() const noexcept;
  // Ring or skeleton points, or Maglev table entries; 0 for rendezvous.
  size_t points() const noexcept;
  // Share of the hash space owned by each backend index (ring: arc lengths; Maglev: entries / M;
  // skeleton: exact cluster shares; rendezvous: owners of the 65536 fixed hashes
  // mix64(j, kShareSampleSeed)). Allocates: admin use.
  std::vector<double> key_shares() const;
  static constexpr uint64_t kShareSampleSeed = 0x5348415245530000ull;  // "SHARES"

  // The underlying structures, for tools and tests (null when another algorithm is active).
  const Ring* ring() const noexcept { return std::get_if<Ring>(&impl_); }
  const Rendezvous* rendezvous() const noexcept { return std::get_if<Rendezvous>(&impl_); }
  const Maglev* maglev() const noexcept { return std::get_if<Maglev>(&impl_); }
  const SkeletonRendezvous* skeleton() const noexcept {
    return std::get_if<SkeletonRendezvous>(&impl_);
  }

 private:
  template <class T>
  Selector(T impl, Algorithm a, size_t backends, size_t eligible)
      : impl_(std::move(impl)),
        algorithm_(a),
        backend_count_(backends),
        eligible_count_(eligible) {}

  void start_walk(CursorState& state, uint64_t hash) const noexcept;
  BackendIndex walk_next(CursorState& state, std::span<uint64_t> scratch) const noexcept;

  std::variant<Ring, Rendezvous, Maglev, SkeletonRendezvous> impl_;
  Algorithm algorithm_ = Algorithm::kRing;
  size_t backend_count_ = 0;
  size_t eligible_count_ = 0;
};

}  // namespace rondel::core
