// Tests of load_file()/load_string(): every broken file's exact errors, the example file and
// the defaults an operator gets when keys are absent.

#include "rondel/config/loader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace rondel::config {
namespace {

const std::string kSourceDir = RONDEL_SOURCE_DIR;
const std::string kBrokenDir = kSourceDir + "/tests/unit/config/broken";

// The errors of `result` as "FILE:LINE:COL: message" strings, with `strip` removed from FILE.
std::vector<std::string> error_strings(const LoadResult& result, const std::string& strip = "") {
  std::vector<std::string> out;
  for (const ConfigError& e : result.errors) {
    std::string s = e.to_string();
    if (!strip.empty() && s.rfind(strip, 0) == 0) s.erase(0, strip.size());
    out.push_back(s);
  }
  return out;
}

// One string, one error per line: doctest prints it in full when a comparison fails.
std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& line : lines) s += line + "\n";
  return s;
}

struct BrokenCase {
  std::string file;
  std::vector<std::string> errors;
};

// Each file under broken/ and exactly what `rondel -c` prints for it, in file order.
// clang-format off: one unbroken line per expected error, as rondel -c prints it.
const std::vector<BrokenCase> kBrokenCases = {
    {"admin_errors.yaml",
     {"admin_errors.yaml:6:3: missing required key 'bind'",
      "admin_errors.yaml:7:3: unknown key 'hotkeys' (did you mean 'hot_keys'?)"}},
    {"bad_address.yaml",
     {"bad_address.yaml:2:24: bad address 'localhost:8080' for 'bind': an IP address is required "
      "here, not a host name",
      "bad_address.yaml:3:24: bad address '127.0.0.1' for 'bind': a port is required, as in "
      "127.0.0.1:80",
      "bad_address.yaml:4:23: bad address '::1:8080' for 'bind': an IPv6 address must be in "
      "brackets, as in [::1]:80",
      "bad_address.yaml:8:18: bad address '300.1.1.1:80' for 'address': not a valid IPv4 address",
      "bad_address.yaml:9:18: bad address 'bad_host!:80' for 'address': not a valid IP address or "
      "host name"}},
    {"bad_duration.yaml",
     {"bad_duration.yaml:1:16: 'drain_timeout' must be a duration such as 500ms, 2s, 1m or 1h, got "
      "'1.5s'",
      "bad_duration.yaml:6:21: 'header_timeout' must be at least 1ms, got 0s",
      "bad_duration.yaml:7:19: 'idle_timeout' must be a duration such as 500ms, 2s, 1m or 1h, got "
      "'2 minutes'",
      "bad_duration.yaml:10:22: 'connect_timeout' is too large, got 99999999999999999h"}},
    {"bad_enums.yaml",
     {"bad_enums.yaml:5:16: 'algorithm' must be one of ring, rendezvous, maglev, "
      "skeleton_rendezvous; got 'rign' (did "
      "you mean 'ring'?)",
      "bad_enums.yaml:6:18: 'missing_key' must be one of least_in_flight, random, uri, reject; got "
      "'fail'",
      "bad_enums.yaml:7:18: 'probe_order' must be one of clockwise, random; got 'counterclockwise'",
      "bad_enums.yaml:11:10: 'level' must be one of debug, info, warn, error; got 'verbose'"}},
    {"bad_expect_status.yaml",
     {"bad_expect_status.yaml:5:30: 'enabled' must be true or false, got 'maybe'",
      "bad_expect_status.yaml:5:52: 'expect_status' must name codes from 100 to 599, lowest first, "
      "got '399-200'",
      "bad_expect_status.yaml:9:22: 'expect_status' must be a status code or range such as 200 or "
      "200-399, got '2xx'",
      "bad_expect_status.yaml:10:13: 'path' must start with '/' and contain no spaces, got "
      "'healthz'"}},
    {"bad_hash_key.yaml",
     {"bad_hash_key.yaml:5:15: 'hash_key' needs a name after 'header:', as in header:X-Cache-Key",
      "bad_hash_key.yaml:8:15: 'hash_key' must be one of uri, path, header:NAME, cookie:NAME, "
      "query:NAME, src or llm_prefix; got 'hdr:X-Key'",
      "bad_hash_key.yaml:11:15: 'hash_key' uri takes no ':NAME', got 'uri:x'",
      "bad_hash_key.yaml:14:15: 'hash_key' has an invalid header name 'X Key'"}},
    {"bad_names.yaml",
     {"bad_names.yaml:2:13: 'name' may contain only letters, digits, '_', '-' and '.', got 'my "
      "web'",
      "bad_names.yaml:6:40: 'id' must not contain spaces, got 'cache a'"}},
    {"bad_size.yaml",
     {"bad_size.yaml:5:23: 'max_header_bytes' must be a size such as 512, 64KiB, 16MiB, 1GiB or "
      "10KB, got '32k'",
      "bad_size.yaml:6:23: 'max_request_line' must be at least 1 byte, got 0",
      "bad_size.yaml:7:21: 'max_body_bytes' is too large, got 99999999999TiB"}},
    {"balance_factor.yaml",
     {"balance_factor.yaml:5:21: 'balance_factor' must be 0 (no bound) or between 101 and 10000 "
      "percent, got 100 (100 would leave no slack above the average load)",
      "balance_factor.yaml:8:21: 'balance_factor' must be at most 10000, got 20000"}},
    {"deploy_errors.yaml",
     {"deploy_errors.yaml:1:27: 'debounce' must be at least 1ms, got 0ms",
      "deploy_errors.yaml:1:32: unknown key 'watch'",
      "deploy_errors.yaml:2:23: 'access_format' must be one of text, json; got 'xml'",
      "deploy_errors.yaml:8:39: 'id' cannot be set next to 'srv': the SRV records give each "
      "target's port and weight, and its id TARGET:PORT",
      "deploy_errors.yaml:9:16: 'srv' must be a DNS name such as _http._tcp.cache.example, got "
      "'-bad-.test'",
      "deploy_errors.yaml:11:16: duplicate SRV name '_http._tcp.ok.test' (first at line 10)"}},
    {"dns_errors.yaml",
     {"dns_errors.yaml:2:33: bad address 'ns.example:53' for 'nameservers': an IP address is "
      "required here, not a host name",
      "dns_errors.yaml:2:48: bad address '127.0.0.1:0' for 'nameservers': the port must be a "
      "number between 1 and 65535",
      "dns_errors.yaml:3:8: 'ttl' must be at least 100ms, got 50ms",
      "dns_errors.yaml:4:11: 'jitter' must be a percentage from 0% to 100%, such as 10%, got "
      "'150%'",
      "dns_errors.yaml:5:3: unknown key 'retries'",
      "dns_errors.yaml:10:20: 'jitter' must be a percentage from 0% to 100%, such as 10%, got "
      "'ten'",
      "dns_errors.yaml:10:35: 'attempts' must be between 1 and 16, got 0",
      "dns_errors.yaml:10:47: 'timeout' must be at least 1ms, got 0",
      "dns_errors.yaml:12:43: 'id' cannot be set for a backend named by DNS "
      "('cache.internal:80'): each address it resolves to is a backend with id ADDRESS:PORT"}},
    {"dup_backend_id.yaml",
     {"dup_backend_id.yaml:7:20: duplicate backend id '127.0.0.1:9001' (first at line 6)",
      "dup_backend_id.yaml:9:40: duplicate backend id 'cache-b' (first at line 8)"}},
    {"dup_bind.yaml",
     {"dup_bind.yaml:3:24: duplicate listener bind address '127.0.0.1:8080' (first at line 2)",
      "dup_bind.yaml:11:9: admin bind address '127.0.0.1:8080' is already a listener's (line 2)"}},
    {"dup_key.yaml", {"dup_key.yaml:8:9: duplicate key 'weight' (first at line 7)"}},
    {"dup_listener_name.yaml",
     {"dup_listener_name.yaml:5:11: duplicate listener name 'web' (first at line 2)"}},
    {"dup_pool_name.yaml",
     {"dup_pool_name.yaml:7:11: duplicate pool name 'caches' (first at line 4)"}},
    {"empty.yaml",
     {"empty.yaml:1:1: missing required key 'listeners'",
      "empty.yaml:1:1: missing required key 'pools'"}},
    {"empty_backends.yaml", {"empty_backends.yaml:5:15: 'backends' must have at least one entry"}},
    {"empty_values.yaml",
     {"empty_values.yaml:2:5: 'name' must not be empty",
      "empty_values.yaml:4:11: 'pool' must not be empty",
      "empty_values.yaml:7:5: 'retries' must be an integer, got nothing"}},
    {"invalid_yaml.yaml", {"invalid_yaml.yaml:4:3: invalid YAML: illegal block entry"}},
    {"listeners_not_list.yaml",
     {"listeners_not_list.yaml:2:3: 'listeners' must be a list, got a mapping"}},
    {"maglev_not_prime.yaml",
     {"maglev_not_prime.yaml:6:24: 'maglev_table_size' must be a prime number (such as 65537), got "
      "65536"}},
    {"maglev_too_small.yaml",
     {"maglev_too_small.yaml:6:24: 'maglev_table_size' (2) is less than the 3 backends with a "
      "positive weight"}},
    {"merge_key.yaml",
     {"merge_key.yaml:1:1: unknown key 'defaults'",
      "merge_key.yaml:7:5: unknown key '<<' (YAML merge keys are not supported)"}},
    {"missing_backends.yaml", {"missing_backends.yaml:4:5: missing required key 'backends'"}},
    {"missing_required.yaml",
     {"missing_required.yaml:2:5: missing required key 'name'",
      "missing_required.yaml:4:5: missing required key 'bind'",
      "missing_required.yaml:4:5: missing required key 'pool'",
      "missing_required.yaml:8:9: missing required key 'address'",
      "missing_required.yaml:9:5: missing required key 'name'"}},
    {"missing_top.yaml",
     {"missing_top.yaml:2:1: missing required key 'listeners'",
      "missing_top.yaml:2:1: missing required key 'pools'"}},
    {"negative_numbers.yaml",
     {"negative_numbers.yaml:5:14: 'retries' must not be negative, got -1",
      "negative_numbers.yaml:7:44: 'weight' must not be negative, got -2"}},
    {"port_range.yaml",
     {"port_range.yaml:2:24: bad address '127.0.0.1:-1' for 'bind': the port must be a number "
      "between 0 (any free port) and 65535",
      "port_range.yaml:6:18: bad address '127.0.0.1:70000' for 'address': the port must be a "
      "number between 1 and 65535",
      "port_range.yaml:7:18: bad address '127.0.0.1:0' for 'address': the port must be a number "
      "between 1 and 65535"}},
    {"string_for_number.yaml",
     {"string_for_number.yaml:1:10: 'workers' must be an integer, got 'many'",
      "string_for_number.yaml:3:67: 'max_headers' must be an integer, got '1e3'"}},
    {"tab_indent.yaml",
     {"tab_indent.yaml:3:1: invalid YAML: illegal tab when looking for indentation"}},
    {"three_errors.yaml",
     {"three_errors.yaml:1:10: 'workers' must be between 1 and 64, got 0",
      "three_errors.yaml:6:5: unknown key 'idle_timout' (did you mean 'idle_timeout'?)",
      "three_errors.yaml:10:18: bad address '127.0.0.1:99999' for 'address': the port must be a "
      "number between 1 and 65535"}},
    {"two_documents.yaml",
     {"two_documents.yaml:5:1: a configuration file holds one YAML document; a second one starts "
      "here"}},
    {"unknown_key_plain.yaml", {"unknown_key_plain.yaml:5:5: unknown key 'frobnicate'"}},
    {"unknown_key_suggest.yaml",
     {"unknown_key_suggest.yaml:5:5: unknown key 'balance_factr' (did you mean "
      "'balance_factor'?)"}},
    {"unknown_key_top.yaml",
     {"unknown_key_top.yaml:1:1: unknown key 'worker' (did you mean 'workers'?)"}},
    {"unknown_pool.yaml",
     {"unknown_pool.yaml:2:46: listener 'web' uses unknown pool 'cachez' (did you mean 'caches'?)",
      "unknown_pool.yaml:3:46: listener 'api' uses unknown pool 'origin'"}},
    {"workers_range.yaml",
     {"workers_range.yaml:1:10: 'workers' must be between 1 and 64, got 65",
      "workers_range.yaml:3:71: 'max_connections' must be at least 1, got 0",
      "workers_range.yaml:6:17: 'max_points' must be at most 16777216, got 99999999999999999999"}},
    {"wrong_types.yaml",
     {"wrong_types.yaml:1:6: 'log' must be a mapping, got 'stdout'",
      "wrong_types.yaml:3:5: each entry of 'listeners' must be a mapping, got 'web'",
      "wrong_types.yaml:4:24: 'bind' must be an address HOST:PORT, got a list",
      "wrong_types.yaml:7:19: 'health_check' must be a mapping, got a list",
      "wrong_types.yaml:9:9: each entry of 'backends' must be a mapping, got '127.0.0.1:9001'",
      "wrong_types.yaml:10:40: 'id' must be a string, got a mapping"}},
    {"zero_weights.yaml",
     {"zero_weights.yaml:5:5: every backend of pool 'caches' has weight 0; at least one needs a "
      "positive weight"}},
};
// clang-format on

