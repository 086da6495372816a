// The static measurements of one placement: key balance, movement on churn, memory and speed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

// Movement is what one kind of churn (add one backend, or remove one) did to the keys,
// averaged over several trials that each add (remove) a different backend.
struct Movement {
  uint32_t trials = 0;
  double moved_mean = 0.0;    // Fraction of keys whose owner changed, mean over trials.
  double moved_min = 0.0;
  double moved_max = 0.0;
  double ideal = 0.0;         // Mean over trials of the churned backend's weight share.
  double error = 0.0;         // |moved_mean - ideal| / ideal.
  uint64_t stray_keys = 0;    // Keys that moved between two backends present before and after.
  double stray_share = 0.0;   // stray_keys / (trials * keys).
};

// BalanceReport holds every figure of the non-replay mode. Shares are normalized by weight:
// a backend's load is its share of keys (Zipf-weighted when --zipf is given) divided by its
// share of the total weight, so 1.0 is a perfectly fair backend.
struct BalanceReport {
  uint32_t backends = 0;
  uint64_t total_weight = 0;
  bool uniform_weights = true;
  double max_over_avg = 0.0;
  double min_over_avg = 0.0;
  double cv_keys = 0.0;        // CV of the normalized loads measured on the keys.
  double cv_space = -1.0;      // CV of Selector::key_shares() (exact hash-space shares); -1: n/a.
  double cv_theory = -1.0;     // Ring only, equal weights: sqrt((N-1)/(N*k+1)); -1: n/a.
  double cv_theory_error = 0.0;  // |cv_keys - cv_theory| / cv_theory.
  Movement add;
  Movement remove;
  uint64_t memory_bytes = 0;
  uint64_t points = 0;
  double bytes_per_point = 0.0;
  double build_ms = 0.0;       // Median of several builds of the full pool.
  double lookup_ns = 0.0;      // Median over repetitions of the mean owner() time.
  std::vector<double> lookup_ns_reps;
};

// Runs every static measurement for `opt`. Cost: (1 + 2 * churn_trials + lookup_reps) passes
// over opt.keys keys, each pass one owner lookup per key.
core::Result<BalanceReport> run_balance(const SimOptions& opt);

// Returns the hash of key i of a run with `seed`: hash64("/obj/<seed>/<i>").
uint64_t key_hash(uint64_t seed, uint64_t i);

}  // namespace rondel::sim
