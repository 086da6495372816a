// TcpTransport::connect, the one connector (backend connections, health checks, API calls), on a
// real libuv loop: the first bytes (a PROXY header) reach the peer ahead of the owner's first
// write; a refused connect is reported once with its error; a close before the connect ends
// reports nothing but the close. Every run is bounded by a guard timer and ends with
// uv_loop_close() == 0, so a handle or request left behind fails the test.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <string>
#include <vector>

#include "rondel/net/out_queue.h"
#include "rondel/net/tcp_transport.h"
#include "tcp_pair.h"

namespace {

using rondel::net::OutQueue;
using rondel::net::TcpTransport;

// A listening loopback socket (the kernel completes connects into its backlog).
struct LoopbackListener {
  sockaddr_in addr{};
  int fd = rondel::test::listen_loopback(&addr, 4);
  ~LoopbackListener() { ::close(fd); }
};

struct ConnectOwner final : rondel::net::TransportEvents {
  TcpTransport tcp;
  OutQueue q;
  std::string request = "GET / HTTP/1.1\r\n\r\n";
  std::vector<int> connected;  // every status reported
  int written = 1;             // the write's status (1: none yet)
  int closed = 0;
  bool write_after_connect = true;
  uv_timer_t* guard = nullptr;

  void on_transport_connected(int status) noexcept override {
    connected.push_back(status);
    if (status != 0 || !write_after_connect) {
      tcp.close();
      return;
    }
    q.push(request.data(), request.size());
    int r = tcp.write(q);
    if (r == 0) written = 0;
    if (r != 1) tcp.close();  // else on_transport_written closes
  }
  void on_transport_written(int status) noexcept override {
    written = status;
    tcp.close();
  }
  void on_transport_alloc(uv_buf_t* buf) noexcept override { *buf = uv_buf_init(nullptr, 0); }
  void on_transport_read(ssize_t) noexcept override {}
  void on_transport_closed() noexcept override {
    ++closed;
    uv_close(reinterpret_cast<uv_handle_t*>(guard), nullptr);
  }
};

// Runs `loop` until the owner's transport is closed; the guard fails a run past 5 s.
void run_connect(uv_loop_t* loop, ConnectOwner& o, uv_timer_t& guard) {
  o.guard = &guard;
  uv_timer_init(loop, &guard);
  guard.data = &o;
  uv_timer_start(
      &guard,
      [](uv_timer_t* t) noexcept {
        FAIL_CHECK("the run did not end within 5 s");
        static_cast<ConnectOwner*>(t->data)->tcp.close();
      },
      5000, 0);
  uv_run(loop, UV_RUN_DEFAULT);
}

}  // namespace

TEST_CASE("connect: the first bytes reach the peer ahead of the owner's first write") {
  LoopbackListener l;
  uv_loop_t loop;
  uv_loop_init(&loop);
  ConnectOwner o;
  uv_timer_t guard;
  const std::string header = "PROXY-HEADER-BYTES";
  REQUIRE(o.tcp.connect(&loop, reinterpret_cast<const sockaddr*>(&l.addr), &o, header) == 0);
  run_connect(&loop, o, guard);
  CHECK(o.connected == std::vector<int>{0});
  CHECK(o.written == 0);
  CHECK(o.closed == 1);
  int peer = ::accept(l.fd, nullptr, nullptr);
  REQUIRE(peer >= 0);
  const std::string want = header + o.request;
  CHECK(rondel::test::read_n(peer, want.size()) == want);
  ::close(peer);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("connect: a refused connect is reported once, with its error") {
  int port = 0;
  {
    LoopbackListener l;  // a port that was just free; closed again before the connect
    port = ntohs(l.addr.sin_port);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  uv_loop_t loop;
  uv_loop_init(&loop);
  ConnectOwner o;
  uv_timer_t guard;
  REQUIRE(o.tcp.connect(&loop, reinterpret_cast<const sockaddr*>(&a), &o, "HDR") == 0);
  run_connect(&loop, o, guard);
  CHECK(o.connected == std::vector<int>{UV_ECONNREFUSED});
  CHECK(o.written == 1);
  CHECK(o.closed == 1);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("connect: a close before the connect ends reports only the close") {
  LoopbackListener l;
  uv_loop_t loop;
  uv_loop_init(&loop);
  ConnectOwner o;
  uv_timer_t guard;
  REQUIRE(o.tcp.connect(&loop, reinterpret_cast<const sockaddr*>(&l.addr), &o, "HDR") == 0);
  o.tcp.close();
  run_connect(&loop, o, guard);
  CHECK(o.connected.empty());
  CHECK(o.closed == 1);
  CHECK(uv_loop_close(&loop) == 0);
}
