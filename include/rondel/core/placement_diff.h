// PlacementDiff: how much of the key space changes home between two placements, and where it
// goes; the computation behind the reload dry-run (rondel -c --diff-against, POST /api/diff).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/selector.h"

namespace rondel::core {

// One cell of the from -> to matrix: the share of the key space whose home moves from backend
// id `from` (old placement) to backend id `to` (new placement).
struct MoveShare {
  std::string from;
  std::string to;
  double share = 0.0;
};

struct PlacementDiff {
  uint64_t samples = 0;         // key hashes compared
  double moved = 0.0;           // share of them whose home id differs
  double moved_stderr = 0.0;    // binomial standard error of `moved`: sqrt(m (1 - m) / samples)
  std::vector<MoveShare> moves; // non-empty cells, largest share first (ties: from, to)
};

inline constexpr uint64_t kDiffSampleSeed = 0x4449464653414d50ull;  // "DIFFSAMP"
inline constexpr uint64_t kDiffSamples = uint64_t{1} << 20;

// Compares the owners of `samples` uniformly spread key hashes mix64(j, kDiffSampleSeed)
// (j < samples) under the old and the new placement, by backend id (a backend is the same
// backend in both when its id is). Pure: no I/O; allocates the matrix. Cost: 2 * samples owner
// lookups (flat rendezvous: O(N) each). Precondition: each selector was built from its set.
PlacementDiff diff_placements(const BackendSet& old_set, const Selector& old_sel,
                              const BackendSet& new_set, const Selector& new_sel,
                              uint64_t samples = kDiffSamples);

// The least share of the key space a placement whose shares equal the weights exactly must move
// for this change (a ring's actual shares differ by its point noise, so it may move a little
// less or more): the total
// variation distance between the old and new weight shares w / W, matching backends by id
// (sum over ids of max(0, old share - new share)). One backend added to N equal ones:
// 1 / (N + 1). Callers that know two ids are the same machine pass them renamed to one id.
double ideal_moved_share(const std::vector<BackendSpec>& old_specs,
                         const std::vector<BackendSpec>& new_specs);

}  // namespace rondel::core
