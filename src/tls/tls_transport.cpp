// TlsTransport: OpenSSL over a BIO of our own between the TCP transport and the codec (server
// mode) or the backend connection (client mode: its own calls are in tls_transport_client.cpp).
#include "rondel/tls/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "rondel/tls/tls_stats.h"

namespace rondel::tls {

namespace {

// Handshakes in progress on this thread (one worker loop per thread).
thread_local uint32_t t_handshakes = 0;
// Ciphertext read from a socket: alloc and read callbacks run back to back on the loop thread, and
// OpenSSL reads it from here during the read callback, so one buffer per thread serves every
// connection (what is left unread is copied into the connection: see settle_input).
thread_local char t_cipher[16 * 1024];

// Ciphertext writes not in use on this thread: a connection takes one when OpenSSL produces
// ciphertext and gives it back once the kernel has it, so an idle connection holds none and the
// steady state allocates nothing. Bounded in count and in the capacity kept per buffer.
constexpr size_t kSpareWrites = 64;
constexpr size_t kKeepCapacity = 32 * 1024;
struct SpareWrites {
  TlsTransport::WireWrite* w[kSpareWrites] = {};
  size_t n = 0;
  ~SpareWrites();
};
thread_local SpareWrites t_spare;

}  // namespace

// One ciphertext write: the bytes and the queue that writes them through the TCP transport.
struct TlsTransport::WireWrite {
  net::OutQueue q;
  std::string bytes;
};

namespace {

SpareWrites::~SpareWrites() {
  for (size_t i = 0; i < n; ++i) delete w[i];
}

TlsTransport::WireWrite* take_write() noexcept {
  if (t_spare.n > 0) return t_spare.w[--t_spare.n];
  return new (std::nothrow) TlsTransport::WireWrite();
}

void give_back(TlsTransport::WireWrite* w) noexcept {
  if (w == nullptr) return;
  w->q.clear();
  w->q.pending = false;
  w->bytes.clear();
  if (t_spare.n == kSpareWrites) {
    delete w;
    return;
  }
  if (w->bytes.capacity() > kKeepCapacity) std::string().swap(w->bytes);
  t_spare.w[t_spare.n++] = w;
}

// Plaintext gathered so that the small buffers of one write (a head, a chunk-size line, a short
// body) go out as one TLS record rather than one record (and one AEAD tag) each. Buffers larger
// than kGather are encrypted where they are: no body byte is copied for them.
constexpr size_t kGather = 2048;
thread_local char t_plain[4 * kGather];

// Encrypts every buffer of `q` in order into the SSL's output; false on a TLS error.
bool encrypt(SSL* ssl, const net::OutQueue& q) noexcept {
  size_t staged = 0;
  auto flush = [&]() noexcept {
    int r = staged == 0 ? 1 : SSL_write(ssl, t_plain, static_cast<int>(staged));
    staged = 0;
    return r > 0;
  };
  for (int i = 0; i < q.n; ++i) {
    const uv_buf_t& b = q.bufs[i];
    if (b.len == 0) continue;
    if (b.len > kGather) {
      if (!flush() || SSL_write(ssl, b.base, static_cast<int>(b.len)) <= 0) return false;
      continue;
    }
    if (staged + b.len > sizeof t_plain && !flush()) return false;
    std::memcpy(t_plain + staged, b.base, b.len);
    staged += b.len;
  }
  return flush();
}

HandshakeFailure classify(unsigned long err) noexcept {
  if (ERR_GET_LIB(err) != ERR_LIB_SSL) return HandshakeFailure::kProtocol;
  switch (ERR_GET_REASON(err)) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH:
      return HandshakeFailure::kVersion;
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_NO_SUITABLE_KEY_SHARE:
    case SSL_R_NO_SHARED_GROUPS:
      return HandshakeFailure::kCipher;
    case SSL_R_NO_APPLICATION_PROTOCOL:
      return HandshakeFailure::kAlpn;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return HandshakeFailure::kClientCert;
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
      return HandshakeFailure::kHttpRequest;
    default:
      return HandshakeFailure::kProtocol;
  }
}

}  // namespace

// The SSL's one BIO, both ways: it reads the ciphertext at in_ (the worker's read buffer or the
// connection's kept copy) and appends what OpenSSL writes to the transport's next_ write.
struct WireBio {
  static BIO_METHOD* method() noexcept {
    static BIO_METHOD* m = [] {
      BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rondel_wire");
      BIO_meth_set_write(bm, &TlsTransport::wire_write);
      BIO_meth_set_read(bm, &TlsTransport::wire_read);
      BIO_meth_set_ctrl(bm, &TlsTransport::wire_ctrl);
      return bm;
    }();
    return m;
  }
};

