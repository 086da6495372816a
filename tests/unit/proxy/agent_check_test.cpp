// agent_check: the answer parser (HAProxy's words, separators, '#' descriptions, bounds), what an
// answer does to a backend (the agent's own flags beside the operator's, the weight percentage
// in the effective weight and never in the placement), and keyless picks by reported load.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/core/hash.h"
#include "rondel/proxy/agent_check.h"
#include "rondel/proxy/load_report.h"
#include "rondel/proxy/router.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

TEST_CASE("agent answers: each word") {
  CHECK(parse_agent_answer("up").health == AgentHealth::kUp);
  for (const char* w : {"down", "fail", "stopped"}) {
    CHECK(parse_agent_answer(w).health == AgentHealth::kDown);
  }
  CHECK(parse_agent_answer("ready").admin == AgentAdmin::kReady);
  CHECK(parse_agent_answer("drain").admin == AgentAdmin::kDrain);
  CHECK(parse_agent_answer("maint").admin == AgentAdmin::kMaint);
  CHECK(parse_agent_answer("75%").weight_percent == 75);
  const AgentAnswer up = parse_agent_answer("up");
  CHECK(up.admin == AgentAdmin::kUnknown);  // a dimension not named keeps its value
  CHECK(up.weight_percent == -1);
  CHECK(up.known_words == 1);
}

TEST_CASE("agent answers: combinations, separators, case, line end") {
  AgentAnswer a = parse_agent_answer("75%, drain");
  CHECK(a.weight_percent == 75);
  CHECK(a.admin == AgentAdmin::kDrain);
  CHECK(a.known_words == 2);
  a = parse_agent_answer("up 50%\r\n");
  CHECK(a.health == AgentHealth::kUp);
  CHECK(a.weight_percent == 50);
  a = parse_agent_answer("\tREADY,,Up  100%\nmaint");  // only the first line
  CHECK(a.admin == AgentAdmin::kReady);
  CHECK(a.health == AgentHealth::kUp);
  CHECK(a.weight_percent == 100);
  a = parse_agent_answer("Drain 10% maxconn:30 ready");  // the last word of a dimension wins
  CHECK(a.admin == AgentAdmin::kReady);
  CHECK(a.weight_percent == 10);
  CHECK(a.known_words == 3);
}

TEST_CASE("agent answers: '#' descriptions, percentages, garbage, empty, overlong") {
  AgentAnswer a = parse_agent_answer("down#disk full, maint");
  CHECK(a.health == AgentHealth::kDown);
  CHECK(a.admin == AgentAdmin::kUnknown);  // part of the description
  a = parse_agent_answer("stopped # going away");
  CHECK(a.health == AgentHealth::kDown);
  CHECK(parse_agent_answer("0%").weight_percent == 0);
  CHECK(parse_agent_answer("100%").weight_percent == 100);
  CHECK(parse_agent_answer("150%").weight_percent == 150);
  CHECK(parse_agent_answer("256%").weight_percent == 256);
  for (const char* bad : {"257%", "1000%", "-5%", "%", "5 %", "75", "7a%", "+5%", "75%%"}) {
    INFO(bad);
    CHECK_FALSE(parse_agent_answer(bad).known());
  }
  CHECK_FALSE(parse_agent_answer("").known());
  CHECK_FALSE(parse_agent_answer("\r\n").known());
  CHECK_FALSE(parse_agent_answer("#up").known());
  CHECK_FALSE(parse_agent_answer("HTTP/1.1 200 OK").known());
  CHECK_FALSE(parse_agent_answer("upp downn readyy").known());
  CHECK_FALSE(parse_agent_answer(std::string(kMaxAgentAnswer + 1, ' ') + "up").known());
  CHECK(parse_agent_answer(std::string(kMaxAgentAnswer - 2, ' ') + "up").known());
  // A long second line does not matter: only the first is read.
  CHECK(parse_agent_answer("up\n" + std::string(4 * kMaxAgentAnswer, 'x')).known());
}

