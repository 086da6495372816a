// TlsTransport, client mode: the connect to a backend, the end of its handshake, and what a
// backend connection asks before it goes idle or closes.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <new>
#include <utility>

#include "rondel/tls/tls_transport.h"

namespace rondel::tls {

TlsTransport::TlsTransport(std::shared_ptr<const ClientContext> ctx, std::string session_key,
                           net::TcpTransport& tcp, net::TransportEvents& events) noexcept
    : client_(new (std::nothrow) ClientSide{std::move(ctx), std::move(session_key)}),
      tcp_(tcp),
      events_(&events) {}

int TlsTransport::connect(uv_loop_t* loop, const sockaddr* addr, std::string_view first_bytes,
                          std::string_view server_name) noexcept {
  int rc = tcp_.connect(loop, addr, this, first_bytes);
  uv_timer_init(loop, &timer_);  // deferred delivery only: the owner times the handshake
  timer_.data = this;
  timer_open_ = true;
  if (rc != 0) return rc;
  if (!client_ || !client_->ctx) return UV_ENOMEM;
  ssl_ = client_->ctx->new_ssl(&client_->session_key, server_name);
  if (ssl_ == nullptr || !attach_wire()) return UV_ENOMEM;
  return 0;
}

void TlsTransport::on_transport_connected(int status) noexcept {
  if (closing_) return;
  if (status == 0) status = tcp_.start_reading();
  if (status != 0) {
    events_->on_transport_connected(status);
    return;
  }
  handshaking_ = true;
  continue_handshake();  // the ClientHello
}

BackendHandshake TlsTransport::handshake_result() const noexcept {
  return client_ ? client_->result : BackendHandshake::kProtocol;
}

std::string_view TlsTransport::verify_error() const noexcept {
  long v = ssl_ != nullptr ? SSL_get_verify_result(ssl_) : X509_V_OK;
  return v == X509_V_OK ? std::string_view() : X509_verify_cert_error_string(v);
}

void TlsTransport::client_failed(BackendHandshake why) noexcept {
  handshaking_ = false;
  client_->result = why;
  ERR_clear_error();
  flush_wire();  // the alert, if OpenSSL wrote one
  peer_eof_ = true;
  tcp_.stop_reading();
  events_->on_transport_connected(UV_EPROTO);
}

bool TlsTransport::unread() noexcept {
  if (!established_ || closing_) return false;
  unsigned char c;
  ERR_clear_error();
  int p = SSL_peek(ssl_, &c, 1);
  if (p > 0) return true;
  int e = SSL_get_error(ssl_, p);
  ERR_clear_error();
  flush_wire();
  return e != SSL_ERROR_WANT_READ || peer_eof_;
}

void TlsTransport::drain() noexcept {
  char scrap[4096];
  while (in_len_ > 0 || SSL_pending(ssl_) > 0) {
    ERR_clear_error();
    if (SSL_read(ssl_, scrap, sizeof scrap) <= 0) break;
  }
  ERR_clear_error();
}

// How a client handshake failed, from OpenSSL's last error and the verification result.
BackendHandshake TlsTransport::client_reason(unsigned long err) const noexcept {
  if (SSL_get_verify_result(ssl_) != X509_V_OK) return BackendHandshake::kVerify;
  if (ERR_GET_LIB(err) != ERR_LIB_SSL) return BackendHandshake::kProtocol;
  switch (ERR_GET_REASON(err)) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return BackendHandshake::kVerify;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return BackendHandshake::kVersion;
    default:
      return BackendHandshake::kProtocol;
  }
}

}  // namespace rondel::tls
