// Unit tests of the Exchange class without a client socket: a fake BodySource, a fake
// ResponseSink and a fake owner drive it, and a scripted backend on 127.0.0.1 (port 0) in the
// same libuv loop answers it. Covers the pull-based body (a stalled source stops the exchange
// consuming), the stale keep-alive retry on a fresh connection, and a POST whose body was taken
// by the backend never being sent again.
#include <doctest/doctest.h>
#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/worker.h"
#include "router_fixture.h"

using namespace rondel::proxy;
namespace http = rondel::http;

namespace {

// A backend scripted by the test: accepts connections, collects what each one received and calls
// `on_data` after every read, which may reply or close.
struct ScriptedBackend {
  struct Peer {
    uv_tcp_t tcp{};
    ScriptedBackend* owner = nullptr;
    std::string in;
    size_t index = 0;
    bool closed = false;
  };
  uv_tcp_t server{};
  std::vector<std::unique_ptr<Peer>> peers;
  std::function<void(Peer&)> on_data;
  uint16_t port = 0;
  char rbuf[65536];

  void listen(uv_loop_t* loop) {
    REQUIRE(uv_tcp_init(loop, &server) == 0);
    server.data = this;
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", 0, &addr);
    REQUIRE(uv_tcp_bind(&server, reinterpret_cast<const sockaddr*>(&addr), 0) == 0);
    REQUIRE(uv_listen(reinterpret_cast<uv_stream_t*>(&server), 16, &on_connection) == 0);
    sockaddr_storage bound{};
    int len = sizeof bound;
    REQUIRE(uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&bound), &len) == 0);
    port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  static void on_connection(uv_stream_t* s, int status) {
    auto* b = static_cast<ScriptedBackend*>(s->data);
    if (status != 0) return;
    auto p = std::make_unique<Peer>();
    p->owner = b;
    p->index = b->peers.size();
    uv_tcp_init(s->loop, &p->tcp);
    p->tcp.data = p.get();
    if (uv_accept(s, reinterpret_cast<uv_stream_t*>(&p->tcp)) != 0) return;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&p->tcp), &on_alloc, &on_read);
    b->peers.push_back(std::move(p));
  }
  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* p = static_cast<Peer*>(h->data);
    *buf = uv_buf_init(p->owner->rbuf, sizeof p->owner->rbuf);
  }
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* p = static_cast<Peer*>(s->data);
    if (n < 0) {
      close(*p);
      return;
    }
    p->in.append(buf->base, static_cast<size_t>(n));
    if (p->owner->on_data) p->owner->on_data(*p);
  }
  static void reply(Peer& p, std::string_view text) {
    uv_buf_t b = uv_buf_init(const_cast<char*>(text.data()), static_cast<unsigned>(text.size()));
    CHECK(uv_try_write(reinterpret_cast<uv_stream_t*>(&p.tcp), &b, 1) ==
          static_cast<int>(text.size()));
  }
  static void close(Peer& p) {
    if (p.closed) return;
    p.closed = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&p.tcp), nullptr);
  }
  void close_all() {
    for (auto& p : peers) close(*p);
    uv_close(reinterpret_cast<uv_handle_t*>(&server), nullptr);
  }
};

// Requests whose head is complete in `in`, and the body bytes after the first head.
size_t heads_in(const std::string& in) {
  size_t n = 0;
  for (size_t at = in.find("\r\n\r\n"); at != std::string::npos; at = in.find("\r\n\r\n", at + 4)) ++n;
  return n;
}

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// A body source the test feeds by hand.
struct FakeBody final : BodySource {
  std::deque<std::string> pieces;
  bool ended = false;
  int want_more_calls = 0;
  int peeks_while_waiting = 0;  // peek() calls after a want_more() that returned false
  bool waiting = false;

  BodyView peek() noexcept override {
    if (waiting) ++peeks_while_waiting;
    if (next < pieces.size()) return {pieces[next], BodyState::kMore};
    return {{}, ended ? BodyState::kEnd : BodyState::kMore};
  }
  void consume(size_t n) noexcept override {
    REQUIRE(next < pieces.size());
    REQUIRE(n == pieces[next].size());  // the exchange queues whole pieces
    ++next;  // consumed bytes stay valid (a deque does not move its elements on push_back)
  }
  bool want_more() noexcept override {
    ++want_more_calls;
    waiting = true;
    return false;
  }
  BodyFailure failure() const noexcept override { return {}; }
  size_t next = 0;  // pieces before it were consumed
};

