// TcpTransport: the Transport of one TCP connection (one libuv uv_tcp_t): a client connection
// accepted, with an optional PROXY protocol header stage in front of the codec's bytes, or a
// connection to a backend (connect(): the one place rondel calls uv_tcp_connect).
//
// Embedded by value in its owner: accepting and serving a connection allocates nothing (a
// connection of a PROXY-protocol listener allocates its header parser for the header stage
// only; a connect allocates its request until it ends). Loop thread only.
#pragma once

#include <memory>
#include <span>

#include "rondel/core/cidr.h"
#include "rondel/net/proxy_protocol.h"
#include "rondel/net/transport.h"

namespace rondel::net {

// What a listener with `proxy_protocol` gives each of its connections' header stage.
struct ProxyStageConfig {
  std::span<const core::Cidr> trusted;  // only read by expect_proxy_header()
  // The listener's counters; the stage keeps them alive while it runs.
  std::shared_ptr<ProxyProtocolCounters> counters;
  uint64_t timeout_ms = 0;  // the listener's header_timeout (the codec runs the timer)
};

class TcpTransport final : public Transport {
 public:
  TcpTransport() = default;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Initialises the handle on `loop` and accepts a pending connection of `server` (TCP_NODELAY
  // on, peer address read). Whatever it returns, the transport must be closed with close(); 0 or
  // a libuv error. `events` must outlive the transport (until on_transport_closed).
  int accept(uv_loop_t* loop, uv_stream_t* server, TransportEvents* events) noexcept;
  // Initialises the handle on `loop` and starts a non-blocking connect to `addr` (TCP_NODELAY
  // on); `events` hears on_transport_connected(status) from the loop, unless close() came first.
  // `first_bytes` (a PROXY protocol header; may be empty) is copied and written as soon as the
  // connection is up, ahead of every later write. Whatever it returns, the transport must be
  // closed with close(); 0 or a libuv error (UV_EMFILE: no file descriptor).
  int connect(uv_loop_t* loop, const sockaddr* addr, TransportEvents* events,
              std::string_view first_bytes = {}) noexcept;

  // Puts a PROXY protocol header stage before the codec's bytes. Call after accept() succeeded
  // and before start_reading(). A peer outside `cfg.trusted` is refused at once: counted
  // (kUntrusted), returns UV_EACCES, and the caller closes. Otherwise returns 0 (UV_ENOMEM if
  // the parser cannot be had) and the transport reads the header before the codec sees any
  // byte: once it is whole, peer() and local_address() report the addresses it carries (LOCAL,
  // UNKNOWN, AF_UNSPEC, AF_UNIX: the connection's own) and the bytes after it are delivered as
  // the codec's first read. A missing or invalid header, or EOF first, is counted by reason and
  // reported to the codec as a read error (UV_EPROTO, or the EOF/error itself); the codec
  // closes. The codec runs the stage's timeout (cfg.timeout_ms from this call): a close() at or
  // after that deadline while the stage is still running counts as kTimeout.
  int expect_proxy_header(const ProxyStageConfig& cfg) noexcept;
  // Whether the header stage is still running.
  bool awaiting_proxy_header() const noexcept { return proxy_ != nullptr; }

  int start_reading() noexcept override;
  void stop_reading() noexcept override;
  int write(OutQueue& q) noexcept override;
  // Writes what the socket takes of [p, p + n) now, with no write request: the bytes written,
  // or a libuv error (UV_EAGAIN: none). Only while no write() is pending.
  int try_write(const char* p, size_t n) noexcept;
  int shutdown() noexcept override;
  void close() noexcept override;
  bool closing() const noexcept override { return closing_; }
  const PeerAddr& peer() const noexcept override { return peer_; }
  bool local_address(sockaddr_storage* out) const noexcept override;
  int splice_fd() const noexcept override;

 private:
  struct ProxyStage {
    ProxyHeaderParser parser;
    std::shared_ptr<ProxyProtocolCounters> counters;
    uint64_t deadline_ms = 0;  // loop time
  };
  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  // A read during the header stage: feeds the parser, ends the stage when it is decided.
  void proxy_read(ssize_t nread, const uv_buf_t* buf) noexcept;
  void count_reject(ProxyReject r) noexcept;
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_written(uv_write_t* req, int status) noexcept;
  static void on_shutdown(uv_shutdown_t* req, int status) noexcept;
  static void on_closed(uv_handle_t* h) noexcept;
  struct Connecting;  // the connect request and the first bytes (tcp_transport.cpp)
  static void on_connect(uv_connect_t* req, int status) noexcept;

  uv_tcp_t tcp_{};
  TransportEvents* events_ = nullptr;
  std::unique_ptr<ProxyStage> proxy_;  // the header stage, while it runs
  PeerAddr peer_;                      // the connection's peer, or the PROXY header's source
  ProxyEndpoint carried_local_;        // the PROXY header's destination, when carried_family_
  uint8_t carried_family_ = 0;         // 0: local_address() is the socket's; 4 or 6
  bool reading_ = false;
  bool closing_ = false;
};

}  // namespace rondel::net
