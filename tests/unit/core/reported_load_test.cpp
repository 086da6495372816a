// Load report parsers (ORCA text, colon and JSON forms, plain numbers) against well formed and
// many malformed inputs, the effective load, and the bound's guarantee that reports cannot make
// every backend full.
#include "rondel/core/reported_load.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bounded.h"

namespace rondel::core {
namespace {

constexpr std::string_view kInFlight = "named_metrics.in_flight";

ReportStatus orca_status(std::string_view v, std::string_view metric = kInFlight) {
  return parse_orca(v, metric, 1).status;
}

uint32_t orca_load(std::string_view v, std::string_view metric = kInFlight, uint32_t scale = 1) {
  const ParsedReport r = parse_orca(v, metric, scale);
  REQUIRE(r.status == ReportStatus::kOk);
  return r.load;
}

TEST_CASE("ORCA text forms") {
  CHECK(orca_load("TEXT named_metrics.in_flight=12") == 12);
  CHECK(orca_load("TEXT cpu_utilization=0.3, named_metrics.in_flight=7, mem_utilization=0.5") ==
        7);
  CHECK(orca_load("named_metrics.in_flight:5") == 5);
  CHECK(orca_load("  cpu_utilization:0.25 ,named_metrics.in_flight : 9  ") == 9);
  CHECK(orca_load("TEXT cpu_utilization=0.25", "cpu_utilization", 100) == 25);
  CHECK(orca_load("TEXT a=1, a=3", "a") == 3);  // last wins
  CHECK(orca_load("TEXT a=2.5e1", "a") == 25);
  CHECK(orca_load("TEXT a=-0", "a") == 0);
  CHECK(orca_load("TEXT a=0.4", "a") == 0);  // rounded
  CHECK(orca_load("TEXT a=1000000", "a") == 1000000);
}

TEST_CASE("ORCA JSON form") {
  CHECK(orca_load(R"(JSON {"named_metrics": {"in_flight": 4}})") == 4);
  CHECK(orca_load(R"(JSON {"cpu_utilization": 0.5, "named_metrics": {"x": 1, "in_flight": 8}})") ==
        8);
  CHECK(orca_load(R"(JSON {"cpu_utilization":0.5})", "cpu_utilization", 10) == 5);
  CHECK(orca_load(R"(JSON {"utilization": {"gpu": 0.75}})", "utilization.gpu", 100) == 75);
  CHECK(orca_load("JSON {\n \"a\" : 1e2 \n}", "a") == 100);
  CHECK(orca_status(R"(JSON {})") == ReportStatus::kMissing);
  CHECK(orca_status(R"(JSON {"named_metrics": {}})") == ReportStatus::kMissing);
  // A top-level key spelled with the dot names the metric too.
  CHECK(orca_status(R"(JSON {"named_metrics.in_flight": 3})") == ReportStatus::kOk);
}

TEST_CASE("missing metric is counted apart from malformed values") {
  CHECK(orca_status("TEXT cpu_utilization=0.3") == ReportStatus::kMissing);
  CHECK(orca_status("cpu_utilization:0.3") == ReportStatus::kMissing);
  CHECK(orca_status("TEXT named_metrics.in_flight2=3") == ReportStatus::kMissing);
}

TEST_CASE("malformed ORCA values") {
  const char* bad[] = {
      "", " ", "TEXT", "TEXT ", "JSON", "JSON ", "BIN CgsKCWluX2ZsaWdodA==",
      "TEXT named_metrics.in_flight", "TEXT named_metrics.in_flight=", "TEXT =3",
      "TEXT named_metrics.in_flight=3,", "TEXT ,named_metrics.in_flight=3",
      "TEXT named_metrics.in_flight=3,,a=1", "TEXT named_metrics.in_flight=0x10",
      "TEXT named_metrics.in_flight=1.", "TEXT named_metrics.in_flight=.5",
      "TEXT named_metrics.in_flight=+1", "TEXT named_metrics.in_flight=1e",
      "TEXT named_metrics.in_flight=1e+", "TEXT named_metrics.in_flight=01x",
      "TEXT named_metrics.in_flight=3 4", "TEXT named metrics.in_flight=3",
      "TEXT named_metrics.in_flight:3",  // ':' in the TEXT form
      "named_metrics.in_flight=3",       // '=' without the TEXT prefix
      "TEXTnamed_metrics.in_flight=3", "text named_metrics.in_flight=3",
      "TEXT a=1, b=oops, named_metrics.in_flight=3",  // a bad item anywhere
      "TEXT named_metrics.in_flight=\"3\"", "TEXT named_metrics.in_flight=3;q=1",
      "JSON {", "JSON }", "JSON {\"named_metrics\": {\"in_flight\": 4}", "JSON []",
      R"(JSON {"named_metrics": {"in_flight": 4}} x)", R"(JSON {"a": 1,})",
      R"(JSON {"a": 1, "a": 2})", R"(JSON {"a": true})", R"(JSON {"a": null})",
      R"(JSON {"a": "1"})", R"(JSON {"a": [1]})", R"(JSON {a: 1})", R"(JSON {"": 1})",
      R"(JSON {"a\"b": 1})", R"(JSON {"a b": 1})", R"(JSON {"a": {"b": {"c": 1}}})",
      R"(JSON {"named_metrics": {"in_flight": 4, "in_flight": 5}})", R"(JSON {"a" 1})",
      R"(JSON {"a": 01.})", R"(JSON {"a": -})", R"(JSON {"a": 1 2})", "JSON{\"a\": 1}",
  };
  for (const char* v : bad) {
    INFO(v);
    CHECK(orca_status(v) == ReportStatus::kMalformed);
  }
  CHECK(orca_status(std::string(kMaxReportBytes + 1, ' ') + "a:1", "a") ==
        ReportStatus::kMalformed);
}