TEST_CASE("every broken file reports exactly its expected errors, in file order") {
  for (const BrokenCase& c : kBrokenCases) {
    CAPTURE(c.file);
    const LoadResult r = load_file(kBrokenDir + "/" + c.file);
    CHECK_FALSE(r.ok());
    CHECK(joined(error_strings(r, kBrokenDir + "/")) == joined(c.errors));
  }
}

TEST_CASE("every file under broken/ has an entry in the table") {
  std::set<std::string> listed;
  for (const BrokenCase& c : kBrokenCases) listed.insert(c.file);
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(kBrokenDir)) {
    on_disk.insert(entry.path().filename().string());
  }
  CHECK(listed == on_disk);
  CHECK(on_disk.size() >= 25);
}

TEST_CASE("a file with three independent errors reports all three, in file order") {
  const LoadResult r = load_file(kBrokenDir + "/three_errors.yaml");
  const std::vector<std::string> errors = error_strings(r, kBrokenDir + "/");
  REQUIRE(errors.size() == 3);
  CHECK(errors[0].rfind("three_errors.yaml:1:", 0) == 0);
  CHECK(errors[1].rfind("three_errors.yaml:6:", 0) == 0);
  CHECK(errors[2].rfind("three_errors.yaml:10:", 0) == 0);
}

