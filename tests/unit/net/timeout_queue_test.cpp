// TimeoutQueue on a real libuv loop: what fires, in which order, and what a reset or a clear
// prevents. Durations are short (tens of ms) and every loop run is bounded by its own timer.
#include <doctest/doctest.h>
#include <uv.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rondel/net/timeout_queue.h"

namespace {

using rondel::net::Timeout;
using rondel::net::TimeoutQueue;

struct Item : Timeout {
  explicit Item(std::string n) : name(std::move(n)) {}
  std::string name;
};

std::vector<std::string>* g_fired = nullptr;
TimeoutQueue* g_queue = nullptr;
uint64_t g_rearm_ms = 0;  // when non-zero, the first expiry sets its item again once

void record(Timeout* t) noexcept {
  auto* it = static_cast<Item*>(t);
  g_fired->push_back(it->name);
  if (g_rearm_ms != 0) {
    uint64_t ms = g_rearm_ms;
    g_rearm_ms = 0;
    it->name += "+";
    g_queue->set(*it, ms);
  }
}

// Runs the loop until nothing is pending in `items` or `limit_ms` passed.
void run_until_quiet(uv_loop_t* loop, std::vector<Item*> items, uint64_t limit_ms) {
  uv_update_time(loop);
  uint64_t end = uv_now(loop) + limit_ms;
  uv_timer_t guard;
  uv_timer_init(loop, &guard);
  uv_timer_start(&guard, [](uv_timer_t*) {}, limit_ms, 0);
  for (;;) {
    bool any = false;
    for (Item* i : items) any = any || i->pending();
    if (!any || uv_now(loop) >= end) break;
    uv_run(loop, UV_RUN_ONCE);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

struct Fixture {
  Fixture() : q(init(), &record) {
    g_fired = &fired;
    g_queue = &q;
    g_rearm_ms = 0;
  }
  ~Fixture() {
    q.close();
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
  }
  uv_loop_t* init() {
    uv_loop_init(&loop);
    return &loop;
  }
  uv_loop_t loop;
  std::vector<std::string> fired;
  TimeoutQueue q;
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "timeouts of several durations fire in due order, on one timer") {
  Item a("a40"), b("b10"), c("c25"), d("d10");
  q.set(a, 40);
  q.set(b, 10);
  q.set(c, 25);
  q.set(d, 10);
  CHECK(q.lanes() == 3);
  run_until_quiet(&loop, {&a, &b, &c, &d}, 2000);
  CHECK(fired == std::vector<std::string>{"b10", "d10", "c25", "a40"});
}

TEST_CASE_FIXTURE(Fixture, "timeouts all overdue when the timer wakes late still fire in due order") {
  // A busy machine wakes the loop late: every lane is due at once. Lane order (40 first) must
  // not decide the firing order.
  Item a("a40"), b("b10"), c("c25"), d("d10");
  q.set(a, 40);
  q.set(b, 10);
  q.set(c, 25);
  q.set(d, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  run_until_quiet(&loop, {&a, &b, &c, &d}, 2000);
  CHECK(fired == std::vector<std::string>{"b10", "d10", "c25", "a40"});
}

TEST_CASE_FIXTURE(Fixture, "a moved timeout fires at its new time, a cleared one never") {
  Item a("a"), b("b"), c("c");
  q.set(a, 15);
  q.set(b, 15);
  q.set(c, 30);
  q.set(a, 60);  // moved later: now behind c
  q.clear(b);
  CHECK_FALSE(b.pending());
  run_until_quiet(&loop, {&a, &b, &c}, 2000);
  CHECK(fired == std::vector<std::string>{"c", "a"});
}

TEST_CASE_FIXTURE(Fixture, "a timeout set earlier than the armed one re-arms the timer") {
  // The slow one is far off (5 s) so that a stalled test process (seconds on a loaded machine)
  // cannot make both due at once; the bound below still tells re-armed from not re-armed.
  Item slow("slow"), fast("fast");
  q.set(slow, 5000);
  uv_run(&loop, UV_RUN_NOWAIT);
  q.set(fast, 10);
  uv_update_time(&loop);
  uint64_t t0 = uv_now(&loop);
  run_until_quiet(&loop, {&fast}, 2000);
  CHECK(fired == std::vector<std::string>{"fast"});
  CHECK(uv_now(&loop) - t0 < 4000);  // did not wait for the 5000 ms one
  CHECK(slow.pending());
  q.clear(slow);
}

TEST_CASE_FIXTURE(Fixture, "the expiry callback may set the timeout again") {
  Item a("a");
  g_rearm_ms = 10;
  q.set(a, 10);
  run_until_quiet(&loop, {&a}, 2000);
  CHECK(fired == std::vector<std::string>{"a", "a+"});
}

TEST_CASE_FIXTURE(Fixture, "a destroyed owner leaves its lane") {
  Item keep("keep");
  {
    Item gone("gone");
    q.set(gone, 10);
    q.set(keep, 20);
  }
  run_until_quiet(&loop, {&keep}, 2000);
  CHECK(fired == std::vector<std::string>{"keep"});
}

TEST_CASE_FIXTURE(Fixture, "after close nothing is queued and the loop can close") {
  Item a("a");
  q.set(a, 10);
  q.close();
  CHECK(q.set(a, 10));
  CHECK_FALSE(a.pending());
}
