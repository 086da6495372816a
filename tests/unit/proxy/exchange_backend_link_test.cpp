// The Exchange against a fake backend connection (backend_link.h): no socket, the test plays
// the backend by calling the connection's events itself, so each step of an attempt (connect,
// head written, response bytes, EOF, timeout) happens exactly when the test says. Covers what
// the exchange writes, a response streamed and the connection pooled, a connect failure, a POST
// never sent twice, the stale keep-alive retry and a backend timeout.
#include <doctest/doctest.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "exchange_fakes.h"
#include "rondel/proxy/backend_link.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/worker.h"
#include "router_fixture.h"

using namespace rondel::proxy;
using namespace rondel::proxy::test;

namespace {

// A backend connection the test drives: it records what the exchange writes and how it leaves
// the connection, and delivers what the test says the backend sent.
struct FakeLink final : BackendLink {
  BackendEvents* owner = nullptr;
  BackendState* backend = nullptr;
  bool was_reused = false;
  std::string sent;               // every byte the exchange wrote
  std::string in;                 // delivered by the backend
  size_t pos = 0;                 // in[pos..] not consumed yet
  bool closed = false, pooled = false, ended = false, no_more = false;
  uint64_t timer_ms = 0;

  void release_to_idle(uint64_t) noexcept override { pooled = true; }
  void close() noexcept override { closed = true; }
  int write(rondel::net::OutQueue& q, uv_write_cb) noexcept override {
    for (int i = 0; i < q.n; ++i) sent.append(q.bufs[i].base, q.bufs[i].len);
    return 0;  // all written at once
  }
  int fd() const noexcept override { return -1; }  // nothing to splice
  BackendState* state() const noexcept override { return backend; }
  bool reused() const noexcept override { return was_reused; }
  const char* data() const noexcept override { return in.data() + pos; }
  size_t available() const noexcept override { return in.size() - pos; }
  void consume(size_t n) noexcept override { pos += n; }
  void set_read_class(BufferPool::Class) noexcept override {}
  void shed_buffer() noexcept override {}
  void pause_reading() noexcept override {}
  void hold_reading() noexcept override {}
  void resume_reading() noexcept override {}
  bool eof() const noexcept override { return ended; }
  void expect_no_more() noexcept override { no_more = true; }
  bool clean() const noexcept override { return !ended && pos == in.size(); }
  void arm_timer(uint64_t ms) noexcept override { timer_ms = ms; }

  // The backend's side.
  void connected(int status = 0) { owner->on_backend_connected(this, status); }
  void deliver(std::string_view bytes) {
    in += bytes;
    owner->on_backend_data(this);
  }
  void hang_up() {
    ended = true;
    owner->on_backend_eof(this, UV_EOF);
  }
  void time_out() { owner->on_backend_timeout(this); }
};

// Hands out FakeLinks: the idle one the test set up when the exchange may reuse one, else a
// new one (its connect completes when the test calls connected()).
struct FakeConnector final : BackendConnector {
  std::vector<std::unique_ptr<FakeLink>> made;  // every link handed out, in order
  std::unique_ptr<FakeLink> idle;
  BackendLink* acquire(Worker&, BackendState& st, const BackendTarget&, BackendEvents* owner,
                       bool allow_idle, bool* fresh, int*) noexcept override {
    std::unique_ptr<FakeLink> l = allow_idle && idle ? std::move(idle)
                                                     : std::make_unique<FakeLink>();
    *fresh = !l->was_reused;
    l->owner = owner;
    l->backend = &st;
    made.push_back(std::move(l));
    return made.back().get();
  }
  FakeLink& last() { return *made.back(); }
};

struct LinkFixture {
  uv_loop_t loop;
  LogSink sink;
  Logger log{sink};
  WorkerStats stats;
  test::PoolMaker maker;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Worker> worker;
  FakeConnector connector;
  Exchange* ex = nullptr;

  LinkFixture() {
    REQUIRE(uv_loop_init(&loop) == 0);
    auto cfg = test::pool_config({"a"});
    cfg.retries = 0;  // a failed attempt is answered at once (no other backend to try)
    cfg.connect_timeout_ms = 1500;
    cfg.response_header_timeout_ms = 2500;
    pool = maker.build(cfg);
    REQUIRE(pool);
    worker = std::make_unique<Worker>(&loop, log, sink, stats);
    worker->set_backend_connector(connector);
    ex = worker->take_exchange();
    REQUIRE(ex != nullptr);
  }
  ~LinkFixture() {
    worker->give_exchange(ex);
    worker->close_all();
    uv_run(&loop, UV_RUN_DEFAULT);
    worker.reset();
    CHECK(uv_loop_close(&loop) == 0);
  }
  ExchangeRequest request(const Head& h, BodySource& body, ResponseSink& s, ExchangeOwner& o) {
    ExchangeRequest rq;
    rq.head = &h.head;
    rq.forward.client_ip = "192.0.2.7";
    rq.pool = pool.get();
    rq.body = &body;
    rq.sink = &s;
    rq.owner = &o;
    return rq;
  }
};

}  // namespace

