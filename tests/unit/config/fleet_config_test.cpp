// Tests of the top-level `fleet` section: its etcd or Kubernetes source as read, and every error
// at its FILE:LINE:COL (both sources, neither, a bad Service name).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

constexpr std::string_view kHead = R"(listeners:
  - { name: web, bind: 127.0.0.1:8080, pool: p }
pools:
  - { name: p, backends: [{ address: 127.0.0.1:9001 }] }
)";

// An admin listener, which fleets sharing hot keys without etcd read each other on.
constexpr std::string_view kAdmin = "admin: { bind: 127.0.0.1:9901 }\n";

std::vector<std::string> fleet_errors_of(std::string_view fleet) {
  std::vector<std::string> out;
  for (const ConfigError& e :
       load_string(std::string(kHead) + std::string(fleet), "f.yaml").errors) {
    out.push_back(e.to_string());
  }
  return out;
}

TEST_CASE("fleet: kubernetes reads the Service the instances belong to") {
  const LoadResult r = load_string(std::string(kHead) + R"(fleet:
  kubernetes: { service: rondel, namespace: edge, port: "8080", server: https://10.0.0.1:6443, token_file: /t }
  id: rondel-1
  retry: 200ms
)", "f.yaml");
  REQUIRE(r.ok());
  const FleetConfig& f = r.config.fleet;
  CHECK(f.enabled);
  CHECK(f.source.kind == DiscoveryKind::kKubernetes);
  CHECK(f.source.service == "rondel");
  CHECK(f.source.namespace_name == "edge");
  CHECK(f.source.port == "8080");
  CHECK(f.source.server.port == 6443);
  CHECK(f.source.token_file == "/t");
  CHECK(f.source.retry_ms == 200);
  CHECK(f.id == "rondel-1");
  CHECK_FALSE(f.share_hot_keys);  // nowhere to publish counts
}

TEST_CASE("fleet: etcd is still read as before") {
  const LoadResult r = load_string(
      std::string(kHead) + "fleet: { etcd: { endpoints: [http://127.0.0.1:2379], prefix: /f/ } }\n",
      "f.yaml");
  REQUIRE(r.ok());
  CHECK(r.config.fleet.source.kind == DiscoveryKind::kEtcd);
  CHECK(r.config.fleet.source.prefix == "/f/");
  CHECK(r.config.fleet.share_hot_keys);  // on by default with etcd
}

TEST_CASE("fleet: one source, and a Service name, else an error at its position") {
  CHECK(fleet_errors_of("fleet:\n  etcd: { endpoints: [http://h:1], prefix: /f/ }\n"
                        "  kubernetes: { service: r, port: http }\n") ==
        std::vector<std::string>{
            "f.yaml:7:15: 'fleet' takes one source: 'etcd' or 'kubernetes', not both"});
  CHECK(fleet_errors_of("fleet: { id: r1 }\n") ==
        std::vector<std::string>{"f.yaml:5:8: 'fleet' needs a source: 'etcd' or 'kubernetes'"});
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: Rondel } }\n") ==
        std::vector<std::string>{
            "f.yaml:5:22: missing required key 'port'",
            "f.yaml:5:33: 'service' must be a Service name (lower-case letters, digits and '-', "
            "at most 63), got 'Rondel'"});
}

