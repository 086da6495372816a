// Loopback TCP pairs and listeners, and blocking byte helpers, for the net tests.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

namespace rondel::test {

// A socket listening on 127.0.0.1 on a free port (the caller closes it); its address in *a.
inline int listen_loopback(sockaddr_in* a, int backlog = 1) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  *a = sockaddr_in{};
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(a), sizeof *a) == 0);
  REQUIRE(::listen(fd, backlog) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(a), &len) == 0);
  return fd;
}

// A connected loopback TCP pair: `far` is the peer (blocking), `near` the proxy's side
// (non-blocking), as a backend or client connection looks to rondel.
struct TcpPair {
  int near = -1, far = -1;
  TcpPair() {
    sockaddr_in a{};
    int lst = listen_loopback(&a);
    far = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(far, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    near = ::accept(lst, nullptr, nullptr);
    REQUIRE(near >= 0);
    ::close(lst);
    ::fcntl(near, F_SETFL, ::fcntl(near, F_GETFL) | O_NONBLOCK);
  }
  ~TcpPair() {
    if (near >= 0) ::close(near);
    if (far >= 0) ::close(far);
  }
  void reset_far() {  // close with RST
    linger l{1, 0};
    ::setsockopt(far, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(far);
    far = -1;
  }
};

inline std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = rng();
    std::memcpy(s.data() + i, &w, std::min<size_t>(8, n - i));
  }
  return s;
}

inline void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;  // the test sees the shortfall
    off += static_cast<size_t>(n);
  }
}

inline std::string read_n(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    ssize_t k = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (k <= 0) break;
    out.append(buf, static_cast<size_t>(k));
  }
  return out;
}

inline bool wait_fd(int fd, short events, int timeout_ms = 5000) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

}  // namespace rondel::test
