// Http2Stream pooling: steady-state HTTP/2 streams take their stream object and buffers from the
// worker's pool, so a connection serving request after request makes no C++ allocation per
// request, and nghttp2's own allocations come from the worker's H2Mem free lists, not malloc.
#include <doctest/doctest.h>
#include <uv.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "new_count.h"
#include "rondel/config/config.h"
#include "rondel/proxy/client_connection.h"
#include "rondel/proxy/http2_session.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/worker.h"

namespace {

std::atomic<uint64_t> g_news{0};

// A transport that takes every write at once and delivers the test's bytes as reads.
class LoopbackTransport final : public rondel::net::Transport {
 public:
  rondel::net::TransportEvents* events = nullptr;
  bool reading = false, closed = false;
  size_t written = 0;
  size_t writes = 0;  // write calls
  int start_reading() noexcept override { return reading = true, 0; }
  void stop_reading() noexcept override { reading = false; }
  int write(rondel::net::OutQueue& q) noexcept override {
    written += q.bytes;
    ++writes;
    q.sent_now = q.bytes;
    q.clear();
    return 0;
  }
  int shutdown() noexcept override { return 0; }
  void close() noexcept override { closed = true; }
  bool closing() const noexcept override { return closed; }
  const rondel::net::PeerAddr& peer() const noexcept override { return peer_; }
  bool local_address(sockaddr_storage*) const noexcept override { return false; }
  void deliver(const std::string& bytes) {
    uv_buf_t b;
    events->on_transport_alloc(&b);
    REQUIRE(b.len >= bytes.size());
    std::memcpy(b.base, bytes.data(), bytes.size());
    events->on_transport_read(static_cast<ssize_t>(bytes.size()));
  }

 private:
  rondel::net::PeerAddr peer_;
};

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  f += static_cast<char>(payload.size() >> 16);
  f += static_cast<char>(payload.size() >> 8);
  f += static_cast<char>(payload.size());
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>(stream >> shift);
  return f + payload;
}

}  // namespace

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (the worker takes its exchanges with new (std::nothrow)): counted
// alike, and every form frees with free() (under ASan an unreplaced form is the sanitizer's own,
// whose memory free() must not release).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

uint64_t rondel::test::operator_new_calls() noexcept {
  return g_news.load(std::memory_order_relaxed);
}

namespace {

// A loop, closed (and checked closed) after everything on it.
struct Loop {
  uv_loop_t loop;
  Loop() { REQUIRE(uv_loop_init(&loop) == 0); }
  ~Loop() { CHECK(uv_loop_close(&loop) == 0); }
};

// One HTTP/2 session with no pool (every stream is answered 503 by rondel: head parsed,
// response submitted) over a LoopbackTransport, on its own worker; its end closes the worker
// and checks that the connection is no longer counted.
struct NoPoolSession : Loop {
  rondel::proxy::LogSink sink;
  rondel::proxy::Logger log{sink};
  rondel::proxy::WorkerStats stats;
  rondel::proxy::Worker worker{&loop, log, sink, stats};
  rondel::config::ListenerConfig l;
  std::shared_ptr<rondel::proxy::ListenerState> state =
      std::make_shared<rondel::proxy::ListenerState>("t");
  LoopbackTransport t;

  NoPoolSession() {
    l.name = "t";
    t.events = rondel::proxy::ClientConnection::attach(
        worker, t, {&l, nullptr, state, nullptr}, rondel::proxy::ClientProtocol::kHttp2);
    REQUIRE(t.events != nullptr);
  }
  ~NoPoolSession() {
    worker.close_all();
    if (t.closed) t.events->on_transport_closed();
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(stats.client_connections_open.load() == 0);
  }
};

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace

TEST_CASE("steady-state HTTP/2 streams reuse pooled stream objects and buffers") {
  NoPoolSession h;
  LoopbackTransport& t = h.t;
  t.deliver(kPreface + frame(4, 0, 0, "") + frame(4, 1, 0, ""));
  // :method GET, :scheme http, :path / (indexed), :authority a.test (literal, not indexed),
  // user-agent (literal, not indexed).
  static constexpr char kBlock[] = "\x82\x86\x84\x01\x06" "a.test" "\x0f\x2b\x04" "test";
  const std::string block(kBlock, sizeof kBlock - 1);
  std::vector<std::string> frames;  // made before counting: the test's own allocations
  for (uint32_t id = 1; id < 700; id += 2) frames.push_back(frame(1, 0x5, id, block));
  size_t next = 0;
  auto one = [&] {
    size_t before = t.written;
    t.deliver(frames[next++]);
    uv_run(&h.loop, UV_RUN_NOWAIT);  // the worker's flush pass writes what the pass queued
    CHECK(t.written > before);  // the 503 went out
  };
  // Warm: pools, nghttp2's tables, the worker's lists, and the closed streams nghttp2 keeps for
  // its priority tree (one more per request until it holds max_concurrent_streams of them).
  for (int i = 0; i < 150; ++i) one();
  uint64_t news = g_news.load();
  uint64_t system = rondel::proxy::Http2WorkerState::of(h.worker)->mem.from_system();
  REQUIRE(rondel::proxy::Http2WorkerState::of(h.worker)->mem.outstanding() > 0);  // the session's blocks are the H2Mem's
  for (int i = 0; i < 200; ++i) one();
  CHECK(g_news.load() - news == 0);
  CHECK(rondel::proxy::Http2WorkerState::of(h.worker)->mem.from_system() - system == 0);  // nghttp2: every block reused
  CHECK(h.stats.h2_streams.load() == 350);
}

TEST_CASE("the responses of streams answered in one loop pass leave in one write") {
  // Ten requests arrive in ten reads of one loop pass (as ten backends' answers would): each is
  // answered at once (no pool: 503), and the worker's flush pass after the I/O callbacks writes
  // the ten responses together. Before the flush pass, each read wrote its own response.
  NoPoolSession h;
  LoopbackTransport& t = h.t;
  t.deliver(kPreface + frame(4, 0, 0, ""));
  uv_run(&h.loop, UV_RUN_NOWAIT);
  REQUIRE(t.writes == 1);  // the server's SETTINGS and the ACK
  static constexpr char kBlock[] = "\x82\x86\x84\x01\x06" "a.test";
  const std::string block(kBlock, sizeof kBlock - 1);
  size_t before = t.written;
  for (uint32_t id = 1; id < 20; id += 2) t.deliver(frame(1, 0x5, id, block));
  CHECK(t.writes == 1);  // nothing written inside the reads
  uv_run(&h.loop, UV_RUN_NOWAIT);
  CHECK(t.writes == 2);  // the ten responses in one write
  CHECK(t.written > before);
  CHECK(h.stats.h2_streams.load() == 10);
}
