// HotKeys (Space-Saving top-K over two windows): exact answers while the summary is not full,
// the Space-Saving guarantees against an exact reference count under random Zipf-like streams,
// index consistency through many evictions, window turnover and key truncation.
#include "rondel/core/hot_keys.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace rondel::core {
namespace {

std::string key_of(uint64_t i) { return "/obj/" + std::to_string(i); }
uint64_t hash_of(uint64_t i) { return i * 0x9E3779B97F4A7C15ull + 12345; }

TEST_CASE("empty summary and k = 0") {
  HotKeys hk(8, 1000);
  CHECK(hk.top(5).empty());
  hk.observe(1, "a");
  CHECK(hk.top(0).empty());
  hk.observe(2, "b", 0);  // weight 0 is ignored
  CHECK(hk.top(10).size() == 1);
}

TEST_CASE("exact while fewer keys than counters") {
  HotKeys hk(16, 1000);
  hk.advance(0);
  for (uint64_t i = 1; i <= 10; ++i) {
    for (uint64_t j = 0; j < i; ++j) hk.observe(hash_of(i), key_of(i));
  }
  auto top = hk.top(3);
  REQUIRE(top.size() == 3);
  CHECK(top[0].hash == hash_of(10));
  CHECK(top[0].key == "/obj/10");
  CHECK(top[0].count == 10);
  CHECK(top[0].error == 0);
  CHECK(top[1].count == 9);
  CHECK(top[2].count == 8);
  CHECK(hk.top(100).size() == 10);
}

TEST_CASE("weights add up") {
  HotKeys hk(4, 1000);
  hk.observe(7, "k", 5);
  hk.observe(7, "k", 3);
  auto top = hk.top(1);
  REQUIRE(top.size() == 1);
  CHECK(top[0].count == 8);
}

TEST_CASE("keys are truncated to 64 bytes") {
  HotKeys hk(4, 1000);
  std::string long_key(300, 'x');
  long_key[63] = 'y';
  hk.observe(1, long_key);
  auto top = hk.top(1);
  REQUIRE(top.size() == 1);
  CHECK(top[0].key.size() == HotKeys::kMaxKeyBytes);
  CHECK(top[0].key.back() == 'y');
}

TEST_CASE("Space-Saving guarantees hold against an exact count (random skewed streams)") {
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    std::mt19937_64 rng(seed);
    const size_t m = 32;
    HotKeys hk(m, 1000);
    std::map<uint64_t, uint64_t> exact;
    uint64_t total = 0;
    // Zipf-like: key i with probability ~ 1/i over 2000 keys, via inverse-CDF sampling.
    std::vector<double> cdf(2000);
    double acc = 0;
    for (size_t i = 0; i < cdf.size(); ++i) cdf[i] = acc += 1.0 / static_cast<double>(i + 1);
    std::uniform_real_distribution<double> u(0, acc);
    for (int n = 0; n < 20000; ++n) {
      uint64_t i = static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) -
                                         cdf.begin());
      uint64_t w = 1 + rng() % 3;
      hk.observe(hash_of(i), key_of(i), w);
      exact[hash_of(i)] += w;
      total += w;
    }
    auto all = hk.top(m);
    REQUIRE(all.size() == m);
    uint64_t sum = 0;
    for (const auto& e : all) {
      // count is an upper bound, count - error a lower bound.
      CHECK(e.count >= exact[e.hash]);
      CHECK(e.count - e.error <= exact[e.hash]);
      sum += e.count;
    }
    // Space-Saving keeps the sum of the counters equal to the stream weight.
    CHECK(sum == total);
    // Every key heavier than total / m is monitored.
    for (const auto& [h, c] : exact) {
      if (c > total / m) {
        bool found = std::any_of(all.begin(), all.end(), [&](const auto& e) { return e.hash == h; });
        CHECK(found);
      }
    }
    // The heaviest key is first.
    auto heaviest = std::max_element(exact.begin(), exact.end(),
                                      [](auto& a, auto& b) { return a.second < b.second; });
    CHECK(all[0].hash == heaviest->first);
  }
}

TEST_CASE("many distinct keys: index stays consistent through evictions") {
  HotKeys hk(8, 1000);
  for (uint64_t i = 0; i < 100000; ++i) hk.observe(hash_of(i % 997), key_of(i % 997));
  // One key made clearly heavier than the churn must win.
  for (int i = 0; i < 5000; ++i) hk.observe(hash_of(5000), "hot");
  auto top = hk.top(1);
  REQUIRE(top.size() == 1);
  CHECK(top[0].hash == hash_of(5000));
  CHECK(top[0].key == "hot");
  CHECK(top[0].count - top[0].error >= 5000);
}

TEST_CASE("sliding window: two windows, then forgotten") {
  HotKeys hk(8, 1000);
  hk.advance(0);
  for (int i = 0; i < 5; ++i) hk.observe(1, "a");
  hk.advance(999);
  CHECK(hk.top(1)[0].count == 5);
  hk.advance(1000);  // a turns into the previous window: still counted
  for (int i = 0; i < 3; ++i) hk.observe(2, "b");
  hk.observe(1, "a");
  auto top = hk.top(2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].key == "a");
  CHECK(top[0].count == 6);
  CHECK(top[1].key == "b");
  CHECK(top[1].count == 3);
  hk.advance(2000);  // the window holding a's first 5 is dropped
  top = hk.top(2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].key == "b");
  CHECK(top[0].count == 3);
  CHECK(top[1].count == 1);
  hk.advance(1500);  // time going backwards is ignored
  CHECK(hk.top(2).size() == 2);
  hk.advance(4500);  // two idle windows: everything forgotten
  CHECK(hk.top(2).empty());
}

TEST_CASE("merge across windows keeps the upper bound when one window is full") {
  HotKeys hk(2, 1000);
  hk.advance(0);
  hk.observe(1, "a", 10);
  hk.observe(2, "b", 4);
  hk.advance(1000);
  hk.observe(3, "c", 7);
  auto top = hk.top(3);
  REQUIRE(top.size() == 3);
  // c is absent from the previous (full, min 4) window: count 7 + 4, error 4.
  auto c = std::find_if(top.begin(), top.end(), [](auto& e) { return e.hash == 3; });
  REQUIRE(c != top.end());
  CHECK(c->count == 11);
  CHECK(c->error == 4);
  // a is absent from the current window, which is not full: exact.
  CHECK(top[0].hash == 3);  // ranked by the upper bound
  auto a = std::find_if(top.begin(), top.end(), [](auto& e) { return e.hash == 1; });
  REQUIRE(a != top.end());
  CHECK(a->count == 10);
  CHECK(a->error == 0);
}

TEST_CASE("clear forgets everything") {
  HotKeys hk(4, 1000);
  hk.observe(1, "a");
  hk.clear();
  CHECK(hk.top(4).empty());
  hk.observe(2, "b");
  CHECK(hk.top(4).size() == 1);
}

}  // namespace
}  // namespace rondel::core