struct AgentFixture {
  AgentFixture() {
    cfg = test::pool_config({"a", "b", "c", "d"});
    cfg.spill_memory = 0;
    cfg.hot_keys.share = 0;
    pool = maker.build(cfg);
    REQUIRE(pool != nullptr);
  }
  AgentChange answer(core::BackendIndex i, std::string_view line, uint64_t now_ms = 10) {
    const AgentChange ch =
        apply_agent_answer(pool->backend(i), line, parse_agent_answer(line), now_ms);
    pool->refresh_weights(now_ms);
    return ch;
  }
  config::PoolConfig cfg;
  test::PoolMaker maker;
  std::unique_ptr<Pool> pool;
};

TEST_CASE("agent drain, maint and down are the agent's reasons, apart from the operator's") {
  AgentFixture f;
  BackendState& b = f.pool->backend(1);
  CHECK(f.answer(1, "drain").flags);
  CHECK(b.has_flag(HealthFlag::kAgentAdmin));
  CHECK_FALSE(b.usable());
  CHECK(b.agent.summary() == AgentSummary::kDrain);
  CHECK(b.admin_state() == AdminState::kReady);  // the operator's state is untouched
  CHECK(b.health() == Health::kUp);
  CHECK(f.pool->state().unusable.load() == 1);

  // The operator drains too; the agent's ready leaves the operator's drain in place.
  b.set_admin_state(AdminState::kDrain);
  CHECK(f.answer(1, "ready").flags);
  CHECK_FALSE(b.has_flag(HealthFlag::kAgentAdmin));
  CHECK_FALSE(b.usable());
  CHECK(b.agent.summary() == AgentSummary::kUp);
  // And the operator's ready leaves the agent's maint in place.
  f.answer(1, "maint");
  b.set_admin_state(AdminState::kReady);
  CHECK_FALSE(b.usable());
  CHECK(b.agent.summary() == AgentSummary::kMaint);
  f.answer(1, "ready");
  CHECK(b.usable());
  CHECK(f.pool->state().unusable.load() == 0);

  // down / up: the health dimension; `up` does not undo a drain, `ready` does not undo a down.
  f.answer(1, "down#disk");
  CHECK(b.health() == Health::kDown);
  CHECK(b.agent.summary() == AgentSummary::kDown);
  f.answer(1, "drain");
  f.answer(1, "up");
  CHECK_FALSE(b.usable());
  CHECK(b.agent.summary() == AgentSummary::kDrain);
  f.answer(1, "down");
  f.answer(1, "ready");
  CHECK_FALSE(b.usable());
  const AgentChange back = apply_agent_answer(b, "up", parse_agent_answer("up"), 77);
  CHECK(back.flags);
  CHECK(b.usable());
  CHECK(b.ramp_start_ms == 77);  // back in rotation: slow start (when the pool has one)
  CHECK(b.agent.last == "up");
  CHECK(f.pool->state().unusable.load() == 0);

  // Unknown words and repeats change nothing.
  CHECK_FALSE(f.answer(1, "up").any());
  CHECK_FALSE(f.answer(1, "hello").any());
  CHECK(b.usable());

  // Turning the agent off clears its reasons and its percentage.
  f.answer(2, "maint 50%");
  CHECK_FALSE(f.pool->backend(2).usable());
  const AgentChange off = clear_agent(f.pool->backend(2), 100);
  CHECK(off.flags);
  CHECK(off.weight);
  CHECK(f.pool->backend(2).usable());
  CHECK(f.pool->backend(2).agent.summary() == AgentSummary::kNone);
  CHECK(f.pool->backend(2).agent.weight_percent.load() == 100);
}

