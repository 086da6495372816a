// ServerContext: OpenSSL contexts from a listener's `tls` configuration, the SNI and ALPN
// callbacks and the session-ticket callback.
#include "rondel/tls/server_context.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>

#include "rondel/tls/sni_map.h"
#include "rondel/tls/ticket_keys.h"

namespace rondel::tls {

// Mozilla's "intermediate" profile (server side TLS guidelines, version 5.7).
constexpr const char* kIntermediateCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
constexpr const char* kIntermediateSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kIntermediateGroups = "X25519:prime256v1:secp384r1";

struct ServerContext::Impl {
  std::vector<SSL_CTX*> ctxs;  // as the configured certificates; [0] is the default
  SniMap sni;
  std::string alpn_wire;       // the protocols served, in ALPN wire format
  std::shared_ptr<TicketKeys> keys;
  ~Impl() {
    for (SSL_CTX* c : ctxs) SSL_CTX_free(c);
  }
};

namespace {

uint64_t steady_ms() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The reason of OpenSSL's last error ("no start line"), clearing the queue.
std::string openssl_reason(std::string_view fallback) {
  unsigned long e = 0, last = 0;
  while ((e = ERR_get_error()) != 0) last = e;
  const char* r = last != 0 ? ERR_reason_error_string(last) : nullptr;
  return r != nullptr ? std::string(r) : std::string(fallback);
}

std::string readable(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return file + ": cannot open: " + std::strerror(errno);
  std::fclose(f);
  return "";
}

int64_t asn1_unix(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string date_of(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

CertificateInfo describe(X509* x, const std::string& file) {
  CertificateInfo info;
  info.cert_file = file;
  char cn[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn) > 0) {
    info.subject = cn;
  }
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr,
                                                            nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
      if (g->type != GEN_DNS) continue;
      const auto* s = g->d.dNSName;
      info.names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                              static_cast<size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(sans);
  }
  if (info.names.empty() && !info.subject.empty()) info.names.push_back(info.subject);
  info.not_before_unix = asn1_unix(X509_get0_notBefore(x));
  info.not_after_unix = asn1_unix(X509_get0_notAfter(x));
  return info;
}

ServerContext::Impl* impl_of(SSL* s) noexcept {
  return static_cast<ServerContext::Impl*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(s)));
}

int on_servername(SSL* s, int*, void*) noexcept {
  const char* name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
  ServerContext::Impl* impl = impl_of(s);
  if (name == nullptr || impl == nullptr) return SSL_TLSEXT_ERR_OK;
  uint32_t i = impl->sni.find(name);
  if (i != SniMap::kNone && i < impl->ctxs.size() && impl->ctxs[i] != SSL_get_SSL_CTX(s)) {
    SSL_set_SSL_CTX(s, impl->ctxs[i]);
  }
  return SSL_TLSEXT_ERR_OK;  // no match: the default certificate
}

int on_alpn(SSL* s, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
            unsigned int inlen, void*) noexcept {
  ServerContext::Impl* impl = impl_of(s);
  if (impl == nullptr) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* chosen = nullptr;
  int r = SSL_select_next_proto(&chosen, outlen,
                                reinterpret_cast<const unsigned char*>(impl->alpn_wire.data()),
                                static_cast<unsigned>(impl->alpn_wire.size()), in, inlen);
  if (r != OPENSSL_NPN_NEGOTIATED) return SSL_TLSEXT_ERR_ALERT_FATAL;  // RFC 7301 section 3.2
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

int on_ticket(SSL* s, unsigned char name[16], unsigned char* iv, EVP_CIPHER_CTX* cctx,
              EVP_MAC_CTX* hctx, int enc) noexcept {
  ServerContext::Impl* impl = impl_of(s);
  if (impl == nullptr || !impl->keys) return -1;
  TicketKeys::Key k;
  bool renew = false;
  if (enc == 1) {
    if (!impl->keys->current(steady_ms(), k)) return -1;
    if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1) return -1;
    std::memcpy(name, k.name, TicketKeys::kNameLen);
    if (EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), nullptr, k.aes, iv) != 1) return -1;
  } else {
    if (!impl->keys->find(steady_ms(), name, k, renew)) return 0;  // unknown or expired key
    if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), nullptr, k.aes, iv) != 1) return -1;
  }
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac,
                                                           sizeof k.hmac),
                         OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(hctx, params) != 1) return -1;
  return renew ? 2 : 1;
}

