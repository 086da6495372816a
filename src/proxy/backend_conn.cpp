// BackendConn: connect (through BackendSocket), read into pooled buffers, idle keep-alive,
// timers.
#include "rondel/proxy/backend_conn.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/worker.h"
#include "rondel/tls/tls_transport.h"

namespace rondel::proxy {

BackendConn::BackendConn(Worker& worker, BackendState& state) : worker_(worker), state_(&state) {}

BackendConn::~BackendConn() = default;

BackendConn* BackendConn::connect(Worker& worker, BackendState& state, const Target& target,
                                  BackendEvents* owner, int* err) {
  auto* c = new BackendConn(worker, state);
  c->reuse_key_ = target.reuse_key;
  uv_timer_init(worker.loop(), &c->timer_);
  c->timer_.data = c;
  c->deadline_.init(&c->timer_, &on_timer);
  c->owner_ = owner;
  c->exchanges_ = 1;
  ++state.open_connections;
  worker.stats().backend_connections_open.fetch_add(1, std::memory_order_relaxed);
  int rc = c->sock_.connect(worker.loop(), state, target, *c);
  if (rc != 0) {
    *err = rc;
    c->owner_ = nullptr;
    c->close();
    return nullptr;
  }
  return c;
}

void BackendConn::on_transport_connected(int status) noexcept {
  if (closing()) return;
  const tls::TlsTransport* t = sock_.tls();
  if (t != nullptr && (status == 0 || status == UV_EPROTO)) handshake_ended(*t, status);
  if (status == 0) resume_reading();
  if (owner_ != nullptr) owner_->on_backend_connected(this, status);
}

void BackendConn::handshake_ended(const tls::TlsTransport& t, int status) noexcept {
  const tls::BackendHandshake result = t.handshake_result();
  tls::backend_tls_stats().count(result);
  if (status == 0) return;
  std::string detail = "backend=" + (state_ != nullptr ? state_->id() : std::string("-")) +
                       " reason=" + std::string(tls::backend_handshake_name(result));
  if (auto v = t.verify_error(); !v.empty()) detail += " verify=\"" + std::string(v) + "\"";
  worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_tls_failed", detail);
}

void BackendConn::attach(BackendEvents* owner) noexcept {
  owner_ = owner;
  ++exchanges_;
  done_ = false;
  want_class_ = BufferPool::Class::kSmall;
  deadline_.clear();
  resume_reading();
}

void BackendConn::release_to_idle(uint64_t idle_timeout_ms) noexcept {
  owner_ = nullptr;
  // Anything already decrypted or buffered is a stray byte: it closes.
  if (tls::TlsTransport* t = sock_.tls(); t != nullptr && t->unread()) {
    close();
    return;
  }
  want_class_ = BufferPool::Class::kSmall;
  drop_buffer();
  if (state_ == nullptr || eof_ || junk_ || state_->retired.load(std::memory_order_relaxed)) {
    close();
    return;
  }
  resume_reading();
  arm_timer(idle_timeout_ms);
  state_->push_idle(worker_.id(), this);
}

void BackendConn::close() noexcept {
  if (closing()) return;
  owner_ = nullptr;
  if (state_ != nullptr) {
    state_->remove_idle(this);
    --state_->open_connections;
    state_ = nullptr;
  }
  worker_.stats().backend_connections_open.fetch_sub(1, std::memory_order_relaxed);
  deadline_.stop();
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
  if (sock_.close()) close_other();  // on_transport_closed follows from the loop
}

void BackendConn::on_all_closed() noexcept {
  // Unconditionally: a connection closed after a bad response may hold unconsumed bytes, which
  // drop_buffer() keeps (it only returns an empty buffer).
  if (buf_ != nullptr) {
    worker_.buffers().put(buf_, buf_class_);
    buf_ = nullptr;
  }
  delete this;
}

void BackendConn::take_buffer() noexcept {
  if (buf_ != nullptr && buf_class_ != want_class_) drop_buffer();  // swapped once empty
  if (buf_ == nullptr) {
    buf_ = worker_.buffers().get(want_class_);
    buf_class_ = want_class_;
    rpos_ = rlen_ = kReadStart;
  }
}

void BackendConn::compact() noexcept {
  // The owner left unconsumed bytes at the end of a full buffer: move them to the front.
  std::memmove(buf_ + kReadStart, buf_ + rpos_, rlen_ - rpos_);
  rlen_ = kReadStart + (rlen_ - rpos_);
  rpos_ = kReadStart;
}

void BackendConn::drop_buffer() noexcept {
  if (buf_ != nullptr && rpos_ == rlen_) {
    worker_.buffers().put(buf_, buf_class_);
    buf_ = nullptr;
    rpos_ = rlen_ = kReadStart;
  }
}

int BackendConn::fd() const noexcept {
  return closing() ? -1 : sock_.splice_fd();  // TLS: the bytes must be decrypted, never spliced
}

void BackendConn::consume(size_t n) noexcept {
  rpos_ += n;
  if (rpos_ == rlen_) rpos_ = rlen_ = kReadStart;
}

void BackendConn::pause_reading() noexcept {
  if (reading_ || held_) {
    sock_.stop_reading();
    reading_ = held_ = false;
  }
}

void BackendConn::hold_reading() noexcept {
  if (sock_.tls() != nullptr) {
    pause_reading();  // ciphertext read while held would pile up in OpenSSL
    return;
  }
  if (reading_) {
    reading_ = false;
    held_ = true;
  }
}

void BackendConn::park() noexcept {
  pause_reading();
  parked_ = fd() >= 0;  // TLS: the bytes must go through the decryption's own reads
}

void BackendConn::resume_reading() noexcept {
  if (reading_ || closing() || eof_) return;
  if (held_) {  // the watcher never stopped
    held_ = false;
    reading_ = true;
    return;
  }
  if (parked_ && owner_ != nullptr && !done_) {
    read_parked();
    return;
  }
  parked_ = false;
  if (sock_.start_reading() == 0) reading_ = true;
}

void BackendConn::read_parked() noexcept {
  if (in_direct_) {  // from inside a direct read's delivery: the loop below reads again
    again_ = true;
    return;
  }
  in_direct_ = true;
  int reads = 0;
  do {
    again_ = false;
    read_direct();
  } while (again_ && parked_ && !closing() && owner_ != nullptr && ++reads < kDirectReads);
  in_direct_ = false;
  // A body that keeps flowing this way yields to the loop after kDirectReads reads: the
  // watcher, level-triggered, fires again at once.
  if (again_ && parked_ && !closing() && owner_ != nullptr) {
    parked_ = false;
    if (sock_.start_reading() == 0) reading_ = true;
  }
}

void BackendConn::read_direct() noexcept {
  const int s = fd();
  if (s < 0) return;
  take_buffer();
  if (rpos_ > kReadStart && rlen_ == capacity()) compact();
  const size_t room = capacity() - rlen_;
  if (room == 0) return;  // the owner has not consumed: it resumes again once it has
  ssize_t n;
  do {
    n = ::recv(s, buf_ + rlen_, room, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  const int error = n < 0 ? errno : 0;
  if (n < 0 && (error == EAGAIN || error == EWOULDBLOCK)) {
    parked_ = false;
    if (sock_.start_reading() == 0) reading_ = true;
    return;
  }
  // A read that filled the room may have left more: stay parked. A shorter one drained the
  // socket: the watcher waits for the rest.
  parked_ = n > 0 && static_cast<size_t>(n) == room;
  if (n > 0 && !parked_ && sock_.start_reading() == 0) reading_ = true;
  received(n > 0 ? n : n == 0 ? UV_EOF : -error);
}

int BackendConn::write(net::OutQueue& q, uv_write_cb cb) noexcept {
  if (closing()) return UV_ECANCELED;
  void* data = q.req.data;
  const int r = sock_.write(q);
  if (r == 1) {  // on_transport_written gives q.req back to the owner with its data
    codec_q_ = &q;
    codec_cb_ = cb;
    codec_data_ = data;
  } else {
    q.req.data = data;
  }
  return r;
}

void BackendConn::on_transport_written(int status) noexcept {
  net::OutQueue* q = std::exchange(codec_q_, nullptr);
  if (q == nullptr) return;
  q->req.data = codec_data_;
  codec_cb_(&q->req, status);
}

void BackendConn::on_transport_alloc(uv_buf_t* buf) noexcept {
  if (held_) {
    // Held: no byte may land in the buffer (a sink may still be sending from it). No room makes
    // the transport report UV_ENOBUFS without reading; on_transport_read stops reading then.
    *buf = uv_buf_init(nullptr, 0);
    return;
  }
  if (owner_ == nullptr || done_) {
    *buf = uv_buf_init(idle_byte_, sizeof idle_byte_);
    return;
  }
  take_buffer();
  if (rpos_ > kReadStart && rlen_ == capacity()) compact();  // unlikely
  // Full (TLS: plaintext decrypted ahead of the owner): UV_ENOBUFS, reading stops until resumed.
  *buf = uv_buf_init(buf_ + rlen_, static_cast<unsigned>(capacity() - rlen_));
}

void BackendConn::on_transport_read(ssize_t nread) noexcept {
  if (nread == 0 || closing()) return;
  if (nread == UV_ENOBUFS) {  // bytes came while held, or the buffer is full: stop until resumed
    park();
    return;
  }
  received(nread);
}

void BackendConn::received(ssize_t nread) noexcept {
  if (owner_ == nullptr) {
    // Idle: the backend closed the connection or sent bytes nobody asked for.
    close();
    return;
  }
  if (done_) {
    // After the owner's response: nothing may arrive. Remember it; the owner decides.
    if (nread < 0) eof_ = true;
    else junk_ = true;
    pause_reading();
    return;
  }
  if (nread < 0) {
    eof_ = true;
    pause_reading();
    owner_->on_backend_eof(this, static_cast<int>(nread));
    return;
  }
  rlen_ += static_cast<size_t>(nread);
  if (state_ != nullptr)
    state_->counters.bytes_in.fetch_add(static_cast<uint64_t>(nread), std::memory_order_relaxed);
  // Full: hold, not stop. An owner that consumes before more bytes come costs no epoll change;
  // a read event before that parks the connection (on_transport_read).
  if (rlen_ == capacity() && rpos_ == kReadStart) hold_reading();
  owner_->on_backend_data(this);
}

void BackendConn::arm_timer(uint64_t ms) noexcept {
  if (closing()) return;
  deadline_.set(ms);
}

void BackendConn::on_timer(uv_timer_t* t) noexcept {
  auto* c = static_cast<BackendConn*>(t->data);
  if (c->closing() || !c->deadline_.fire()) return;
  if (const tls::TlsTransport* tls = c->sock_.tls(); tls != nullptr && tls->handshaking()) {
    tls::backend_tls_stats().count(tls::BackendHandshake::kTimeout);
  }
  if (c->owner_ == nullptr) {
    c->close();
    return;
  }
  c->owner_->on_backend_timeout(c);
}

}  // namespace rondel::proxy

namespace rondel::proxy {

namespace {

// The daemon's connector: an idle BackendConn of the worker that fits, else a new one.
class DefaultConnector final : public BackendConnector {
 public:
  BackendLink* acquire(Worker& w, BackendState& state, const BackendTarget& target,
                       BackendEvents* owner, bool allow_idle, bool* fresh,
                       int* err) noexcept override {
    if (allow_idle) {
      while (BackendConn* idle = state.pop_idle_matching(w.id(), target.reuse_key)) {
        // Made under another pool snapshot's TLS settings (a reload changed them): not reused.
        if (idle->tls_context() != target.tls.get()) {
          idle->close();
          continue;
        }
        idle->attach(owner);
        *fresh = false;
        return idle;
      }
    }
    *fresh = true;
    return BackendConn::connect(w, state, target, owner, err);
  }
};

}  // namespace

BackendConnector& default_backend_connector() noexcept {
  static DefaultConnector connector;
  return connector;
}

}  // namespace rondel::proxy