TEST_CASE("the annotated example conf/rondel.yaml loads with no errors") {
  const LoadResult r = load_file(kSourceDir + "/conf/rondel.yaml");
  CHECK(joined(error_strings(r)) == "");
  REQUIRE(r.ok());
  const Config& c = r.config;
  CHECK(c.file == kSourceDir + "/conf/rondel.yaml");
  REQUIRE(c.listeners.size() == 1);
  CHECK(c.listeners[0].bind.to_string() == "127.0.0.1:8080");
  CHECK(c.listeners[0].pool == "caches");
  REQUIRE(c.pools.size() == 1);
  const PoolConfig& p = c.pools[0];
  REQUIRE(p.backends.size() == 4);
  const char* ids[] = {"cache-a", "cache-b", "cache-c", "cache-d"};
  for (size_t i = 0; i < 4; ++i) {
    CHECK(p.backends[i].id == ids[i]);
    CHECK(p.backends[i].address.to_string() == "127.0.0.1:900" + std::to_string(i + 1));
    CHECK(p.backends[i].weight == 1);
  }
  CHECK(c.admin.enabled);
  CHECK(c.admin.bind.to_string() == "127.0.0.1:9901");
}

TEST_CASE("a missing or unreadable file is one error at 0:0 naming the OS reason") {
  const LoadResult r = load_file("/nonexistent/rondel.yaml");
  CHECK(error_strings(r) ==
        std::vector<std::string>{
            "/nonexistent/rondel.yaml:0:0: cannot read file: No such file or directory"});
  const LoadResult dir = load_file(kBrokenDir);
  CHECK(error_strings(dir, kBrokenDir) ==
        std::vector<std::string>{":0:0: cannot read file: Is a directory"});
}

constexpr std::string_view kMinimal = R"(
listeners:
  - { name: web, bind: 127.0.0.1:8080, pool: caches }
pools:
  - name: caches
    backends:
      - address: 127.0.0.1:9001
)";

