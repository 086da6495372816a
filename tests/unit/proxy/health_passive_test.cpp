// Health by source, without sockets: the flags each owner sets, passive ejection and its restore,
// the max_ejected_percent limit (also under racing workers), the pool's unusable count, empty
// pools (a DNS name that resolved to nothing) and slow-start weights read while picks run.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/passive_health.h"
#include "rondel/proxy/pool.h"
#include "rondel/proxy/router.h"

namespace rondel::proxy {
namespace {

config::PoolConfig pool_config(size_t n, uint32_t threshold, uint32_t percent) {
  config::PoolConfig pc;
  pc.name = "p";
  pc.passive.consecutive_failures = threshold;
  pc.passive.ejection_ms = 1000;
  pc.passive.max_ejected_percent = percent;
  for (size_t i = 0; i < n; ++i) {
    config::BackendConfig b;
    b.address = config::Address{"127.0.0.1", static_cast<uint16_t>(9000 + i), false};
    b.id = "b" + std::to_string(i);
    pc.backends.push_back(b);
  }
  return pc;
}

// One pool as a snapshot holds it, with the registry and pool state a daemon keeps across builds.
struct Fixture {
  explicit Fixture(config::PoolConfig cfg) : state(std::make_shared<PoolState>()) {
    pool = build(std::move(cfg));
  }
  std::unique_ptr<Pool> build(config::PoolConfig cfg) {
    auto p = Pool::build(cfg, registry, state);
    REQUIRE(p);
    return std::move(*p);
  }
  uint32_t unusable() const { return state->unusable.load(); }
  BackendState& b(size_t i) { return pool->backend(static_cast<core::BackendIndex>(i)); }

  BackendRegistry registry;
  std::shared_ptr<PoolState> state;
  std::unique_ptr<Pool> pool;
  LogSink sink;  // not opened: lines are dropped
  Logger log{sink};
};

PassiveHealth::Verdict fail(Fixture& f, size_t i, uint64_t now = 100) {
  return PassiveHealth::note_failure(*f.pool, static_cast<core::BackendIndex>(i), now, f.log);
}

TEST_CASE("each source has its own flag; usable when none is set; the views' health derives") {
  Fixture f(pool_config(3, 2, 100));
  BackendState& b = f.b(0);
  CHECK(b.usable());
  CHECK(b.health() == Health::kUp);

  CHECK(b.set_flag(HealthFlag::kFailedActiveCheck));
  CHECK_FALSE(b.set_flag(HealthFlag::kFailedActiveCheck));  // already set
  CHECK_FALSE(b.usable());
  CHECK(b.health() == Health::kDown);
  CHECK(f.unusable() == 1);

  // Passive ejection while down by checks: both flags, still counted once.
  CHECK(fail(f, 0) == PassiveHealth::Verdict::kCounted);
  CHECK(fail(f, 0) == PassiveHealth::Verdict::kEjected);
  CHECK(b.has_flag(HealthFlag::kPassiveEjected));
  CHECK(b.health() == Health::kDown);
  CHECK(f.unusable() == 1);

  // Checks pass again: the ejection is not lost with it (one enum used to be overwritten).
  CHECK(b.clear_flag(HealthFlag::kFailedActiveCheck));
  CHECK_FALSE(b.usable());
  CHECK(b.health() == Health::kEjected);
  CHECK(f.unusable() == 1);

  CHECK(PassiveHealth::restore_due(*f.pool, 100 + 1000, f.log) == 1);
  CHECK(b.usable());
  CHECK(b.health() == Health::kUp);
  CHECK(f.unusable() == 0);
  CHECK_FALSE(b.clear_flag(HealthFlag::kPassiveEjected));
  CHECK(f.unusable() == 0);
}

TEST_CASE("passive ejection at the threshold, a success resets the run, off when 0") {
  Fixture f(pool_config(4, 3, 100));
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kCounted);
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kCounted);
  PassiveHealth::note_success(f.b(1));
  CHECK(f.b(1).consecutive_failures() == 0);
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kCounted);
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kCounted);
  CHECK(f.b(1).usable());
  CHECK(fail(f, 1, 500) == PassiveHealth::Verdict::kEjected);
  CHECK_FALSE(f.b(1).usable());
  CHECK(f.b(1).health() == Health::kEjected);
  CHECK(f.b(1).ejected_until_ms() == 500 + 1000);
  CHECK(f.unusable() == 1);
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kAlreadyEjected);
  CHECK(f.unusable() == 1);

  Fixture off(pool_config(4, 0, 100));
  for (int i = 0; i < 50; ++i) CHECK(fail(off, 0) == PassiveHealth::Verdict::kCounted);
  CHECK(off.b(0).usable());
  CHECK(off.unusable() == 0);
}

