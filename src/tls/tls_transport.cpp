// TlsTransport: OpenSSL over memory BIOs between the TCP transport and the codec.
#include "rondel/tls/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rondel/tls/tls_stats.h"

namespace rondel::tls {

namespace {

// Handshakes in progress on this thread (one worker loop per thread).
thread_local uint32_t t_handshakes = 0;
// Ciphertext read from a socket: alloc and read callbacks run back to back on the loop thread, and
// every byte is handed to OpenSSL at once, so one buffer per thread serves every connection.
thread_local char t_cipher[16 * 1024];
// An output buffer keeps at most this much capacity between writes (idle connections stay small).
constexpr size_t kKeepCapacity = 4096;

void trim(std::string& s) {
  s.clear();
  if (s.capacity() > kKeepCapacity) std::string().swap(s);
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

// The write side of the SSL: ciphertext is appended to the transport's out_next_.
struct WireBio {
  static BIO_METHOD* method() noexcept {
    static BIO_METHOD* m = [] {
      BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rondel_wire");
      BIO_meth_set_write(bm, &TlsTransport::wire_write);
      BIO_meth_set_ctrl(bm, &ctrl);
      return bm;
    }();
    return m;
  }
  static long ctrl(BIO*, int cmd, long, void*) noexcept { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
};

int TlsTransport::wire_write(BIO* b, const char* data, int len) noexcept {
  auto* t = static_cast<TlsTransport*>(BIO_get_data(b));
  if (len <= 0) return 0;
  t->out_next_.append(data, static_cast<size_t>(len));
  return len;
}

TlsTransport::TlsTransport(std::shared_ptr<const ServerContext> ctx, net::TcpTransport& tcp,
                           net::TransportEvents& events) noexcept
    : ctx_(std::move(ctx)), tcp_(tcp), events_(&events) {}

TlsTransport::~TlsTransport() {
  end_handshake();
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees both BIOs
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
  rbio_ = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(WireBio::method());
  if (ssl_ == nullptr || rbio_ == nullptr || wbio == nullptr) {
    BIO_free(rbio_);
    BIO_free(wbio);
    rbio_ = nullptr;
    return UV_ENOMEM;
  }
  BIO_set_mem_eof_return(rbio_, -1);  // empty: "retry", not EOF
  BIO_set_data(wbio, this);
  BIO_set_init(wbio, 1);
  SSL_set_bio(ssl_, rbio_, wbio);
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
  --t_handshakes;
  tls_stats().in_progress.fetch_sub(1, std::memory_order_relaxed);
  if (timer_open_) uv_timer_stop(&timer_);
}

int TlsTransport::start_reading() noexcept {
  if (closing_) return 0;
  reading_ = true;
  if (!established_) return 0;  // the handshake reads on its own
  int rc = tcp_.start_reading();
  if (rc != 0) return rc;
  // Plaintext (or an EOF) already buffered: deliver it from the loop, not from inside this call.
  if (peer_eof_ || SSL_has_pending(ssl_) == 1 || BIO_ctrl_pending(rbio_) > 0) {
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
    if (handshaking_) handshake_failed(HandshakeFailure::kEof);
    else deliver();
    return;
  }
  BIO_write(rbio_, t_cipher, static_cast<int>(n));
  if (handshaking_) continue_handshake();
  else if (established_) deliver();
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
  handshake_failed(e == SSL_ERROR_WANT_READ ? HandshakeFailure::kEof : classify(err));
}

void TlsTransport::handshake_done() noexcept {
  end_handshake();
  established_ = true;
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
  if (wire_q_.pending) return 1;
  if (out_next_.empty() || closing_) return 0;
  out_flight_.swap(out_next_);
  out_next_.clear();
  wire_q_.clear();
  wire_q_.push(out_flight_.data(), out_flight_.size());
  int r = tcp_.write(wire_q_);
  if (r <= 0) trim(out_flight_);
  return r;
}

int TlsTransport::write(net::OutQueue& q) noexcept {
  if (closing_) return UV_ECANCELED;
  if (!established_) return UV_ENOTCONN;
  ERR_clear_error();
  for (int i = 0; i < q.n; ++i) {
    if (q.bufs[i].len == 0) continue;
    if (SSL_write(ssl_, q.bufs[i].base, static_cast<int>(q.bufs[i].len)) <= 0) return UV_EPROTO;
  }
  size_t bytes = q.bytes;
  int r = flush_wire();
  if (r < 0) return r;
  q.sent_now = r == 0 ? bytes : 0;
  if (r == 0) {
    q.clear();
    return 0;
  }
  q.pending = true;
  codec_write_pending_ = true;
  return 1;
}

void TlsTransport::on_transport_written(int status) noexcept {
  wire_q_.pending = false;
  wire_q_.clear();
  trim(out_flight_);
  int r = status < 0 ? status : (closing_ ? 0 : flush_wire());
  if (r == 1) return;  // more ciphertext went out; its completion continues here
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
  if (self->handshaking_) self->handshake_failed(HandshakeFailure::kTimeout);
  else if (self->established_) self->deliver();
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