bool TlsTransport::attach_wire() noexcept {
  BIO* wire = BIO_new(WireBio::method());
  if (wire == nullptr) return false;
  BIO_set_data(wire, this);
  BIO_set_init(wire, 1);
  SSL_set_bio(ssl_, wire, wire);  // one reference, taken by the SSL
  return true;
}

int TlsTransport::wire_write(BIO* b, const char* data, int len) noexcept {
  auto* t = static_cast<TlsTransport*>(BIO_get_data(b));
  if (len <= 0) return 0;
  size_t done = 0;
  if (t->flight_ == nullptr && t->next_ == nullptr && !t->closing_) {
    // Nothing queued before it: the record goes to the socket from OpenSSL's own buffer, and
    // only what the socket does not take now is copied (an error shows at the next write).
    int n = t->tcp_.try_write(data, static_cast<size_t>(len));
    if (n > 0) t->wire_took_ = true;
    if (n == len) return len;
    if (n > 0) done = static_cast<size_t>(n);
  }
  if (t->next_ == nullptr && (t->next_ = take_write()) == nullptr) return -1;
  t->next_->bytes.append(data + done, static_cast<size_t>(len) - done);
  return len;
}

int TlsTransport::wire_read(BIO* b, char* out, int len) noexcept {
  auto* t = static_cast<TlsTransport*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  if (len <= 0) return 0;
  if (t->in_len_ == 0) {
    BIO_set_retry_read(b);  // nothing buffered: "retry", not EOF
    return -1;
  }
  size_t n = std::min(t->in_len_, static_cast<size_t>(len));
  std::memcpy(out, t->in_, n);
  t->in_ += n;
  t->in_len_ -= n;
  return static_cast<int>(n);
}

long TlsTransport::wire_ctrl(BIO* b, int cmd, long, void*) noexcept {
  auto* t = static_cast<TlsTransport*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(t->in_len_);
    default:
      return 0;
  }
}

void TlsTransport::settle_input() noexcept {
  if (in_len_ == 0) {
    in_ = nullptr;
    if (in_kept_.capacity() != 0) std::string().swap(in_kept_);
    return;
  }
  if (in_ >= t_cipher && in_ < t_cipher + sizeof t_cipher) {
    in_kept_.assign(in_, in_len_);  // the codec stopped reading mid-buffer: rare, bounded
  } else {
    in_kept_.erase(0, in_kept_.size() - in_len_);
  }
  in_ = in_kept_.data();
}

TlsTransport::TlsTransport(std::shared_ptr<const ServerContext> ctx, net::TcpTransport& tcp,
                           net::TransportEvents& events) noexcept
    : ctx_(std::move(ctx)), tcp_(tcp), events_(&events) {}

