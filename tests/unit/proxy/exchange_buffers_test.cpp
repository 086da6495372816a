// Unit tests of the exchange's owned resources, no sockets: the in-flight slot (the only code
// that lowers in-flight counts) and the worker's pool of exchange buffers (bounded capacity).
#include <doctest/doctest.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "rondel/proxy/inflight_slot.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/http1_session.h"
#include "rondel/proxy/worker.h"

using rondel::proxy::InFlightSlot;

TEST_CASE("InFlightSlot raises both counts once and lowers them exactly once") {
  std::atomic<uint32_t> backend{0};
  std::atomic<uint64_t> pool{0};
  {
    InFlightSlot a = InFlightSlot::take(backend, pool);
    CHECK(a.held());
    CHECK(backend.load() == 1);
    CHECK(pool.load() == 1);
    InFlightSlot b = std::move(a);  // moving hands the counts over; nothing is lowered
    CHECK_FALSE(a.held());
    CHECK(b.held());
    CHECK(backend.load() == 1);
    b.release();
    CHECK(backend.load() == 0);
    CHECK(pool.load() == 0);
    b.release();  // a released slot does nothing
    a.release();
    CHECK(backend.load() == 0);
    CHECK(pool.load() == 0);
    b = InFlightSlot::take(backend, pool);
    CHECK(backend.load() == 1);
  }  // the destructor releases a held slot
  CHECK(backend.load() == 0);
  CHECK(pool.load() == 0);
}

TEST_CASE("InFlightSlot with a cost: the CAS admits below the limit, release gives all back") {
  std::atomic<uint32_t> backend{0}, backend_cost{0};
  std::atomic<uint64_t> pool{0}, pool_cost{0};
  {
    InFlightSlot a = InFlightSlot::take_cost_below(backend, pool, backend_cost, pool_cost, 200, 1);
    CHECK(a.held());
    CHECK(a.cost() == 200);
    CHECK(backend.load() == 1);
    CHECK(backend_cost.load() == 200);
    CHECK(pool_cost.load() == 200);
    // 200 KiB in flight, limit 124: the next one does not get in, and nothing moved.
    InFlightSlot b = InFlightSlot::take_cost_below(backend, pool, backend_cost, pool_cost, 1, 124);
    CHECK_FALSE(b.held());
    CHECK(backend.load() == 1);
    CHECK(backend_cost.load() == 200);
    // Forced (an all-full pick): it gets in whatever the cost.
    b = InFlightSlot::take_cost(backend, pool, backend_cost, pool_cost, 3);
    CHECK(backend.load() == 2);
    CHECK(backend_cost.load() == 203);
    InFlightSlot c = std::move(b);
    CHECK(c.cost() == 3);
    CHECK(b.cost() == 0);
    a.release();
    CHECK(backend.load() == 1);
    CHECK(backend_cost.load() == 3);
    CHECK(pool_cost.load() == 3);
  }
  CHECK(backend.load() == 0);
  CHECK(pool.load() == 0);
  CHECK(backend_cost.load() == 0);
  CHECK(pool_cost.load() == 0);
  // A slot without a cost leaves the cost counters alone.
  InFlightSlot d = InFlightSlot::take(backend, pool);
  CHECK(d.cost() == 0);
  d.release();
  CHECK(backend_cost.load() == 0);
}

TEST_CASE("InFlightSlot: resetting an exchange by value releases its slot") {
  std::atomic<uint32_t> backend{0};
  std::atomic<uint64_t> pool{0};
  rondel::proxy::ExchangeState ex;
  ex.slot = InFlightSlot::take(backend, pool);
  CHECK(backend.load() == 1);
  ex = rondel::proxy::ExchangeState{};
  CHECK_FALSE(ex.slot.held());
  CHECK(backend.load() == 0);
  CHECK(pool.load() == 0);
}

TEST_CASE("pooled codec buffers do not keep the capacity of one huge rewritten head") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  {
    rondel::proxy::LogSink sink;
    rondel::proxy::Logger log(sink);
    rondel::proxy::WorkerStats stats;
    rondel::proxy::Worker worker(&loop, log, sink, stats);
    rondel::http::Limits limits;
    rondel::proxy::Http1Buffers* cb = rondel::proxy::take_http1_buffers(worker, limits);
    REQUIRE(cb != nullptr);
    cb->resp_head_out.assign(1 << 20, 'x');  // a 1 MiB response head rewritten once
    rondel::proxy::give_http1_buffers(worker, cb);
    rondel::proxy::Http1Buffers* again = rondel::proxy::take_http1_buffers(worker, limits);
    REQUIRE(again == cb);  // the same pooled object comes back
    CHECK(again->resp_head_out.capacity() <= rondel::proxy::Worker::kMaxPooledStringCapacity);
    again->resp_head_out.assign(200, 'y');  // an ordinary one stays warm
    size_t small_capacity = again->resp_head_out.capacity();
    rondel::proxy::give_http1_buffers(worker, again);
    again = rondel::proxy::take_http1_buffers(worker, limits);
    CHECK(again->resp_head_out.capacity() == small_capacity);
    rondel::proxy::give_http1_buffers(worker, again);
    // Exchanges are pooled too: the one given back is the next one taken.
    rondel::proxy::Exchange* ex = worker.take_exchange();
    REQUIRE(ex != nullptr);
    worker.give_exchange(ex);
    CHECK(worker.take_exchange() == ex);
    worker.give_exchange(ex);
    worker.close_all();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("BufferPool lends each class at its size and keeps the classes apart") {
  using rondel::proxy::BufferPool;
  BufferPool pool;
  char* small = pool.get();
  char* large = pool.get(BufferPool::Class::kLarge);
  CHECK(pool.outstanding() == 2);
  // The whole of each is writable (ASan checks the bounds).
  std::fill(small, small + BufferPool::kSize, 's');
  std::fill(large, large + BufferPool::kLargeSize, 'l');
  pool.put(large, BufferPool::Class::kLarge);
  pool.put(small);
  CHECK(pool.outstanding() == 0);
  // A returned buffer is lent again only in its own class.
  CHECK(pool.get(BufferPool::Class::kLarge) == large);
  CHECK(pool.get() == small);
  pool.put(small);
  pool.put(large, BufferPool::Class::kLarge);
}