struct FakeSink final : ResponseSink {
  uint16_t head_status = 0, local_status = 0;
  std::string body;
  bool ended = false;
  Interim sink_interim(const http::ResponseHead&) noexcept override { return Interim::kSkipped; }
  void sink_head(const http::ResponseHead& h) noexcept override { head_status = h.status; }
  bool sink_body(std::string_view b) noexcept override {
    body += b;
    return true;
  }
  void sink_end() noexcept override { ended = true; }
  void sink_local(uint16_t status) noexcept override { local_status = status; }
  bool sink_flush() noexcept override { return true; }
  bool sink_busy() const noexcept override { return false; }
};

struct FakeOwner final : ExchangeOwner {
  int done = 0;
  Outcome outcome = Outcome::kOk;
  ExchangeState last;  // a copy of the final state's plain fields
  void on_exchange_done(Exchange& ex, Outcome o) noexcept override {
    ++done;
    outcome = o;
    last.status = ex.state().status;
    last.attempts = ex.state().attempts;
    last.stale_retried = ex.state().stale_retried;
    last.response = ex.state().response;
  }
  ClientSide client_side() noexcept override { return {}; }
};

// A request head with its header fields (kept alive by the struct).
struct Head {
  explicit Head(std::string_view method, size_t content_length = 0) {
    headers.push_back({"Host", "t"});
    if (content_length > 0) {
      length = std::to_string(content_length);
      headers.push_back({"Content-Length", length});
    }
    head.method = method;
    head.target = "/obj/1";
    head.host = "t";
    head.headers = headers;
    head.idempotent = method == "GET";
    head.framing = content_length > 0 ? http::Framing::kLength : http::Framing::kNone;
    head.content_length = content_length;
  }
  std::string length;
  std::vector<http::Header> headers;
  http::RequestHead head;
};

// One worker, one pool of one backend (the scripted one), a tick timer so the loop never blocks
// for long; everything closed and run down at the end.
struct Fixture {
  uv_loop_t loop;
  uv_timer_t tick;
  LogSink sink;
  Logger log{sink};
  WorkerStats stats;
  ScriptedBackend backend;
  test::PoolMaker maker;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Worker> worker;
  Exchange* ex = nullptr;

  Fixture() {
    REQUIRE(uv_loop_init(&loop) == 0);
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, [](uv_timer_t*) {}, 10, 10);
    backend.listen(&loop);
    auto cfg = test::pool_config({"a"});
    cfg.backends[0].address.port = backend.port;
    cfg.retries = 1;
    pool = maker.build(cfg);
    REQUIRE(pool);
    worker = std::make_unique<Worker>(&loop, log, sink, stats);
    ex = worker->take_exchange();
    REQUIRE(ex != nullptr);
  }
  ~Fixture() {
    worker->give_exchange(ex);
    pool->backend(0).close_idle(worker->id());
    backend.close_all();
    worker->close_all();
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    worker.reset();
    CHECK(uv_loop_close(&loop) == 0);
  }
  // Runs the loop until `done` holds, at most ~5 s (500 ticks).
  bool run_until(const std::function<bool()>& done) {
    for (int i = 0; i < 500 && !done(); ++i) uv_run(&loop, UV_RUN_ONCE);
    return done();
  }
  ExchangeRequest request(const Head& h, BodySource& body, ResponseSink& s, ExchangeOwner& o) {
    ExchangeRequest rq;
    rq.head = &h.head;
    rq.forward.client_ip = "127.0.0.1";
    rq.pool = pool.get();
    rq.body = &body;
    rq.sink = &s;
    rq.owner = &o;
    return rq;
  }
  // Serves one keep-alive GET so that the backend connection goes to the idle pool.
  void warm_connection() {
    Head get("GET");
    FakeSink s;
    FakeOwner o;
    REQUIRE(ex->start(request(get, EmptyBody::instance(), s, o)) == Exchange::Start::kStarted);
    REQUIRE(run_until([&] { return o.done == 1; }));
    REQUIRE(s.head_status == 200);
    REQUIRE(pool->backend(0).idle_count(worker->id()) == 1);
  }
};

}  // namespace

