// The listener `tls` section: defaults, every key, and errors at their positions.
#include <doctest/doctest.h>

#include <string>

#include "rondel/config/loader.h"

using namespace rondel::config;

namespace {

LoadResult load_tls(const std::string& tls) {
  return load_string("listeners:\n  - name: web\n    bind: 127.0.0.1:8443\n    pool: p\n" + tls +
                         "pools:\n  - name: p\n    backends:\n      - address: 127.0.0.1:9001\n",
                     "tls.yaml");
}

std::string first_error(const LoadResult& r) {
  return r.errors.empty() ? std::string() : r.errors.front().to_string();
}

}  // namespace

TEST_CASE("a listener without tls is plain; a tls section takes the defaults") {
  LoadResult plain = load_tls("");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain.config.listeners[0].tls.enabled);
  LoadResult r = load_tls("    tls:\n      certificates:\n        - { cert: a.pem, key: a.key }\n");
  REQUIRE(r.ok());
  const TlsConfig& t = r.config.listeners[0].tls;
  CHECK(t.enabled);
  REQUIRE(t.certificates.size() == 1);
  CHECK(t.certificates[0].cert == "a.pem");
  CHECK(t.certificates[0].key == "a.key");
  CHECK(t.alpn == std::vector<std::string>{"http/1.1"});
  CHECK(t.min_version == 0x0303);
  CHECK(t.max_version == 0x0304);
  CHECK(t.ciphers.empty());
  CHECK(t.session_tickets);
  CHECK(t.ticket_key_rotation_ms == 3600000);
  CHECK(t.verify == TlsVerify::kNone);
  CHECK(t.handshake_timeout_ms == 10000);
  CHECK(t.max_handshakes == 1000);
}

TEST_CASE("every tls key is read") {
  LoadResult r = load_tls(
      "    tls:\n"
      "      certificates:\n"
      "        - { cert: a.pem, key: a.key }\n"
      "        - { cert: b.pem, key: b.key }\n"
      "      alpn: [h2, http/1.1]\n"
      "      min_version: TLSv1.3\n"
      "      max_version: TLSv1.3\n"
      "      ciphers: ECDHE-ECDSA-AES128-GCM-SHA256\n"
      "      ciphersuites: TLS_AES_128_GCM_SHA256\n"
      "      groups: X25519\n"
      "      session_tickets: false\n"
      "      ticket_key_rotation: 10m\n"
      "      client_ca: ca.pem\n"
      "      verify: optional\n"
      "      handshake_timeout: 3s\n"
      "      max_handshakes: 50\n");
  REQUIRE_MESSAGE(r.ok(), first_error(r));
  const TlsConfig& t = r.config.listeners[0].tls;
  CHECK(t.certificates.size() == 2);
  CHECK(t.alpn == std::vector<std::string>{"h2", "http/1.1"});
  CHECK(t.min_version == 0x0304);
  CHECK(t.ciphers == "ECDHE-ECDSA-AES128-GCM-SHA256");
  CHECK(t.ciphersuites == "TLS_AES_128_GCM_SHA256");
  CHECK(t.groups == "X25519");
  CHECK_FALSE(t.session_tickets);
  CHECK(t.ticket_key_rotation_ms == 600000);
  CHECK(t.client_ca == "ca.pem");
  CHECK(t.verify == TlsVerify::kOptional);
  CHECK(t.handshake_timeout_ms == 3000);
  CHECK(t.max_handshakes == 50);
}

TEST_CASE("client_ca alone means verify: required") {
  LoadResult r = load_tls(
      "    tls:\n      certificates: [{ cert: a.pem, key: a.key }]\n      client_ca: ca.pem\n");
  REQUIRE(r.ok());
  CHECK(r.config.listeners[0].tls.verify == TlsVerify::kRequired);
}

TEST_CASE("tls errors are reported at their positions") {
  CHECK(first_error(load_tls("    tls:\n      alpn: [http/1.1]\n")) ==
        "tls.yaml:6:7: missing required key 'certificates'");
  CHECK(first_error(load_tls("    tls:\n      certificates: [{ cert: a.pem, key: a.key }]\n"
                             "      alpn: [spdy/3]\n")) ==
        "tls.yaml:7:14: 'alpn' protocols are http/1.1 and h2, got 'spdy/3'");
  CHECK(first_error(load_tls("    tls:\n      certificates: [{ cert: a.pem, key: a.key }]\n"
                             "      alpn: [h2]\n")) ==
        "tls.yaml:7:13: 'alpn' must include http/1.1");
  CHECK(first_error(load_tls("    tls:\n      certificates: [{ cert: a.pem }]\n")).find(
            "missing required key 'key'") != std::string::npos);
  CHECK(first_error(load_tls("    tls:\n      certificates: [{ cert: a.pem, key: a.key }]\n"
                             "      min_version: TLSv1.1\n"))
            .find("'min_version' must be one of TLSv1.2, TLSv1.3") != std::string::npos);
  CHECK(first_error(load_tls("    tls:\n      certificates: [{ cert: a.pem, key: a.key }]\n"
                             "      ticket_key_rotation: 10ms\n"))
            .find("ticket_key_rotation") != std::string::npos);
}