TEST_CASE("defaults apply when keys are absent") {
  const LoadResult r = load_string(kMinimal, "min.yaml");
  REQUIRE(r.ok());
  const Config& c = r.config;
  CHECK(c.file == "min.yaml");
  CHECK(c.workers == 1);
  CHECK(c.drain_timeout_ms == 30000);
  CHECK(c.log.access_log.empty());
  CHECK(c.log.error_log == "-");
  CHECK(c.log.level == "info");
  CHECK_FALSE(c.admin.enabled);
  CHECK(c.admin.hot_keys == 10);

  const ListenerConfig& l = c.listeners.at(0);
  CHECK(l.name == "web");
  CHECK(l.position.line == 3);
  CHECK(l.position.column == 5);
  CHECK(l.max_connections == 10000);
  CHECK(l.header_timeout_ms == 10000);
  CHECK(l.body_timeout_ms == 30000);
  CHECK(l.idle_timeout_ms == 60000);
  CHECK(l.max_request_line == 8192);
  CHECK(l.max_header_bytes == 32768);
  CHECK(l.max_headers == 100);
  CHECK(l.max_body_bytes == 0);
  CHECK(l.forwarded_headers);

  const PoolConfig& p = c.pools.at(0);
  CHECK(p.name == "caches");
  CHECK(p.position.line == 5);
  CHECK(p.algorithm == Algorithm::kRing);
  CHECK(p.hash_key.kind == HashKeyKind::kUri);
  CHECK(p.hash_key.name.empty());
  CHECK(p.missing_key == MissingKeyPolicy::kLeastInFlight);
  CHECK(p.balance_factor == 125);
  CHECK(p.capacity_slack == 8);
  CHECK(p.probe_order == ProbeOrder::kClockwise);
  CHECK(p.spill_memory == 4096);
  CHECK(p.spill_hysteresis == 0);
  CHECK(p.hot_keys.share == 5);
  CHECK(p.hot_keys.max_replicas == 0);
  CHECK(p.hot_keys.window_ms == 1000);
  CHECK(p.hot_keys.capacity == 64);
  CHECK(p.hot_keys.min_count == 16);
  CHECK(p.replica_choice == ReplicaChoice::kLeastLoaded);
  CHECK(p.points_per_weight == 4096);
  CHECK(p.max_points == 1048576);
  CHECK(p.maglev_table_size == 65537);
  CHECK(p.retries == 2);
  CHECK(p.connect_timeout_ms == 2000);
  CHECK(p.response_header_timeout_ms == 30000);
  CHECK(p.backend_idle_timeout_ms == 60000);
  CHECK(p.backend_io_timeout_ms == 60000);
  CHECK(p.max_idle_per_backend == 64);
  CHECK(p.max_connections_per_backend == 0);
  CHECK(p.slow_start_ms == 0);
  CHECK_FALSE(p.health.enabled);
  CHECK(p.health.method == "GET");
  CHECK(p.health.path == "/healthz");
  CHECK(p.health.expect_status_min == 200);
  CHECK(p.health.expect_status_max == 399);
  CHECK(p.health.interval_ms == 2000);
  CHECK(p.health.timeout_ms == 1000);
  CHECK(p.health.rise == 2);
  CHECK(p.health.fall == 3);
  CHECK(p.passive.consecutive_failures == 5);
  CHECK(p.passive.ejection_ms == 10000);
  CHECK(p.passive.max_ejected_percent == 50);
  CHECK(c.dns.nameservers.empty());
  CHECK(c.dns.ttl_ms == 60000);
  CHECK(c.dns.jitter_percent == 10);
  CHECK(c.dns.timeout_ms == 2000);
  CHECK(c.dns.attempts == 2);
  CHECK(c.dns.hold_ms == 30000);
  CHECK(p.dns.nameservers.empty());
  CHECK(p.dns.ttl_ms == 60000);
  CHECK(p.dns.jitter_percent == 10);

  const BackendConfig& b = p.backends.at(0);
  CHECK(b.id == "127.0.0.1:9001");
  CHECK(b.weight == 1);
  CHECK_FALSE(b.address.is_name);
  CHECK(b.position.line == 7);
  CHECK(b.position.column == 9);
}

TEST_CASE("every key is read into its field") {
  constexpr std::string_view kFull = R"(
workers: 4
drain_timeout: 1m
log: { access_log: /var/log/rondel/access.log, error_log: "-", level: debug }
listeners:
  - name: web
    bind: "[::1]:0"
    pool: objects
    max_connections: 500
    header_timeout: 5s
    body_timeout: 1m
    idle_timeout: 1h
    max_request_line: 4KiB
    max_header_bytes: 1MB
    max_headers: 50
    max_body_bytes: 1GiB
    forwarded_headers: no
pools:
  - name: objects
    algorithm: maglev
    hash_key: header:X-Object-Id
    missing_key: uri
    balance_factor: 0
    capacity_slack: 3
    probe_order: random
    points_per_weight: 40
    max_points: 4096
    maglev_table_size: 251
    retries: 0
    connect_timeout: 250ms
    response_header_timeout: 5s
    backend_idle_timeout: 30s
    backend_io_timeout: 45s
    max_idle_per_backend: 8
    max_connections_per_backend: 100
    slow_start: 20s
    health_check: { enabled: yes, method: HEAD, path: /ping, expect_status: 204, interval: 5s, timeout: 500, rise: 1, fall: 1 }
    passive_health: { consecutive_failures: 0, ejection_time: 1m, max_ejected_percent: 100 }
    backends:
      - { address: cache.internal:80 }
      - { address: "[2001:db8:0::1]:8080", weight: 3, id: v6 }
      - { address: 10.0.0.3:80, weight: 0 }
  - name: by-cookie
    algorithm: rendezvous
    hash_key: cookie:session
    missing_key: reject
    backends: [{ address: 10.0.0.4:80 }]
  - name: by-query
    hash_key: query:user
    missing_key: random
    backends: [{ address: 10.0.0.5:80 }]
  - name: by-source
    hash_key: src
    backends: [{ address: 10.0.0.6:80 }]
admin:
  bind: 0.0.0.0:9901
  hot_keys: 0
)";
  const LoadResult r = load_string(kFull, "full.yaml");
  CHECK(joined(error_strings(r)) == "");
  REQUIRE(r.ok());
  const Config& c = r.config;
  CHECK(c.workers == 4);
  CHECK(c.drain_timeout_ms == 60000);
  CHECK(c.log.access_log == "/var/log/rondel/access.log");
  CHECK(c.log.level == "debug");

  const ListenerConfig& l = c.listeners.at(0);
  CHECK(l.bind.host == "::1");
  CHECK(l.bind.port == 0);
  CHECK(l.bind.to_string() == "[::1]:0");
  CHECK(l.max_connections == 500);
  CHECK(l.header_timeout_ms == 5000);
  CHECK(l.body_timeout_ms == 60000);
  CHECK(l.idle_timeout_ms == 3600000);
  CHECK(l.max_request_line == 4096);
  CHECK(l.max_header_bytes == 1000000);
  CHECK(l.max_headers == 50);
  CHECK(l.max_body_bytes == (1ull << 30));
  CHECK_FALSE(l.forwarded_headers);

  REQUIRE(c.pools.size() == 4);
  const PoolConfig& p = c.pools[0];
  CHECK(p.algorithm == Algorithm::kMaglev);
  CHECK(p.hash_key.kind == HashKeyKind::kHeader);
  CHECK(p.hash_key.name == "X-Object-Id");
  CHECK(p.missing_key == MissingKeyPolicy::kHashUri);
  CHECK(p.balance_factor == 0);
  CHECK(p.capacity_slack == 3);
  CHECK(p.probe_order == ProbeOrder::kRandom);
  CHECK(p.points_per_weight == 40);
  CHECK(p.max_points == 4096);
  CHECK(p.maglev_table_size == 251);
  CHECK(p.retries == 0);
  CHECK(p.connect_timeout_ms == 250);
  CHECK(p.response_header_timeout_ms == 5000);
  CHECK(p.backend_idle_timeout_ms == 30000);
  CHECK(p.backend_io_timeout_ms == 45000);
  CHECK(p.max_idle_per_backend == 8);
  CHECK(p.max_connections_per_backend == 100);
  CHECK(p.slow_start_ms == 20000);
  CHECK(p.health.enabled);
  CHECK(p.health.method == "HEAD");
  CHECK(p.health.path == "/ping");
  CHECK(p.health.expect_status_min == 204);
  CHECK(p.health.expect_status_max == 204);
  CHECK(p.health.interval_ms == 5000);
  CHECK(p.health.timeout_ms == 500);
  CHECK(p.health.rise == 1);
  CHECK(p.health.fall == 1);
  CHECK(p.passive.consecutive_failures == 0);
  CHECK(p.passive.ejection_ms == 60000);
  CHECK(p.passive.max_ejected_percent == 100);
  REQUIRE(p.backends.size() == 3);
  CHECK(p.backends[0].address.is_name);
  CHECK(p.backends[0].id == "cache.internal:80");
  CHECK(p.backends[1].address.host == "2001:db8::1");  // written canonically
  CHECK(p.backends[1].id == "v6");
  CHECK(p.backends[1].weight == 3);
  CHECK(p.backends[2].weight == 0);

  CHECK(c.pools[1].algorithm == Algorithm::kRendezvous);
  CHECK(c.pools[1].hash_key.kind == HashKeyKind::kCookie);
  CHECK(c.pools[1].hash_key.name == "session");
  CHECK(c.pools[1].missing_key == MissingKeyPolicy::kReject);
  CHECK(c.pools[2].hash_key.kind == HashKeyKind::kQuery);
  CHECK(c.pools[2].hash_key.name == "user");
  CHECK(c.pools[2].missing_key == MissingKeyPolicy::kRandom);
  CHECK(c.pools[3].hash_key.kind == HashKeyKind::kSrc);

  CHECK(c.admin.enabled);
  CHECK(c.admin.bind.to_string() == "0.0.0.0:9901");
  CHECK(c.admin.hot_keys == 0);
}

