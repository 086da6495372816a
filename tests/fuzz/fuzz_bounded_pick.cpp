// Fuzz target: the placement core with bounded loads (BackendSet -> Selector -> bounded_pick).
//
// Input: backend ids and weights, algorithm and options, then per-backend loads, effective
// weights and exclusions, and a key hash. Invariants (bounded.h): the chosen backend is not
// excluded and has effective weight > 0; if its load is at or above its capacity, all_full is set
// and every eligible backend is at capacity (and the choice is a least-loaded one); with no
// choice, no backend is eligible; skips never exceed N; the owner is the selector's owner; and in
// clockwise order the choice is the first eligible backend below capacity in preference order.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"
#include "rondel/core/selector.h"

using namespace rondel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const size_t n = 1 + in.u8() % 24;
  std::vector<core::BackendSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    core::BackendSpec s;
    const uint8_t len = in.u8() % 4;
    s.id = "b" + std::to_string(i);
    for (uint8_t k = 0; k < len; ++k) s.id += static_cast<char>(in.u8());
    s.weight = in.u8() % 4;
    specs.push_back(std::move(s));
  }
  core::Result<core::BackendSet> set = core::BackendSet::create(specs);
  if (!set) return 0;
  core::SelectorOptions so;
  const uint8_t algo = in.u8();
  so.algorithm = static_cast<core::Algorithm>(algo % 3);
  so.points_per_weight = 1 + in.u8() % 16;
  so.max_points = 1 + in.u16() % 512;
  static constexpr uint32_t kPrimes[] = {2, 3, 13, 31, 101, 251, 509};
  so.maglev_table_size = kPrimes[in.u8() % 7];
  core::Result<core::Selector> sel = core::Selector::build(set.value(), so);
  if (!sel) return 0;
  const core::Selector& selector = sel.value();

  core::BoundedOptions bo;
  static constexpr uint32_t kFactors[] = {0, 101, 125, 150, 200, 10000};
  bo.balance_factor = kFactors[in.u8() % 6];
  bo.slack = in.u8() % 3;
  bo.probe = (algo & 0x80) ? core::ProbeOrder::kRandom : core::ProbeOrder::kClockwise;

  auto loads = std::make_unique<std::atomic<uint32_t>[]>(n);
  std::vector<const std::atomic<uint32_t>*> load_ptrs(n);
  std::vector<uint32_t> weights(n);
  std::vector<uint64_t> excluded(core::bitset_words(n), 0);
  uint64_t total = 0;
  uint64_t total_weight = 0;
  const uint8_t mode = in.u8();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t load = in.u8() % 8;
    loads[i].store(load);
    load_ptrs[i] = &loads[i];
    total += load;
    weights[i] = (mode & 1) ? in.u8() % 4 : set.value()[static_cast<core::BackendIndex>(i)].weight;
    if (in.u8() % 4 == 0) core::bit_set(std::span<uint64_t>(excluded), i);
    if (!core::bit_test(std::span<const uint64_t>(excluded), i)) total_weight += weights[i];
  }
  if (mode & 2) total = in.u16();  // inconsistent totals are allowed input
  if (mode & 4) total_weight = in.u16();
  const uint64_t hash = in.u64();

  core::PickInput pi;
  if (mode & 8) {
    pi.in_flight_ptrs = load_ptrs;
  } else {
    pi.in_flight = std::span<const std::atomic<uint32_t>>(loads.get(), n);
  }
  pi.weights = weights;
  pi.total_in_flight = total;
  pi.total_weight = total_weight;
  pi.excluded = excluded;

  std::vector<uint64_t> scratch(core::pick_scratch_words(selector), ~0ull);
  const core::PickResult r = core::bounded_pick(selector, hash, pi, bo, scratch);

  auto eligible = [&](size_t i) {
    return weights[i] > 0 && set.value()[static_cast<core::BackendIndex>(i)].weight > 0 &&
           !core::bit_test(std::span<const uint64_t>(excluded), i);
  };
  auto cap = [&](size_t i) { return core::capacity(total, weights[i], total_weight, bo); };

  FUZZ_CHECK(r.owner == selector.owner(hash));
  FUZZ_CHECK(static_cast<size_t>(r.skipped_full) + r.skipped_excluded <= n);
  if (r.backend == core::kNoBackend) {
    for (size_t i = 0; i < n; ++i) FUZZ_CHECK(!eligible(i));
    return 0;
  }
  const size_t b = r.backend;
  FUZZ_CHECK(b < n && eligible(b));
  FUZZ_CHECK(r.capacity == cap(b));
  if (loads[b].load() >= r.capacity) FUZZ_CHECK(r.all_full);
  if (r.all_full) {
    for (size_t i = 0; i < n; ++i) {
      if (!eligible(i)) continue;
      FUZZ_CHECK(loads[i].load() >= cap(i));
      FUZZ_CHECK(loads[b].load() <= loads[i].load());
    }
  } else {
    FUZZ_CHECK(loads[b].load() < r.capacity);
  }
  if (bo.probe == core::ProbeOrder::kClockwise) {
    std::vector<core::BackendIndex> order(n);
    const size_t k = selector.preference(hash, order);
    for (size_t j = 0; j < k; ++j) {
      const size_t i = order[j];
      if (eligible(i) && loads[i].load() < cap(i)) {
        FUZZ_CHECK(!r.all_full && i == b);
        break;
      }
    }
  }
  return 0;
}
