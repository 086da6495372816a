// TlsTransport: the Transport of a TLS connection, for its owner exactly like a plain one: in
// server mode a client connection (the codec is its events), in client mode a connection to a
// backend (BackendConn, a health check, a control-plane API call).
//
// It is the TransportEvents of the connection's TcpTransport (anything below TLS, such as a PROXY
// header, stays in the TCP transport): ciphertext read from it is fed to OpenSSL straight from the
// worker's read buffer through a BIO of our own, plaintext is decrypted into the codec's own read
// buffer, and the codec's writes are encrypted record by record: a record goes to the socket
// from OpenSSL's buffer when nothing is queued before it, else into an output buffer written
// through the TCP transport with the same contract (one write pending at a time; backpressure
// until the ciphertext is taken by the kernel). Reads reach the codec only once the handshake is
// complete, after on_transport_ready (server mode: the negotiated ALPN protocol) or
// on_transport_connected (client mode).
// A server handshake has a timeout and takes one of the worker's max_handshakes slots until it
// ends. A client handshake runs once the TCP connect is up, under the owner's timer (the
// pool's connect timeout), with the pool's ClientContext: SNI, verification against the pool's
// CA, ALPN http/1.1, and the session kept per backend offered and renewed; the owner hears
// on_transport_connected when it ends and counts it (backend_tls_stats).
// An idle connection holds no buffer of its own beyond OpenSSL's SSL object: a ciphertext write
// (its bytes and its write request) goes back to a per-thread spare list once the kernel has it,
// and ciphertext read is copied into the connection only when the codec stops reading in the
// middle of it. Loop thread only.
#pragma once

#include <uv.h>

#include <memory>
#include <string>

#include "rondel/net/tcp_transport.h"
#include "rondel/tls/client_context.h"
#include "rondel/tls/server_context.h"
#include "rondel/tls/tls_stats.h"

typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace rondel::tls {

class TlsTransport final : public net::Transport, private net::TransportEvents {
 public:
  // Server mode. `tcp` (the connection's socket, owned by the caller) and `events` (the codec)
  // must outlive this transport (until on_transport_closed); `ctx` is held until then.
  TlsTransport(std::shared_ptr<const ServerContext> ctx, net::TcpTransport& tcp,
               net::TransportEvents& events) noexcept;
  ~TlsTransport() override;
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  // Accepts the connection on `tcp` and starts the handshake. Non-zero (a libuv error, or
  // UV_EBUSY when the worker already runs max_handshakes, counted): the caller closes.
  int accept(uv_loop_t* loop, uv_stream_t* server) noexcept;
  // Client mode, with the same lifetimes: `ctx` the pool's context (or a control-plane API's);
  // `session_key` names the backend in its session cache.
  TlsTransport(std::shared_ptr<const ClientContext> ctx, std::string session_key,
               net::TcpTransport& tcp, net::TransportEvents& events) noexcept;
  // Client mode: connects `tcp` to `addr` (TcpTransport::connect, `first_bytes` ahead of the
  // handshake) and then runs the handshake to a backend named `server_name` (ClientContext::
  // new_ssl). The events hear on_transport_connected: 0 once the handshake is done, the TCP
  // connect's error, or UV_EPROTO for a failed handshake (handshake_result() says why).
  // Non-zero: the caller closes.
  int connect(uv_loop_t* loop, const sockaddr* addr, std::string_view first_bytes,
              std::string_view server_name) noexcept;
  // Client mode: the pool's context the connection was made under (nullptr in server mode).
  const ClientContext* client_context() const noexcept {
    return client_ ? client_->ctx.get() : nullptr;
  }
  // Client mode: whether the handshake runs (the TCP connect is up and it has not ended).
  bool handshaking() const noexcept { return handshaking_; }
  // Client mode: how the handshake ended (kOk or kResumed once connected, the reason after
  // UV_EPROTO), and OpenSSL's words for a failed verification ("" if none).
  BackendHandshake handshake_result() const noexcept;
  std::string_view verify_error() const noexcept;
  // Processes what is buffered (session tickets, alerts) without delivering it: whether
  // plaintext or the end of the stream waits. An idle backend connection with either closes.
  bool unread() noexcept;
  // Gives the connection to another codec (from inside its on_transport_ready, when the
  // negotiated protocol needs a different codec): every later event goes to `events`.
  void set_events(net::TransportEvents& events) noexcept { events_ = &events; }

  int start_reading() noexcept override;
  void stop_reading() noexcept override;
  int write(net::OutQueue& q) noexcept override;
  int shutdown() noexcept override;
  void close() noexcept override;
  bool closing() const noexcept override { return closing_; }
  const net::PeerAddr& peer() const noexcept override { return tcp_.peer(); }
  bool local_address(sockaddr_storage* out) const noexcept override {
    return tcp_.local_address(out);
  }
  // write() encrypts everything it is given before it returns.
  bool consumes_on_write() const noexcept override { return true; }

  // The access log's TLS fields, once the handshake is done (all empty before): the version
  // ("TLSv1.2", "TLSv1.3"), the SNI name ("-" if none) and "1"/"0" for a resumed session. The
  // views stay valid while the connection lives.
  struct LogFields {
    std::string_view version, sni, resumed;
  };
  LogFields log_fields() const noexcept;

  // One ciphertext write (defined in the .cpp), taken from a per-thread spare list.
  struct WireWrite;

 private:
  // The TCP transport's side.
  void on_transport_alloc(uv_buf_t* buf) noexcept override;
  void on_transport_read(ssize_t n) noexcept override;
  void on_transport_written(int status) noexcept override;
  void on_transport_closed() noexcept override;

  void on_transport_connected(int status) noexcept override;

  void continue_handshake() noexcept;
  void handshake_done() noexcept;
  void handshake_failed(HandshakeFailure why) noexcept;
  void client_failed(BackendHandshake why) noexcept;
  // Why a client handshake failed, from OpenSSL's last error and the verification result.
  BackendHandshake client_reason(unsigned long err) const noexcept;
  bool attach_wire() noexcept;  // the SSL's one BIO (WireBio) over this transport
  void drain() noexcept;  // client mode: reads what is buffered (a session ticket) before close
  void end_handshake() noexcept;  // gives the in-progress slot back, stops its timer
  // Decrypts what is buffered into the codec while it reads; EOF/errors are passed on.
  void deliver() noexcept;
  // Writes the ciphertext waiting in next_ unless a write is pending: 0 written now, 1 pending
  // (on_transport_written follows), < 0 on error.
  int flush_wire() noexcept;
  static void on_timer(uv_timer_t* t) noexcept;
  static void on_timer_closed(uv_handle_t* h) noexcept;
  // Copies unread ciphertext out of the worker's read buffer, or frees the copy once read.
  void settle_input() noexcept;
  static int wire_write(BIO* b, const char* data, int len) noexcept;
  static int wire_read(BIO* b, char* out, int len) noexcept;
  static long wire_ctrl(BIO* b, int cmd, long num, void* ptr) noexcept;
  friend struct WireBio;

  std::shared_ptr<const ServerContext> ctx_;  // server mode
  // Client mode only (null in server mode): the pool's context, the backend's session key (the
  // SSL's app data) and how the handshake ended.
  struct ClientSide {
    std::shared_ptr<const ClientContext> ctx;
    std::string session_key;
    BackendHandshake result = BackendHandshake::kProtocol;
  };
  std::unique_ptr<ClientSide> client_;
  net::TcpTransport& tcp_;
  net::TransportEvents* events_;
  SSL* ssl_ = nullptr;
  const char* in_ = nullptr;    // ciphertext not yet read by OpenSSL: in the worker's read
  size_t in_len_ = 0;           // buffer during a read callback, else in in_kept_
  std::string in_kept_;         // unread ciphertext kept across callbacks (empty when idle)
  uv_timer_t timer_{};          // handshake timeout, then deferred delivery after start_reading
  WireWrite* flight_ = nullptr;  // the ciphertext write in flight on tcp_ (none when idle)
  WireWrite* next_ = nullptr;    // ciphertext produced since (appended by the BIO)
  int pending_closes_ = 0;
  bool reading_ = false;        // the codec wants plaintext
  bool handshaking_ = false;    // in progress (server mode: holds an in-progress slot)
  bool established_ = false;
  bool peer_eof_ = false;       // the TCP side ended (delivered once the plaintext is drained)
  bool codec_write_pending_ = false;
  bool wire_took_ = false;      // the socket took ciphertext at once since write() began
  bool shutdown_after_flush_ = false;
  bool closing_ = false;
  bool timer_open_ = false;
};

}  // namespace rondel::tls
