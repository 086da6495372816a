// Router with load_report: a fresh report, moved by this instance's starts and completions
// since, is what the bound compares; a stale one falls back to the local count; reports never
// move a key's owner.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/core/hash.h"
#include "rondel/proxy/load_report.h"
#include "rondel/proxy/router.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

struct ReportFixture {
  // One report is enough in most cases here; min_reports has its own case.
  explicit ReportFixture(uint32_t min_reports = 1) {
    cfg = test::pool_config({"a", "b", "c", "d"});
    cfg.balance_factor = 125;
    cfg.capacity_slack = 0;
    cfg.spill_memory = 0;
    cfg.hot_keys.share = 0;
    cfg.load_report.enabled = true;
    cfg.load_report.max_age_ms = 100;
    cfg.load_report.min_reports = min_reports;
    pool = maker.build(cfg);
    REQUIRE(pool != nullptr);
    scratch.assign(pool->scratch_words(), 0);
    key = RouteKey{RouteKey::Kind::kKey, core::hash64("/k"), "/k"};
    owner = pool->selector().owner(key.hash);
  }
  RouteDecision route(uint64_t now_ms) {
    PickRequest rq;
    rq.key = key;
    rq.now_ms = now_ms;
    rq.worker = 0;
    return router.route(*pool, rq, scratch);
  }
  // A response head of backend i carrying `value` in endpoint-load-metrics at `now_ms`.
  void report(core::BackendIndex i, const std::string& value, uint64_t now_ms,
              ReportSource source = ReportSource::kHealthCheck) {
    http::Header h{"Endpoint-Load-Metrics", value};
    http::ResponseHead head;
    head.status = 200;
    head.headers = std::span<const http::Header>(&h, 1);
    report_from(cfg.load_report, head, now_ms, pool->backend(i).report, source);
  }
  // What the exchange does around a pick: takes an in-flight slot, gives it back at the end.
  void start(core::BackendIndex i) { pool->backend(i).in_flight.fetch_add(1); }
  void finish(core::BackendIndex i) { pool->backend(i).in_flight.fetch_sub(1); }
  config::PoolConfig cfg;
  test::PoolMaker maker;
  std::unique_ptr<Pool> pool;
  Router router;
  std::vector<uint64_t> scratch;
  RouteKey key;
  core::BackendIndex owner = core::kNoBackend;
};

TEST_CASE("a fresh report of a full owner sends the key elsewhere; a stale one does not") {
  ReportFixture f;
  // Other instances keep the owner busy: it reports 40, the others 0. Total 40 over 4
  // backends: cap = ceil(1.25 * 41 / 4) = 13 < 40.
  for (core::BackendIndex i = 0; i < 4; ++i) {
    f.report(i, "TEXT named_metrics.in_flight=" + std::to_string(i == f.owner ? 40 : 0), 1000);
  }
  const RouteDecision d = f.route(1050);
  CHECK(d.backend != f.owner);
  CHECK(d.owner == f.owner);  // the placement did not change: only the load did
  CHECK(d.reason == core::RouteReason::kSpill);
  // The attempt's slot counts on the backend it chose.
  f.start(d.backend);
  CHECK(effective_load_of(*f.pool, d.backend, 1050) == 1);
  f.finish(d.backend);
  // 101 ms later every report is stale: the local counts (all 0) decide, the key goes home.
  const RouteDecision stale = f.route(1101);
  CHECK(stale.backend == f.owner);
  CHECK(stale.reason == core::RouteReason::kHome);
}

TEST_CASE("min_reports: a backend's reports count only when that many arrived within max_age") {
  ReportFixture f(2);
  const std::string full = "TEXT named_metrics.in_flight=40";
  // One report of 40 on the owner: too sparse to trust; the local count (0) decides.
  f.report(f.owner, full, 1000);
  CHECK(effective_load_of(*f.pool, f.owner, 1010) == 0);
  CHECK(f.route(1010).backend == f.owner);
  // A second within max_age (100 ms): both count, the owner is full, the key spills.
  f.report(f.owner, full, 1050);
  CHECK(effective_load_of(*f.pool, f.owner, 1060) == 40);
  CHECK(f.route(1060).reason == core::RouteReason::kSpill);
  // At 1101 the older of the two is past max_age though the newer is 51 ms old: local again.
  CHECK(effective_load_of(*f.pool, f.owner, 1101) == 0);
  // Reports 150 ms apart never make two within 100 ms: the backend stays on local counts.
  f.report(f.owner, full, 1200);
  CHECK(effective_load_of(*f.pool, f.owner, 1210) == 0);
}

