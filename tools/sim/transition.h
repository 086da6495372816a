// Keys moved by one configuration change (rondel-sim --to-*): the simulator's own measurement
// of what the daemon's reload dry-run (rondel -c --diff-against) reports.
#pragma once

#include <cstdint>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

struct TransitionReport {
  uint64_t keys = 0;
  double moved = 0.0;  // share of the keys whose owner (by backend id) changed
};

// Builds the pool of --algo/--backends/--weights and the pool after --to-algo, --to-backends,
// --to-weights and --to-rename (backend G gets a new id), and counts keys whose owner changed.
core::Result<TransitionReport> run_transition(const SimOptions& opt);

}  // namespace rondel::sim