TEST_CASE("a pool's dns settings start from the top-level ones and override them key by key") {
  constexpr std::string_view kDns = R"(
dns: { nameservers: [127.0.0.1:5353, "[::1]:53"], ttl: 30s, jitter: 5%, hold: 10s }
listeners:
  - { name: web, bind: 127.0.0.1:8080, pool: a }
pools:
  - name: a
    dns: { ttl: 1s, jitter: 0, hold: 0s }
    backends: [{ address: cache.internal:80, weight: 2 }]
  - name: b
    backends: [{ address: 127.0.0.1:9001 }]
)";
  const LoadResult r = load_string(kDns, "dns.yaml");
  REQUIRE(r.ok());
  const Config& c = r.config;
  REQUIRE(c.dns.nameservers.size() == 2);
  CHECK(c.dns.nameservers[0].to_string() == "127.0.0.1:5353");
  CHECK(c.dns.nameservers[1].to_string() == "[::1]:53");
  CHECK(c.dns.ttl_ms == 30000);
  CHECK(c.dns.jitter_percent == 5);
  const PoolConfig& a = c.pools.at(0);
  CHECK(a.dns.nameservers.size() == 2);
  CHECK(a.dns.ttl_ms == 1000);
  CHECK(a.dns.jitter_percent == 0);
  CHECK(a.dns.hold_ms == 0);
  CHECK(a.backends.at(0).address.is_name);
  CHECK(a.backends.at(0).weight == 2);
  const PoolConfig& b = c.pools.at(1);
  CHECK(b.dns.ttl_ms == 30000);
  CHECK(b.dns.jitter_percent == 5);
  CHECK(b.dns.hold_ms == 10000);
}

TEST_CASE("deployment keys: access_format, config_watch and srv backends") {
  const LoadResult r = load_string(
      "config_watch: { debounce: 2s }\n"
      "log: { access_format: json }\n"
      "listeners: [{ name: web, bind: 127.0.0.1:0, pool: p }]\n"
      "pools:\n  - name: p\n    backends:\n"
      "      - { srv: _http._tcp.cache.test. }\n      - { address: 127.0.0.1:81 }\n",
      "deploy.yaml");
  REQUIRE_MESSAGE(r.ok(), joined(error_strings(r)));
  CHECK(r.config.config_watch.enabled);
  CHECK(r.config.config_watch.debounce_ms == 2000);
  CHECK(r.config.log.access_format == "json");
  const auto& b = r.config.pools[0].backends;
  REQUIRE(b.size() == 2);
  CHECK(b[0].lookup == NameLookup::kSrv);
  CHECK(b[0].address.is_name);
  CHECK(b[0].address.host == "_http._tcp.cache.test");  // the root's dot dropped
  CHECK(b[1].lookup == NameLookup::kAddress);
  const LoadResult off = load_string(
      "config_watch: { enabled: false }\nlisteners: [{ name: web, bind: 127.0.0.1:0, pool: p }]\n"
      "pools: [{ name: p, backends: [{ address: 127.0.0.1:81 }] }]\n",
      "off.yaml");
  REQUIRE(off.ok());
  CHECK_FALSE(off.config.config_watch.enabled);
  CHECK(off.config.log.access_format == "text");
}

TEST_CASE("an admin section with enabled: false needs no bind") {
  std::string yaml(kMinimal);
  yaml += "admin: { enabled: false }\n";
  const LoadResult r = load_string(yaml, "a.yaml");
  CHECK(joined(error_strings(r)) == "");
  CHECK_FALSE(r.config.admin.enabled);
}