TlsTransport::~TlsTransport() {
  end_handshake();
  // Backend connections end without close_notify (an idle timeout, a client gone): OpenSSL would
  // then mark the cached session unresumable. A connection is not evidence against its session.
  if (ssl_ != nullptr && client_) SSL_set_shutdown(ssl_, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees the BIO
  give_back(flight_);
  give_back(next_);
}

int TlsTransport::accept(uv_loop_t* loop, uv_stream_t* server) noexcept {
  int rc = tcp_.accept(loop, server, this);
  if (rc != 0) return rc;
  const config::TlsConfig& cfg = ctx_->config();
  if (t_handshakes >= cfg.max_handshakes) {
    tls_stats().failed[static_cast<size_t>(HandshakeFailure::kLimit)].fetch_add(
        1, std::memory_order_relaxed);
    return UV_EBUSY;
  }
  ssl_ = SSL_new(static_cast<SSL_CTX*>(ctx_->default_ctx()));
  if (ssl_ == nullptr || !attach_wire()) return UV_ENOMEM;
  SSL_set_accept_state(ssl_);
  handshaking_ = true;
  ++t_handshakes;
  tls_stats().in_progress.fetch_add(1, std::memory_order_relaxed);
  uv_timer_init(loop, &timer_);
  timer_.data = this;
  timer_open_ = true;
  uv_timer_start(&timer_, &on_timer, cfg.handshake_timeout_ms, 0);
  return tcp_.start_reading();
}

void TlsTransport::end_handshake() noexcept {
  if (!handshaking_) return;
  handshaking_ = false;
  if (client_) return;  // no slot, no timer of its own
  --t_handshakes;
  tls_stats().in_progress.fetch_sub(1, std::memory_order_relaxed);
  if (timer_open_) uv_timer_stop(&timer_);
}

int TlsTransport::start_reading() noexcept {
  if (closing_) return 0;
  reading_ = true;
  if (!established_) return 0;  // the handshake reads on its own
  // After the TCP side ended nothing more is read from it (a restart would report EOF again).
  int rc = peer_eof_ ? 0 : tcp_.start_reading();
  if (rc != 0) return rc;
  // Plaintext (or an EOF) already buffered: deliver it from the loop, not from inside this call.
  if (peer_eof_ || SSL_has_pending(ssl_) == 1 || in_len_ > 0) {
    uv_timer_start(&timer_, &on_timer, 0, 0);
  }
  return 0;
}

void TlsTransport::stop_reading() noexcept {
  reading_ = false;
  if (established_) tcp_.stop_reading();
}

void TlsTransport::on_transport_alloc(uv_buf_t* buf) noexcept {
  *buf = uv_buf_init(t_cipher, sizeof t_cipher);
}

void TlsTransport::on_transport_read(ssize_t n) noexcept {
  if (closing_) return;
  if (n < 0) {
    peer_eof_ = true;
    if (handshaking_ && client_) client_failed(BackendHandshake::kEof);
    else if (handshaking_) handshake_failed(HandshakeFailure::kEof);
    else deliver();
    return;
  }
  if (in_len_ == 0) {
    in_ = t_cipher;
    in_len_ = static_cast<size_t>(n);
  } else {  // ciphertext kept from before: append the new bytes behind it
    in_kept_.erase(0, in_kept_.size() - in_len_);
    in_kept_.append(t_cipher, static_cast<size_t>(n));
    in_ = in_kept_.data();
    in_len_ = in_kept_.size();
  }
  if (handshaking_) continue_handshake();
  else if (established_) deliver();
  settle_input();
}

void TlsTransport::continue_handshake() noexcept {
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
  unsigned long err = ERR_peek_last_error();
  if (flush_wire() < 0) peer_eof_ = true;
  if (r == 1) {
    handshake_done();
    deliver();
    return;
  }
  if (e == SSL_ERROR_WANT_READ && !peer_eof_) return;
  if (client_) {
    client_failed(e == SSL_ERROR_WANT_READ ? BackendHandshake::kEof : client_reason(err));
    return;
  }
  handshake_failed(e == SSL_ERROR_WANT_READ ? HandshakeFailure::kEof : classify(err));
}

void TlsTransport::handshake_done() noexcept {
  end_handshake();
  established_ = true;
  if (client_) {
    client_->result =
        SSL_session_reused(ssl_) == 1 ? BackendHandshake::kResumed : BackendHandshake::kOk;
    events_->on_transport_connected(0);
    if (!reading_ && !closing_) tcp_.stop_reading();
    return;
  }
  TlsStats& st = tls_stats();
  TlsVersion v = SSL_version(ssl_) == TLS1_3_VERSION ? TlsVersion::kTls13 : TlsVersion::kTls12;
  st.ok_by_version[static_cast<size_t>(v)].fetch_add(1, std::memory_order_relaxed);
  const unsigned char* proto = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl_, &proto, &len);
  std::string_view alpn(reinterpret_cast<const char*>(proto), len);
  AlpnResult a = alpn == "h2" ? AlpnResult::kH2 : len > 0 ? AlpnResult::kHttp11 : AlpnResult::kNone;
  st.ok_by_alpn[static_cast<size_t>(a)].fetch_add(1, std::memory_order_relaxed);
  if (SSL_session_reused(ssl_) == 1) st.resumed.fetch_add(1, std::memory_order_relaxed);
  events_->on_transport_ready(alpn);  // may hand the connection to another codec (set_events)
  if (!reading_) tcp_.stop_reading();
}

