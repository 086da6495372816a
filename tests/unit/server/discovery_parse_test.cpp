// The documents discovery sources read: an etcd key's backend value and a Kubernetes
// EndpointSlice (shapes from the discovery.k8s.io/v1 API reference), and the API URL syntax.
#include <doctest/doctest.h>

#include <string>

#include "discovery_source.h"

namespace rondel::server {
namespace {

SourceBackend etcd_ok(std::string_view text) {
  bool left_out = true;
  auto b = parse_etcd_backend(text, left_out);
  REQUIRE(b);
  CHECK_FALSE(left_out);
  return *b;
}

std::string etcd_error(std::string_view text) {
  bool left_out = false;
  auto b = parse_etcd_backend(text, left_out);
  REQUIRE_FALSE(b);
  return b.error().message;
}

TEST_CASE("an etcd value is one backend: address, id, weight, labels, state") {
  SourceBackend b = etcd_ok(R"({"address": "10.0.0.7:8080", "id": "cache-7", "weight": 3,
                                "labels": ["z1", "ssd"], "state": "up"})");
  CHECK(b.id == "cache-7");
  CHECK(b.address.to_string() == "10.0.0.7:8080");
  CHECK(b.weight == 3);
  CHECK(b.labels == std::vector<std::string>{"z1", "ssd"});
  // Defaults: the id is the address, weight 1; IPv6 in brackets.
  b = etcd_ok(R"({"address": "[2001:db8::7]:80"})");
  CHECK(b.id == "[2001:db8::7]:80");
  CHECK(b.weight == 1);
  CHECK(etcd_ok(R"({"address": "10.0.0.7:80", "state": "drain"})").weight == 0);
  bool left_out = false;
  CHECK(parse_etcd_backend(R"({"address": "10.0.0.7:80", "state": "down"})", left_out));
  CHECK(left_out);
}

TEST_CASE("an etcd value that is not a backend says why") {
  CHECK(etcd_error("{not json") == "not a JSON object");
  CHECK(etcd_error("[1]") == "not a JSON object");
  CHECK(etcd_error(R"({"id": "x"})") == "'address' must be IP:PORT, got ''");
  CHECK(etcd_error(R"({"address": "cache.internal:80"})") ==
        "'address' must be IP:PORT, got 'cache.internal:80'");
  CHECK(etcd_error(R"({"address": "10.0.0.7:0"})") == "'address' must be IP:PORT, got '10.0.0.7:0'");
  CHECK(etcd_error(R"({"address": "10.0.0.7:80", "weight": -1})") ==
        "'weight' must be an integer 0..1000000");
  CHECK(etcd_error(R"({"address": "10.0.0.7:80", "weight": "2"})") ==
        "'weight' must be an integer 0..1000000");
  CHECK(etcd_error(R"({"address": "10.0.0.7:80", "labels": "z1"})") ==
        "'labels' must be a list of strings");
  CHECK(etcd_error(R"({"address": "10.0.0.7:80", "id": "a b"})") ==
        "'id' has a space or control");
  CHECK(etcd_error(R"({"address": "10.0.0.7:80", "state": "maybe"})") ==
        "'state' must be up, drain or down, got 'maybe'");
}

// An EndpointSlice as the EndpointSlice controller writes it (API reference shape).
constexpr std::string_view kSlice = R"({
  "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
  "metadata": {"name": "cache-abc", "namespace": "shop", "resourceVersion": "4711",
               "labels": {"kubernetes.io/service-name": "cache"}},
  "addressType": "IPv4",
  "endpoints": [
    {"addresses": ["10.1.0.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
     "targetRef": {"kind": "Pod", "namespace": "shop", "name": "cache-0", "uid": "u0"},
     "nodeName": "n1", "zone": "europe-west1-b"},
    {"addresses": ["10.1.0.6"], "conditions": {"ready": false, "serving": true, "terminating": true},
     "targetRef": {"kind": "Pod", "namespace": "shop", "name": "cache-1", "uid": "u1"}},
    {"addresses": ["10.1.0.7"], "conditions": {"ready": false, "serving": false, "terminating": true},
     "targetRef": {"kind": "Pod", "namespace": "shop", "name": "cache-2", "uid": "u2"}},
    {"addresses": ["10.1.0.8"], "conditions": {}, "hostname": "cache-3"},
    {"addresses": ["10.1.0.9"], "conditions": {"ready": false}},
    {"addresses": ["10.1.0.10"]}
  ],
  "ports": [{"name": "http", "protocol": "TCP", "port": 8080},
            {"name": "metrics", "protocol": "TCP", "port": 9100}]
})";

TEST_CASE("an EndpointSlice's endpoints: ids, conditions, zones and the named port") {
  auto list = endpoint_slice_backends(kSlice, "http");
  REQUIRE(list.size() == 4);
  CHECK(list[0].id == "cache-0");  // targetRef.name
  CHECK(list[0].address.to_string() == "10.1.0.5:8080");
  CHECK(list[0].weight == 1);
  CHECK(list[0].labels == std::vector<std::string>{"zone.europe-west1-b"});
  CHECK(list[1].id == "cache-1");  // serving and terminating: drained
  CHECK(list[1].weight == 0);
  // cache-2 (not serving) and the endpoint with ready false and no serving are gone.
  CHECK(list[2].id == "cache-3");  // no targetRef: the hostname; no conditions: ready
  CHECK(list[2].weight == 1);
  CHECK(list[3].id == "10.1.0.10:8080");  // neither: the address
  // By number; a port the slice does not have gives nothing.
  CHECK(endpoint_slice_backends(kSlice, "9100").at(0).address.to_string() == "10.1.0.5:9100");
  CHECK(endpoint_slice_backends(kSlice, "grpc").empty());
  CHECK(endpoint_slice_backends(R"({"addressType": "FQDN", "endpoints": [], "ports": []})",
                                "http").empty());
  CHECK(endpoint_slice_backends("not json", "http").empty());
}

TEST_CASE("IPv6 EndpointSlices") {
  auto list = endpoint_slice_backends(
      R"({"addressType": "IPv6", "endpoints": [{"addresses": ["2001:db8::5"]}],
          "ports": [{"name": "http", "port": 80}]})",
      "http");
  REQUIRE(list.size() == 1);
  CHECK(list[0].address.to_string() == "[2001:db8::5]:80");
}

TEST_CASE("API URLs") {
  auto u = config::parse_api_url("https://[::1]:6443/base/");
  REQUIRE(u);
  CHECK(u->tls);
  CHECK(u->host == "::1");
  CHECK(u->port == 6443);
  CHECK(u->base_path == "/base");
  u = config::parse_api_url("http://etcd-0.internal");
  REQUIRE(u);
  CHECK(u->port == 80);
  CHECK(u->base_path.empty());
  CHECK(config::parse_api_url("https://h").value().port == 443);
  CHECK(config::parse_api_url("etcd:2379").error().message ==
        "must start with http:// or https://");
  CHECK(config::parse_api_url("http://:80").error().message == "no host");
  CHECK(config::parse_api_url("http://h:0").error().message == "the port must be 1..65535");
  CHECK(config::parse_api_url("http://h:").error().message == "the port must be 1..65535");
  CHECK(config::parse_api_url("http://u@h").error().message == "no user info or spaces");
  CHECK(config::parse_api_url("http://h/a?b").error().message == "no query or fragment");
  CHECK(config::parse_api_url("http://[::1").error().message == "unclosed '[' in the host");
}

}  // namespace
}  // namespace rondel::server