TEST_CASE("the admin listener's connection limits: defaults, values and errors") {
  struct Case {
    const char* keys;  // added to `admin: { bind: 127.0.0.1:0 ... }`
    uint32_t max_connections;
    uint64_t header_timeout_ms, idle_timeout_ms;
  };
  const Case cases[] = {
      {"", 10, 10000, 10000},  // HAProxy's `stats maxconn` and `stats timeout` defaults
      {", max_connections: 4, header_timeout: 2s, idle_timeout: 500ms", 4, 2000, 500},
  };
  for (const Case& c : cases) {
    const LoadResult r = load_string(
        std::string(kMinimal) + "admin: { bind: 127.0.0.1:0" + c.keys + " }\n", "a.yaml");
    REQUIRE_MESSAGE(r.ok(), c.keys);
    CHECK(r.config.admin.max_connections == c.max_connections);
    CHECK(r.config.admin.header_timeout_ms == c.header_timeout_ms);
    CHECK(r.config.admin.idle_timeout_ms == c.idle_timeout_ms);
  }
  const LoadResult bad = load_string(
      std::string(kMinimal) + "admin: { bind: 127.0.0.1:0, max_connections: 0, "
                              "header_timeout: 0ms, idle_timeout: soon }\n",
      "b.yaml");
  CHECK(error_strings(bad) ==
        std::vector<std::string>{
            "b.yaml:8:46: 'max_connections' must be between 1 and 65535, got 0",
            "b.yaml:8:65: 'header_timeout' must be at least 1ms, got 0ms",
            "b.yaml:8:84: 'idle_timeout' must be a duration such as 500ms, 2s, 1m or 1h, got "
            "'soon'"});
}

TEST_CASE("two listeners on port 0 do not collide: each gets its own free port") {
  constexpr std::string_view kYaml = R"(
listeners:
  - { name: a, bind: 127.0.0.1:0, pool: p }
  - { name: b, bind: 127.0.0.1:0, pool: p }
pools:
  - { name: p, backends: [{ address: 127.0.0.1:9001 }] }
admin: { bind: 127.0.0.1:0 }
)";
  const LoadResult r = load_string(kYaml, "zero.yaml");
  CHECK(joined(error_strings(r)) == "");
}

TEST_CASE("a pool of more than 65535 backends is refused at its 'backends' key") {
  std::string yaml =
      "listeners: [{ name: w, bind: 127.0.0.1:80, pool: big }]\n"
      "pools:\n"
      "  - name: big\n"
      "    backends:\n";
  for (int i = 0; i < 65536; ++i) {
    yaml += "      - { address: 10." + std::to_string(i >> 8) + "." + std::to_string(i & 255) +
            ".1:80 }\n";
  }
  const LoadResult r = load_string(yaml, "big.yaml");
  CHECK(error_strings(r) ==
        std::vector<std::string>{
            "big.yaml:4:5: 'backends' has 65536 entries; a pool holds at most 65535"});
}

TEST_CASE("backend ids default to the address, so reordering keeps every id") {
  constexpr std::string_view kA = R"(
listeners: [{ name: w, bind: 127.0.0.1:80, pool: p }]
pools: [{ name: p, backends: [{ address: 10.0.0.1:80 }, { address: "[::1]:81" }, { address: b.example:82 }] }]
)";
  const LoadResult r = load_string(kA, "ids.yaml");
  REQUIRE(r.ok());
  const auto& b = r.config.pools.at(0).backends;
  CHECK(b.at(0).id == "10.0.0.1:80");
  CHECK(b.at(1).id == "[::1]:81");
  CHECK(b.at(2).id == "b.example:82");
}

TEST_CASE("routing-quality keys are read per pool, and all of them off is plain bounded loads") {
  constexpr std::string_view kRouting = R"(
listeners: [{name: web, bind: 127.0.0.1:0, pool: tuned}]
pools:
  - name: tuned
    capacity_slack: 4
    spill_memory: 1024
    spill_hysteresis: 2
    hot_keys: {share: 25, max_replicas: 3, window: 500ms, capacity: 128, min_count: 8}
    replica_choice: round_robin
    backends: [{address: 127.0.0.1:9001}]
  - name: plain
    capacity_slack: 0
    spill_memory: 0
    hot_keys: {share: 0}
    backends: [{address: 127.0.0.1:9001}]
)";
  const LoadResult r = load_string(kRouting, "routing.yaml");
  REQUIRE(r.errors.empty());
  const PoolConfig& t = r.config.pools.at(0);
  CHECK(t.capacity_slack == 4);
  CHECK(t.spill_memory == 1024);
  CHECK(t.spill_hysteresis == 2);
  CHECK(t.hot_keys.share == 25);
  CHECK(t.hot_keys.max_replicas == 3);
  CHECK(t.hot_keys.window_ms == 500);
  CHECK(t.hot_keys.capacity == 128);
  CHECK(t.hot_keys.min_count == 8);
  CHECK(t.replica_choice == ReplicaChoice::kRoundRobin);
  const PoolConfig& p = r.config.pools.at(1);
  CHECK(p.capacity_slack == 0);
  CHECK(p.spill_memory == 0);
  CHECK(p.hot_keys.share == 0);
  CHECK(p.hot_keys.window_ms == 1000);  // untouched keys of the mapping keep their defaults
}

TEST_CASE("llm_prefix pools: balanced tenant homes by default, share 200, hashed on request") {
  constexpr std::string_view kLlm = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: a}]
pools:
  - name: a
    hash_key: llm_prefix
    backends: [{address: 127.0.0.1:9001}]
  - name: b
    hash_key: llm_prefix
    llm_prefix: {tenant_homes: hashed}
    hot_keys: {share: 400}
    backends: [{address: 127.0.0.1:9001}]
  - name: c
    hash_key: llm_prefix
    llm_prefix: {tenant_homes: even}
    backends: [{address: 127.0.0.1:9001}]
)";
  const LoadResult r = load_string(kLlm, "llm.yaml");
  const std::vector<std::string> errs = error_strings(r);
  INFO(joined(errs));
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].rfind("llm.yaml:13:32: 'tenant_homes' must be one of balanced, hashed", 0) == 0);
  const LoadResult ok = load_string(kLlm.substr(0, kLlm.find("  - name: c")), "llm.yaml");
  REQUIRE(ok.errors.empty());
  CHECK(ok.config.pools.at(0).llm_prefix.tenant_homes == TenantHomes::kBalanced);
  CHECK(ok.config.pools.at(0).hot_keys.share == 200);
  CHECK(ok.config.pools.at(1).llm_prefix.tenant_homes == TenantHomes::kHashed);
  CHECK(ok.config.pools.at(1).hot_keys.share == 400);
}