TEST_CASE("Exchange: a body source that stalls stops the exchange consuming until it has more") {
  Fixture f;
  f.backend.on_data = [](ScriptedBackend::Peer& p) {
    size_t head_end = p.in.find("\r\n\r\n");
    if (head_end != std::string::npos && p.in.size() - head_end - 4 == 10) {
      ScriptedBackend::reply(p, kOk);
    }
  };
  Head post("POST", 10);
  FakeBody body;
  body.pieces.push_back("hello");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(post, body, sink, owner)) == Exchange::Start::kStarted);
  auto body_bytes = [&] {
    if (f.backend.peers.empty()) return size_t{0};
    const std::string& in = f.backend.peers[0]->in;
    size_t at = in.find("\r\n\r\n");
    return at == std::string::npos ? 0 : in.size() - at - 4;
  };
  REQUIRE(f.run_until([&] { return body_bytes() == 5; }));
  // The source has nothing more: the exchange asked once and waits, pulling nothing.
  for (int i = 0; i < 5; ++i) uv_run(&f.loop, UV_RUN_ONCE);
  CHECK(body.want_more_calls == 1);
  CHECK(body.peeks_while_waiting == 0);
  CHECK(owner.done == 0);
  CHECK_FALSE(f.ex->state().req_done());
  CHECK(body_bytes() == 5);
  // More arrives: the source calls the exchange back, which pulls the rest and the end.
  body.waiting = false;
  body.pieces.push_back("world");
  body.ended = true;
  f.ex->on_body_available();
  REQUIRE(f.run_until([&] { return owner.done == 1; }));
  CHECK(owner.outcome == Outcome::kOk);
  CHECK(sink.head_status == 200);
  CHECK(sink.body == "ok");
  CHECK(sink.ended);
  const std::string& in = f.backend.peers[0]->in;
  CHECK(in.substr(in.find("\r\n\r\n") + 4) == std::string("helloworld"));
}

TEST_CASE("Exchange: a GET on a stale keep-alive connection is retried once on a fresh one") {
  Fixture f;
  // The first connection answers its first request, then closes on the next one unanswered
  // (the backend's keep-alive timeout raced the request); a new connection answers.
  f.backend.on_data = [](ScriptedBackend::Peer& p) {
    size_t heads = heads_in(p.in);
    if (p.index == 0 && heads == 2) ScriptedBackend::close(p);
    else if (heads >= 1) ScriptedBackend::reply(p, kOk);
  };
  f.warm_connection();
  const uint64_t errors_before = f.pool->backend(0).counters.errors.load();
  Head get("GET");
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(get, EmptyBody::instance(), sink, owner)) ==
          Exchange::Start::kStarted);
  REQUIRE(f.run_until([&] { return owner.done == 1; }));
  CHECK(owner.outcome == Outcome::kOk);
  CHECK(sink.head_status == 200);
  CHECK(sink.local_status == 0);
  CHECK(owner.last.attempts == 2);
  CHECK(owner.last.stale_retried);
  CHECK(f.backend.peers.size() == 2);  // the retry went to the same backend, on a new connection
  CHECK(f.stats.retries.load() == 0);  // not a retry against the budget, not a failure
  CHECK(f.pool->backend(0).counters.errors.load() == errors_before);
}

TEST_CASE("Exchange: a POST whose body the backend took is never sent again") {
  Fixture f;
  // The first connection answers a GET, then takes a whole POST and closes without answering.
  f.backend.on_data = [](ScriptedBackend::Peer& p) {
    size_t heads = heads_in(p.in);
    if (heads == 1 && p.in.find("GET") == 0 && p.in.size() == p.in.find("\r\n\r\n") + 4) {
      ScriptedBackend::reply(p, kOk);
    } else if (heads == 2 && p.in.size() >= p.in.rfind("\r\n\r\n") + 4 + 10) {
      ScriptedBackend::close(p);
    }
  };
  f.warm_connection();
  Head post("POST", 10);
  FakeBody body;
  body.pieces.push_back("0123456789");
  body.ended = true;
  FakeSink sink;
  FakeOwner owner;
  REQUIRE(f.ex->start(f.request(post, body, sink, owner)) == Exchange::Start::kStarted);
  REQUIRE(f.run_until([&] { return owner.done == 1; }));
  // Not stale (a body byte was taken), not re-sent to another backend (the pool allows one
  // retry, but the request is not re-sendable): rondel answers 502 itself.
  CHECK(owner.outcome == Outcome::kBackendError);
  CHECK(owner.last.response == ResponseState::kLocal);
  CHECK(sink.local_status == 502);
  CHECK(owner.last.attempts == 1);
  CHECK_FALSE(owner.last.stale_retried);
  CHECK(f.backend.peers.size() == 1);
  CHECK(body.next == 1);
}
