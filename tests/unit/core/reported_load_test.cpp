// The load report model: status names, the effective load, and the bound's guarantee that
// reports cannot make every backend full (the parsers: tests/unit/proxy/load_report_parser_test).
#include "rondel/core/reported_load.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bounded.h"

namespace rondel::core {
namespace {

// kN equal backends on a ring, with the scratch, weights and bound (c = 1.25) a pick needs.
struct PickRig {
  explicit PickRig(size_t n)
      : set(test::make_set(test::specs(n))),
        sel(test::make_selector(set, Algorithm::kRing)),
        scratch(pick_scratch_words(sel)),
        weights(n, 1) {
    o.balance_factor = 125;
  }
  BackendSet set;
  Selector sel;
  std::vector<uint64_t> scratch;
  std::vector<uint32_t> weights;
  BoundedOptions o;
};

TEST_CASE("status names") {
  CHECK(report_status_name(ReportStatus::kOk) == "ok");
  CHECK(report_status_name(ReportStatus::kTooLarge) == "too_large");
  CHECK(report_status_name(ReportStatus::kNotFinite) == "not_finite");
}

TEST_CASE("effective load: the report moved by this instance's change since, stale falls back") {
  // Reported 10 while this instance had 4 in flight there; it has 6 now: 2 more started.
  ReportView r{.reported = 10, .at_ms = 1000, .local_at_report = 4, .local_in_flight = 6};
  CHECK(effective_load(r, 1000, 500) == 12);
  CHECK(effective_load(r, 1500, 500) == 12);  // age == max_age: fresh
  CHECK(effective_load(r, 1501, 500) == 6);   // stale: the local count
  CHECK(effective_load(r, 900, 500) == 12);   // from another thread's later clock
  r.at_ms = 0;
  CHECK(effective_load(r, 1000, 500) == 6);   // never reported
  r = ReportView{.reported = UINT32_MAX, .at_ms = 5, .local_at_report = 0, .local_in_flight = 9};
  CHECK(effective_load(r, 5, 1) == UINT32_MAX);  // saturates
}

TEST_CASE("effective load on a fleet of N: each local change stands for N, stale is N x local") {
  // 3 instances. The backend reported 10 when this instance held 2 there; it holds 4 now: two
  // starts here stand for six across the fleet.
  ReportView r{.reported = 10, .at_ms = 100, .local_at_report = 2, .local_in_flight = 4};
  CHECK(effective_load(r, 150, 1000, 3) == 16);
  CHECK(effective_load(r, 150, 1000, 1) == 12);
  // One completion since: 10 - 3.
  r.local_in_flight = 1;
  CHECK(effective_load(r, 150, 1000, 3) == 7);
  // Four completions' worth would go below 0: 0.
  r.local_at_report = 5;
  CHECK(effective_load(r, 150, 1000, 3) == 0);
  // Stale: this instance's own count on the fleet's scale, not the bare local count (which
  // would make a stale backend look three times emptier than the fresh ones beside it).
  r.local_in_flight = 4;
  CHECK(effective_load(r, 1101, 1000, 3) == 12);
  CHECK(effective_load(ReportView{.local_in_flight = 5}, 7, 1000, 4) == 20);
  // N = 0 is read as 1; saturation at UINT32_MAX.
  CHECK(effective_load(ReportView{.local_in_flight = 5}, 7, 1000, 0) == 5);
  CHECK(effective_load(ReportView{.local_in_flight = UINT32_MAX}, 7, 1000, 2) == UINT32_MAX);
  // The matching local limits: cap 13 with the report above leaves 5 + ceil(3 / 3) = 6 (L = 5
  // gives 10, L = 6 gives 13); stale, ceil(13 / 3) = 5 (L = 4 gives 12, L = 5 gives 15).
  CHECK(local_limit(r, 150, 1000, 13, 3) == 6);
  CHECK(local_limit(r, 1101, 1000, 13, 3) == 5);
  CHECK(local_limit(r, 1101, 1000, 13, 1) == 13);
}

TEST_CASE("effective load: fresh shared counts are this instance's count plus the members'") {
  // Whatever the report and N: exact counts are not scaled; stale shares fall back to the rest.
  ReportView r{.reported = 40, .at_ms = 1000, .local_at_report = 2, .local_in_flight = 5};
  r.peer_in_flight = 7;
  CHECK(effective_load(r, 1000, 500, 3) == 40 + 3 * 3);  // not fresh: the report's estimate
  r.peers_fresh = true;
  CHECK(effective_load(r, 1000, 500, 3) == 12);
  CHECK(effective_load(r, 9000, 500, 3) == 12);  // a stale report changes nothing
  CHECK(local_limit(r, 1000, 500, 20, 3) == 13);  // 13 local + 7 shared reach the cap of 20
  CHECK(local_limit(r, 1000, 500, 6, 3) == 0);    // the members alone hold more than the cap
  r.peer_in_flight = UINT32_MAX;
  CHECK(effective_load(r, 1000, 500, 3) == UINT32_MAX);
}

TEST_CASE("judged_at: the oldest of the newest min_reports arrivals, 0 when fewer came") {
  const std::array<uint64_t, 8> ring{300, 900, 0, 0, 0, 0, 0, 0};
  CHECK(judged_at(ring, 1) == 900);
  CHECK(judged_at(ring, 0) == 900);
  CHECK(judged_at(ring, 2) == 300);
  CHECK(judged_at(ring, 3) == 0);  // only two reports so far: never fresh
  const std::array<uint64_t, 8> full{5, 80, 70, 60, 50, 40, 30, 20};
  CHECK(judged_at(full, 2) == 70);
  CHECK(judged_at(full, 8) == 5);
  CHECK(judged_at(full, 9) == 0);
  CHECK(judged_at(std::span<const uint64_t>{}, 1) == 0);
  // Two reports within max_age 500 at now 1000: fresh; the second newest at 400: stale, so the
  // bound uses N x local even though the newest report is young.
  ReportView r{.reported = 30, .local_at_report = 2, .local_in_flight = 2};
  r.at_ms = judged_at(std::array<uint64_t, 2>{600, 950}, 2);
  CHECK(effective_load(r, 1000, 500, 3) == 30);
  r.at_ms = judged_at(std::array<uint64_t, 2>{400, 950}, 2);
  CHECK(effective_load(r, 1000, 500, 3) == 6);
}

TEST_CASE("effective load: completions since the report lower it, never below 0") {
  // Reported 10 with 4 of this instance's requests in flight; 3 of them completed since.
  ReportView r{.reported = 10, .at_ms = 1000, .local_at_report = 4, .local_in_flight = 1};
  CHECK(effective_load(r, 1100, 500) == 7);
  // The report had not seen some of this instance's requests leave (they were in flight
  // towards the backend): more completions than the report counts give 0, not a wrap.
  r = ReportView{.reported = 2, .at_ms = 1000, .local_at_report = 5, .local_in_flight = 0};
  CHECK(effective_load(r, 1100, 500) == 0);
  r = ReportView{.reported = 0, .at_ms = 1000, .local_at_report = UINT32_MAX, .local_in_flight = 0};
  CHECK(effective_load(r, 1100, 500) == 0);
  // No change since the report: the report itself.
  r = ReportView{.reported = 7, .at_ms = 1000, .local_at_report = 3, .local_in_flight = 3};
  CHECK(effective_load(r, 1100, 500) == 7);
}

// Property: over random views, the effective load is the local count when stale and, when
// fresh, max(0, reported + local - local_at_report) (saturated), so it moves one for one with
// this instance's starts (+1) and completions (-1) until it reaches 0.
TEST_CASE("effective load: one for one with local starts and completions (random views)") {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 20000; ++iter) {
    ReportView r;
    r.reported = static_cast<uint32_t>(rng() % 3 == 0 ? rng() : rng() % 100);
    r.at_ms = rng() % 4 == 0 ? 0 : 1 + rng() % 2000;
    r.local_at_report = static_cast<uint32_t>(rng() % 50);
    r.local_in_flight = static_cast<uint32_t>(rng() % 50);
    const uint64_t now = rng() % 3000, age = rng() % 1000;
    const uint32_t e = effective_load(r, now, age);
    const bool fresh = r.at_ms != 0 && (now <= r.at_ms || now - r.at_ms <= age);
    if (!fresh) {
      CHECK(e == r.local_in_flight);
      continue;
    }
    const int64_t want = int64_t{r.reported} + r.local_in_flight - r.local_at_report;
    CHECK(e == static_cast<uint32_t>(std::clamp<int64_t>(want, 0, UINT32_MAX)));
    ReportView up = r;
    ++up.local_in_flight;  // one more start
    const uint32_t e_up = effective_load(up, now, age);
    CHECK(e_up == (e == UINT32_MAX || want < 0 ? e : e + 1));
    if (r.local_in_flight > 0) {
      ReportView down = r;
      --down.local_in_flight;  // one completion
      CHECK(effective_load(down, now, age) == (e == 0 || want > UINT32_MAX ? e : e - 1));
    }
  }
}

// With effective loads in the pick, some backend always has room: the sum of the loads is the
// total the capacity uses, so not all can be at or above (1+eps) x their share of it, however
// absurd or frequent the reports. One backend reporting the cap is passed over, the others
// not.
TEST_CASE("reports cannot make every backend full") {
  constexpr size_t kN = 8;
  PickRig rig(kN);
  auto& [set, sel, scratch, weights, o] = rig;
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint32_t> loads(kN);
    uint64_t total = 0;
    for (auto& l : loads) {
      // What a pick computes from an absurd, a normal or a stale report, with this instance's
      // own change since.
      ReportView v;
      v.reported = static_cast<uint32_t>(rng() % 3 == 0 ? kMaxReportedLoad : rng() % 1000);
      v.at_ms = rng() % 4 == 0 ? 0 : 1 + rng() % 100;
      v.local_at_report = static_cast<uint32_t>(rng() % 40);
      v.local_in_flight = static_cast<uint32_t>(rng() % 40);
      l = effective_load(v, 100, 50);
      total += l;
    }
    PickInput in;
    in.loads = loads;
    in.weights = weights;
    in.total_in_flight = total;
    in.total_weight = kN;
    const PickResult r = bounded_pick(sel, rng(), in, o, scratch);
    REQUIRE(r.backend != kNoBackend);
    CHECK_FALSE(r.all_full);
    CHECK(loads[r.backend] < r.capacity);
  }
  std::vector<uint32_t> loads(kN, 5);
  loads[0] = static_cast<uint32_t>(kMaxReportedLoad);
  PickInput in;
  in.loads = loads;
  in.weights = weights;
  in.total_in_flight = 5 * (kN - 1) + loads[0];
  in.total_weight = kN;
  size_t to_zero = 0;
  for (uint64_t h = 0; h < 4000; ++h) {
    const PickResult r = bounded_pick(sel, h * 0x9E3779B97F4A7C15ull, in, o, scratch);
    CHECK_FALSE(r.all_full);
    to_zero += r.backend == 0;
  }
  CHECK(to_zero == 0);
}

