// ConfigDiff: the reload dry-run. For two configurations, per pool: the share of the key space
// whose home would change, the from -> to matrix, the ideal share for the change and a warning
// when the move is far above it. Used by `rondel -c -f NEW --diff-against OLD` and POST
// /api/diff. Pure: builds placements from the configurations, never touches the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/placement_diff.h"
#include "rondel/core/result.h"

namespace rondel::server {

enum class PoolChange : uint8_t { kChanged, kAdded, kRemoved };

struct PoolDiff {
  std::string pool;
  PoolChange change = PoolChange::kChanged;
  core::PlacementDiff diff;     // kChanged only
  double ideal = 0.0;           // least share any placement must move (core::ideal_moved_share)
  std::vector<std::string> notes;  // what changed: renamed ids, algorithm, options
  std::string warning;          // empty unless the move is far above the ideal
};

// A move is "far above ideal" when moved > 1.5 * ideal + 0.02 + 3 * stderr.
bool far_above_ideal(const core::PlacementDiff& d, double ideal) noexcept;

// Compares every pool of `next` with the pool of the same name in `prev` (pools in one only are
// kAdded / kRemoved). A backend at the same position of a pool whose id changed (with its
// address, when the id is the address) counts as the same machine for the ideal, and is named in
// the notes. Errors: a pool whose placement cannot be built ("pool P: reason").
core::Result<std::vector<PoolDiff>> diff_configs(const config::Config& prev,
                                                 const config::Config& next,
                                                 uint64_t samples = core::kDiffSamples);

// Human-readable report (matrix rows: the `max_rows` largest cells per pool).
std::string diff_text(const std::vector<PoolDiff>& diffs, size_t max_rows = 20);
// One JSON object: {"samples":K,"pools":[{"pool","change","moved","moved_stderr","ideal",
// "warning","notes":[...],"moves":[{"from","to","share"}]}]}, newline-terminated.
std::string diff_json(const std::vector<PoolDiff>& diffs);

}  // namespace rondel::server
