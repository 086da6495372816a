// SpliceRelay on a real libuv loop and loopback TCP pairs: a body relayed byte-exact with what
// follows it left in the source, through a sink that stalls for a while; a source that ends
// early; a cancel mid-body and one before the loop runs; segments with prefixes (chunked bodies);
// bodies in turn over one connection pair with no descriptor opened per relay. Every run is
// bounded by a guard timer, and every test closes the loop with uv_loop_close() == 0, so a handle
// the relay leaks fails it.
#include <doctest/doctest.h>
#include <uv.h>

#include <chrono>
#include <filesystem>
#include <csignal>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rondel/net/splice_relay.h"
#include "tcp_pair.h"

namespace {

using rondel::net::PipePool;
using rondel::net::SpliceEvents;
using rondel::net::SplicePoller;
using rondel::net::SpliceRelay;
using rondel::net::SpliceStop;
using rondel::test::random_bytes;
using rondel::test::read_n;
using rondel::test::TcpPair;
using rondel::test::wait_fd;
using rondel::test::write_all;

struct Owner final : SpliceEvents {
  SpliceRelay* relay = nullptr;
  uint64_t in = 0, out = 0, progress_calls = 0;
  bool ended = false;
  SpliceStop stop = SpliceStop::kDone;
  int error = 0;
  uint64_t cancel_after = 0;  // > 0: cancel once this many bytes reached the sink
  uv_timer_t* guard = nullptr;
  // Segments the relay is extended by, in turn (bytes, prefix); then "END" as a last prefix.
  std::vector<std::pair<uint64_t, std::string>> segments;
  size_t next_segment = 0;

  rondel::net::SpliceNext on_splice_segment_done() noexcept override {
    if (next_segment < segments.size()) {
      const auto& [bytes, prefix] = segments[next_segment++];
      relay->extend(bytes, prefix);
      return rondel::net::SpliceNext::kContinue;
    }
    if (!segments.empty()) relay->extend(0, "END");
    return rondel::net::SpliceNext::kEnd;
  }

  void on_splice_progress(size_t i, size_t o) noexcept override {
    in += i;
    out += o;
    ++progress_calls;
    if (cancel_after > 0 && out >= cancel_after) {
      relay->cancel();
      relay = nullptr;
      uv_timer_stop(guard);
    }
  }
  void on_splice_end(SpliceStop s, int e) noexcept override {
    ended = true;
    stop = s;
    error = e;
    relay = nullptr;
    uv_timer_stop(guard);
  }
};

// Runs `loop` until the relay is done (or cancelled) or 10 s passed, the relay then cancelled.
void run_relay(uv_loop_t* loop, Owner& owner) {
  uv_timer_t guard;
  uv_timer_init(loop, &guard);
  owner.guard = &guard;
  uv_timer_start(&guard, [](uv_timer_t* t) { uv_stop(t->loop); }, 10000, 0);
  uv_run(loop, UV_RUN_DEFAULT);  // returns once the relay ended: nothing else holds the loop
  uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
  if (owner.relay != nullptr) owner.relay->cancel();  // timed out: let the test fail cleanly
  uv_run(loop, UV_RUN_DEFAULT);
}

// Closes the poller and the loop: a handle left open fails the test.
void close_loop(uv_loop_t* loop, SplicePoller& poller) {
  poller.close();
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(loop) == 0);
}

void run_and_close(uv_loop_t* loop, Owner& owner, SplicePoller& poller) {
  run_relay(loop, owner);
  close_loop(loop, poller);
}

}  // namespace

TEST_CASE("a relay moves a body byte-exact through a stalling sink and leaves what follows") {
  TcpPair backend, client;
  int small = 64 * 1024;  // small buffers, so the sink fills while the reader waits
  ::setsockopt(client.far, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ::setsockopt(client.near, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  Owner owner;
  const std::string body = random_bytes((6u << 20) + 333, 7);
  int err = 0;
  owner.relay = SpliceRelay::start(poller, pool, backend.near, client.near, body.size(), &owner,
                                   &err);
  REQUIRE(owner.relay != nullptr);
  std::thread writer([&] { write_all(backend.far, body + "NEXT"); });
  std::string got;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the stall under test
    got = read_n(client.far, body.size());
  });
  run_and_close(&loop, owner, poller);
  writer.join();
  reader.join();
  CHECK(owner.ended);
  CHECK(owner.stop == SpliceStop::kDone);
  CHECK(owner.out == body.size());
  CHECK(owner.in == body.size());
  CHECK(owner.progress_calls > 1);
  CHECK(got == body);
  REQUIRE(wait_fd(backend.near, POLLIN));
  char next[16];
  CHECK(::read(backend.near, next, sizeof next) == 4);
  CHECK(pool.idle() == 1);  // the empty pipe went back for the next body
  CHECK(pool.outstanding() == 0);
}

