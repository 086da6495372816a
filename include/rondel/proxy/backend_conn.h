// BackendConn: one TCP connection to a backend, plain or TLS (the pool's `tls`), busy with one
// client's exchange or idle in the backend's keep-alive pool.
//
// The connection reports to its owner (BackendEvents: an Exchange) through on_backend_* calls; while idle it
// has no owner and closes itself on any byte, EOF or its idle timeout. Its read buffer comes from
// the worker's BufferPool while busy and is returned when idle. On a TLS connection the
// handshake runs between the TCP connect and on_backend_connected (within the connect timeout),
// reads deliver decrypted bytes into the same buffer, write() encrypts, and fd() is -1 so that
// nothing is spliced past the encryption. Loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rondel/net/deadline.h"
#include "rondel/net/out_queue.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/worker.h"
#include "rondel/util/intrusive_list.h"

namespace rondel::tls {
class ClientContext;
class ClientTls;
}  // namespace rondel::tls

namespace rondel::proxy {

class BackendState;
class BackendConn;
class Worker;

// What a backend connection reports to the exchange it serves (its owner). The connection never
// knows the concrete owner: an Exchange in the daemon, a test's recorder in unit tests. Each call
// is made on the loop thread with the connection still alive; the owner may close or release
// the connection from inside it.
class BackendEvents {
 public:
  virtual ~BackendEvents() = default;
  // The connect (and TLS handshake) ended: 0, or a libuv error (UV_EPROTO: a failed handshake).
  virtual void on_backend_connected(BackendConn* conn, int status) noexcept = 0;
  // New bytes are available() (not all need be consumed now).
  virtual void on_backend_data(BackendConn* conn) noexcept = 0;
  // The backend closed (UV_EOF) or the connection failed (another libuv error).
  virtual void on_backend_eof(BackendConn* conn, int status) noexcept = 0;
  // The timer armed with arm_timer() expired.
  virtual void on_backend_timeout(BackendConn* conn) noexcept = 0;
};

// The tag of a backend's per-worker idle list (BackendState).
struct BackendIdleTag {};

class BackendConn final : public net::HandleCloser, public util::ListNode<BackendIdleTag> {
 public:
  // How to reach a backend: plain TCP (tls null) or TLS under the pool's context, naming the
  // backend `host_name` (its configured host name, "" for an address literal).
  struct Target {
    std::shared_ptr<const tls::ClientContext> tls;
    std::string_view host_name;
    // A PROXY protocol header to write first (before any TLS; empty: none), and the key that
    // an idle connection must match to be reused (0 without a header).
    std::string_view proxy_header;
    uint64_t reuse_key = 0;
  };
  // Starts a non-blocking connect (and TLS handshake) to `state` for `owner`; the owner hears
  // on_backend_connected(conn, status), status UV_EPROTO for a failed handshake (counted). Returns
  // nullptr (and sets *err) if the socket could not even be created (e.g. out of file
  // descriptors).
  static BackendConn* connect(Worker& worker, BackendState& state, const Target& target,
                              BackendEvents* owner, int* err);

  // Takes an idle connection for `owner` and starts reading into a buffer.
  void attach(BackendEvents* owner) noexcept;
  // The owner is done and the connection may be reused: back to the idle pool.
  void release_to_idle(uint64_t idle_timeout_ms) noexcept;
  // Closes the connection, detaching any owner silently.
  void close() noexcept;

  // Writes `q` as OutQueue::flush does (0 all written, 1 pending: `cb` runs with &q.req, < 0
  // error); on TLS the bytes are encrypted at once and q's buffers are free on return.
  int write(net::OutQueue& q, uv_write_cb cb) noexcept;
  // The socket's fd for splice: -1 while closing and on TLS connections.
  int fd() const noexcept;
  // The pool context a TLS connection was made under (nullptr: plain): an idle connection is
  // reused only by a pool snapshot with the same context.
  const tls::ClientContext* tls_context() const noexcept;
  uint64_t reuse_key() const noexcept { return reuse_key_; }
  BackendState* state() const noexcept { return state_; }
  bool reused() const noexcept { return exchanges_ > 1; }

  // Unconsumed received bytes; the owner consumes what it has parsed and forwarded.
  const char* data() const noexcept { return buf_ + rpos_; }
  size_t available() const noexcept { return rlen_ - rpos_; }
  void consume(size_t n) noexcept;
  // The buffer class the next reads go into (BufferPool): kLarge while a large response body
  // streams on the copy path. The buffer is swapped once it holds nothing unconsumed; attach()
  // and release_to_idle() set kSmall again, and an idle connection holds no buffer.
  void set_read_class(BufferPool::Class c) noexcept { want_class_ = c; }
  // Gives the read buffer back now if it holds nothing unconsumed (a splice moves the body
  // without it); the next read takes one again.
  void shed_buffer() noexcept { drop_buffer(); }
  void pause_reading() noexcept;
  // Stops taking bytes as pause_reading does, but lazily: the read watcher stays (a stop and a
  // restart are two epoll_ctl calls, per pause on the response path), and only a read event
  // while held stops it. For a pause the exchange expects to end soon (the sink's
  // backpressure). TLS connections pause.
  void hold_reading() noexcept;
  void resume_reading() noexcept;
  bool eof() const noexcept { return eof_; }
  // The owner's response is complete: the connection keeps its read watcher (no epoll change per
  // request) but any later byte or EOF only marks it unusable and stops reading.
  void expect_no_more() noexcept { done_ = true; }
  // Nothing unread, no EOF, no stray byte after the response: fit for the idle pool.
  bool clean() const noexcept { return !eof_ && !junk_ && rlen_ == rpos_; }

