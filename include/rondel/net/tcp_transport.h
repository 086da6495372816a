// TcpTransport: the Transport of a plain TCP client connection (one libuv uv_tcp_t).
//
// Embedded by value in its codec: accepting and serving a connection allocates nothing. Loop
// thread only.
#pragma once

#include "rondel/net/transport.h"

namespace rondel::net {

class TcpTransport final : public Transport {
 public:
  TcpTransport() = default;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Initialises the handle on `loop` and accepts a pending connection of `server` (TCP_NODELAY
  // on, peer address read). Whatever it returns, the transport must be closed with close(); 0 or
  // a libuv error. `events` must outlive the transport (until on_transport_closed).
  int accept(uv_loop_t* loop, uv_stream_t* server, TransportEvents* events) noexcept;

  int start_reading() noexcept override;
  void stop_reading() noexcept override;
  int write(OutQueue& q) noexcept override;
  int shutdown() noexcept override;
  void close() noexcept override;
  bool closing() const noexcept override { return closing_; }
  const PeerAddr& peer() const noexcept override { return peer_; }
  bool local_address(sockaddr_storage* out) const noexcept override;
  int splice_fd() const noexcept override;

 private:
  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_written(uv_write_t* req, int status) noexcept;
  static void on_shutdown(uv_shutdown_t* req, int status) noexcept;
  static void on_closed(uv_handle_t* h) noexcept;

  uv_tcp_t tcp_{};
  uv_shutdown_t shutdown_req_{};
  TransportEvents* events_ = nullptr;
  PeerAddr peer_;
  bool reading_ = false;
  bool closing_ = false;
};

}  // namespace rondel::net
