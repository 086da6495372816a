// TcpTransport: libuv stream calls and callbacks, forwarded to the codec's TransportEvents.
#include "rondel/net/tcp_transport.h"

namespace rondel::net {

int TcpTransport::accept(uv_loop_t* loop, uv_stream_t* server, TransportEvents* events) noexcept {
  events_ = events;
  uv_tcp_init(loop, &tcp_);
  tcp_.data = this;
  int rc = uv_accept(server, stream());
  if (rc != 0) return rc;
  uv_tcp_nodelay(&tcp_, 1);
  peer_.read(&tcp_);
  return 0;
}

int TcpTransport::start_reading() noexcept {
  if (reading_ || closing_) return 0;
  int rc = uv_read_start(stream(), &on_alloc, &on_read);
  if (rc == 0) reading_ = true;
  return rc;
}

void TcpTransport::stop_reading() noexcept {
  if (!reading_) return;
  uv_read_stop(stream());
  reading_ = false;
}

int TcpTransport::write(OutQueue& q) noexcept {
  q.req.data = this;
  return q.flush(stream(), &on_written);
}

int TcpTransport::shutdown() noexcept {
  shutdown_req_.data = this;
  return uv_shutdown(&shutdown_req_, stream(), &on_shutdown);
}

void TcpTransport::close() noexcept {
  if (closing_) return;
  closing_ = true;
  reading_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &on_closed);
}

bool TcpTransport::local_address(sockaddr_storage* out) const noexcept {
  int len = sizeof *out;
  return uv_tcp_getsockname(&tcp_, reinterpret_cast<sockaddr*>(out), &len) == 0;
}

int TcpTransport::splice_fd() const noexcept {
  uv_os_fd_t fd = -1;
  if (closing_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) != 0) return -1;
  return fd;
}

void TcpTransport::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  static_cast<TcpTransport*>(h->data)->events_->on_transport_alloc(buf);
}

void TcpTransport::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) noexcept {
  auto* t = static_cast<TcpTransport*>(s->data);
  if (nread == 0 || t->closing_) return;
  t->events_->on_transport_read(nread);
}

void TcpTransport::on_written(uv_write_t* req, int status) noexcept {
  static_cast<TcpTransport*>(req->data)->events_->on_transport_written(status);
}

void TcpTransport::on_shutdown(uv_shutdown_t*, int) noexcept {}

void TcpTransport::on_closed(uv_handle_t* h) noexcept {
  static_cast<TcpTransport*>(h->data)->events_->on_transport_closed();
}

}  // namespace rondel::net