TEST_CASE("a fleet of 3 shares a fresh report's last place: a third of the picks take it") {
  // The owner reports 13, the others 10: total 43, cap = ceil(1.25 * 44 / 4) = 14, so one place
  // is left. Each of three instances reading that report would take it with the ceiling (and
  // put 16 on the owner); with `rounding: random` (the default) each takes it with probability
  // 1/3. Picks without a start, so the room stays 1 throughout.
  for (const auto rounding : {config::ReportRounding::kRandom, config::ReportRounding::kUp}) {
    ReportFixture f;
    f.cfg.load_report.rounding = rounding;
    f.pool = f.maker.build(f.cfg);
    REQUIRE(f.pool != nullptr);
    f.pool->state().fleet_instances.store(3);
    for (core::BackendIndex i = 0; i < 4; ++i) {
      f.report(i, "TEXT named_metrics.in_flight=" + std::to_string(i == f.owner ? 13 : 10), 1000);
    }
    // Of 3000 picks at `now`, how many go home: random, within [lo, hi]%; up, all of them.
    const auto home_share = [&f, rounding](uint64_t now, int lo, int hi) {
      constexpr int kPicks = 3000;
      int home = 0;
      for (int k = 0; k < kPicks; ++k) home += f.route(now).backend == f.owner;
      CAPTURE(home);
      if (rounding == config::ReportRounding::kRandom) {
        CHECK(home > kPicks * lo / 100);
        CHECK(home < kPicks * hi / 100);
      } else {
        CHECK(home == kPicks);
      }
    };
    home_share(1010, 29, 38);
    // Two places left (owner at 12: total 42, cap ceil(1.25 * 43 / 4) = 14): two thirds.
    f.report(f.owner, "TEXT named_metrics.in_flight=12", 1020);
    home_share(1030, 62, 71);
    // Stale reports (N x local, every count 0): no rounding, every pick goes home.
    int home = 0;
    for (int k = 0; k < 100; ++k) home += f.route(1200).backend == f.owner;
    CHECK(home == 100);
  }
}

TEST_CASE("starts since the report raise the load and completions lower it, without a report") {
  ReportFixture f;
  for (core::BackendIndex i = 0; i < 4; ++i) f.report(i, "named_metrics.in_flight:0", 10);
  // With all four at 0 reported, requests go home until the owner's load reaches its cap:
  // after k requests on the owner, total k: cap = ceil(1.25 * (k + 1) / 4) -> 1 while k < 4.
  CHECK(f.route(20).backend == f.owner);
  f.start(f.owner);
  CHECK(effective_load_of(*f.pool, f.owner, 20) == 1);
  const RouteDecision spilled = f.route(20);  // owner at 1, cap ceil(1.25 * 2 / 4) = 1
  CHECK(spilled.backend != f.owner);
  // The owner's request completes: its load is back to 0 with no newer report (an estimate
  // that only counts starts keeps it at 1 and spills the key until the report is stale).
  f.finish(f.owner);
  CHECK(effective_load_of(*f.pool, f.owner, 30) == 0);
  CHECK(f.route(30).backend == f.owner);
  // Never below 0: a report of 0 taken while 2 of this instance's requests were in flight
  // there (they had not reached the backend), then both complete.
  f.start(f.owner);
  f.start(f.owner);
  f.report(f.owner, "named_metrics.in_flight:0", 40);
  f.finish(f.owner);
  f.finish(f.owner);
  CHECK(effective_load_of(*f.pool, f.owner, 40) == 0);
}

TEST_CASE("a response's report leaves out the request it answers; a health check's does not") {
  ReportFixture f;
  const core::BackendIndex b = 1;
  // Three of this instance's requests in flight on b; one's response reports 5 (the backend
  // holds 5 others): after that request completes, b holds 5.
  for (int i = 0; i < 3; ++i) f.start(b);
  f.report(b, "named_metrics.in_flight:5", 10, ReportSource::kResponse);
  CHECK(f.pool->backend(b).report.local_at_report.load() == 2);
  CHECK(effective_load_of(*f.pool, b, 10) == 6);
  f.finish(b);
  CHECK(effective_load_of(*f.pool, b, 10) == 5);
  // A health check holds no slot: its report counts all of this instance's requests.
  f.report(b, "named_metrics.in_flight:5", 20, ReportSource::kHealthCheck);
  CHECK(f.pool->backend(b).report.local_at_report.load() == 2);
  CHECK(effective_load_of(*f.pool, b, 20) == 5);
  f.finish(b);
  f.finish(b);
  CHECK(effective_load_of(*f.pool, b, 20) == 3);
  // Stale: the local count.
  CHECK(effective_load_of(*f.pool, b, 121) == 0);
}

