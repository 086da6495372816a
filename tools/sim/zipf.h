// Zipf key popularity for the simulator: exact per-rank weights and a seeded sampler.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace rondel::sim {

// Returns the popularity of ranks 1..keys under Zipf(s): p(r) = r^-s / H(keys, s), summing to 1.
// s = 0 gives the uniform distribution. Cost O(keys).
std::vector<double> zipf_weights(uint64_t keys, double s);

// ZipfSampler draws key indexes 0..keys-1 (index i has rank i+1) by inverse-CDF binary search.
// Building costs O(keys) time and 8 bytes per key; each draw costs O(log keys).
class ZipfSampler {
 public:
  ZipfSampler(uint64_t keys, double s);

  // Draws one key index using `rng`; deterministic for a given rng state.
  uint64_t operator()(std::mt19937_64& rng) const;

 private:
  std::vector<double> cdf_;
};

}  // namespace rondel::sim