TEST_CASE("Exchange over a fake link: a GET is written, answered, streamed and pooled") {
  LinkFixture f;
  Head get("GET");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(get, EmptyBody::instance(), sink, owner)) ==
          Exchange::Start::kStarted);
  REQUIRE(f.connector.made.size() == 1);
  FakeLink& link = f.connector.last();
  CHECK(link.timer_ms == 1500);  // connect_timeout while connecting
  CHECK(link.sent.empty());      // nothing before the connection is up
  link.connected();
  CHECK(link.sent.rfind("GET /obj/1 HTTP/1.1\r\n", 0) == 0);
  CHECK(link.sent.find("\r\nHost: t\r\n") != std::string::npos);
  CHECK(link.sent.find("\r\nX-Forwarded-For: 192.0.2.7\r\n") != std::string::npos);
  CHECK(link.timer_ms == 2500);  // the request is sent: response_header_timeout
  link.deliver("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
  CHECK(sink.head_status == 200);
  CHECK(owner.done == 0);
  link.deliver("lo");
  REQUIRE(owner.done == 1);
  CHECK(owner.outcome == Outcome::kOk);
  CHECK(sink.body == "hello");
  CHECK(sink.ended);
  CHECK(link.pooled);  // whole response, nothing left over: back to the idle pool
  CHECK_FALSE(link.closed);
}

TEST_CASE("Exchange over a fake link: a connect failure with no retry left answers 502") {
  LinkFixture f;
  Head get("GET");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(get, EmptyBody::instance(), sink, owner)) ==
          Exchange::Start::kStarted);
  f.connector.last().connected(UV_ECONNREFUSED);
  REQUIRE(owner.done == 1);
  CHECK(owner.outcome == Outcome::kBackendError);
  CHECK(sink.local_status == 502);
  CHECK(f.connector.made.size() == 1);  // the one backend was tried: no second pick
  CHECK(f.connector.last().closed);
  CHECK(f.pool->backend(0).counters.connect_errors.load() == 1);
}

TEST_CASE("Exchange over a fake link: a POST the backend took is never sent again") {
  LinkFixture f;
  Head post("POST", 4);
  FakeBody body;
  body.pieces.push_back("data");
  body.ended = true;
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(post, body, sink, owner)) == Exchange::Start::kStarted);
  FakeLink& link = f.connector.last();
  link.connected();
  CHECK(link.sent.substr(link.sent.find("\r\n\r\n") + 4) == "data");
  link.hang_up();  // the backend closes without an answer, after the whole request
  REQUIRE(owner.done == 1);
  CHECK(owner.outcome == Outcome::kBackendError);
  CHECK(sink.local_status == 502);
  CHECK(f.connector.made.size() == 1);
  CHECK(link.closed);
}

TEST_CASE("Exchange over a fake link: a stale reused connection is retried once, fresh") {
  LinkFixture f;
  f.connector.idle = std::make_unique<FakeLink>();
  f.connector.idle->was_reused = true;
  Head get("GET");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(get, EmptyBody::instance(), sink, owner)) ==
          Exchange::Start::kStarted);
  FakeLink& stale = f.connector.last();
  CHECK(stale.sent.rfind("GET /obj/1 ", 0) == 0);  // a reused connection is written at once
  stale.hang_up();  // the backend had closed it as it went idle (RFC 9112 9.3.1)
  REQUIRE(f.connector.made.size() == 2);
  CHECK(stale.closed);
  FakeLink& fresh = f.connector.last();
  CHECK_FALSE(fresh.was_reused);
  fresh.connected();
  fresh.deliver(kOk);
  REQUIRE(owner.done == 1);
  CHECK(owner.outcome == Outcome::kOk);
  CHECK(owner.last.stale_retried);
  CHECK(sink.body == "ok");
  CHECK(f.pool->backend(0).counters.errors.load() == 0);  // not the backend's fault
}

TEST_CASE("Exchange over a fake link: no response head in time answers 504") {
  LinkFixture f;
  Head get("GET");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(get, EmptyBody::instance(), sink, owner)) ==
          Exchange::Start::kStarted);
  FakeLink& link = f.connector.last();
  link.connected();
  link.time_out();
  REQUIRE(owner.done == 1);
  CHECK(owner.outcome == Outcome::kTimeout);
  CHECK(sink.local_status == 504);
  CHECK(link.closed);
  CHECK(f.pool->backend(0).counters.timeouts.load() == 1);
}
