// Transport: the byte stream a client codec or a backend connection reads and writes (plain TCP,
// or TLS over it), so the codec and everything behind it (Exchange, routing) never touch a socket
// directly.
//
// One Transport per connection, driven by one TransportEvents (the codec, the BackendConn, a
// health check). An accepted connection is ready at once; a connecting one (TcpTransport::connect,
// TlsTransport::connect) reports on_transport_connected first. Reads go into
// a buffer the codec supplies; a write takes an OutQueue and reports backpressure (a pending
// write) and completion. At most one write is pending at a time. Loop thread only.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

#include <string_view>

#include "rondel/net/uv_util.h"
#include "rondel/net/out_queue.h"

namespace rondel::net {

// What a transport reports to its codec. Callbacks run on the loop thread and must not throw.
class TransportEvents {
 public:
  // The buffer the next read fills (`buf->len` 0: no room, reading stops on its own).
  virtual void on_transport_alloc(uv_buf_t* buf) noexcept = 0;
  // `n` > 0 bytes arrived at the start of the last buffer given; `n` < 0: EOF or an error.
  virtual void on_transport_read(ssize_t n) noexcept = 0;
  // The pending write finished (status < 0: failed or cancelled by close()).
  virtual void on_transport_written(int status) noexcept = 0;
  // close() completed: nothing of the transport is in use any more; the owner may free it.
  virtual void on_transport_closed() noexcept = 0;
  // A TLS handshake completed with `alpn` negotiated ("h2", "http/1.1", or empty: none), before
  // the first read is delivered. Default: nothing (a plain transport never calls it).
  virtual void on_transport_ready(std::string_view alpn) noexcept { (void)alpn; }
  // A connect ended (TCP connected and, over TLS, the client handshake done): 0, or a libuv
  // error (UV_EPROTO: the TLS handshake failed). Default: nothing (an accepted connection).
  virtual void on_transport_connected(int status) noexcept { (void)status; }

 protected:
  ~TransportEvents() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Starts or stops delivering reads (idempotent). start_reading returns 0 or a libuv error.
  virtual int start_reading() noexcept = 0;
  virtual void stop_reading() noexcept = 0;
  // Writes `q` as far as the peer takes it now: 0 = all written (q is cleared), 1 = the rest is
  // pending (backpressure: on_transport_written follows; q must stay untouched until then),
  // < 0 = error. Sets q.sent_now to the bytes written at once.
  virtual int write(OutQueue& q) noexcept = 0;
  // Half-closes the sending side after pending writes; 0 or a libuv error.
  virtual int shutdown() noexcept = 0;
  // Closes the connection (idempotent); on_transport_closed follows, from the loop.
  virtual void close() noexcept = 0;
  virtual bool closing() const noexcept = 0;
  // The client's address: the peer's (read once, at accept), or the source a PROXY protocol
  // header carried (set before the codec's first read).
  virtual const PeerAddr& peer() const noexcept = 0;
  // The local address the connection arrived on (or the destination a PROXY header carried);
  // false if unknown.
  virtual bool local_address(sockaddr_storage* out) const noexcept = 0;
  // The socket's fd when bytes written to it straight (splice) reach the peer as they are; -1
  // otherwise (TLS: the bytes must be encrypted). Default: -1.
  virtual int splice_fd() const noexcept { return -1; }
  // True when write() is done with q's buffers once it returns, even when it returns 1 (TLS:
  // the plaintext is encrypted into the transport's own output at once), so the caller may
  // change them right away. Default: false (they must stay until on_transport_written).
  virtual bool consumes_on_write() const noexcept { return false; }
};

}  // namespace rondel::net