TEST_CASE("routing-quality keys out of range are errors at their value") {
  constexpr std::string_view kBad = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - name: p
    spill_memory: 99999999
    hot_keys: {share: 1001, max_replicas: 65, window: 1ms, capacity: 0, stride: 2}
    replica_choice: random
    backends: [{address: 127.0.0.1:9001}]
)";
  const LoadResult r = load_string(kBad, "bad.yaml");
  const std::vector<std::string> errs = error_strings(r);
  INFO(joined(errs));
  REQUIRE(errs.size() == 7);
  CHECK(errs[0].rfind("bad.yaml:4:19: 'spill_memory'", 0) == 0);
  CHECK(errs[1].rfind("bad.yaml:5:23: 'share'", 0) == 0);
  CHECK(errs[2].rfind("bad.yaml:5:43: 'max_replicas'", 0) == 0);
  CHECK(errs[3].rfind("bad.yaml:5:55: 'window' must be at least 10ms", 0) == 0);
  CHECK(errs[4].rfind("bad.yaml:5:70: 'capacity' must be between 1 and 4096", 0) == 0);
  CHECK(errs[5].rfind("bad.yaml:5:73: unknown key 'stride'", 0) == 0);
  CHECK(errs[6].rfind("bad.yaml:6:21: 'replica_choice' must be one of least_loaded, round_robin",
                      0) == 0);
}

TEST_CASE("range_chunk: a size for uri and path keys; an error at its value for other keys") {
  constexpr std::string_view kOk = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - {name: p, hash_key: path, range_chunk: 4MiB, backends: [{address: 127.0.0.1:9001}]}
  - {name: q, backends: [{address: 127.0.0.1:9001}]}
)";
  const LoadResult ok = load_string(kOk, "ok.yaml");
  INFO(joined(error_strings(ok)));
  REQUIRE(ok.ok());
  CHECK(ok.config.pools.at(0).range_chunk == 4u << 20);
  CHECK(ok.config.pools.at(1).range_chunk == 0);  // default: off
  constexpr std::string_view kBad = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - name: p
    hash_key: header:X-Id
    range_chunk: 1MiB
    backends: [{address: 127.0.0.1:9001}]
  - {name: q, range_chunk: 0, backends: [{address: 127.0.0.1:9001}]}
)";
  const LoadResult r = load_string(kBad, "bad.yaml");
  const std::vector<std::string> errs = error_strings(r);
  INFO(joined(errs));
  REQUIRE(errs.size() == 2);
  CHECK(errs[0].rfind("bad.yaml:5:18: 'range_chunk' needs 'hash_key: uri' or 'hash_key: path'",
                      0) == 0);
  CHECK(errs[1].rfind("bad.yaml:7:28: 'range_chunk'", 0) == 0);
}

TEST_CASE("previous and migrate_percent: read per pool; unknown ids and a percent alone are errors") {
  constexpr std::string_view kOk = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - name: p
    algorithm: maglev
    seed: 7
    migrate_percent: 30
    previous:
      algorithm: ring
      points_per_weight: 160
      seed: 9
      backends: [{id: a, weight: 2}, {address: 127.0.0.1:9002}]
    backends: [{address: 127.0.0.1:9001, id: a}, {address: 127.0.0.1:9002}, {address: 127.0.0.1:9003}]
)";
  const LoadResult ok = load_string(kOk, "ok.yaml");
  INFO(joined(error_strings(ok)));
  REQUIRE(ok.ok());
  const PoolConfig& p = ok.config.pools.at(0);
  CHECK(p.seed == 7);
  CHECK(p.migrate_percent == 30);
  CHECK(p.previous.present);
  CHECK(p.previous.algorithm == Algorithm::kRing);
  CHECK(p.previous.points_per_weight == 160);
  CHECK(p.previous.seed == 9);
  REQUIRE(p.previous.backends.size() == 2);
  CHECK(p.previous.backends[0].id == "a");
  CHECK(p.previous.backends[0].weight == 2);
  CHECK(p.previous.backends[1].id == "127.0.0.1:9002");
  constexpr std::string_view kBad = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - name: p
    migrate_percent: 101
    previous:
      backends: [{id: nope}, {id: a}, {id: a}]
    backends: [{address: 127.0.0.1:9001, id: a}]
  - {name: q, migrate_percent: 5, backends: [{address: 127.0.0.1:9001}]}
)";
  const LoadResult r = load_string(kBad, "bad.yaml");
  const std::vector<std::string> errs = error_strings(r);
  INFO(joined(errs));
  REQUIRE(errs.size() == 4);
  CHECK(errs[0].rfind("bad.yaml:4:22: 'migrate_percent'", 0) == 0);
  CHECK(errs[1].rfind("bad.yaml:6:18: previous backend 'nope' is not a backend of the pool", 0) == 0);
  CHECK(errs[2].rfind("bad.yaml:6:39: duplicate previous backend 'a'", 0) == 0);
  CHECK(errs[3].rfind("bad.yaml:8:32: 'migrate_percent' needs a 'previous' placement", 0) == 0);
}

TEST_CASE("load_string names the file it was given in every error") {
  const LoadResult r = load_string("workers: [1]\n", "inline");
  // Errors come sorted by position: the document's own position (1:1) comes first.
  CHECK(error_strings(r) ==
        std::vector<std::string>{"inline:1:1: missing required key 'listeners'",
                                 "inline:1:1: missing required key 'pools'",
                                 "inline:1:10: 'workers' must be an integer, got a list"});
}

}  // namespace
}  // namespace rondel::config

