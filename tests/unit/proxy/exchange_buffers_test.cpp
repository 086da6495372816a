// Unit tests of the exchange's owned resources, no sockets: the in-flight slot (the only code
// that lowers in-flight counts) and the worker's pool of exchange buffers (bounded capacity).
#include <doctest/doctest.h>
#include <uv.h>

#include <atomic>
#include <utility>

#include "rondel/proxy/inflight_slot.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/session.h"
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

TEST_CASE("InFlightSlot: resetting an exchange by value releases its slot") {
  std::atomic<uint32_t> backend{0};
  std::atomic<uint64_t> pool{0};
  rondel::proxy::Exchange ex;
  ex.slot = InFlightSlot::take(backend, pool);
  CHECK(backend.load() == 1);
  ex = rondel::proxy::Exchange{};
  CHECK_FALSE(ex.slot.held());
  CHECK(backend.load() == 0);
  CHECK(pool.load() == 0);
}

TEST_CASE("a pooled exchange does not keep the capacity of one huge rewritten head") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  {
    rondel::proxy::LogSink sink;
    rondel::proxy::Logger log(sink);
    rondel::proxy::WorkerStats stats;
    rondel::proxy::Worker worker(&loop, log, sink, stats);
    rondel::http::Limits limits;
    rondel::proxy::ExchangeBuffers* xb = worker.take_exchange(limits);
    REQUIRE(xb != nullptr);
    xb->req_head_out.assign(1 << 20, 'x');   // a 1 MiB request head rewritten once
    xb->resp_head_out.assign(200, 'y');      // an ordinary response head
    size_t small_capacity = xb->resp_head_out.capacity();
    worker.give_exchange(xb);
    rondel::proxy::ExchangeBuffers* again = worker.take_exchange(limits);
    REQUIRE(again == xb);  // the same pooled object comes back
    CHECK(again->req_head_out.capacity() <= rondel::proxy::Worker::kMaxPooledStringCapacity);
    CHECK(again->resp_head_out.capacity() == small_capacity);  // small ones stay warm
    worker.give_exchange(again);
    worker.close_all();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}