TEST_CASE("room_admits: of every grain residues, exactly the room's worth take a partial place") {
  // For every load, cap and grain N, the residues 0..N-1 admit min(room, N) times when there
  // is room, never when there is none; residue 0 alone is the plain bound load < cap.
  for (uint32_t grain = 1; grain <= 9; ++grain) {
    for (uint32_t cap = 0; cap <= 20; ++cap) {
      for (uint32_t load = 0; load <= cap + 3; ++load) {
        uint32_t admitted = 0;
        for (uint32_t residue = 0; residue < grain; ++residue) {
          admitted += room_admits(load, cap, residue);
        }
        CAPTURE(grain);
        CAPTURE(cap);
        CAPTURE(load);
        CHECK(admitted == (load < cap ? std::min(cap - load, grain) : 0));
        CHECK(room_admits(load, cap, 0) == (load < cap));
      }
    }
  }
  // room_residue: 0 unless the backend is rounded and the grain is above 1; then below it.
  const std::vector<uint64_t> bits = {0b101};
  PickInput in;
  in.rounded = bits;
  in.grain = 3;
  for (uint64_t coin = 0; coin < 200; ++coin) {
    in.coin = coin;
    CHECK(room_residue(in, 0) < 3);
    CHECK(room_residue(in, 1) == 0);
  }
  in.grain = 1;
  CHECK(room_residue(in, 0) == 0);
}