TEST_CASE("a relay whose source ends early reports it after the bytes that came") {
  TcpPair backend, client;
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  Owner owner;
  int err = 0;
  owner.relay = SpliceRelay::start(poller, pool, backend.near, client.near, 1 << 20, &owner, &err);
  REQUIRE(owner.relay != nullptr);
  const std::string part = random_bytes(100000, 8);
  write_all(backend.far, part);
  ::shutdown(backend.far, SHUT_WR);
  run_and_close(&loop, owner, poller);
  CHECK(owner.ended);
  CHECK(owner.stop == SpliceStop::kSourceEof);
  CHECK(owner.out == part.size());
  CHECK(read_n(client.far, part.size()) == part);
}

TEST_CASE("a cancelled relay stops, reports nothing more and closes every handle") {
  std::signal(SIGPIPE, SIG_IGN);
  TcpPair backend, client;
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  Owner owner;
  owner.cancel_after = 1 << 20;
  const std::string body = random_bytes(8u << 20, 9);
  int err = 0;
  owner.relay = SpliceRelay::start(poller, pool, backend.near, client.near, body.size(), &owner,
                                   &err);
  REQUIRE(owner.relay != nullptr);
  std::thread writer([&] { write_all(backend.far, body); });
  std::string got;
  std::thread reader([&] { got = read_n(client.far, body.size()); });
  run_and_close(&loop, owner, poller);
  CHECK_FALSE(owner.ended);
  CHECK(owner.out >= (1u << 20));
  CHECK(owner.out < body.size());
  CHECK(pool.outstanding() == 0);
  // The owner closes both connections after a cancel: the peers see the end (the backend a
  // reset, as rondel's close of a connection with unread bytes gives it).
  ::close(backend.near);
  backend.near = -1;
  ::close(client.near);
  client.near = -1;
  writer.join();
  reader.join();
  CHECK(got.size() == owner.out);
  CHECK(got == body.substr(0, got.size()));
}

TEST_CASE("a relay extended by segments writes each prefix before its bytes, in order") {
  TcpPair backend, client;
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  Owner owner;
  const std::string a = random_bytes(300000, 9), b = random_bytes(1 << 20, 10),
                    c = random_bytes(70000, 11);
  owner.segments = {{b.size(), "\r\nB\r\n"}, {c.size(), "\r\nC\r\n"}};
  int err = 0;
  owner.relay =
      SpliceRelay::start(poller, pool, backend.near, client.near, a.size(), &owner, &err, "A\r\n");
  REQUIRE(owner.relay != nullptr);
  const std::string want = "A\r\n" + a + "\r\nB\r\n" + b + "\r\nC\r\n" + c + "END";
  std::thread writer([&] { write_all(backend.far, a + b + c + "NEXT"); });
  std::string got;
  std::thread reader([&] { got = read_n(client.far, want.size()); });
  run_and_close(&loop, owner, poller);
  writer.join();
  reader.join();
  CHECK(owner.ended);
  CHECK(owner.stop == SpliceStop::kDone);
  CHECK(owner.out == a.size() + b.size() + c.size());
  CHECK(got == want);
  REQUIRE(wait_fd(backend.near, POLLIN));
  char next[16];
  CHECK(::read(backend.near, next, sizeof next) == 4);
}

namespace {

size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("bodies relayed in turn over the same connections open no descriptor of their own") {
  // A keep-alive connection pair carries one spliced body after another: each relay registers
  // the connections' own fds and takes them out again when it ends, so the next one can.
  TcpPair backend, client;
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  for (int round = 0; round < 3; ++round) {
    Owner owner;
    const std::string body = random_bytes((1u << 20) + 17 * round, 20 + round);
    const size_t before = open_fds();  // from round 1 on, the pool's idle pipe is among them
    int err = 0;
    owner.relay = SpliceRelay::start(poller, pool, backend.near, client.near, body.size(), &owner,
                                     &err);
    REQUIRE(owner.relay != nullptr);
    if (round > 0) CHECK(open_fds() == before);  // no dup, no pipe: the pool lent its idle one
    std::thread writer([&] { write_all(backend.far, body); });
    std::string got;
    std::thread reader([&] { got = read_n(client.far, body.size()); });
    run_relay(&loop, owner);
    writer.join();
    reader.join();
    REQUIRE(owner.ended);
    CHECK(owner.stop == SpliceStop::kDone);
    CHECK(got == body);
  }
  CHECK(pool.outstanding() == 0);
  close_loop(&loop, poller);
}

TEST_CASE("a relay cancelled before the loop runs is freed at once and reports nothing") {
  TcpPair backend, client;
  uv_loop_t loop;
  uv_loop_init(&loop);
  PipePool pool;
  SplicePoller poller(&loop);
  Owner owner;
  int err = 0;
  owner.relay = SpliceRelay::start(poller, pool, backend.near, client.near, 1000, &owner, &err);
  REQUIRE(owner.relay != nullptr);
  write_all(backend.far, random_bytes(1000, 30));
  owner.relay->cancel();
  owner.relay = nullptr;
  CHECK(pool.outstanding() == 0);
  uv_run(&loop, UV_RUN_NOWAIT);  // the source is readable, but nothing waits on it any more
  CHECK_FALSE(owner.ended);
  CHECK(owner.out == 0);
  REQUIRE(wait_fd(backend.near, POLLIN));
  char buf[2000];
  CHECK(::read(backend.near, buf, sizeof buf) == 1000);  // every byte still in the socket
  close_loop(&loop, poller);
}
