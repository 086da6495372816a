// splice_step and PipePool on real loopback TCP connections: a body arrives byte-exact and
// nothing past its end is taken; a sink that stops reading, a source that is dry, ends early or
// resets, and a sink that resets each stop the step with the right reason; the pool reuses empty
// pipes and never lends one that still holds bytes. Every wait is poll(2) with a timeout.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rondel/net/splice_pipe.h"
#include "tcp_pair.h"

namespace {

using rondel::net::PipePool;
using rondel::test::random_bytes;
using rondel::test::read_n;
using rondel::test::TcpPair;
using rondel::test::wait_fd;
using rondel::test::write_all;
using rondel::net::SplicePipe;
using rondel::net::SpliceStep;
using rondel::net::SpliceStop;
using rondel::net::splice_step;

// Runs splice_step until it stops with something other than "wait" (waiting with poll), or a
// wait times out; returns the last step and the total moved out.
SpliceStep run(int from, SplicePipe& pipe, int to, uint64_t remaining, uint64_t* out_total) {
  SpliceStep st;
  for (int i = 0; i < 100000; ++i) {
    st = splice_step(from, pipe, to, remaining);
    *out_total += st.out;
    remaining -= st.out;
    if (st.stop == SpliceStop::kSourceDry) {
      if (!wait_fd(from, POLLIN)) return st;
    } else if (st.stop == SpliceStop::kSinkFull) {
      if (!wait_fd(to, POLLOUT)) return st;
    } else if (st.stop != SpliceStop::kBudgetUsed) {
      return st;
    }
  }
  return st;
}

}  // namespace

TEST_CASE("a spliced body arrives byte-exact and what follows it stays in the source") {
  TcpPair backend, client;
  PipePool pool;
  int err = 0;
  SplicePipe* pipe = pool.take(&err);
  REQUIRE(pipe != nullptr);
  CHECK(pipe->capacity() >= 64 * 1024);
  const std::string body = random_bytes((8u << 20) + 12345, 1);
  std::thread writer([&] { write_all(backend.far, body + "NEXT RESPONSE"); });
  std::string got;
  std::thread reader([&] { got = read_n(client.far, body.size()); });
  uint64_t out = 0;
  SpliceStep st = run(backend.near, *pipe, client.near, body.size(), &out);
  writer.join();
  reader.join();
  CHECK(st.stop == SpliceStop::kDone);
  CHECK(out == body.size());
  CHECK(pipe->held() == 0);
  CHECK(got == body);
  // The bytes after the body were not taken: the next response starts there.
  REQUIRE(wait_fd(backend.near, POLLIN));
  char next[64];
  ssize_t n = ::read(backend.near, next, sizeof next);
  CHECK(std::string(next, n > 0 ? static_cast<size_t>(n) : 0) == "NEXT RESPONSE");
  pool.give(pipe);
  CHECK(pool.idle() == 1);
}

