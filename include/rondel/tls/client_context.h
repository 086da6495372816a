// ClientContext: the TLS policy rondel uses towards the backends of one pool (its `tls`
// section), built when a Snapshot is built so that a reload swaps it together with the rest of
// the configuration (a bad CA or client certificate file fails the build and the old snapshot
// keeps serving), and the pool's TLS session cache: one resumable session per backend.
//
// Connections use it through TlsTransport in client mode (tls_transport.h). Immutable once
// built except for the session cache, which every worker reads and writes under
// its mutex (once per new backend connection, never per request). BackendTlsStats are the
// process-wide counters of backend handshakes. OpenSSL stays inside src/tls.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "rondel/config/config.h"
#include "rondel/core/result.h"

typedef struct ssl_session_st SSL_SESSION;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace rondel::tls {

// How a backend handshake ended; indexes BackendTlsStats::handshakes.
enum class BackendHandshake : uint8_t {
  kOk,        // a full handshake
  kResumed,   // a session from the pool's cache was resumed
  kVerify,    // the backend's certificate did not verify (chain or name)
  kVersion,   // no protocol version in common
  kProtocol,  // any other TLS error or alert from the backend
  kEof,       // the backend closed or reset during the handshake
  kTimeout,   // the pool's connect_timeout expired during the handshake
  kCount
};
std::string_view backend_handshake_name(BackendHandshake h) noexcept;
inline bool handshake_ok(BackendHandshake h) noexcept {
  return h == BackendHandshake::kOk || h == BackendHandshake::kResumed;
}

struct BackendTlsStats {
  std::array<std::atomic<uint64_t>, static_cast<size_t>(BackendHandshake::kCount)> handshakes{};
  void count(BackendHandshake h) noexcept {
    handshakes[static_cast<size_t>(h)].fetch_add(1, std::memory_order_relaxed);
  }
};
BackendTlsStats& backend_tls_stats() noexcept;

class ClientContext {
 public:
  // Builds pool `pool`'s context from `cfg` (enabled). Fails with "FILE: reason" for an
  // unreadable CA bundle, client certificate or key, or a key that does not match.
  static core::Result<std::shared_ptr<const ClientContext>> build(
      const std::string& pool, const config::BackendTlsConfig& cfg);
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  const config::BackendTlsConfig& config() const noexcept { return cfg_; }
  SSL_CTX* ssl_ctx() const noexcept { return ctx_; }  // internal to src/tls
  // The name sent as SNI and verified for a backend whose configured host name is `host_name`
  // ("" for an address literal): `sni` when set, else the host name.
  std::string_view server_name(std::string_view host_name) const noexcept {
    return cfg_.sni.empty() ? host_name : std::string_view(cfg_.sni);
  }

  // A new client SSL (internal to src/tls; the caller frees it; nullptr without memory) for a
  // connection to the backend `session_key` names in the session cache (the string must outlive
  // the SSL) and that is named `server_name`: a DNS name is sent as SNI and verified, an IP
  // address is verified against the certificate's IP addresses (when `verify` is on). A session
  // kept for the backend is offered; a new one the backend sends replaces it.
  SSL* new_ssl(const std::string* session_key, std::string_view server_name) const noexcept;

  // The session cache (internal to src/tls), sessions kept serialised: `take` returns a new
  // session object for `backend` (the caller frees it; nullptr if none), `keep` replaces the
  // one kept (the caller keeps its reference).
  SSL_SESSION* take_session(const std::string& backend) const noexcept;
  void keep_session(const std::string& backend, SSL_SESSION* s) const noexcept;

 private:
  ClientContext() = default;
  config::BackendTlsConfig cfg_;
  SSL_CTX* ctx_ = nullptr;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::string> sessions_;  // backend id -> DER
};

}  // namespace rondel::tls
