// Zipf popularity weights and sampler used by the balance report and the bounded-load replay.
#include "zipf.h"

#include <algorithm>
#include <cmath>

namespace rondel::sim {

std::vector<double> zipf_weights(uint64_t keys, double s) {
  std::vector<double> w(keys);
  double sum = 0.0;
  for (uint64_t i = 0; i < keys; ++i) {
    w[i] = s == 0.0 ? 1.0 : std::pow(static_cast<double>(i + 1), -s);
    sum += w[i];
  }
  for (double& x : w) x /= sum;
  return w;
}

ZipfSampler::ZipfSampler(uint64_t keys, double s) : cdf_(zipf_weights(keys, s)) {
  double acc = 0.0;
  for (double& x : cdf_) {
    acc += x;
    x = acc;
  }
  cdf_.back() = 1.0;
}

uint64_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  // 53 random bits -> u in [0, 1); the first rank whose cumulative share exceeds u wins.
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  if (it == cdf_.end()) --it;
  return static_cast<uint64_t>(it - cdf_.begin());
}

}  // namespace rondel::sim