TEST_CASE("a sink that stops reading stops the step; it resumes where it left off") {
  TcpPair backend, client;
  int small = 64 * 1024;  // keep the socket buffers from absorbing the body
  ::setsockopt(client.far, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ::setsockopt(client.near, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  PipePool pool;
  int err = 0;
  SplicePipe* pipe = pool.take(&err);
  REQUIRE(pipe != nullptr);
  const std::string body = random_bytes(4u << 20, 2);
  std::thread writer([&] { write_all(backend.far, body); });
  uint64_t out = 0, remaining = body.size();
  SpliceStep st;
  for (int i = 0; i < 100000; ++i) {  // until the sink is full (the client reads nothing)
    st = splice_step(backend.near, *pipe, client.near, remaining);
    out += st.out;
    remaining -= st.out;
    if (st.stop == SpliceStop::kSinkFull) break;
    if (st.stop == SpliceStop::kSourceDry) REQUIRE(wait_fd(backend.near, POLLIN));
  }
  REQUIRE(st.stop == SpliceStop::kSinkFull);
  CHECK(out < body.size());
  CHECK(pipe->held() <= pipe->capacity());
  std::string got;
  std::thread reader([&] { got = read_n(client.far, body.size()); });
  st = run(backend.near, *pipe, client.near, remaining, &out);
  writer.join();
  reader.join();
  CHECK(st.stop == SpliceStop::kDone);
  CHECK(out == body.size());
  CHECK(got == body);
  pool.give(pipe);
}

TEST_CASE("a dry source, an early end and a reset source each stop the step") {
  TcpPair backend, client;
  PipePool pool;
  int err = 0;
  SplicePipe* pipe = pool.take(&err);
  REQUIRE(pipe != nullptr);
  SpliceStep st = splice_step(backend.near, *pipe, client.near, 5000);
  CHECK(st.stop == SpliceStop::kSourceDry);
  CHECK(st.in == 0);
  CHECK(st.out == 0);

  write_all(backend.far, std::string(1000, 'x'));
  ::shutdown(backend.far, SHUT_WR);
  uint64_t out = 0;
  st = run(backend.near, *pipe, client.near, 5000, &out);
  CHECK(st.stop == SpliceStop::kSourceEof);
  CHECK(out == 1000);  // what came before the end reached the sink
  CHECK(read_n(client.far, 1000) == std::string(1000, 'x'));
  pool.give(pipe);

  TcpPair backend2;
  pipe = pool.take(&err);
  write_all(backend2.far, "abc");
  backend2.reset_far();
  REQUIRE(wait_fd(backend2.near, POLLIN));
  st = splice_step(backend2.near, *pipe, client.near, 5000);
  // The 3 bytes may or may not be read before the reset is seen; then the source fails.
  if (st.stop != SpliceStop::kSourceError) {
    out = 0;
    st = run(backend2.near, *pipe, client.near, 5000 - st.out, &out);
  }
  CHECK(st.stop == SpliceStop::kSourceError);
  CHECK(st.error == -ECONNRESET);
  pool.give(pipe);
}

TEST_CASE("a sink that resets fails the step; its pipe is closed, not lent again") {
  TcpPair backend, client;
  PipePool pool;
  int err = 0;
  SplicePipe* pipe = pool.take(&err);
  REQUIRE(pipe != nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // as rondel's main does: a write to a reset socket is -EPIPE
  client.reset_far();
  const std::string body = random_bytes(4u << 20, 3);
  std::thread writer([&] {
    write_all(backend.far, body);
    ::shutdown(backend.far, SHUT_WR);
  });
  uint64_t out = 0;
  SpliceStep st = run(backend.near, *pipe, client.near, body.size(), &out);
  // Closing `backend.near` unblocks the writer whatever the step did.
  ::shutdown(backend.near, SHUT_RDWR);
  writer.join();
  CHECK(st.stop == SpliceStop::kSinkError);
  CHECK((st.error == -EPIPE || st.error == -ECONNRESET));
  CHECK(pipe->held() > 0);
  pool.give(pipe);
  CHECK(pool.idle() == 0);  // closed: it held bytes of the cut-off body
  CHECK(pool.outstanding() == 0);
}

TEST_CASE("the budget makes a long body yield to the loop") {
  TcpPair backend, client;
  PipePool pool;
  int err = 0;
  SplicePipe* pipe = pool.take(&err);
  REQUIRE(pipe != nullptr);
  const std::string body = random_bytes(2u << 20, 4);
  std::thread writer([&] { write_all(backend.far, body); });
  std::string got;
  std::thread reader([&] { got = read_n(client.far, body.size()); });
  uint64_t out = 0, remaining = body.size();
  bool yielded = false;
  for (int i = 0; i < 100000 && remaining > 0; ++i) {
    SpliceStep st = splice_step(backend.near, *pipe, client.near, remaining, 64 * 1024);
    out += st.out;
    remaining -= st.out;
    if (st.stop == SpliceStop::kBudgetUsed) {
      yielded = true;
      CHECK(st.out >= 64 * 1024);
      CHECK(st.out <= 64 * 1024 + pipe->capacity());
    } else if (st.stop == SpliceStop::kSourceDry) {
      REQUIRE(wait_fd(backend.near, POLLIN));
    } else if (st.stop == SpliceStop::kSinkFull) {
      REQUIRE(wait_fd(client.near, POLLOUT));
    } else {
      CHECK(st.stop == SpliceStop::kDone);
    }
  }
  writer.join();
  reader.join();
  CHECK(yielded);
  CHECK(out == body.size());
  CHECK(got == body);
  pool.give(pipe);
}

TEST_CASE("the pool reuses empty pipes and keeps at most kMaxIdle") {
  PipePool pool;
  int err = 0;
  SplicePipe* a = pool.take(&err);
  REQUIRE(a != nullptr);
  int fd = a->read_fd();
  CHECK((::fcntl(a->read_fd(), F_GETFL) & O_NONBLOCK) != 0);
  CHECK((::fcntl(a->write_fd(), F_GETFD) & FD_CLOEXEC) != 0);
  pool.give(a);
  SplicePipe* b = pool.take(&err);
  CHECK(b == a);
  CHECK(b->read_fd() == fd);  // no new pipe(2)
  CHECK(pool.outstanding() == 1);
  pool.give(b);
  std::vector<SplicePipe*> many;
  for (size_t i = 0; i < PipePool::kMaxIdle + 3; ++i) {
    SplicePipe* p = pool.take(&err);
    REQUIRE(p != nullptr);
    many.push_back(p);
  }
  for (SplicePipe* p : many) pool.give(p);
  CHECK(pool.idle() == PipePool::kMaxIdle);
  CHECK(pool.outstanding() == 0);
}

TEST_CASE("recv_line_part reads up to a line's end and leaves what follows in the socket") {
  using rondel::net::LinePart;
  using rondel::net::recv_line_part;
  TcpPair p;
  char buf[64];
  CHECK(recv_line_part(p.near, buf, sizeof buf).kind == LinePart::Kind::kWait);
  write_all(p.far, std::string("4000\r\nDATA"));
  REQUIRE(wait_fd(p.near, POLLIN));
  LinePart got = recv_line_part(p.near, buf, sizeof buf);
  REQUIRE(got.kind == LinePart::Kind::kBytes);
  CHECK(std::string(buf, got.n) == "4000\r\n");
  // The bytes after the line stay for the next reader (a splice).
  char rest[8];
  CHECK(::recv(p.near, rest, sizeof rest, MSG_DONTWAIT) == 4);
  CHECK(std::string(rest, 4) == "DATA");
  // A line longer than the buffer comes in parts, none past its end.
  write_all(p.far, std::string("abcdef\r\nX"));
  REQUIRE(wait_fd(p.near, POLLIN));
  got = recv_line_part(p.near, buf, 4);
  REQUIRE(got.kind == LinePart::Kind::kBytes);
  CHECK(std::string(buf, got.n) == "abcd");
  got = recv_line_part(p.near, buf, sizeof buf);
  REQUIRE(got.kind == LinePart::Kind::kBytes);
  CHECK(std::string(buf, got.n) == "ef\r\n");
  CHECK(::recv(p.near, rest, sizeof rest, MSG_DONTWAIT) == 1);
  ::shutdown(p.far, SHUT_WR);
  REQUIRE(wait_fd(p.near, POLLIN));
  CHECK(recv_line_part(p.near, buf, sizeof buf).kind == LinePart::Kind::kEnd);
}
