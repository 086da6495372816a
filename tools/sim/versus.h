// Side-by-side lookup timing of several placements over the same pool and keys, interleaved
// rep by rep in one process so that a shared, noisy machine slows them alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

// One placement's figures in a --versus run.
struct VersusEntry {
  AlgoChoice algo = AlgoChoice::kRing;
  double lookup_ns = 0.0;      // Median over reps of the mean owner() time.
  double ratio_to_first = 1.0; // lookup_ns / the first entry's (the --algo under test).
  uint64_t memory_bytes = 0;
  uint64_t probe_keys = 0;     // Keys timed per rep (fewer for O(N) rendezvous at large N).
};

// Builds --algo and every --versus algorithm over opt.backends backends, then for each of
// max(3, lookup_reps) reps times every placement once, in turn, over the same key hashes.
core::Result<std::vector<VersusEntry>> run_versus(const SimOptions& opt);

}  // namespace rondel::sim