TEST_CASE("N instances reading one report fill its room on average, not N places (property)") {
  // Three instances (N = 3) read the same fresh report of a key's home with `room` places left
  // below its cap; each sends one request of that key. Rounded (room_admits with each pick's
  // coin), the home takes `room` of them on average and the cap holds in expectation; taking
  // every place below the cap (the ceiling) sends all three home whatever the room.
  constexpr size_t kN = 4;
  PickRig rig(kN);
  auto& [set, sel, scratch, weights, o] = rig;
  const uint64_t key = 0xC0FFEE;
  const BackendIndex home = sel.owner(key);
  std::mt19937_64 rng(38);
  const std::vector<uint64_t> all = {(uint64_t{1} << kN) - 1};
  for (uint32_t room = 1; room <= 4; ++room) {
    // Others at 40 each; the home at the h that leaves `room` below cap = ceil(1.25 * (120 + h
    // + 1) / 4).
    std::vector<uint32_t> loads(kN, 40);
    uint32_t h = 0;
    while (capacity(40 * (kN - 1) + h, 1, kN, o) != h + room) ++h;
    const uint32_t cap = h + room;
    loads[home] = h;
    PickInput in;
    in.loads = loads;
    in.weights = weights;
    in.total_in_flight = 40 * (kN - 1) + loads[home];
    in.total_weight = kN;
    REQUIRE(capacity(in.total_in_flight, 1, kN, o) == cap);
    in.grain = 3;
    constexpr int kTrials = 20000;
    uint64_t rounded_home = 0, ceiling_home = 0;
    for (int t = 0; t < kTrials; ++t) {
      for (int instance = 0; instance < 3; ++instance) {
        in.coin = rng();
        in.rounded = all;
        rounded_home += bounded_pick(sel, key, in, o, scratch).backend == home;
        in.rounded = {};
        ceiling_home += bounded_pick(sel, key, in, o, scratch).backend == home;
      }
    }
    CAPTURE(room);
    const double mean = static_cast<double>(rounded_home) / kTrials;
    CHECK(mean == doctest::Approx(std::min(room, 3u)).epsilon(0.03));
    CHECK(ceiling_home == 3u * kTrials);
  }
}