void TlsTransport::handshake_failed(HandshakeFailure why) noexcept {
  end_handshake();
  tls_stats().failed[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  flush_wire();  // the alert, if OpenSSL wrote one
  peer_eof_ = true;
  // The codec sees the connection end (it reads from accept on) and closes it.
  if (reading_) events_->on_transport_read(why == HandshakeFailure::kTimeout ? UV_ETIMEDOUT
                                                                            : UV_EPROTO);
}

void TlsTransport::deliver() noexcept {
  while (reading_ && !closing_) {
    unsigned char c;
    ERR_clear_error();
    int p = SSL_peek(ssl_, &c, 1);
    if (p <= 0) {
      int e = SSL_get_error(ssl_, p);
      flush_wire();  // a key update or alert answered while reading
      if (e == SSL_ERROR_WANT_READ && !peer_eof_) return;
      // close_notify, the TCP side ending, or a TLS error: the stream ends for the codec.
      events_->on_transport_read(e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_WANT_READ
                                    ? UV_EOF
                                    : UV_EPROTO);
      return;
    }
    uv_buf_t b;
    events_->on_transport_alloc(&b);
    if (b.len == 0) {
      events_->on_transport_read(UV_ENOBUFS);  // as libuv reports a full buffer
      return;
    }
    int n = SSL_read(ssl_, b.base, static_cast<int>(b.len));
    if (n <= 0) continue;  // the peeked record went away (cannot happen): peek again
    events_->on_transport_read(n);
  }
  flush_wire();
}

int TlsTransport::flush_wire() noexcept {
  if (flight_ != nullptr) return 1;
  if (next_ == nullptr || closing_) return 0;
  flight_ = std::exchange(next_, nullptr);
  flight_->q.push(flight_->bytes.data(), flight_->bytes.size());
  int r = tcp_.write(flight_->q);
  if (r <= 0) give_back(std::exchange(flight_, nullptr));
  return r;
}

int TlsTransport::write(net::OutQueue& q) noexcept {
  if (closing_) return UV_ECANCELED;
  if (!established_) return UV_ENOTCONN;
  ERR_clear_error();
  wire_took_ = false;
  if (!encrypt(ssl_, q)) return UV_EPROTO;
  size_t bytes = q.bytes;
  int r = flush_wire();
  if (r < 0) return r;
  // The plaintext is encrypted: it counts as sent once the socket took ciphertext of it.
  q.sent_now = r == 0 || wire_took_ ? bytes : 0;
  if (r == 0) {
    q.clear();
    return 0;
  }
  q.pending = true;
  codec_write_pending_ = true;
  return 1;
}

void TlsTransport::on_transport_written(int status) noexcept {
  give_back(std::exchange(flight_, nullptr));
  int r = status < 0 ? status : (closing_ ? 0 : flush_wire());
  if (r == 1) return;  // more ciphertext went out; its completion continues here
  if (r < 0 && handshaking_ && client_ && !closing_) {
    client_failed(BackendHandshake::kEof);  // the backend is gone mid-handshake
    return;
  }
  if (r == 0 && shutdown_after_flush_ && !closing_) {
    shutdown_after_flush_ = false;
    tcp_.shutdown();
  }
  if (codec_write_pending_) {
    codec_write_pending_ = false;
    events_->on_transport_written(r < 0 ? r : 0);
  }
}

int TlsTransport::shutdown() noexcept {
  if (closing_) return UV_ECANCELED;
  if (established_) SSL_shutdown(ssl_);  // close_notify
  int r = flush_wire();
  if (r < 0) return r;
  if (r == 1) {
    shutdown_after_flush_ = true;
    return 0;
  }
  return tcp_.shutdown();
}

void TlsTransport::close() noexcept {
  if (closing_) return;
  // A connection to a backend still keeps the session ticket sent after its last response.
  if (client_ && established_) drain();
  closing_ = true;
  reading_ = false;
  end_handshake();
  pending_closes_ = 1;
  if (timer_open_) {
    ++pending_closes_;
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &on_timer_closed);
  }
  tcp_.close();
}

void TlsTransport::on_transport_closed() noexcept {
  if (--pending_closes_ == 0) events_->on_transport_closed();  // may free this transport
}

void TlsTransport::on_timer(uv_timer_t* t) noexcept {
  auto* self = static_cast<TlsTransport*>(t->data);
  if (self->closing_) return;
  if (self->handshaking_ && !self->client_) self->handshake_failed(HandshakeFailure::kTimeout);
  else if (self->established_) {
    self->deliver();
    self->settle_input();
  }
}

void TlsTransport::on_timer_closed(uv_handle_t* h) noexcept {
  auto* self = static_cast<TlsTransport*>(h->data);
  if (--self->pending_closes_ == 0) self->events_->on_transport_closed();
}

TlsTransport::LogFields TlsTransport::log_fields() const noexcept {
  if (!established_) return {};
  const char* sni = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return {SSL_version(ssl_) == TLS1_3_VERSION ? "TLSv1.3" : "TLSv1.2",
          sni != nullptr && *sni != '\0' ? std::string_view(sni) : std::string_view("-"),
          SSL_session_reused(ssl_) == 1 ? "1" : "0"};
}

}  // namespace rondel::tls