TEST_CASE("restore after the cool-down: on probation, with slow start; one failure ejects again") {
  Fixture f(pool_config(4, 3, 100));
  for (int i = 0; i < 3; ++i) fail(f, 2, 1000);
  REQUIRE_FALSE(f.b(2).usable());
  CHECK(PassiveHealth::restore_due(*f.pool, 1999, f.log) == 0);
  CHECK_FALSE(f.b(2).usable());
  CHECK(PassiveHealth::restore_due(*f.pool, 2000, f.log) == 1);
  CHECK(f.b(2).usable());
  CHECK(f.unusable() == 0);
  CHECK(f.b(2).ramp_start_ms == 2000);
  CHECK(f.b(2).consecutive_failures() == 2);
  CHECK(fail(f, 2, 2100) == PassiveHealth::Verdict::kEjected);
  CHECK(f.b(2).ejected_until_ms() == 3100);
  // On probation, one success clears the record.
  CHECK(PassiveHealth::restore_due(*f.pool, 3100, f.log) == 1);
  PassiveHealth::note_success(f.b(2));
  CHECK(fail(f, 2) == PassiveHealth::Verdict::kCounted);
  CHECK(f.b(2).usable());
}

TEST_CASE("never more than max_ejected_percent unusable, whatever the source") {
  Fixture f(pool_config(4, 1, 50));  // limit 2
  CHECK(PassiveHealth::limit(*f.pool) == 2);
  REQUIRE(f.b(0).set_flag(HealthFlag::kFailedActiveCheck));  // down by checks: counts
  CHECK(fail(f, 1) == PassiveHealth::Verdict::kEjected);
  CHECK(fail(f, 2) == PassiveHealth::Verdict::kLimitReached);
  CHECK(fail(f, 3) == PassiveHealth::Verdict::kLimitReached);
  CHECK(f.b(2).usable());
  CHECK(f.b(3).usable());
  CHECK(f.unusable() == 2);
  // A backend already down by checks can still be ejected: it adds nothing to the count.
  CHECK(fail(f, 0) == PassiveHealth::Verdict::kEjected);
  CHECK(f.unusable() == 2);
  // One restored: room for one more.
  CHECK(PassiveHealth::restore_due(*f.pool, 100 + 1000, f.log) == 2);
  CHECK(f.unusable() == 1);  // b0 is still down by checks
  CHECK(fail(f, 3) == PassiveHealth::Verdict::kEjected);
  CHECK(f.unusable() == 2);

  Fixture three(pool_config(3, 1, 50));  // rounded down: at most one
  CHECK(fail(three, 0) == PassiveHealth::Verdict::kEjected);
  CHECK(fail(three, 1) == PassiveHealth::Verdict::kLimitReached);
  Fixture none(pool_config(3, 1, 0));
  CHECK(fail(none, 0) == PassiveHealth::Verdict::kLimitReached);
  CHECK(none.b(0).usable());
}

TEST_CASE("racing workers cannot pass the limit together, and the count stays exact") {
  constexpr size_t kBackends = 16;
  constexpr int kThreads = 4;
  for (int round = 0; round < 20; ++round) {
    Fixture f(pool_config(kBackends, 1, 50));  // limit 8
    std::atomic<int> go{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&f, &go, t] {
        LogSink sink;
        Logger log(sink);
        go.fetch_add(1);
        while (go.load() < kThreads) {
        }
        for (size_t i = 0; i < kBackends; ++i) {
          size_t b = (i + static_cast<size_t>(t) * 5) % kBackends;
          PassiveHealth::note_failure(*f.pool, static_cast<core::BackendIndex>(b), 100, log);
        }
      });
    }
    for (auto& t : threads) t.join();
    size_t ejected = 0;
    for (size_t i = 0; i < kBackends; ++i) ejected += f.b(i).usable() ? 0 : 1;
    CHECK(ejected == 8);
    CHECK(f.unusable() == 8);
    CHECK(PassiveHealth::restore_due(*f.pool, 100 + 1000, f.log) == 8);
    CHECK(f.unusable() == 0);
  }
}

