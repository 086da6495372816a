// BackendSocket: the one connector to a backend, for backend connections (BackendConn) and
// health checks alike: a TCP connect to the backend's address (net::TcpTransport::connect) and,
// for a pool with `tls`, a tls::TlsTransport in client mode over it.
//
// Embedded by value in its owner, which is the TransportEvents of the top transport. The calls
// below go to the concrete transport (no virtual call on the plain path). Loop thread only.
#pragma once

#include <uv.h>

#include <memory>
#include <string>

#include "rondel/net/out_queue.h"
#include "rondel/net/tcp_transport.h"
#include "rondel/proxy/backend_link.h"
#include "rondel/tls/tls_transport.h"

namespace rondel::proxy {

class BackendState;

class BackendSocket {
 public:
  // Starts connecting to `state` as `target` says (TLS under target.tls, its PROXY header
  // first); `events` hears on_transport_connected (net/transport.h). 0 or a libuv error;
  // whatever it returns, the owner ends with close().
  int connect(uv_loop_t* loop, const BackendState& state, const BackendTarget& target,
              net::TransportEvents& events) noexcept;
  // Closes the connection (idempotent): true when a transport was opened, on_transport_closed
  // following from the loop; false when none was (connect() not called, or it failed before
  // opening one: no on_transport_closed then).
  bool close() noexcept;

  tls::TlsTransport* tls() const noexcept { return tls_.get(); }
  // The pool context a TLS connection was made under (nullptr: plain).
  const tls::ClientContext* tls_context() const noexcept {
    return tls_ ? tls_->client_context() : nullptr;
  }
  int start_reading() noexcept { return tls_ ? tls_->start_reading() : tcp_.start_reading(); }
  void stop_reading() noexcept {
    if (tls_) tls_->stop_reading();
    else tcp_.stop_reading();
  }
  // net::Transport::write; q.req.data belongs to the transport while a write is pending.
  int write(net::OutQueue& q) noexcept { return tls_ ? tls_->write(q) : tcp_.write(q); }
  // The fd for splice: -1 on TLS and while closing.
  int splice_fd() const noexcept { return tls_ ? -1 : tcp_.splice_fd(); }

  // The name a TLS connection to `state` sends as SNI and verifies: the pool's `sni`, else the
  // backend's configured host name, else its address.
  static std::string server_name(const BackendState& state, const BackendTarget& target);

 private:
  net::TcpTransport tcp_;
  std::unique_ptr<tls::TlsTransport> tls_;
  bool started_ = false;
};

}  // namespace rondel::proxy