TEST_CASE("when every place below a cap loses its rounding, the first is taken, not all-full") {
  // Every backend one place below its cap, each read from a fresh report on a fleet of 3:
  // when every residue declines, the pick is the first of them in the walk as a plain place
  // (residue 0, so its claim is bounded by the cap), never an all-full pick, whose claim would
  // take the slot without a bound.
  constexpr size_t kN = 4;
  PickRig rig(kN);
  auto& [set, sel, scratch, weights, o] = rig;
  // All at 2: cap = ceil(1.25 * 9 / 4) = 3, one place left on each.
  const uint32_t cap = 3;
  const std::vector<uint32_t> loads(kN, cap - 1);
  REQUIRE(capacity(kN * (cap - 1), 1, kN, o) == cap);
  const std::vector<uint64_t> all = {(uint64_t{1} << kN) - 1};
  PickInput in;
  in.loads = loads;
  in.weights = weights;
  in.total_in_flight = kN * (cap - 1);
  in.total_weight = kN;
  in.rounded = all;
  in.grain = 3;
  const uint64_t key = 0xBEEF;
  const BackendIndex owner = sel.owner(key);
  int declined_everywhere = 0;
  for (uint64_t coin = 0; coin < 2000; ++coin) {
    in.coin = coin;
    const PickResult r = bounded_pick(sel, key, in, o, scratch);
    CAPTURE(coin);
    CHECK_FALSE(r.all_full);
    bool any = false;
    for (BackendIndex b = 0; b < kN; ++b) any = any || room_residue(in, b) == 0;
    if (!any) {
      ++declined_everywhere;
      CHECK(r.backend == owner);  // the first in the walk
      CHECK(r.residue == 0);
      CHECK(r.skipped_full == 0);
    } else {
      CHECK(room_residue(in, r.backend) == 0);  // an admitted place
    }
  }
  CHECK(declined_everywhere > 200);  // (2/3)^4 of the coins: about 395
}

