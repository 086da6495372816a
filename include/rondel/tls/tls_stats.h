// TlsStats: the process-wide counters of TLS termination (handshakes, versions, ALPN,
// resumptions, handshakes in progress), owned here and read by the metrics exporter.
//
// Relaxed atomics bumped once per handshake by whichever worker ran it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace rondel::tls {

// Why a handshake did not complete; indexes TlsStats::failed.
enum class HandshakeFailure : uint8_t {
  kProtocol,     // any other TLS error (bad record, bad message, decrypt error...)
  kVersion,      // no protocol version in common
  kCipher,       // no cipher suite or group in common
  kAlpn,         // the client offered ALPN protocols and none is served
  kClientCert,   // mTLS: no client certificate, or it did not verify
  kHttpRequest,  // plain HTTP sent to a TLS listener
  kEof,          // the client closed or reset during the handshake
  kTimeout,      // handshake_timeout expired
  kLimit,        // max_handshakes in progress on the worker: closed at accept
  kCount
};
std::string_view handshake_failure_name(HandshakeFailure f) noexcept;

enum class TlsVersion : uint8_t { kTls12, kTls13, kCount };
std::string_view tls_version_name(TlsVersion v) noexcept;
enum class AlpnResult : uint8_t { kHttp11, kNone, kH2, kCount };
std::string_view alpn_result_name(AlpnResult a) noexcept;

struct TlsStats {
  std::array<std::atomic<uint64_t>, static_cast<size_t>(HandshakeFailure::kCount)> failed{};
  // Completed handshakes by version and by negotiated ALPN protocol.
  std::array<std::atomic<uint64_t>, static_cast<size_t>(TlsVersion::kCount)> ok_by_version{};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(AlpnResult::kCount)> ok_by_alpn{};
  std::atomic<uint64_t> resumed{0};
  std::atomic<int64_t> in_progress{0};  // every worker's handshakes under way
};

TlsStats& tls_stats() noexcept;

}  // namespace rondel::tls