TEST_CASE("non-finite, negative and absurd values") {
  for (const char* v : {"TEXT a=nan", "TEXT a=NaN", "TEXT a=-inf", "TEXT a=Infinity",
                        "a:+INF", "TEXT a=1e999", R"(JSON {"a": NaN})", R"(JSON {"a": -Infinity})"}) {
    INFO(v);
    CHECK(orca_status(v, "a") == ReportStatus::kNotFinite);
  }
  CHECK(orca_status("TEXT a=-1", "a") == ReportStatus::kNegative);
  CHECK(orca_status("TEXT a=-1e-9", "a") == ReportStatus::kNegative);
  CHECK(orca_status(R"(JSON {"a": -3})", "a") == ReportStatus::kNegative);
  CHECK(orca_status("TEXT a=1000001", "a") == ReportStatus::kTooLarge);
  CHECK(orca_status("TEXT a=1e300", "a") == ReportStatus::kTooLarge);
  CHECK(parse_orca("TEXT a=0.5", "a", 3'000'000).status == ReportStatus::kTooLarge);
  // A NaN in another metric does not spoil the one we read (its syntax is valid).
  CHECK(orca_load("TEXT b=nan, a=2", "a") == 2);
}

TEST_CASE("plain numeric header") {
  CHECK(parse_plain_load("12", 1).load == 12);
  CHECK(parse_plain_load(" 0.5 ", 10).load == 5);
  CHECK(parse_plain_load("", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("12 requests", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("a:1", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("nan", 1).status == ReportStatus::kNotFinite);
  CHECK(parse_plain_load("-2", 1).status == ReportStatus::kNegative);
  CHECK(parse_plain_load("2e6", 1).status == ReportStatus::kTooLarge);
  CHECK(parse_load_report(LoadHeaderFormat::kPlain, "7", "ignored", 1).load == 7);
}

TEST_CASE("random byte strings never crash and never yield an absurd load") {
  std::mt19937_64 rng(17);
  const std::string alphabet = "TEXTJSON {}\":,.=-+e0123456789nafiINF_\t";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const size_t len = rng() % 48;
    for (size_t i = 0; i < len; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
    if (iter % 3 == 0) s = "TEXT a=" + s;
    if (iter % 3 == 1) s = "JSON {\"a\": " + s;
    for (uint32_t scale : {1u, 1000u}) {
      const ParsedReport r = parse_orca(s, "a", scale);
      CHECK(static_cast<size_t>(r.status) < kReportStatuses);
      if (r.status == ReportStatus::kOk) {
        CHECK(r.load <= kMaxReportedLoad);
      } else {
        CHECK(r.load == 0);
      }
      const ParsedReport p = parse_plain_load(s, scale);
      CHECK(p.load <= kMaxReportedLoad);
    }
  }
}

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
  const BackendSet set = test::make_set(test::specs(kN));
  const Selector sel = test::make_selector(set, Algorithm::kRing);
  std::vector<uint64_t> scratch(pick_scratch_words(sel));
  std::vector<uint32_t> weights(kN, 1);
  std::mt19937_64 rng(5);
  BoundedOptions o;
  o.balance_factor = 125;
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

TEST_CASE("local limit: below it exactly when the effective load is below the cap (property)") {
  // For random reports, ages and caps, every local count L satisfies
  // effective_load(L) < cap <=> L < local_limit: the one bound a compare-and-swap on the local
  // counter checks is the bound the pick compared. Edge values (0, UINT32_MAX) mixed in.
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
    const uint64_t now = rng() % 4;
    const uint64_t max_age = rng() % 2;
    const uint32_t cap = draw();
    const uint64_t limit = local_limit(r, now, max_age, cap);
    const auto near = [](uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX)); };
    for (uint32_t l : {uint32_t{0}, uint32_t{1}, near(limit == 0 ? 0 : limit - 1), near(limit),
                       near(limit + 1), draw()}) {
      r.local_in_flight = l;
      CAPTURE(r.reported);
      CAPTURE(r.at_ms);
      CAPTURE(r.local_at_report);
      CAPTURE(l);
      CAPTURE(cap);
      CHECK((effective_load(r, now, max_age) < cap) == (l < limit));
    }
  }
}

}  // namespace
}  // namespace rondel::core
