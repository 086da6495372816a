// BackendConn, TLS connections: the handshake after the TCP connect, decrypting reads into the
// connection's read buffer, encrypting the owner's writes, and the deferred delivery of
// plaintext already decrypted when the owner resumes reading.
#include <uv.h>

#include <cstring>
#include <utility>

#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/worker.h"
#include "rondel/tls/client_tls.h"

namespace rondel::proxy {

namespace {

// Ciphertext read from a socket: alloc and read callbacks run back to back on the loop thread
// and every byte is fed to OpenSSL at once, so one buffer per thread serves every connection.
thread_local char t_cipher[16 * 1024];
// The wire buffer keeps at most this much capacity between writes (idle connections stay small).
constexpr size_t kKeepCapacity = 4096;

void trim(std::string& s) {
  s.clear();
  if (s.capacity() > kKeepCapacity) std::string().swap(s);
}

}  // namespace

uv_buf_t BackendConn::cipher_buffer() noexcept { return uv_buf_init(t_cipher, sizeof t_cipher); }

std::string BackendConn::tls_name(const BackendState& state, const Target& target) {
  std::string name(target.tls->server_name(target.host_name));
  if (!name.empty()) return name;
  // An address literal: its IP is what the certificate must name.
  char ip[64] = "";
  const auto* sa = reinterpret_cast<const sockaddr*>(&state.addr());
  if (sa->sa_family == AF_INET6) {
    uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(sa), ip, sizeof ip);
  } else {
    uv_ip4_name(reinterpret_cast<const sockaddr_in*>(sa), ip, sizeof ip);
  }
  return ip;
}

void BackendConn::tls_read(ssize_t n) noexcept {
  if (n < 0) {
    tcp_eof_ = true;
    // The socket is done reading; libuv stops on EOF by itself.
    if (handshaking_) tls_handshake();
    else tls_deliver();
    return;
  }
  tls_->feed(t_cipher, static_cast<size_t>(n));
  if (handshaking_) tls_handshake();
  else tls_deliver();
}

void BackendConn::tls_handshake() noexcept {
  tls::ClientTls::Step step = tls_->handshake();
  const int w = flush_wire();
  if (step == tls::ClientTls::Step::kMore && w >= 0 && !tcp_eof_) return;
  handshaking_ = false;
  tls::BackendHandshake result = tls_->result();
  if (step == tls::ClientTls::Step::kMore) result = tls::BackendHandshake::kEof;
  tls::backend_tls_stats().count(result);
  BackendEvents* owner = owner_;
  if (tls::handshake_ok(result)) {
    if (owner != nullptr) owner->on_backend_connected(this, 0);
    return;
  }
  std::string detail = "backend=" + (state_ != nullptr ? state_->id() : std::string("-")) +
                       " reason=" + std::string(tls::backend_handshake_name(result));
  if (auto v = tls_->verify_error(); !v.empty()) detail += " verify=\"" + std::string(v) + "\"";
  worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_tls_failed", detail);
  if (owner != nullptr) owner->on_backend_connected(this, UV_EPROTO);
}

void BackendConn::tls_deliver() noexcept {
  while (!closing() && (reading_ || owner_ == nullptr)) {
    char* dst = idle_byte_;
    size_t cap = sizeof idle_byte_;
    if (owner_ != nullptr && !done_) {
      take_buffer();
      if (rpos_ > kReadStart && rlen_ == capacity()) compact();
      if (rlen_ == capacity()) {
        pause_reading();  // the owner consumes, then resumes: kick() continues
        return;
      }
      dst = buf_ + rlen_;
      cap = capacity() - rlen_;
    }
    const ssize_t n = tls_->read(dst, cap);
    if (flush_wire() < 0) {
      received(UV_EPROTO);
      return;
    }
    if (n > 0) {
      received(n);
      continue;
    }
    if (n == 0 && !tcp_eof_) return;  // more ciphertext needed
    // close_notify, a TLS error, or the socket's end with nothing more to decrypt.
    received(n == 0 ? UV_EOF : (tcp_eof_ ? UV_EOF : UV_EPROTO));
    return;
  }
}

void BackendConn::kick() noexcept {
  if (tls_->buffered() || tcp_eof_) uv_timer_start(&kick_, &on_kick, 0, 0);
}

void BackendConn::on_kick(uv_timer_t* t) noexcept {
  auto* c = static_cast<BackendConn*>(t->data);
  if (!c->closing() && c->reading_ && !c->handshaking_) c->tls_deliver();
}

int BackendConn::tls_write(net::OutQueue& q, uv_write_cb cb) noexcept {
  q.sent_now = 0;
  if (q.n == 0) return 0;
  if (closing()) return UV_ECANCELED;
  for (int i = 0; i < q.n; ++i) {
    if (!tls_->write(q.bufs[i].base, q.bufs[i].len)) return UV_EPROTO;
  }
  const size_t bytes = q.bytes;
  wire_took_ = 0;
  const int r = flush_wire();
  if (r < 0) return r;
  // The request is encrypted: it counts as sent once the socket took ciphertext of it.
  q.sent_now = r == 0 || wire_took_ > 0 ? bytes : 0;
  q.clear();
  if (r == 0) return 0;
  q.pending = true;
  codec_q_ = &q;
  codec_cb_ = cb;
  return 1;
}

int BackendConn::flush_wire() noexcept {
  if (wire_pending_) return 1;
  std::string& next = tls_->wire();
  if (next.empty()) return 0;
  if (closing()) {
    next.clear();
    return UV_ECANCELED;
  }
  wire_flight_.swap(next);
  next.clear();
  uv_buf_t b = uv_buf_init(wire_flight_.data(), static_cast<unsigned>(wire_flight_.size()));
  int r = uv_try_write(stream(), &b, 1);
  if (r < 0 && r != UV_EAGAIN) {
    trim(wire_flight_);
    return r;
  }
  const size_t done = r > 0 ? static_cast<size_t>(r) : 0;
  wire_took_ = done;
  if (done == wire_flight_.size()) {
    trim(wire_flight_);
    return 0;
  }
  b.base += done;
  b.len -= static_cast<unsigned>(done);
  r = uv_write(&wire_req_, stream(), &b, 1, &on_wire_written);
  if (r != 0) {
    trim(wire_flight_);
    return r;
  }
  wire_pending_ = true;
  return 1;
}

void BackendConn::on_wire_written(uv_write_t* req, int status) noexcept {
  auto* c = static_cast<BackendConn*>(req->data);
  c->wire_pending_ = false;
  trim(c->wire_flight_);
  int r = status < 0 ? status : c->flush_wire();
  if (r == 1) return;  // more ciphertext went out; its completion continues here
  if (c->handshaking_ && r < 0 && !c->closing()) {
    c->tcp_eof_ = true;
    c->tls_handshake();  // ends it as a failure
  }
  if (c->codec_q_ != nullptr) {
    net::OutQueue* q = std::exchange(c->codec_q_, nullptr);
    c->codec_cb_(&q->req, r < 0 ? r : 0);
  }
}

}  // namespace rondel::proxy
