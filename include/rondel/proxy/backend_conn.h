// BackendConn: one TCP connection to a backend, busy with one client's exchange or idle in the
// backend's keep-alive pool.
//
// The connection reports to its owner (an Exchange) through on_backend_* calls; while idle it
// has no owner and closes itself on any byte, EOF or its idle timeout. Its read buffer comes from
// the worker's BufferPool while busy and is returned when idle. Loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>

#include "rondel/net/deadline.h"
#include "rondel/net/uv_util.h"

namespace rondel::proxy {

class BackendState;
class Exchange;
class Worker;

class BackendConn final : public net::HandleCloser {
 public:
  // Starts a non-blocking connect to `state` for `owner`; the owner hears
  // on_backend_connected(conn, status). Returns nullptr (and sets *err) if the socket could not
  // even be created (e.g. out of file descriptors).
  static BackendConn* connect(Worker& worker, BackendState& state, Exchange* owner, int* err);

  // Takes an idle connection for `owner` and starts reading into a buffer.
  void attach(Exchange* owner) noexcept;
  // The owner is done and the connection may be reused: back to the idle pool.
  void release_to_idle(uint64_t idle_timeout_ms) noexcept;
  // Closes the connection, detaching any owner silently.
  void close() noexcept;

  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  // The socket's fd (for splice), -1 while closing.
  int fd() const noexcept;
  BackendState* state() const noexcept { return state_; }
  bool reused() const noexcept { return exchanges_ > 1; }

  // Unconsumed received bytes; the owner consumes what it has parsed and forwarded.
  const char* data() const noexcept { return buf_ + rpos_; }
  size_t available() const noexcept { return rlen_ - rpos_; }
  void consume(size_t n) noexcept;
  void pause_reading() noexcept;
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
  void on_all_closed() noexcept override;
  void take_buffer() noexcept;
  void drop_buffer() noexcept;
  static void on_connect(uv_connect_t* req, int status) noexcept;
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_timer(uv_timer_t* t) noexcept;

  Worker& worker_;
  BackendState* state_;
  Exchange* owner_ = nullptr;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_connect_t connect_req_{};
  char* buf_ = nullptr;
  size_t rpos_ = 0, rlen_ = 0;
  uint64_t exchanges_ = 0;
  bool reading_ = false;
  bool eof_ = false;
  bool done_ = false;  // expect_no_more() since the last attach
  bool junk_ = false;  // a byte arrived after the response
  net::Deadline deadline_;
  char idle_byte_[64];  // read target while idle: any byte there means "close"

  // Idle-list links (BackendState owns the list).
  BackendConn* idle_prev_ = nullptr;
  BackendConn* idle_next_ = nullptr;
  bool in_idle_list_ = false;
  uint32_t idle_worker_ = 0;  // whose idle list holds it
};

}  // namespace rondel::proxy
