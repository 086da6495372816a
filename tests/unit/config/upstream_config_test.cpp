// A pool's backend-side keys: `tls` (defaults, every key, errors at their positions) and
// `send_proxy_protocol`.
#include <doctest/doctest.h>

#include <string>

#include "rondel/config/loader.h"

using namespace rondel::config;

namespace {

LoadResult load_pool(const std::string& keys, const std::string& backend = "127.0.0.1:9001") {
  return load_string("listeners:\n  - name: web\n    bind: 127.0.0.1:8080\n    pool: p\n"
                     "pools:\n  - name: p\n" + keys +
                         "    backends:\n      - address: " + backend + "\n",
                     "up.yaml");
}

std::string upstream_first_error(const LoadResult& r) {
  return r.errors.empty() ? std::string() : r.errors.front().to_string();
}

}  // namespace

TEST_CASE("a pool without tls is plain; an empty tls section verifies with the system CAs") {
  LoadResult plain = load_pool("");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain.config.pools[0].tls.enabled);
  CHECK(plain.config.pools[0].send_proxy_protocol == SendProxyProtocol::kOff);
  LoadResult r = load_pool("    tls: {}\n");
  REQUIRE_MESSAGE(r.ok(), upstream_first_error(r));
  const BackendTlsConfig& t = r.config.pools[0].tls;
  CHECK(t.enabled);
  CHECK(t.verify);
  CHECK(t.ca.empty());
  CHECK(t.sni.empty());
  CHECK(t.min_version == 0x0303);
  CHECK(t.max_version == 0x0304);
  CHECK(t.session_reuse);
}

TEST_CASE("every pool tls key is read") {
  LoadResult r = load_pool(
      "    tls:\n      verify: false\n      ca: ca.pem\n      sni: api.internal\n"
      "      min_version: TLSv1.3\n      max_version: TLSv1.3\n"
      "      cert: c.pem\n      key: c.key\n      session_reuse: false\n"
      "    send_proxy_protocol: v2\n");
  REQUIRE_MESSAGE(r.ok(), upstream_first_error(r));
  const BackendTlsConfig& t = r.config.pools[0].tls;
  CHECK_FALSE(t.verify);
  CHECK(t.ca == "ca.pem");
  CHECK(t.sni == "api.internal");
  CHECK(t.min_version == 0x0304);
  CHECK(t.cert == "c.pem");
  CHECK(t.key == "c.key");
  CHECK_FALSE(t.session_reuse);
  CHECK(r.config.pools[0].send_proxy_protocol == SendProxyProtocol::kV2);
}

TEST_CASE("a backend named by host name keeps the name (the default SNI)") {
  LoadResult r = load_pool("    tls: {}\n", "api.example.test:443");
  REQUIRE_MESSAGE(r.ok(), upstream_first_error(r));
  CHECK(r.config.pools[0].backends[0].host_name == "api.example.test");
  LoadResult lit = load_pool("    tls: {}\n");
  CHECK(lit.config.pools[0].backends[0].host_name.empty());
}

TEST_CASE("pool tls errors are reported at their positions") {
  CHECK(upstream_first_error(load_pool("    tls: { verify: maybe }\n")).find("up.yaml:7:") == 0);
  CHECK(upstream_first_error(load_pool("    tls: { cert: c.pem }\n")) ==
        "up.yaml:7:18: 'cert' and 'key' (the client certificate) go together");
  CHECK(upstream_first_error(load_pool("    tls: { min_version: TLSv1.3, max_version: TLSv1.2 }\n")) ==
        "up.yaml:7:10: 'min_version' is above 'max_version'");
  CHECK(upstream_first_error(load_pool("    tls: { ciphers: x }\n")).find("ciphers") != std::string::npos);
  CHECK(upstream_first_error(load_pool("    send_proxy_protocol: v1\n"))
            .find("'send_proxy_protocol' must be one of off, v2") != std::string::npos);
}
