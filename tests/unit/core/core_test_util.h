// Helpers shared by the core unit tests: building sets and selectors, key streams.
#pragma once

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/hash.h"
#include "rondel/core/selector.h"

namespace rondel::core::test {

inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::kRing, Algorithm::kRendezvous,
                                               Algorithm::kMaglev,
                                               Algorithm::kSkeletonRendezvous};

inline std::string name(Algorithm a) { return std::string(name_of(a)); }

inline BackendSet make_set(std::vector<BackendSpec> specs) {
  auto r = BackendSet::create(std::move(specs));
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
  return std::move(r).value();
}

inline Selector make_selector(const BackendSet& set, Algorithm a, SelectorOptions o = {}) {
  o.algorithm = a;
  auto r = Selector::build(set, o);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
  return std::move(r).value();
}

// n backends named "10.0.<i/250>.<i%250>:8080" with the given weights (cycled).
inline std::vector<BackendSpec> specs(size_t n, std::vector<uint32_t> weights = {1}) {
  std::vector<BackendSpec> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back({"10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":8080",
                   weights[i % weights.size()]});
  }
  return out;
}

// The i-th test key hash: XXH3 of a URI-like key, as the router would compute it.
inline uint64_t key_hash(uint64_t i) {
  return hash64("/object/" + std::to_string(i));
}

// A cheaper stream of well-mixed hashes for the large samples.
inline uint64_t fast_key(uint64_t i, uint64_t seed = 0x6b657973) {
  return mix64(i, seed);
}

}  // namespace rondel::core::test
