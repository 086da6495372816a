// ClientTls: OpenSSL client connections over a memory BIO (in) and a string BIO (out).
#include "rondel/tls/client_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <cstring>

namespace rondel::tls {

namespace {

BIO_METHOD* wire_method(int (*write)(BIO*, const char*, int), long (*ctrl)(BIO*, int, long, void*)) {
  static BIO_METHOD* m = [&] {
    BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rondel_backend");
    BIO_meth_set_write(bm, write);
    BIO_meth_set_ctrl(bm, ctrl);
    return bm;
  }();
  return m;
}

bool is_ip_literal(const std::string& name) noexcept {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

BackendHandshake classify(unsigned long err, long verify) noexcept {
  if (verify != X509_V_OK) return BackendHandshake::kVerify;
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

}  // namespace

int ClientTls::wire_write(BIO* b, const char* data, int len) noexcept {
  auto* t = static_cast<ClientTls*>(BIO_get_data(b));
  if (len <= 0) return 0;
  try {
    t->out_.append(data, static_cast<size_t>(len));
  } catch (...) {
    return -1;
  }
  return len;
}

long ClientTls::wire_ctrl(BIO*, int cmd, long, void*) noexcept {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int ClientTls::on_new_session(SSL* ssl, SSL_SESSION* s) noexcept {
  auto* t = static_cast<ClientTls*>(SSL_get_app_data(ssl));
  if (t == nullptr || !t->ctx_->config().session_reuse) return 0;
  t->ctx_->keep_session(t->backend_, s);
  return 0;  // the cache keeps a copy: OpenSSL frees its reference
}

std::unique_ptr<ClientTls> ClientTls::start(std::shared_ptr<const ClientContext> ctx,
                                            std::string backend, std::string_view server_name) {
  std::unique_ptr<ClientTls> t(new ClientTls());
  t->ctx_ = std::move(ctx);
  t->backend_ = std::move(backend);
  SSL_CTX* sctx = t->ctx_->ssl_ctx();
  t->ssl_ = SSL_new(sctx);
  t->rbio_ = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(wire_method(&ClientTls::wire_write, &ClientTls::wire_ctrl));
  if (t->ssl_ == nullptr || t->rbio_ == nullptr || wbio == nullptr) {
    BIO_free(t->rbio_);
    BIO_free(wbio);
    t->rbio_ = nullptr;
    return nullptr;
  }
  BIO_set_mem_eof_return(t->rbio_, -1);  // empty: "retry", not EOF
  BIO_set_data(wbio, t.get());
  BIO_set_init(wbio, 1);
  SSL_set_bio(t->ssl_, t->rbio_, wbio);
  SSL_set_app_data(t->ssl_, t.get());
  SSL_set_connect_state(t->ssl_);
  const std::string name(server_name);
  if (!name.empty()) {
    const bool ip = is_ip_literal(name);
    if (!ip) SSL_set_tlsext_host_name(t->ssl_, name.c_str());
    if (t->ctx_->config().verify) {
      if (ip) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl_), name.c_str());
      else SSL_set1_host(t->ssl_, name.c_str());
    }
  }
  if (t->ctx_->config().session_reuse) {
    if (SSL_SESSION* s = t->ctx_->take_session(t->backend_)) {
      SSL_set_session(t->ssl_, s);
      SSL_SESSION_free(s);
    }
  }
  return t;
}

ClientTls::~ClientTls() {
  if (ssl_ == nullptr) return;
  // Backend connections end without close_notify (an idle timeout, a client gone): OpenSSL would
  // then mark the cached session unresumable. A connection is not evidence against its session.
  SSL_set_shutdown(ssl_, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(ssl_);  // frees both BIOs
}

ClientTls::Step ClientTls::handshake() noexcept {
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    result_ = SSL_session_reused(ssl_) == 1 ? BackendHandshake::kResumed : BackendHandshake::kOk;
    return Step::kDone;
  }
  int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ) return Step::kMore;
  result_ = classify(ERR_peek_last_error(), SSL_get_verify_result(ssl_));
  ERR_clear_error();
  return Step::kFailed;
}

std::string_view ClientTls::verify_error() const noexcept {
  long v = SSL_get_verify_result(ssl_);
  return v == X509_V_OK ? std::string_view() : X509_verify_cert_error_string(v);
}

void ClientTls::feed(const char* p, size_t n) noexcept {
  if (n > 0) BIO_write(rbio_, p, static_cast<int>(n));
}

ssize_t ClientTls::read(char* dst, size_t cap) noexcept {
  ERR_clear_error();
  int n = SSL_read(ssl_, dst, static_cast<int>(cap));
  if (n > 0) return n;
  int e = SSL_get_error(ssl_, n);
  if (e == SSL_ERROR_WANT_READ) return 0;
  ERR_clear_error();
  return -1;
}

void ClientTls::drain() noexcept {
  char scrap[4096];
  while (BIO_ctrl_pending(rbio_) > 0 || SSL_pending(ssl_) > 0) {
    ERR_clear_error();
    if (SSL_read(ssl_, scrap, sizeof scrap) <= 0) break;
  }
  ERR_clear_error();
}

bool ClientTls::buffered() const noexcept {
  return SSL_pending(ssl_) > 0 || BIO_ctrl_pending(rbio_) > 0;
}

bool ClientTls::write(const char* p, size_t n) noexcept {
  if (n == 0) return true;
  ERR_clear_error();
  if (SSL_write(ssl_, p, static_cast<int>(n)) > 0) return true;
  ERR_clear_error();
  return false;
}

}  // namespace rondel::tls
