// Command-line options of rondel-sim and their parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rondel/core/bounded.h"
#include "rondel/core/result.h"
#include "rondel/core/selector.h"

namespace rondel::sim {

// AlgoChoice is the placement under test: one of the Selector algorithms, or jump hash (which
// has no Selector and takes numbered buckets only).
enum class AlgoChoice : uint8_t { kRing, kRendezvous, kMaglev, kJump };

// SimOptions holds every knob of one simulator run; defaults are the documented ones.
struct SimOptions {
  AlgoChoice algo = AlgoChoice::kRing;
  uint32_t backends = 10;
  std::vector<uint32_t> weights;   // Empty: every weight is 1.
  uint32_t points = 160;           // Ring points per unit of weight.
  uint32_t maglev_table = 65537;   // Maglev lookup-table size (prime).
  uint64_t keys = 100000;
  double zipf = 0.0;               // 0: every key is requested equally often.
  uint64_t seed = 1;
  uint32_t churn_trials = 5;       // Add/remove experiments averaged for the movement figures.
  uint32_t lookup_reps = 5;        // Repetitions of the lookup timing (median reported).
  bool json = false;
  bool check = false;

  bool replay = false;
  uint32_t balance_factor = 125;   // Percent; 0 means unbounded (always the natural owner).
  core::ProbeOrder probe = core::ProbeOrder::kClockwise;
  uint64_t requests = 1000000;
  double arrival_rate = 1000.0;    // Requests per unit of time.
  double mean_service = 1.0;       // Mean service time, same unit.
};

// Returns the usage text printed by --help and on a parse error.
std::string usage();

// Parses argv into SimOptions. Returns an Error naming the bad flag or value; `--help` yields an
// Error whose message is empty (the caller prints usage and exits 0).
core::Result<SimOptions> parse_options(int argc, char** argv);

// Returns the printable name of an algorithm choice ("ring", "rendezvous", ...).
const char* algo_name(AlgoChoice algo) noexcept;

}  // namespace rondel::sim
