// Known answers for hash64 (pinned against `xxhsum -H3`), mix64 quality, and jump hash.
#include "rondel/core/hash.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rondel/core/jump.h"

namespace rondel::core {
namespace {

TEST_CASE("hash64 matches xxhsum -H3 (xxHash 0.8.1) known answers") {
  // Produced with: printf '%s' "$s" | xxhsum -H3 -
  CHECK(hash64("") == 0x2d06800538d394c2ull);
  CHECK(hash64("a") == 0xe6c632b61e964e1full);
  CHECK(hash64("abc") == 0x78af5f94892f3950ull);
  CHECK(hash64("/index.html") == 0xaa8f18ab73b5f828ull);
  CHECK(hash64("The quick brown fox jumps over the lazy dog") == 0xce7d19a5418fb365ull);
  // head -c 300 /dev/zero | xxhsum -H3 -   (exercises the > 240-byte path)
  CHECK(hash64(std::string(300, '\0')) == 0x56d0762b20085f91ull);
}

TEST_CASE("hash64 seeds give independent hashes and the default seed is 0") {
  CHECK(hash64("abc", 0) == hash64("abc"));
  CHECK(hash64("abc", 1) != hash64("abc"));
  CHECK(hash64("abc", 1) != hash64("abc", 2));
}

TEST_CASE("mix64 is a bijection of its first argument and avalanches") {
  // Bijection: 1M consecutive inputs, no collision.
  std::vector<uint64_t> out;
  out.reserve(1 << 20);
  for (uint64_t a = 0; a < (1u << 20); ++a) out.push_back(mix64(a, 0x1234));
  std::sort(out.begin(), out.end());
  CHECK(std::adjacent_find(out.begin(), out.end()) == out.end());

  // Avalanche: flipping any single input bit (of a or of b) flips about half the output bits.
  std::mt19937_64 rng(7);
  double flipped_total = 0;
  int trials = 0;
  int worst_bit_min = 64;
  int worst_bit_max = 0;
  for (int bit = 0; bit < 128; ++bit) {
    double flipped = 0;
    for (int t = 0; t < 200; ++t) {
      const uint64_t a = rng();
      const uint64_t b = rng();
      const uint64_t a2 = bit < 64 ? a ^ (uint64_t{1} << bit) : a;
      const uint64_t b2 = bit >= 64 ? b ^ (uint64_t{1} << (bit - 64)) : b;
      flipped += std::popcount(mix64(a, b) ^ mix64(a2, b2));
    }
    const int mean = static_cast<int>(flipped / 200 + 0.5);
    worst_bit_min = std::min(worst_bit_min, mean);
    worst_bit_max = std::max(worst_bit_max, mean);
    flipped_total += flipped;
    trials += 200;
  }
  // Mean of 200 Binomial(64, 1/2) draws has sd 0.28 bits; 30..34 is > 7 sd wide.
  CHECK(worst_bit_min >= 30);
  CHECK(worst_bit_max <= 34);
  CHECK(flipped_total / trials == doctest::Approx(32.0).epsilon(0.01));
}

TEST_CASE("jump_hash known answers from the reference C++ code") {
  // Table from github.com/dgryski/go-jump jump_test.go ("Generated from the reference C++
  // code"); entry i is the bucket for i + 1 buckets.
  struct Row {
    uint64_t key;
    std::vector<int32_t> buckets;
  };
  const Row rows[] = {
      {0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {1, {0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17}},
      {0xdeadbeef, {0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16}},
      {0x0ddc0ffeebadf00d, {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15}},
  };
  for (const Row& r : rows) {
    for (size_t i = 0; i < r.buckets.size(); ++i) {
      CAPTURE(r.key);
      CAPTURE(i + 1);
      CHECK(jump_hash(r.key, static_cast<int32_t>(i + 1)) == r.buckets[i]);
    }
  }
  CHECK(jump_hash(42, 0) == -1);
  CHECK(jump_hash(42, -5) == -1);
}

TEST_CASE("jump_hash moves only keys into the new bucket, about 1/(n+1) of them") {
  constexpr int kKeys = 100000;
  for (int32_t n : {1, 2, 9, 10, 99, 1000}) {
    int moved = 0;
    for (int k = 0; k < kKeys; ++k) {
      const uint64_t key = mix64(static_cast<uint64_t>(k), 99);
      const int32_t before = jump_hash(key, n);
      const int32_t after = jump_hash(key, n + 1);
      REQUIRE(before >= 0);
      REQUIRE(before < n);
      if (before != after) {
        ++moved;
        CHECK(after == n);
      }
    }
    // Binomial(kKeys, 1/(n+1)): allow 5 standard deviations.
    const double p = 1.0 / (n + 1);
    const double sd = std::sqrt(kKeys * p * (1 - p));
    CAPTURE(n);
    CHECK(std::abs(moved - kKeys * p) <= 5 * sd);
  }
}

}  // namespace
}  // namespace rondel::core