TEST_CASE("fleet: a static size with 'instances', alone") {
  const LoadResult r = load_string(std::string(kHead) + "fleet: { instances: 3 }\n", "f.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(r.config.fleet.enabled);  // nothing registered or watched
  CHECK(r.config.fleet.instances == 3);
  CHECK(fleet_errors_of("fleet: { instances: 0 }\n") ==
        std::vector<std::string>{"f.yaml:5:21: 'instances' must be between 1 and 1024, got 0"});
  CHECK(fleet_errors_of("fleet:\n  instances: 2\n  etcd: { endpoints: [http://h:1], prefix: /f/ }\n") ==
        std::vector<std::string>{
            "f.yaml:6:14: 'instances' is a static fleet size: with 'etcd' or 'kubernetes' the "
            "fleet counts its members itself; give one"});
  CHECK(fleet_errors_of("fleet: { instances: 2, peer_port: 9901 }\n") ==
        std::vector<std::string>{"f.yaml:5:35: 'peer_port' needs a fleet source ('etcd' or "
                                 "'kubernetes'), not 'instances'"});
  CHECK(fleet_errors_of("fleet: { instances: 2, ttl: 5s }\n") ==
        std::vector<std::string>{
            "f.yaml:5:29: 'ttl' needs a fleet source ('etcd' or 'kubernetes'), not 'instances'"});
}

TEST_CASE("fleet: Kubernetes members share hot-key counts through their admin APIs when asked") {
  LoadResult r = load_string(std::string(kHead) +
                                 "fleet: { kubernetes: { service: r, port: http } }\n",
                             "f.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(r.config.fleet.share_hot_keys);  // off unless set: the network must allow it
  CHECK(r.config.fleet.peer_port == 0);        // this instance's own admin port
  r = load_string(std::string(kHead) +
                      "fleet: { kubernetes: { service: r, port: http }, share_hot_keys: true, "
                      "peer_port: 9901 }\n",
                  "f.yaml");
  REQUIRE(r.ok());
  CHECK(r.config.fleet.share_hot_keys);
  CHECK(r.config.fleet.peer_port == 9901);
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: r, port: http }, peer_port: 0 }\n") ==
        std::vector<std::string>{"f.yaml:5:61: 'peer_port' must be between 1 and 65535, got 0"});
  CHECK(fleet_errors_of("fleet: { etcd: { endpoints: [http://h:1], prefix: /f/ }, peer_port: 9 }\n") ==
        std::vector<std::string>{
            "f.yaml:5:69: 'peer_port' is where Kubernetes members read each other's hot-key "
            "counts; an etcd fleet shares them through etcd"});
}

TEST_CASE("fleet: a fixed list of peers, this instance among them") {
  const LoadResult r = load_string(
      std::string(kHead) +
          "fleet:\n  peers: [{ id: lb1, admin: 10.0.0.1:9901 }, { id: lb2, admin: '[::1]:9902' }]\n"
          "  id: lb2\nadmin: { bind: '[::1]:9902' }\n",
      "f.yaml");
  REQUIRE(r.ok());
  const FleetConfig& f = r.config.fleet;
  CHECK(f.enabled);
  CHECK(f.share_hot_keys);  // the point of listing them
  REQUIRE(f.peers.size() == 2);
  CHECK(f.peers[0].id == "lb1");
  CHECK(f.peers[0].admin.to_string() == "10.0.0.1:9901");
  CHECK(f.peers[1].admin.to_string() == "[::1]:9902");
  CHECK(f.source.kind == DiscoveryKind::kNone);
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }] }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{
            "f.yaml:5:17: a fleet of 'peers' needs 'id': which of them this instance is"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: b }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{
            "f.yaml:5:53: 'id' 'b' is not one of 'peers': list this instance too"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }, { id: a, admin: "
                        "10.0.0.2:1 }], id: a }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{"f.yaml:5:54: peer 'a' is listed twice"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, ttl: 5s }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{
            "f.yaml:5:61: 'ttl' does not apply to a fleet of 'peers' (a fixed member list)"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: lb.example:1 }], id: a }\n").size() ==
        1);  // an IP literal: no DNS on the epoch's path
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a }], id: a }\n").size() == 1);
  CHECK(fleet_errors_of("fleet: { instances: 2, peers: [{ id: a, admin: 10.0.0.1:1 }] }\n")
            .size() == 1);
}

