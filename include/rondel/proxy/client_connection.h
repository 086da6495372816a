// ClientConnection: one accepted client connection, from accept to close, and the codec it runs.
//
// The connection owns everything a client connection has whatever its protocol: the transports
// (TCP, and TLS over it), its place in the listener's max_connections count (ListenerSlot), the
// snapshot and listener it serves, its one client timeout (a node of the worker's TimeoutQueue),
// its link in the worker's list, and the open/total connection counts. It runs
// accept -> PROXY header (when the listener takes one) -> TLS handshake (on a TLS listener) and
// then installs the codec that the codec table (client_codecs.cpp) gives for the negotiated ALPN
// and the listener's mode. The codec (HTTP/1: Http1Session, HTTP/2: Http2Session) only speaks
// its protocol over the connection's transport; it has no accept, transport, timer or count of
// its own. A new protocol is one codec and one table row.
//
// Life: accept() creates it; close() ends it (the codec first ends its exchanges as client
// aborts); the transport's close callback destroys the codec, then the connection.
// Loop thread of its worker only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rondel/net/tcp_transport.h"
#include "rondel/net/timeout_queue.h"
#include "rondel/proxy/listener_slot.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"
#include "rondel/tls/tls_transport.h"
#include "rondel/util/intrusive_list.h"

namespace rondel::proxy {

class ClientConnection;

// A protocol spoken over a ClientConnection. The connection forwards its transport's events and
// its timeout to the codec; the codec reads, writes and closes through the connection.
class ClientCodec {
 public:
  virtual ~ClientCodec() = default;
  // The connection is ready for the protocol (accepted, PROXY stage started, TLS handshake
  // done): start reading and set the first timeout.
  virtual void start() noexcept = 0;
  // The transport's events (net::TransportEvents), forwarded by the connection.
  virtual void on_alloc(uv_buf_t* buf) noexcept = 0;
  virtual void on_read(ssize_t nread) noexcept = 0;
  virtual void on_written(int status) noexcept = 0;
  // The connection's timeout (set_timeout) expired.
  virtual void on_timeout() noexcept = 0;
  // Graceful stop (SIGTERM, the listener removed by a reload): no new request; close once the
  // running ones end.
  virtual void drain() noexcept = 0;
  // The connection is closing now (ClientConnection::close): end every running exchange as a
  // client abort. Called once; the codec must not call close() from here.
  virtual void on_closing() noexcept = 0;
  // A reload published a snapshot without this connection's listener.
  virtual void on_listener_removed() noexcept {}
  // The worker's end-of-pass flush that the codec asked for (Worker::want_flush).
  virtual void on_flush() noexcept {}
};

// The codec table's answer: which protocol a connection speaks.
enum class ClientProtocol : uint8_t { kHttp1, kHttp2 };

// The codec table (client_codecs.cpp): the protocol for a connection whose TLS handshake
// negotiated `alpn` ("h2", "http/1.1"; empty on cleartext, where the listener's `http2` mode
// decides), and the codec made for it.
ClientProtocol choose_client_protocol(const config::ListenerConfig* l, std::string_view alpn);
ClientCodec* make_client_codec(ClientProtocol p, ClientConnection& c) noexcept;

struct ClientConnectionTag {};

class ClientConnection final : private net::TransportEvents,
                               private net::Timeout,
                               public util::ListNode<ClientConnectionTag> {
 public:
  // Accepts a connection from `server` for `listener`: admission, the PROXY stage, the TLS
  // handshake, then the codec. On any failure the connection is closed (and counted).
  static void accept(Worker& worker, uv_stream_t* server, const std::string& listener);
  // A connection over `t`, any transport (a test's or a fuzz target's scripted one), speaking
  // `protocol` for `route` with no admission limit; the returned events are the transport's
  // receiver (null: out of memory). `t` must outlive the connection.
  static net::TransportEvents* attach(Worker& worker, net::Transport& t, ListenerRoute route,
                                      ClientProtocol protocol) noexcept;
  // The worker's TimeoutQueue callback.
  static void on_timeout(net::Timeout* t) noexcept;

  // Closes the connection now: the codec ends its exchanges (on_closing), the counts and the
  // listener slot are released, the transport closes; the codec and the connection are freed
  // by the transport's close callback. Idempotent.
  void close() noexcept;
  bool closing() const noexcept { return closing_; }
  // Passed on to the codec.
  void drain() noexcept;
  void listener_removed() noexcept;

  Worker& worker() noexcept { return worker_; }
  net::Transport& transport() noexcept { return *transport_; }
  const net::Transport& transport() const noexcept { return *transport_; }
  // The TLS transport (null on cleartext): "https" forwarding and the access log's TLS fields.
  const tls::TlsTransport* tls() const noexcept { return tls_.get(); }
  // Whether the PROXY header is still awaited (no request byte can have arrived yet).
  bool awaiting_proxy_header() const noexcept { return tcp_.awaiting_proxy_header(); }
  // The listener served (null when a reload removed it) and its pool.
  const config::ListenerConfig* listener() const noexcept { return listener_cfg_; }
  const Pool* pool() const noexcept { return listener_pool_; }
  // The listener's name, for reloads ("" for a connection refused at accept).
  std::string_view listener_name() const noexcept { return slot_.name(); }
  // Moves to the worker's newest snapshot (between two requests): listener() and pool() then
  // come from it.
  void refresh_snapshot() noexcept;
  // The client's address as text (the PROXY header's source when the listener takes one); an
  // IPv6 one is formatted once, at the first call after the PROXY stage.
  std::string_view client_ip() noexcept;
  // The connection's one client timeout: `ms` from now (0: none). Without memory for a new
  // timeout lane the connection is closed instead (it would otherwise have no timeout).
  void set_timeout(uint64_t ms) noexcept;
  void clear_timeout() noexcept { worker_.timeouts().clear(*this); }

 private:
  explicit ClientConnection(Worker& worker) noexcept;
  ~ClientConnection();
  void install(ClientProtocol p) noexcept;
  void on_transport_alloc(uv_buf_t* buf) noexcept override;
  void on_transport_read(ssize_t nread) noexcept override;
  void on_transport_written(int status) noexcept override;
  void on_transport_closed() noexcept override;
  void on_transport_ready(std::string_view alpn) noexcept override;

  Worker& worker_;
  std::shared_ptr<const Snapshot> snap_;
  const config::ListenerConfig* listener_cfg_ = nullptr;
  const Pool* listener_pool_ = nullptr;
  ListenerSlot slot_;
  net::TcpTransport tcp_;
  std::unique_ptr<tls::TlsTransport> tls_;
  net::Transport* transport_ = &tcp_;
  ClientCodec* codec_ = nullptr;  // null until the handshake (TLS) or accept (cleartext)
  std::unique_ptr<char[]> ip6_;   // an IPv6 client's address as text, made at first use
  uint8_t ip6_len_ = 0;
  bool closing_ = false;
};

}  // namespace rondel::proxy
