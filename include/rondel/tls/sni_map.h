// SniMap: which certificate of a listener serves a TLS server name (SNI), exact names first,
// then one-label wildcards ("*.example.com"), names compared case-insensitively.
//
// Pure data, no OpenSSL: built once per listener when a Snapshot is built, read by handshakes on
// every worker (const, so shared without locks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rondel::tls {

class SniMap {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Maps `name` (a DNS name of certificate `index`, or "*.suffix") to index; the first
  // certificate naming a name keeps it.
  void add(std::string_view name, uint32_t index);
  // The certificate for server name `host`: an exact name, else the wildcard of its parent
  // domain; kNone when neither is known (the caller then uses the default certificate).
  uint32_t find(std::string_view host) const;

 private:
  std::unordered_map<std::string, uint32_t> exact_;
  std::unordered_map<std::string, uint32_t> wildcard_;  // keyed by the suffix after "*."
};

}  // namespace rondel::tls
