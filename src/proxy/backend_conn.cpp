// BackendConn: connect, read into pooled buffers, idle keep-alive, timers.
#include "rondel/proxy/backend_conn.h"

#include <cstring>

#include "rondel/net/proxy_header_writer.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/worker.h"
#include "rondel/tls/client_tls.h"

namespace rondel::proxy {

BackendConn::BackendConn(Worker& worker, BackendState& state) : worker_(worker), state_(&state) {}

BackendConn::~BackendConn() = default;

BackendConn* BackendConn::connect(Worker& worker, BackendState& state, const Target& target,
                                  BackendEvents* owner, int* err) {
  auto* c = new BackendConn(worker, state);
  c->reuse_key_ = target.reuse_key;
  static_assert(sizeof(ProxyOut::bytes) >= net::kProxyV2MaxBytes);
  if (!target.proxy_header.empty() && target.proxy_header.size() <= sizeof(ProxyOut::bytes)) {
    c->proxy_out_ = std::make_unique<ProxyOut>();
    std::memcpy(c->proxy_out_->bytes, target.proxy_header.data(), target.proxy_header.size());
    c->proxy_out_->len = target.proxy_header.size();
  }
  if (target.tls) {
    c->tls_ = tls::ClientTls::start(target.tls, state.id(), tls_name(state, target));
    if (!c->tls_) {
      delete c;
      *err = UV_ENOMEM;
      return nullptr;
    }
    uv_timer_init(worker.loop(), &c->kick_);
    c->kick_.data = c;
    c->wire_req_.data = c;
  }
  uv_tcp_init(worker.loop(), &c->tcp_);
  uv_timer_init(worker.loop(), &c->timer_);
  c->tcp_.data = c;
  c->timer_.data = c;
  c->connect_req_.data = c;
  c->deadline_.init(&c->timer_, &on_timer);
  c->owner_ = owner;
  c->exchanges_ = 1;
  ++state.open_connections;
  worker.stats().backend_connections_open.fetch_add(1, std::memory_order_relaxed);
  int rc = uv_tcp_connect(&c->connect_req_, &c->tcp_,
                          reinterpret_cast<const sockaddr*>(&state.addr()), &on_connect);
  if (rc != 0) {
    *err = rc;
    c->owner_ = nullptr;
    c->close();
    return nullptr;
  }
  uv_tcp_nodelay(&c->tcp_, 1);
  return c;
}

void BackendConn::on_connect(uv_connect_t* req, int status) noexcept {
  auto* c = static_cast<BackendConn*>(req->data);
  if (c->closing()) return;  // status is UV_ECANCELED after close()
  BackendEvents* owner = c->owner_;
  if (status == 0 && c->proxy_out_) c->write_proxy_header();  // ahead of TLS and the request
  if (status == 0 && c->tls_) c->handshaking_ = true;
  if (status == 0) c->resume_reading();
  if (status == 0 && c->tls_) {
    c->tls_handshake();  // the owner hears on_backend_connected once it ends
    return;
  }
  if (owner != nullptr) owner->on_backend_connected(c, status);
}

void BackendConn::write_proxy_header() noexcept {
  // Later writes queue behind it: uv_try_write refuses while libuv holds a queued write.
  uv_buf_t b = uv_buf_init(proxy_out_->bytes, static_cast<unsigned>(proxy_out_->len));
  int r = uv_try_write(stream(), &b, 1);
  if (r == static_cast<int>(proxy_out_->len)) return;
  const size_t done = r > 0 ? static_cast<size_t>(r) : 0;
  b.base += done;
  b.len -= static_cast<unsigned>(done);
  // A failure shows on the request's own write or read, which follow on the same socket.
  uv_write(&proxy_out_->req, stream(), &b, 1, [](uv_write_t*, int) noexcept {});
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
  if (tls_) {
    tls_deliver();  // anything already decrypted or buffered is a stray byte: it closes
    if (closing()) return;
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
  if (tls_ && !handshaking_) tls_->drain();
  handshaking_ = false;  // an abandoned handshake is the owner's (a timeout counts in on_timer)
  if (state_ != nullptr) {
    state_->remove_idle(this);
    --state_->open_connections;
    state_ = nullptr;
  }
  worker_.stats().backend_connections_open.fetch_sub(1, std::memory_order_relaxed);
  deadline_.stop();
  close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
  if (tls_) close_handle(reinterpret_cast<uv_handle_t*>(&kick_));
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
  uv_os_fd_t fd = -1;
  if (tls_ || closing()) return -1;  // TLS: the bytes must be decrypted, never spliced
  if (uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) != 0) return -1;
  return fd;
}

void BackendConn::consume(size_t n) noexcept {
  rpos_ += n;
  if (rpos_ == rlen_) rpos_ = rlen_ = kReadStart;
}

void BackendConn::pause_reading() noexcept {
  if (reading_ || held_) {
    uv_read_stop(stream());
    reading_ = held_ = false;
  }
}

void BackendConn::hold_reading() noexcept {
  if (tls_) {
    pause_reading();  // ciphertext read while held would pile up in OpenSSL
    return;
  }
  if (reading_) {
    reading_ = false;
    held_ = true;
  }
}

void BackendConn::resume_reading() noexcept {
  if (reading_ || closing() || eof_) return;
  if (held_) {  // the watcher never stopped
    held_ = false;
    reading_ = true;
    return;
  }
  if (tls_) {
    // The socket may have ended with plaintext still to deliver: no read to restart then.
    if (!tcp_eof_ && uv_read_start(stream(), &on_alloc, &on_read) != 0) return;
    reading_ = true;
    if (!handshaking_) kick();
    return;
  }
  if (uv_read_start(stream(), &on_alloc, &on_read) == 0) reading_ = true;
}

int BackendConn::write(net::OutQueue& q, uv_write_cb cb) noexcept {
  if (tls_) return tls_write(q, cb);
  return q.flush(stream(), cb);
}

const tls::ClientContext* BackendConn::tls_context() const noexcept {
  return tls_ ? tls_->context() : nullptr;
}

void BackendConn::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  auto* c = static_cast<BackendConn*>(h->data);
  if (c->held_) {
    // Held: no byte may land in the buffer (a sink may still be sending from it). No room makes
    // libuv report UV_ENOBUFS without reading; on_read stops the watcher then.
    *buf = uv_buf_init(nullptr, 0);
    return;
  }
  if (c->tls_) {
    *buf = cipher_buffer();
    return;
  }
  if (c->owner_ == nullptr || c->done_) {
    *buf = uv_buf_init(c->idle_byte_, sizeof c->idle_byte_);
    return;
  }
  c->take_buffer();
  if (c->rpos_ > kReadStart && c->rlen_ == c->capacity()) c->compact();  // unlikely
  *buf = uv_buf_init(c->buf_ + c->rlen_, c->capacity() - c->rlen_);
}

void BackendConn::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) noexcept {
  auto* c = static_cast<BackendConn*>(s->data);
  if (nread == 0) return;
  if (nread == UV_ENOBUFS && c->held_) {  // bytes came while held: stop for real until resumed
    c->pause_reading();
    return;
  }
  if (c->tls_) c->tls_read(nread);
  else c->received(nread);
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
  if (rlen_ == capacity() && rpos_ == kReadStart) pause_reading();
  owner_->on_backend_data(this);
}

void BackendConn::arm_timer(uint64_t ms) noexcept {
  if (closing()) return;
  deadline_.set(ms);
}

void BackendConn::on_timer(uv_timer_t* t) noexcept {
  auto* c = static_cast<BackendConn*>(t->data);
  if (c->closing() || !c->deadline_.fire()) return;
  if (c->handshaking_) {
    c->handshaking_ = false;
    tls::backend_tls_stats().count(tls::BackendHandshake::kTimeout);
  }
  if (c->owner_ == nullptr) {
    c->close();
    return;
  }
  c->owner_->on_backend_timeout(c);
}

}  // namespace rondel::proxy
