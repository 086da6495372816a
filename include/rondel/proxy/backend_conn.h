// BackendConn: one TCP connection to a backend, plain or TLS (the pool's `tls`), busy with one
// client's exchange or idle in the backend's keep-alive pool.
//
// The connection reports to its owner (BackendEvents: an Exchange) through on_backend_* calls;
// while idle it has no owner and closes itself on any byte, EOF or its idle timeout. Its read
// buffer comes from the worker's BufferPool while busy and is returned when idle. The socket is a
// BackendSocket (the one connector, shared with health checks): plain TCP, or TLS through
// tls::TlsTransport in client mode, whose handshake runs between the TCP connect and
// on_backend_connected (within the connect timeout); reads deliver decrypted bytes into the same
// buffer, write() encrypts, and fd() is -1 so that nothing is spliced past the encryption. Loop
// thread only.
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
#include "rondel/proxy/backend_link.h"
#include "rondel/proxy/backend_socket.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/worker.h"
#include "rondel/util/intrusive_list.h"

namespace rondel::proxy {

class BackendState;
class Worker;

// The tag of a backend's per-worker idle list (BackendState).
struct BackendIdleTag {};

class BackendConn final : public BackendLink,
                          public net::HandleCloser,
                          public util::ListNode<BackendIdleTag>,
                          private net::TransportEvents {
 public:
  using Target = BackendTarget;
  // Starts a non-blocking connect (and TLS handshake) to `state` for `owner`; the owner hears
  // on_backend_connected(conn, status), status UV_EPROTO for a failed handshake (counted). Returns
  // nullptr (and sets *err) if the socket could not even be created (e.g. out of file
  // descriptors).
  static BackendConn* connect(Worker& worker, BackendState& state, const Target& target,
                              BackendEvents* owner, int* err);

  // Takes an idle connection for `owner` and starts reading into a buffer.
  void attach(BackendEvents* owner) noexcept;
  // The owner is done and the connection may be reused: back to the idle pool.
  void release_to_idle(uint64_t idle_timeout_ms) noexcept override;
  // Closes the connection, detaching any owner silently.
  void close() noexcept override;

  // Writes `q` as OutQueue::flush does (0 all written, 1 pending: `cb` runs with &q.req, < 0
  // error); on TLS the bytes are encrypted at once and q's buffers are free on return.
  int write(net::OutQueue& q, uv_write_cb cb) noexcept override;
  // The socket's fd for splice: -1 while closing and on TLS connections.
  int fd() const noexcept override;
  // The pool context a TLS connection was made under (nullptr: plain): an idle connection is
  // reused only by a pool snapshot with the same context.
  const tls::ClientContext* tls_context() const noexcept { return sock_.tls_context(); }
  uint64_t reuse_key() const noexcept { return reuse_key_; }
  BackendState* state() const noexcept override { return state_; }
  bool reused() const noexcept override { return exchanges_ > 1; }

  // Unconsumed received bytes; the owner consumes what it has parsed and forwarded.
  const char* data() const noexcept override { return buf_ + rpos_; }
  size_t available() const noexcept override { return rlen_ - rpos_; }
  void consume(size_t n) noexcept override;
  // The buffer class the next reads go into (BufferPool): kLarge while a large response body
  // streams on the copy path. The buffer is swapped once it holds nothing unconsumed; attach()
  // and release_to_idle() set kSmall again, and an idle connection holds no buffer.
  void set_read_class(BufferPool::Class c) noexcept override { want_class_ = c; }
  // Gives the read buffer back now if it holds nothing unconsumed (a splice moves the body
  // without it); the next read takes one again.
  void shed_buffer() noexcept override { drop_buffer(); }
  void pause_reading() noexcept override;
  // Stops taking bytes as pause_reading does, but lazily: the read watcher stays (a stop and a
  // restart are two epoll_ctl calls, per pause on the response path), and only a read event
  // while held stops it. For a pause the exchange expects to end soon (the sink's
  // backpressure). TLS connections pause.
  void hold_reading() noexcept override;
  // Reads again. A plain connection whose watcher stopped while bytes waited (parked: a read
  // event while held, or a full buffer) reads them at once with recv(2), as the watcher would
  // have, and restarts the watcher only when a read leaves the socket dry: a response that
  // outruns its sink costs no epoll change per pause.
  void resume_reading() noexcept override;
  bool eof() const noexcept override { return eof_; }
  // The owner's response is complete: the connection keeps its read watcher (no epoll change per
  // request) but any later byte or EOF only marks it unusable and stops reading.
  void expect_no_more() noexcept override { done_ = true; }
  // Nothing unread, no EOF, no stray byte after the response: fit for the idle pool.
  bool clean() const noexcept override { return !eof_ && !junk_ && rlen_ == rpos_; }

  // Arms the single timer; when it fires the owner hears on_backend_timeout(). 0 disarms.
  // O(1) in the common case (net::Deadline).
  void arm_timer(uint64_t ms) noexcept override;

 private:
  friend class BackendState;
  BackendConn(Worker& worker, BackendState& state);
  ~BackendConn() override;
  void on_all_closed() noexcept override;
  void take_buffer() noexcept;
  void drop_buffer() noexcept;
  void compact() noexcept;  // unconsumed bytes to kReadStart
  static void on_timer(uv_timer_t* t) noexcept;
  // What a read brought (plaintext already at buf_ + rlen_ or in idle_byte_, or n < 0: EOF).
  void received(ssize_t n) noexcept;
  // Stops the watcher with bytes waiting in the socket (parked_ on a plain connection).
  void park() noexcept;
  // Parked: reads directly until the owner stops asking, the socket is dry (the watcher takes
  // over) or kDirectReads reads in one call. Reentrant calls from a delivery loop here.
  void read_parked() noexcept;
  // One recv(2) into the buffer, delivered through received().
  void read_direct() noexcept;
  static constexpr int kDirectReads = 16;
  // The transport's side (the socket's top transport reports here).
  void on_transport_connected(int status) noexcept override;
  void on_transport_alloc(uv_buf_t* buf) noexcept override;
  void on_transport_read(ssize_t n) noexcept override;
  void on_transport_written(int status) noexcept override;
  void on_transport_closed() noexcept override { other_closed(); }
  // Counts a TLS handshake's end and logs a failure.
  void handshake_ended(const tls::TlsTransport& tls, int status) noexcept;

  Worker& worker_;
  BackendState* state_;
  BackendEvents* owner_ = nullptr;
  BackendSocket sock_;
  uv_timer_t timer_{};
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
  bool parked_ = false;     // the watcher stopped while bytes waited: resume reads directly
  bool in_direct_ = false;  // read_parked is delivering
  bool again_ = false;      // resume_reading was called during that delivery
  bool eof_ = false;
  bool done_ = false;  // expect_no_more() since the last attach
  bool junk_ = false;  // a byte arrived after the response
  net::Deadline deadline_;
  char idle_byte_[64];  // read target while idle: any byte there means "close"

  uint64_t reuse_key_ = 0;
  // The owner's write pending on the transport, its callback and its request's data (the
  // transport uses q.req.data until the write completes).
  net::OutQueue* codec_q_ = nullptr;
  uv_write_cb codec_cb_ = nullptr;
  void* codec_data_ = nullptr;

  uint32_t idle_worker_ = 0;  // whose idle list holds it (the ListNode links it there)
};

}  // namespace rondel::proxy