TEST_CASE("local limit: below it exactly when the pick would admit (property)") {
  // For random reports, ages, caps, fleet sizes N and rounding residues, every local count L
  // satisfies room_admits(effective_load(L, N), cap, residue) <=> L < local_limit(N, residue):
  // the one bound a compare-and-swap on the local counter checks is the bound the pick
  // compared. Edge values (0, UINT32_MAX) mixed in.
  std::mt19937_64 rng(20261202);
  auto draw = [&rng]() -> uint32_t {
    switch (rng() % 4) {
      case 0: return static_cast<uint32_t>(rng() % 8);
      case 1: return UINT32_MAX - static_cast<uint32_t>(rng() % 4);
      default: return static_cast<uint32_t>(rng() % 64);
    }
  };
  for (int i = 0; i < 20000; ++i) {
    ReportView r{.reported = draw(), .at_ms = rng() % 3, .local_at_report = draw()};
    // Fresh shared counts (fleet.share_load) take precedence over any report, in both.
    r.peers_fresh = rng() % 4 == 0;
    r.peer_in_flight = draw();
    const uint64_t now = rng() % 4;
    const uint64_t max_age = rng() % 2;
    const uint32_t cap = draw();
    constexpr uint32_t kFleets[] = {0, 1, 1, 2, 3, 4, 7, 64, UINT32_MAX};
    const uint32_t fleet = kFleets[rng() % std::size(kFleets)];
    CAPTURE(fleet);
    // A fresh report's places may be rounded with a residue below N (room_residue); a stale
    // one never is.
    const int64_t n = fleet_scale(fleet);
    const bool fresh = report_fresh(r.at_ms, now, max_age) && !r.peers_fresh;
    const uint32_t residue =
        fresh && n > 1 && rng() % 2 == 0 ? static_cast<uint32_t>(rng() % static_cast<uint64_t>(n))
                                         : 0;
    CAPTURE(residue);
    const uint64_t limit = local_limit(r, now, max_age, cap, fleet, residue);
    const auto near = [](uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX)); };
    for (uint32_t l : {uint32_t{0}, uint32_t{1}, near(limit == 0 ? 0 : limit - 1), near(limit),
                       near(limit + 1), draw()}) {
      r.local_in_flight = l;
      CAPTURE(r.reported);
      CAPTURE(r.at_ms);
      CAPTURE(r.local_at_report);
      CAPTURE(l);
      CAPTURE(cap);
      CHECK(room_admits(effective_load(r, now, max_age, fleet), cap, residue) == (l < limit));
    }
  }
}

}  // namespace
}  // namespace rondel::core