// Applies the listener's policy to `ctx`; "" or "reason".
std::string apply_policy(SSL_CTX* ctx, const std::string& listener, const config::TlsConfig& cfg,
                         ServerContext::Impl* impl) {
  if (SSL_CTX_set_min_proto_version(ctx, cfg.min_version) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, cfg.max_version) != 1) {
    return "unsupported protocol version";
  }
  // Server order: every suite of the list is strong, and the best one shared wins.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  const std::string& ciphers = cfg.ciphers.empty() ? kIntermediateCiphers : cfg.ciphers;
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) {
    return "'ciphers': " + openssl_reason("no cipher matches");
  }
  const std::string& suites = cfg.ciphersuites.empty() ? kIntermediateSuites : cfg.ciphersuites;
  if (SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1) {
    return "'ciphersuites': " + openssl_reason("no suite matches");
  }
  const std::string& groups = cfg.groups.empty() ? kIntermediateGroups : cfg.groups;
  if (SSL_CTX_set1_groups_list(ctx, groups.c_str()) != 1) {
    return "'groups': " + openssl_reason("unknown group");
  }
  SSL_CTX_set_dh_auto(ctx, 1);
  SSL_CTX_set_app_data(ctx, impl);
  SSL_CTX_set_tlsext_servername_callback(ctx, &on_servername);
  SSL_CTX_set_alpn_select_cb(ctx, &on_alpn, nullptr);
  SSL_CTX_set_session_id_context(ctx, reinterpret_cast<const unsigned char*>(listener.data()),
                                 static_cast<unsigned>(std::min<size_t>(listener.size(),
                                                                        SSL_MAX_SID_CTX_LENGTH)));
  // Tickets only (stateless, so any worker resumes any session): no server-side cache.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (cfg.session_tickets) {
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, &on_ticket);
    SSL_CTX_set_timeout(ctx, static_cast<long>(cfg.ticket_key_rotation_ms / 1000));
  } else {
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
  }
  if (!cfg.client_ca.empty()) {
    if (std::string e = readable(cfg.client_ca); !e.empty()) return e;
    if (SSL_CTX_load_verify_locations(ctx, cfg.client_ca.c_str(), nullptr) != 1) {
      return cfg.client_ca + ": " + openssl_reason("not a PEM CA bundle");
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(cfg.client_ca.c_str());
    if (names == nullptr) return cfg.client_ca + ": no CA certificate in the bundle";
    SSL_CTX_set_client_CA_list(ctx, names);
    int mode = SSL_VERIFY_PEER;
    if (cfg.verify == config::TlsVerify::kRequired) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    if (cfg.verify != config::TlsVerify::kNone) SSL_CTX_set_verify(ctx, mode, nullptr);
  }
  return "";
}

// Loads one {cert, key}; "" or "FILE: reason".
std::string load_pair(SSL_CTX* ctx, const config::TlsCertificateConfig& c, CertificateInfo& info) {
  if (std::string e = readable(c.cert); !e.empty()) return e;
  if (std::string e = readable(c.key); !e.empty()) return e;
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, c.cert.c_str()) != 1) {
    return c.cert + ": not a PEM certificate (" + openssl_reason("unreadable") + ")";
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, c.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return c.key + ": private key does not match certificate " + c.cert;
    }
    return c.key + ": not a PEM private key (" + openssl_reason("unreadable") + ")";
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return c.key + ": private key does not match certificate " + c.cert;
  }
  info = describe(SSL_CTX_get0_certificate(ctx), c.cert);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (info.not_after_unix <= now) {
    return c.cert + ": certificate expired on " + date_of(info.not_after_unix);
  }
  if (info.not_before_unix > now) {
    return c.cert + ": certificate not valid before " + date_of(info.not_before_unix);
  }
  return "";
}

}  // namespace

core::Result<std::shared_ptr<const ServerContext>> ServerContext::build(
    const std::string& listener, const config::TlsConfig& cfg, std::shared_ptr<TicketKeys> keys) {
  std::shared_ptr<ServerContext> sc(new ServerContext());
  sc->cfg_ = cfg;
  sc->impl_ = std::make_unique<Impl>();
  Impl& impl = *sc->impl_;
  impl.keys = std::move(keys);
  if (impl.keys) impl.keys->set_rotation(cfg.ticket_key_rotation_ms);
  for (const std::string& p : cfg.alpn) {
    impl.alpn_wire += static_cast<char>(p.size());
    impl.alpn_wire += p;
  }
  if (cfg.certificates.empty()) return core::fail("listener " + listener + ": tls needs a certificate");
  for (size_t i = 0; i < cfg.certificates.size(); ++i) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return core::fail("listener " + listener + ": " + openssl_reason("no memory"));
    impl.ctxs.push_back(ctx);
    if (std::string e = apply_policy(ctx, listener, cfg, &impl); !e.empty()) {
      return core::fail("listener " + listener + ": tls " + e);
    }
    CertificateInfo info;
    if (std::string e = load_pair(ctx, cfg.certificates[i], info); !e.empty()) {
      return core::fail(e);
    }
    for (const std::string& n : info.names) impl.sni.add(n, static_cast<uint32_t>(i));
    sc->certs_.push_back(std::move(info));
  }
  return std::shared_ptr<const ServerContext>(std::move(sc));
}

ServerContext::~ServerContext() = default;

void* ServerContext::default_ctx() const noexcept { return impl_->ctxs.front(); }

bool check_certificates(const config::Config& cfg, std::FILE* out, std::FILE* err) {
  bool ok = true;
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const auto& l : cfg.listeners) {
    if (!l.tls.enabled) continue;
    auto sc = ServerContext::build(l.name, l.tls, std::make_shared<TicketKeys>(60000));
    if (!sc) {
      std::fprintf(err, "%s\n", sc.error().message.c_str());
      ok = false;
      continue;
    }
    for (const CertificateInfo& c : (*sc)->certificates()) {
      std::string names;
      for (const auto& n : c.names) names += (names.empty() ? "" : ",") + n;
      std::fprintf(out, "listener %s: %s: names %s, expires %s (%lld days)\n", l.name.c_str(),
                   c.cert_file.c_str(), names.c_str(), date_of(c.not_after_unix).c_str(),
                   static_cast<long long>((c.not_after_unix - now) / 86400));
    }
  }
  return ok;
}

}  // namespace rondel::tls