namespace rondel::config {
namespace {

TEST_CASE("proxy_protocol: trusted networks are read, CIDR errors are at their entry") {
  constexpr std::string_view kOk = R"(listeners:
  - name: edge
    bind: 127.0.0.1:0
    pool: p
    proxy_protocol: {trusted: [10.0.0.0/8, "2001:db8::/32", 127.0.0.1]}
  - {name: plain, bind: 127.0.0.1:0, pool: p}
pools: [{name: p, backends: [{address: 127.0.0.1:9001}]}]
)";
  const LoadResult ok = load_string(kOk, "ok.yaml");
  INFO(joined(error_strings(ok)));
  REQUIRE(ok.ok());
  const auto& pp = ok.config.listeners[0].proxy_protocol;
  CHECK(pp.enabled);
  REQUIRE(pp.trusted.size() == 3);
  CHECK(pp.trusted[0].prefix == 8);
  CHECK(pp.trusted[1].family == 6);
  CHECK(pp.trusted[2].prefix == 32);
  CHECK_FALSE(ok.config.listeners[1].proxy_protocol.enabled);

  constexpr std::string_view kBad = R"(listeners:
  - name: a
    bind: 127.0.0.1:0
    pool: p
    proxy_protocol: {trusted: [10.0.0.1/8, 10.0.0.0/33, nonsense]}
  - name: b
    bind: 127.0.0.1:0
    pool: p
    proxy_protocol: {trusted: []}
  - name: c
    bind: 127.0.0.1:0
    pool: p
    proxy_protocol: {trust: [10.0.0.0/8]}
pools: [{name: p, backends: [{address: 127.0.0.1:9001}]}]
)";
  const LoadResult r = load_string(kBad, "bad.yaml");
  const std::vector<std::string> errs = error_strings(r);
  INFO(joined(errs));
  REQUIRE(errs.size() == 6);
  CHECK(errs[0].rfind("bad.yaml:5:32: 'trusted' entry '10.0.0.1/8' is not a network (CIDR): "
                      "address has bits set past the /8 prefix", 0) == 0);
  CHECK(errs[1].rfind("bad.yaml:5:44: 'trusted' entry '10.0.0.0/33'", 0) == 0);
  CHECK(errs[2].rfind("bad.yaml:5:57: 'trusted' entry 'nonsense' is not a network (CIDR): not "
                      "an IP address", 0) == 0);
  CHECK(errs[3].rfind("bad.yaml:9:31: 'trusted' must have at least one entry", 0) == 0);
  CHECK(errs[4].rfind("bad.yaml:13:21: missing required key 'trusted'", 0) == 0);
  CHECK(errs[5].rfind("bad.yaml:13:22: unknown key 'trust'", 0) == 0);
}

}  // namespace
}  // namespace rondel::config

namespace rondel::config {

TEST_CASE("a pool's discovery section: etcd or kubernetes, checked without contacting them") {
  constexpr std::string_view kOk = R"(
listeners:
  - { name: web, bind: 127.0.0.1:8080, pool: e }
pools:
  - name: e
    discovery: { etcd: { endpoints: [http://127.0.0.1:2379, "https://[::1]:2379/x/"], prefix: /r/e/ }, retry: 200ms }
  - name: k
    discovery:
      kubernetes: { service: cache, namespace: prod, port: http, server: https://10.0.0.1:6443 }
      allow_empty: true
    backends: [{ address: 127.0.0.1:9001 }]
)";
  const LoadResult r = load_string(kOk, "disc.yaml");
  REQUIRE(r.ok());
  const PoolConfig& e = r.config.pools.at(0);
  CHECK(e.discovery.kind == DiscoveryKind::kEtcd);
  CHECK(e.backends.empty());
  REQUIRE(e.discovery.endpoints.size() == 2);
  CHECK(e.discovery.endpoints[0].host == "127.0.0.1");
  CHECK(e.discovery.endpoints[0].port == 2379);
  CHECK_FALSE(e.discovery.endpoints[0].tls);
  CHECK(e.discovery.endpoints[1].host == "::1");
  CHECK(e.discovery.endpoints[1].tls);
  CHECK(e.discovery.endpoints[1].base_path == "/x");
  CHECK(e.discovery.prefix == "/r/e/");
  CHECK(e.discovery.retry_ms == 200);
  CHECK_FALSE(e.discovery.allow_empty);
  const PoolConfig& k = r.config.pools.at(1);
  CHECK(k.discovery.kind == DiscoveryKind::kKubernetes);
  CHECK(k.discovery.service == "cache");
  CHECK(k.discovery.namespace_name == "prod");
  CHECK(k.discovery.port == "http");
  CHECK(k.discovery.server.port == 6443);
  CHECK(k.discovery.allow_empty);

  constexpr std::string_view kBad = R"(
listeners:
  - { name: web, bind: 127.0.0.1:8080, pool: a }
pools:
  - name: a
    discovery: { etcd: { endpoints: [ftp://x:1, "http://h:99999"], prefix: /p/ } }
  - name: a2
    discovery: { etcd: { endpoints: [http://h:1], prefix: /p/ }, kubernetes: { service: s, port: 80 } }
  - name: b
    discovery: { kubernetes: { service: Bad_Name, port: "0" } }
  - name: c
    discovery: { allow_empty: true }
)";
  const LoadResult bad = load_string(kBad, "bad.yaml");
  std::vector<std::string> got;
  for (const auto& err : bad.errors) got.push_back(err.to_string());
  CHECK(got == std::vector<std::string>{
                   "bad.yaml:6:38: bad URL 'ftp://x:1' for 'endpoints': must start with http:// or "
                   "https://",
                   "bad.yaml:6:49: bad URL 'http://h:99999' for 'endpoints': the port must be "
                   "1..65535",
                   "bad.yaml:8:78: 'discovery' takes one source: 'etcd' or 'kubernetes', not both",
                   "bad.yaml:10:41: 'service' must be a Service name (lower-case letters, digits "
                   "and '-', at most 63), got 'Bad_Name'",
                   "bad.yaml:10:57: 'port' must be a port name (lower-case letters, digits and "
                   "'-', at most 15) or a number 1..65535, got '0'",
                   "bad.yaml:12:16: 'discovery' needs a source: 'etcd' or 'kubernetes'"});
}

}  // namespace rondel::config