  // Arms the single timer; when it fires the owner hears on_backend_timeout(). 0 disarms.
  // O(1) in the common case (net::Deadline).
  void arm_timer(uint64_t ms) noexcept;

 private:
  friend class BackendState;
  BackendConn(Worker& worker, BackendState& state);
  ~BackendConn() override;
  void on_all_closed() noexcept override;
  void take_buffer() noexcept;
  void drop_buffer() noexcept;
  void compact() noexcept;  // unconsumed bytes to kReadStart
  static void on_connect(uv_connect_t* req, int status) noexcept;
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_timer(uv_timer_t* t) noexcept;
  void write_proxy_header() noexcept;
  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  // What a read brought (plaintext already at buf_ + rlen_ or in idle_byte_, or n < 0: EOF).
  void received(ssize_t n) noexcept;

  // TLS (backend_conn_tls.cpp).
  void tls_read(ssize_t n) noexcept;           // ciphertext in t_cipher, or EOF
  void tls_handshake() noexcept;               // advances it; reports to the owner at its end
  void tls_deliver() noexcept;                 // decrypts into the read target while reading
  int tls_write(net::OutQueue& q, uv_write_cb cb) noexcept;
  int flush_wire() noexcept;                   // 0 all out now, 1 pending, < 0 error
  void kick() noexcept;                        // deliver buffered plaintext from the loop
  static void on_wire_written(uv_write_t* req, int status) noexcept;
  static uv_buf_t cipher_buffer() noexcept;    // one per thread: reads are handed on at once
  // The server name a TLS connection to `state` sends and verifies.
  static std::string tls_name(const BackendState& state, const Target& target);
  static void on_kick(uv_timer_t* t) noexcept;

  Worker& worker_;
  BackendState* state_;
  BackendEvents* owner_ = nullptr;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_connect_t connect_req_{};
  // Reads start kReadStart bytes into buf_: the headroom a sink may write in front of a body
  // piece (kBodyHeadroom, response_sink.h). [rpos_, rlen_) is received and not consumed.
  static constexpr size_t kReadStart = kBodyHeadroom;
  char* buf_ = nullptr;
  size_t rpos_ = kReadStart, rlen_ = kReadStart;
  BufferPool::Class buf_class_ = BufferPool::Class::kSmall;   // buf_'s class
  BufferPool::Class want_class_ = BufferPool::Class::kSmall;  // the class the next one takes
  // Where reads into buf_ stop: the end of a small buffer; in a large one the last multiple of
  // kBodyPieceGrain past kReadStart (response_sink.h), 65,516 of its 65,536 bytes.
  static constexpr size_t kLargeReadEnd =
      kReadStart + (BufferPool::kLargeSize - kReadStart) / kBodyPieceGrain * kBodyPieceGrain;
  static_assert(kLargeReadEnd - kReadStart == 4 * kBodyPieceGrain);
  size_t capacity() const noexcept {
    return buf_class_ == BufferPool::Class::kLarge ? kLargeReadEnd : BufferPool::kSize;
  }
  uint64_t exchanges_ = 0;
  bool reading_ = false;
  bool held_ = false;  // hold_reading: the watcher is on, but no byte is taken
  bool eof_ = false;
  bool done_ = false;  // expect_no_more() since the last attach
  bool junk_ = false;  // a byte arrived after the response
  net::Deadline deadline_;
  char idle_byte_[64];  // read target while idle: any byte there means "close"

  // The PROXY header written at connection start (null without one); lives until closed.
  struct ProxyOut {
    uv_write_t req{};
    char bytes[64];
    size_t len = 0;
  };
  std::unique_ptr<ProxyOut> proxy_out_;
  uint64_t reuse_key_ = 0;

  // TLS state (null for plain connections).
  std::unique_ptr<tls::ClientTls> tls_;
  uv_timer_t kick_{};          // deferred delivery of plaintext buffered in tls_
  uv_write_t wire_req_{};
  std::string wire_flight_;    // ciphertext being written
  net::OutQueue* codec_q_ = nullptr;  // the owner's write waiting for the ciphertext to go out
  uv_write_cb codec_cb_ = nullptr;
  size_t wire_took_ = 0;       // ciphertext the socket took at once in the last flush_wire()
  bool handshaking_ = false;
  bool wire_pending_ = false;
  bool tcp_eof_ = false;       // the socket ended (delivered once the plaintext is drained)

  uint32_t idle_worker_ = 0;  // whose idle list holds it (the ListNode links it there)
};

}  // namespace rondel::proxy