TEST_CASE("the agent's weight percentage scales the effective weight, never the placement") {
  AgentFixture f;
  std::vector<core::BackendIndex> owners;
  for (int k = 0; k < 200; ++k) {
    owners.push_back(f.pool->selector().owner(core::hash64("/k" + std::to_string(k))));
  }
  const uint32_t full = f.pool->effective_weight(0);
  CHECK(f.answer(0, "50%").weight);
  CHECK(f.pool->effective_weight(0) == full / 2);
  CHECK(f.pool->effective_weight(1) == full);
  f.answer(0, "75%, drain");
  CHECK(f.pool->effective_weight(0) == full * 3 / 4);
  CHECK_FALSE(f.pool->backend(0).usable());
  f.answer(0, "ready 150%");
  CHECK(f.pool->effective_weight(0) == full * 3 / 2);
  CHECK(f.pool->backend(0).usable());
  f.answer(0, "0%");
  CHECK(f.pool->effective_weight(0) == 0);
  CHECK(f.pool->eligible_count() == 3);
  CHECK(f.pool->least_loaded({}) != 0);
  // The placement is the same for every key.
  for (int k = 0; k < 200; ++k) {
    CHECK(f.pool->selector().owner(core::hash64("/k" + std::to_string(k))) == owners[k]);
  }
  // A keyed request whose owner is at 0% walks to its next backend, as a drained one's would.
  Router router;
  std::vector<uint64_t> scratch(f.pool->scratch_words(), 0);
  for (int k = 0; k < 200; ++k) {
    if (owners[k] != 0) continue;
    PickRequest rq;
    rq.key = RouteKey{RouteKey::Kind::kKey, core::hash64("/k" + std::to_string(k)), "/k"};
    rq.worker = 0;
    CHECK(router.route(*f.pool, rq, scratch).backend != 0);
  }
  f.answer(0, "100%");
  CHECK(f.pool->effective_weight(0) == full);
}

TEST_CASE("keyless picks compare effective loads when load_report is on") {
  config::PoolConfig cfg = test::pool_config({"a", "b", "c"});
  cfg.spill_memory = 0;
  cfg.hot_keys.share = 0;
  cfg.missing_key = config::MissingKeyPolicy::kLeastInFlight;
  cfg.load_report.enabled = true;
  cfg.load_report.max_age_ms = 100;
  cfg.load_report.min_reports = 1;
  test::PoolMaker maker;
  auto pool = maker.build(cfg);
  REQUIRE(pool != nullptr);
  // This instance holds nothing on a; other instances keep it busy: it reports 30. b holds 2
  // locally and reports 2; c holds 3 and reports 3.
  auto report = [&](core::BackendIndex i, uint32_t load) {
    const std::string value = "TEXT named_metrics.in_flight=" + std::to_string(load);
    http::Header h{"Endpoint-Load-Metrics", value};
    http::ResponseHead head;
    head.status = 200;
    head.headers = std::span<const http::Header>(&h, 1);
    report_from(cfg.load_report, head, 1000, pool->backend(i).report, ReportSource::kHealthCheck);
  };
  test::set_in_flight(*pool, 1, 2);
  test::set_in_flight(*pool, 2, 3);
  report(0, 30);
  report(1, 2);
  report(2, 3);
  CHECK(effective_load_of(*pool, 0, 1050) == 30);
  CHECK(effective_load_of(*pool, 1, 1050) == 2);
  Router router;
  std::vector<uint64_t> scratch(pool->scratch_words(), 0);
  PickRequest rq;
  rq.key = RouteKey{};  // no key: least_in_flight
  rq.worker = 0;
  rq.now_ms = 1050;
  CHECK(router.route(*pool, rq, scratch).backend == 1);  // not a: its report says 30
  // Stale reports: the local counts decide again, and a holds none.
  rq.now_ms = 1101;
  CHECK(router.route(*pool, rq, scratch).backend == 0);
  // With load_report off the same pool state picks by local counts.
  cfg.load_report.enabled = false;
  test::PoolMaker maker2;
  auto plain = maker2.build(cfg);
  REQUIRE(plain != nullptr);
  test::set_in_flight(*plain, 1, 2);
  test::set_in_flight(*plain, 2, 3);
  rq.now_ms = 1050;
  CHECK(router.route(*plain, rq, scratch).backend == 0);
}

}  // namespace
}  // namespace rondel::proxy
