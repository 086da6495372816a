// TcpListener: binds (optionally with SO_REUSEPORT) and dispatches accepted connections.
#include "rondel/net/listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rondel::net {

core::Result<TcpListener*> TcpListener::open(uv_loop_t* loop, const std::string& host,
                                             uint16_t port, bool reuse_port, int backlog,
                                             OnConnection on_conn) {
  auto addr = to_sockaddr(host, port);
  if (!addr) return addr.error();
  const auto* sa = reinterpret_cast<const sockaddr*>(&*addr);

  int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return core::fail(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  socklen_t len = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::bind(fd, sa, len) != 0) {
    std::string err = "bind " + sockaddr_to_string(sa) + ": " + std::strerror(errno);
    ::close(fd);
    return core::fail(err);
  }

  auto* self = new TcpListener();
  uv_tcp_init(loop, &self->tcp_);
  self->tcp_.data = self;
  self->on_conn_ = std::move(on_conn);
  if (int rc = uv_tcp_open(&self->tcp_, fd); rc != 0) {
    ::close(fd);
    self->close();
    return core::fail(std::string("uv_tcp_open: ") + uv_strerror(rc));
  }
  if (int rc = uv_listen(reinterpret_cast<uv_stream_t*>(&self->tcp_), backlog, &on_connection);
      rc != 0) {
    self->close();
    return core::fail("listen " + sockaddr_to_string(sa) + ": " + uv_strerror(rc));
  }
  sockaddr_storage bound{};
  int blen = sizeof bound;
  uv_tcp_getsockname(&self->tcp_, reinterpret_cast<sockaddr*>(&bound), &blen);
  self->port_ = sockaddr_port(reinterpret_cast<sockaddr*>(&bound));
  self->bind_ = sockaddr_to_string(reinterpret_cast<sockaddr*>(&bound));
  return self;
}

void TcpListener::on_connection(uv_stream_t* server, int status) noexcept {
  auto* self = static_cast<TcpListener*>(server->data);
  if (status < 0 || self->closing()) return;
  self->on_conn_(server);
}

}  // namespace rondel::net
