// The backend seam: what an exchange asks of the backend connection it runs on (BackendLink),
// what the connection reports back (BackendEvents), and the one place an exchange gets a
// connection (BackendConnector). BackendConn implements the link over a socket and
// default_backend_connector() gives idle or new BackendConns; a unit test implements all three
// with a scripted peer and no socket. Loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "rondel/net/out_queue.h"
#include "rondel/proxy/worker.h"

namespace rondel::tls {
class ClientContext;
}

namespace rondel::proxy {

class BackendLink;
class BackendState;

// What a backend connection reports to the exchange it serves (its owner). Each call is made on
// the loop thread with the connection still alive; the owner may close or release the
// connection from inside it.
class BackendEvents {
 public:
  virtual ~BackendEvents() = default;
  // The connect (and TLS handshake) ended: 0, or a libuv error (UV_EPROTO: a failed handshake).
  virtual void on_backend_connected(BackendLink* conn, int status) noexcept = 0;
  // New bytes are available() (not all need be consumed now).
  virtual void on_backend_data(BackendLink* conn) noexcept = 0;
  // The backend closed (UV_EOF) or the connection failed (another libuv error).
  virtual void on_backend_eof(BackendLink* conn, int status) noexcept = 0;
  // The timer armed with arm_timer() expired.
  virtual void on_backend_timeout(BackendLink* conn) noexcept = 0;
};

// One connection to a backend as its owner uses it.
class BackendLink {
 public:
  virtual ~BackendLink() = default;
  // The owner is done and the connection may be reused: back to the idle pool.
  virtual void release_to_idle(uint64_t idle_timeout_ms) noexcept = 0;
  // Closes the connection, detaching any owner silently.
  virtual void close() noexcept = 0;
  // Writes `q` as OutQueue::flush does (0 all written, 1 pending: `cb` runs with &q.req, < 0
  // error); a link that encrypts takes q's bytes at once.
  virtual int write(net::OutQueue& q, uv_write_cb cb) noexcept = 0;
  // The socket's fd for splice: -1 when it has none to splice from or to (TLS, a test's link).
  virtual int fd() const noexcept = 0;
  virtual BackendState* state() const noexcept = 0;
  // Whether the connection served an exchange before this one (an idle one reused).
  virtual bool reused() const noexcept = 0;
  // Unconsumed received bytes; the owner consumes what it has parsed and forwarded.
  virtual const char* data() const noexcept = 0;
  virtual size_t available() const noexcept = 0;
  virtual void consume(size_t n) noexcept = 0;
  // Reads go into buffers of this class from now (kLarge while a large body streams).
  virtual void set_read_class(BufferPool::Class c) noexcept = 0;
  // Gives the read buffer back now if it holds nothing unconsumed.
  virtual void shed_buffer() noexcept = 0;
  // Stops reading (pause), stops taking bytes lazily (hold), reads again (resume).
  virtual void pause_reading() noexcept = 0;
  virtual void hold_reading() noexcept = 0;
  virtual void resume_reading() noexcept = 0;
  virtual bool eof() const noexcept = 0;
  // The owner's response is complete: a later byte or EOF only marks the connection unusable.
  virtual void expect_no_more() noexcept = 0;
  // Nothing unread, no EOF, no stray byte after the response: fit for the idle pool.
  virtual bool clean() const noexcept = 0;
  // Arms the single timer (on_backend_timeout when it fires); 0 disarms.
  virtual void arm_timer(uint64_t ms) noexcept = 0;
};

// How to reach a backend: plain TCP (tls null) or TLS under the pool's context, naming the
// backend `host_name` (its configured host name, "" for an address literal).
struct BackendTarget {
  std::shared_ptr<const tls::ClientContext> tls;
  std::string_view host_name;
  // A PROXY protocol header to write first (before any TLS; empty: none), and the key that an
  // idle connection must match to be reused (0 without a header).
  std::string_view proxy_header;
  uint64_t reuse_key = 0;
  // Another port on the backend's address (agent checks); 0 = the backend's own.
  uint16_t port = 0;
};

// Where an exchange gets its backend connection (Worker::backend_connector()).
class BackendConnector {
 public:
  virtual ~BackendConnector() = default;
  // A connection to `state` for `owner`: with `allow_idle`, an idle one of worker `w` made
  // under the same TLS context and PROXY header (*fresh false: the owner may write at once);
  // else a new connect (*fresh true: on_backend_connected follows). Null when no socket could
  // be had (*err set).
  virtual BackendLink* acquire(Worker& w, BackendState& state, const BackendTarget& target,
                               BackendEvents* owner, bool allow_idle, bool* fresh,
                               int* err) noexcept = 0;
};

// The daemon's connector: BackendConns, idle ones first.
BackendConnector& default_backend_connector() noexcept;

}  // namespace rondel::proxy