TEST_CASE("the unusable count follows the flags across builds and is never overwritten") {
  Fixture f(pool_config(3, 1, 100));
  REQUIRE(fail(f, 0) == PassiveHealth::Verdict::kEjected);
  REQUIRE(f.b(1).set_flag(HealthFlag::kFailedActiveCheck));
  CHECK(f.unusable() == 2);
  // A rebuild that keeps every backend keeps their flags and the count (build no longer
  // recounts), and the tick's weight refresh does not touch it.
  auto same = f.build(pool_config(3, 1, 100));
  CHECK(f.unusable() == 2);
  CHECK_FALSE(same->backend(0).usable());
  same->refresh_weights(50);
  CHECK(f.unusable() == 2);
  // A rebuild without b0 and b1: their states go with the last pool that holds them.
  auto cfg = pool_config(3, 1, 100);
  cfg.backends.erase(cfg.backends.begin(), cfg.backends.begin() + 2);
  auto smaller = f.build(cfg);
  CHECK(f.unusable() == 2);  // the old pools still hold them
  f.pool.reset();
  same.reset();
  CHECK(f.unusable() == 0);
  CHECK(smaller->size() == 1);
}

TEST_CASE("a pool whose names resolved to nothing has no backend and every pick fails") {
  Fixture f(pool_config(0, 1, 100));
  const Pool& p = *f.pool;
  CHECK(p.empty());
  CHECK(p.size() == 0);
  std::vector<uint64_t> scratch(p.scratch_words());
  Router router;
  PickRequest rq;
  rq.key = RouteKey::of(true, "/k", 42);
  const RouteDecision d = router.route(p, rq, scratch);
  CHECK(d.backend == core::kNoBackend);
  CHECK(d.owner == core::kNoBackend);
  CHECK(p.state().no_backend.load() == 1);
  const RouteDecision e = router.explain(p, 42);
  CHECK(e.backend == core::kNoBackend);
  CHECK(e.owner == core::kNoBackend);
  CHECK(p.least_loaded({}) == core::kNoBackend);
  CHECK(p.eligible_count() == 0);
  CHECK_FALSE(f.pool->refresh_weights(10));
}

TEST_CASE("slow start: effective weights ramp and return while other threads pick") {
  auto cfg = pool_config(4, 0, 100);
  cfg.slow_start_ms = 1000;
  Fixture f(cfg);
  Pool& p = *f.pool;
  const uint32_t full = Pool::kWeightScale;
  f.b(3).ramp_start_ms = 1;
  CHECK(p.refresh_weights(1));
  CHECK(p.effective_weight(3) == full * Pool::kSlowStartFloorPermille / 1000);
  CHECK(p.effective_weight(0) == full);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> picked{0};
  std::vector<std::thread> pickers;
  for (int t = 0; t < 2; ++t) {
    pickers.emplace_back([&p, &stop, &picked, t] {
      std::vector<uint64_t> scratch(p.scratch_words());
      Router router;  // one per picking thread, as one per worker
      PickRequest rq;
      uint64_t h = static_cast<uint64_t>(t) << 40;
      while (!stop.load(std::memory_order_relaxed)) {
        rq.key = RouteKey::of(true, "/k", ++h * 0x9e3779b97f4a7c15ull);
        const RouteDecision d = router.route(p, rq, scratch);
        if (d.backend != core::kNoBackend) picked.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // Waits (bounded) until the pickers have made progress past `seen`.
  auto wait_picks = [&picked](uint64_t seen) {
    for (int i = 0; i < 1000000 && picked.load() <= seen; ++i) std::this_thread::yield();
    return picked.load() > seen;
  };
  CHECK(wait_picks(0));
  // The tick ramps b3 from 10% to 100% while the pickers read the weights.
  bool overlapped = true;
  for (uint64_t now = 2; now <= 1001; now += 1) {
    p.refresh_weights(now);
    if (now % 100 == 0) overlapped &= wait_picks(picked.load());
  }
  stop.store(true);
  for (auto& t : pickers) t.join();
  CHECK(overlapped);
  CHECK(f.b(3).ramp_start_ms == 0);
  CHECK(p.effective_weight(3) == full);
  CHECK_FALSE(p.refresh_weights(2000));
}

}  // namespace
}  // namespace rondel::proxy