TEST_CASE("ignored reports are counted by reason and keep the last accepted value") {
  ReportFixture f;
  const core::BackendIndex b = 0;
  f.report(b, "TEXT named_metrics.in_flight=7", 5);
  f.report(b, "TEXT named_metrics.in_flight=nan", 6);
  f.report(b, "TEXT named_metrics.in_flight=-3", 6);
  f.report(b, "TEXT named_metrics.in_flight=99999999", 6);
  f.report(b, "TEXT cpu_utilization=0.1", 6);
  f.report(b, "TEXT named_metrics.in_flight=1,", 6);
  const LoadReportState& st = f.pool->backend(b).report;
  CHECK(st.reported.load() == 7);
  CHECK(st.at_ms.load() == 5);
  for (auto s : {core::ReportStatus::kOk, core::ReportStatus::kNotFinite,
                 core::ReportStatus::kNegative, core::ReportStatus::kTooLarge,
                 core::ReportStatus::kMissing, core::ReportStatus::kMalformed}) {
    CHECK(st.counts[static_cast<size_t>(s)].load() == 1);
  }
  // A head without the field counts nothing.
  http::ResponseHead head;
  report_from(f.cfg.load_report, head, 7, f.pool->backend(b).report);
  uint64_t total = 0;
  for (const auto& c : st.counts) total += c.load();
  CHECK(total == 6);
}

TEST_CASE("without load_report the pick ignores reports") {
  config::PoolConfig cfg = test::pool_config({"a", "b", "c", "d"});
  cfg.capacity_slack = 0;
  test::PoolMaker maker;
  auto pool = maker.build(cfg);
  REQUIRE(pool != nullptr);
  const RouteKey key{RouteKey::Kind::kKey, core::hash64("/k"), "/k"};
  const core::BackendIndex owner = pool->selector().owner(key.hash);
  auto& st = pool->backend(owner).report;
  st.reported.store(1000);
  st.at_ms.store(1);
  Router router;
  std::vector<uint64_t> scratch(pool->scratch_words());
  PickRequest rq;
  rq.key = key;
  rq.now_ms = 1;
  CHECK(router.route(*pool, rq, scratch).backend == owner);
}

TEST_CASE("load_by prompt_size: one large prompt in flight fills its backend for the next key") {
  // 2 backends, c = 1.25, no slack. The owner holds one 200 KiB request: by requests it is half
  // the pool's load and the next request for the key goes home (cap 2); by prompt size the
  // owner holds 200 of 200 KiB (cap ceil(1.25 * 201 / 2) = 126) and the next one spills.
  for (const config::LoadBy by : {config::LoadBy::kRequests, config::LoadBy::kPromptSize}) {
    CAPTURE(static_cast<int>(by));
    config::PoolConfig cfg = test::pool_config({"a", "b"});
    cfg.capacity_slack = 0;
    cfg.spill_memory = 0;
    cfg.hot_keys.share = 0;
    cfg.load_by = by;
    test::PoolMaker maker;
    auto pool = maker.build(cfg);
    REQUIRE(pool != nullptr);
    const RouteKey key{RouteKey::Kind::kKey, core::hash64("/k"), "/k"};
    const core::BackendIndex owner = pool->selector().owner(key.hash);
    Router router;
    std::vector<uint64_t> scratch(pool->scratch_words());
    PickRequest rq;
    rq.key = key;
    rq.worker = 0;
    rq.cost = 200;
    InFlightSlot big;
    CHECK(router.route(*pool, rq, scratch, &big).backend == owner);
    CHECK(big.held());
    CHECK(pool->backend(owner).in_flight.load() == 1);
    CHECK(pool->backend(owner).in_flight_cost.load() ==
          (by == config::LoadBy::kPromptSize ? 200u : 0u));
    rq.cost = 1;
    InFlightSlot small;
    const RouteDecision d = router.route(*pool, rq, scratch, &small);
    CHECK((d.backend == owner) == (by == config::LoadBy::kRequests));
    big.release();
    small.release();
    CHECK(pool->backend(owner).in_flight_cost.load() == 0);
    CHECK(pool->state().total_in_flight_cost.load() == 0);
    CHECK(pool->state().total_in_flight.load() == 0);
  }
}

TEST_CASE("request cost: Content-Length in KiB rounded up, else the bytes read, at least 1") {
  http::RequestHead h;
  h.framing = http::Framing::kLength;
  h.content_length = 0;
  CHECK(request_cost(h, 0) == 1);
  h.content_length = 1024;
  CHECK(request_cost(h, 0) == 1);
  h.content_length = 1025;
  CHECK(request_cost(h, 99999) == 2);  // Content-Length wins over what was read
  h.content_length = uint64_t{1} << 50;
  CHECK(request_cost(h, 0) == kMaxRequestCost);
  h.framing = http::Framing::kChunked;
  CHECK(request_cost(h, 8192) == 8);
  CHECK(request_cost(h, 0) == 1);
}

}  // namespace
}  // namespace rondel::proxy
