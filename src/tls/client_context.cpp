// ClientContext: the client-side OpenSSL context of a pool's backend TLS, its session cache and
// the backend handshake counters.
#include "rondel/tls/client_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rondel::tls {

namespace {

constexpr std::string_view kHandshakeNames[] = {"ok",       "resumed", "verify", "version",
                                                "protocol", "eof",     "timeout"};
static_assert(std::size(kHandshakeNames) == static_cast<size_t>(BackendHandshake::kCount));

// The same "intermediate" TLS 1.2 ciphers the listeners use (server_context.cpp).
constexpr const char* kClientCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";

std::string last_reason(std::string_view fallback) {
  unsigned long e = 0, last = 0;
  while ((e = ERR_get_error()) != 0) last = e;
  const char* r = last != 0 ? ERR_reason_error_string(last) : nullptr;
  return r != nullptr ? std::string(r) : std::string(fallback);
}

// "" or "FILE: cannot open: reason".
std::string unreadable(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return file + ": cannot open: " + std::strerror(errno);
  std::fclose(f);
  return "";
}

// Loads the trust store and the optional client certificate; "" or "FILE: reason".
std::string load_files(SSL_CTX* ctx, const config::BackendTlsConfig& cfg) {
  ERR_clear_error();
  if (!cfg.ca.empty()) {
    if (auto why = unreadable(cfg.ca); !why.empty()) return why;
    if (SSL_CTX_load_verify_locations(ctx, cfg.ca.c_str(), nullptr) != 1) {
      return cfg.ca + ": " + last_reason("not a PEM CA bundle");
    }
  } else if (cfg.verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return "the system trust store: " + last_reason("cannot be loaded");
  }
  if (cfg.cert.empty()) return "";
  for (const std::string* f : {&cfg.cert, &cfg.key}) {
    if (auto why = unreadable(*f); !why.empty()) return why;
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg.cert.c_str()) != 1) {
    return cfg.cert + ": not a PEM certificate (" + last_reason("unreadable") + ")";
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, cfg.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return cfg.key + ": not a PEM private key (" + last_reason("unreadable") + ")";
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return cfg.key + ": does not match the certificate " + cfg.cert;
  }
  return "";
}

bool is_ip_literal(const std::string& name) noexcept {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// A new session the backend sent: kept for the connection's backend (the SSL's app data).
int on_new_session(SSL* ssl, SSL_SESSION* s) noexcept {
  const auto* c = static_cast<const ClientContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  const auto* key = static_cast<const std::string*>(SSL_get_app_data(ssl));
  if (c != nullptr && key != nullptr && c->config().session_reuse) c->keep_session(*key, s);
  return 0;  // the cache keeps a copy: OpenSSL frees its reference
}

// The one protocol rondel speaks to backends, offered by ALPN.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

}  // namespace

std::string_view backend_handshake_name(BackendHandshake h) noexcept {
  return kHandshakeNames[static_cast<size_t>(h)];
}

BackendTlsStats& backend_tls_stats() noexcept {
  static BackendTlsStats stats;
  return stats;
}

core::Result<std::shared_ptr<const ClientContext>> ClientContext::build(
    const std::string& pool, const config::BackendTlsConfig& cfg) {
  std::shared_ptr<ClientContext> c(new ClientContext());
  c->cfg_ = cfg;
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (c->ctx_ == nullptr) return core::fail("pool " + pool + ": " + last_reason("no memory"));
  SSL_CTX* ctx = c->ctx_;
  if (SSL_CTX_set_min_proto_version(ctx, cfg.min_version) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, cfg.max_version) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kClientCiphers) != 1) {
    return core::fail("pool " + pool + ": tls: " + last_reason("bad protocol policy"));
  }
  SSL_CTX_set_verify(ctx, cfg.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  // Sessions are kept per backend (take_session/keep_session), not by OpenSSL.
  SSL_CTX_set_session_cache_mode(
      ctx, cfg.session_reuse ? SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE
                             : SSL_SESS_CACHE_OFF);
  SSL_CTX_set_app_data(ctx, c.get());  // for on_new_session
  if (cfg.session_reuse) SSL_CTX_sess_set_new_cb(ctx, &on_new_session);
  else SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);  // idle pooled connections stay small
  if (SSL_CTX_set_alpn_protos(ctx, kAlpnHttp11, sizeof kAlpnHttp11) != 0) {
    return core::fail("pool " + pool + ": tls: " + last_reason("no memory"));
  }
  if (auto why = load_files(ctx, cfg); !why.empty()) return core::fail(why);
  return std::shared_ptr<const ClientContext>(std::move(c));
}

ClientContext::~ClientContext() { SSL_CTX_free(ctx_); }

SSL* ClientContext::new_ssl(const std::string* session_key,
                            std::string_view server_name) const noexcept {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  SSL_set_app_data(ssl, const_cast<std::string*>(session_key));
  SSL_set_connect_state(ssl);
  try {
    const std::string name(server_name);
    if (!name.empty()) {
      const bool ip = is_ip_literal(name);
      if (!ip) SSL_set_tlsext_host_name(ssl, name.c_str());
      if (cfg_.verify) {
        if (ip) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
        else SSL_set1_host(ssl, name.c_str());
      }
    }
  } catch (...) {
    SSL_free(ssl);
    return nullptr;
  }
  if (cfg_.session_reuse) {
    if (SSL_SESSION* s = take_session(*session_key)) {
      SSL_set_session(ssl, s);
      SSL_SESSION_free(s);
    }
  }
  return ssl;
}

SSL_SESSION* ClientContext::take_session(const std::string& backend) const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(backend);
  if (it == sessions_.end()) return nullptr;
  // A fresh object per connection: a session object shared by connections stops resuming
  // (TLS 1.3 client sessions are meant to be single use; the backend decides about reuse).
  const auto* p = reinterpret_cast<const unsigned char*>(it->second.data());
  return d2i_SSL_SESSION(nullptr, &p, static_cast<long>(it->second.size()));
}

void ClientContext::keep_session(const std::string& backend, SSL_SESSION* s) const noexcept {
  const int n = i2d_SSL_SESSION(s, nullptr);
  if (n <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  try {
    std::string& der = sessions_[backend];
    der.resize(static_cast<size_t>(n));
    auto* p = reinterpret_cast<unsigned char*>(der.data());
    i2d_SSL_SESSION(s, &p);
  } catch (...) {
    // No memory for the entry: this session is not kept.
  }
}

}  // namespace rondel::tls