TEST_CASE("fleet: sharing hot keys without etcd needs an admin API to read") {
  // Without `admin` nothing could answer the members' reads: an error, not a silent no-op.
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a }\n") ==
        std::vector<std::string>{
            "f.yaml:5:8: a fleet of 'peers' shares hot keys on the admin API: give 'admin' a "
            "bind address, or set share_hot_keys: false"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, "
                        "share_hot_keys: false }\n")
            .empty());
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: r, port: http }, share_hot_keys: true }\n") ==
        std::vector<std::string>{
            "f.yaml:5:8: 'share_hot_keys' on Kubernetes reads the members' admin APIs: give "
            "'admin' a bind address (or 'peer_port')"});
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: r, port: http }, share_hot_keys: true, "
                        "peer_port: 9901 }\n")
            .empty());
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: r, port: http }, share_hot_keys: true }\n"
                        "admin: { bind: 127.0.0.1:9901 }\n")
            .empty());
  CHECK(fleet_errors_of("fleet: { instances: 2, peers: [{ id: a, admin: 10.0.0.1:1 }] }\n") ==
        std::vector<std::string>{
            "f.yaml:5:31: 'peers' lists the fleet and 'instances' states its size: give one"});
}

TEST_CASE("fleet: share_load polls the members' counts at their admin addresses") {
  const LoadResult r = load_string(
      std::string(kHead) +
          "fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }, { id: b, admin: 10.0.0.2:1 }], id: a, "
          "share_load: 20ms }\n" + std::string(kAdmin),
      "f.yaml");
  REQUIRE(r.ok());
  CHECK(r.config.fleet.share_load_ms == 20);
  CHECK(load_string(std::string(kHead) + "fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a }\n" +
                        std::string(kAdmin),
                    "f.yaml")
            .config.fleet.share_load_ms == 0);  // off unless asked
  const LoadResult k = load_string(
      std::string(kHead) +
          "fleet: { kubernetes: { service: r, port: http }, share_load: 50ms }\n" + std::string(kAdmin),
      "f.yaml");
  REQUIRE(k.ok());
  CHECK(k.config.fleet.share_load_ms == 50);
  // etcd lists no admin addresses; a static size has no members; nothing to serve the counts
  // on without admin; an interval below 5 ms.
  CHECK(fleet_errors_of("fleet: { etcd: { endpoints: ['http://127.0.0.1:2379'], prefix: /r/ }, "
                        "share_load: 20ms }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{
            "f.yaml:5:83: 'share_load' reads the other members' counts at their admin addresses, "
            "which an etcd fleet does not list: use 'peers' or 'kubernetes'"});
  CHECK(fleet_errors_of("fleet: { instances: 3, share_load: 20ms }\n") ==
        std::vector<std::string>{
            "f.yaml:5:36: 'share_load' needs a fleet source ('etcd' or 'kubernetes'), not "
            "'instances'"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, share_load: 20ms, "
                        "share_hot_keys: false }\n") ==
        std::vector<std::string>{
            "f.yaml:5:8: 'share_load' sends and receives the members' counts on the admin "
            "address: give 'admin' a bind address with a fixed port"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, share_load: 5ms }\n"
                        "admin: { bind: 127.0.0.1:0 }\n") ==
        std::vector<std::string>{
            "f.yaml:5:8: 'share_load' sends and receives the members' counts on the admin "
            "address: give 'admin' a bind address with a fixed port"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, share_load: 1ms }\n" +
                        std::string(kAdmin)) ==
        std::vector<std::string>{"f.yaml:5:68: 'share_load' must be at least 5ms, got 1ms"});
  CHECK(fleet_errors_of("fleet: { peers: [{ id: a, admin: 10.0.0.1:1 }], id: a, share_load: 11s }\n" +
                        std::string(kAdmin)) ==
        std::vector<std::string>{"f.yaml:5:68: 'share_load' must be at most 10s (counts older "
                                 "than 4 intervals are not used)"});
  // On Kubernetes the counts come from each member's admin port, so peer_port must be it.
  CHECK(fleet_errors_of("fleet: { kubernetes: { service: r, port: http }, share_load: 5ms, "
                        "peer_port: 9902 }\n" + std::string(kAdmin)) ==
        std::vector<std::string>{
            "f.yaml:5:8: 'share_load' sends each member's counts from its admin port: 'peer_port' "
            "must be that port (9901), not 9902"});
}

}  // namespace
}  // namespace rondel::config
