// ServerContext: a TLS listener's certificates and protocol policy, loaded from its `tls`
// configuration when a Snapshot is built, so a reload swaps certificates together with the rest
// of the configuration (a bad file fails the build and the old snapshot keeps serving).
//
// One OpenSSL context per certificate (SNI picks one; the first is the default), all with the
// same policy: versions, Mozilla "intermediate" ciphers and groups unless configured, ALPN,
// session tickets under the listener's TicketKeys, optional client-certificate verification.
// Immutable once built; handshakes on every worker read it. OpenSSL stays inside src/tls.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/result.h"

namespace rondel::tls {

class TicketKeys;

// What the admin view and `rondel -c` show of one loaded certificate.
struct CertificateInfo {
  std::string cert_file;
  std::string subject;             // the subject's common name ("" if none)
  std::vector<std::string> names;  // DNS names SNI matches (subjectAltName, else the CN)
  int64_t not_before_unix = 0;
  int64_t not_after_unix = 0;
};

class ServerContext {
 public:
  // Loads every certificate of `cfg` (listener `listener`; tickets under `keys`, shared with
  // the listener's previous and next contexts). Fails with "FILE: reason" for a missing,
  // unreadable or expired certificate, a key that does not match it, or a bad CA bundle.
  static core::Result<std::shared_ptr<const ServerContext>> build(
      const std::string& listener, const config::TlsConfig& cfg,
      std::shared_ptr<TicketKeys> keys);
  ~ServerContext();
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;

  const config::TlsConfig& config() const noexcept { return cfg_; }
  const std::vector<CertificateInfo>& certificates() const noexcept { return certs_; }
  // The default context (an SSL_CTX*) new connections start from; internal to src/tls.
  void* default_ctx() const noexcept;

  struct Impl;

 private:
  ServerContext() = default;
  config::TlsConfig cfg_;
  std::vector<CertificateInfo> certs_;
  std::unique_ptr<Impl> impl_;
};

// Loads every TLS listener's certificates of `cfg` as a start would and prints one line per
// certificate ("listener web: FILE: CN, names ..., expires DATE (N days)") to `out`; errors go
// to `err` as "FILE: reason". False if any certificate would refuse a start.
bool check_certificates(const config::Config& cfg, std::FILE* out, std::FILE* err);

}  // namespace rondel::tls
