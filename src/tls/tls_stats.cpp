// TlsStats: the one instance and the label names of its enums.
#include "rondel/tls/tls_stats.h"

namespace rondel::tls {

namespace {
constexpr std::string_view kFailureNames[] = {"protocol",     "version", "cipher",
                                              "alpn",         "client_cert", "http_request",
                                              "eof",          "timeout", "limit"};
static_assert(std::size(kFailureNames) == static_cast<size_t>(HandshakeFailure::kCount));
constexpr std::string_view kVersionNames[] = {"TLSv1.2", "TLSv1.3"};
constexpr std::string_view kAlpnNames[] = {"http/1.1", "none", "h2"};
}  // namespace

std::string_view handshake_failure_name(HandshakeFailure f) noexcept {
  return kFailureNames[static_cast<size_t>(f)];
}
std::string_view tls_version_name(TlsVersion v) noexcept {
  return kVersionNames[static_cast<size_t>(v)];
}
std::string_view alpn_result_name(AlpnResult a) noexcept {
  return kAlpnNames[static_cast<size_t>(a)];
}

TlsStats& tls_stats() noexcept {
  static TlsStats stats;
  return stats;
}

}  // namespace rondel::tls
