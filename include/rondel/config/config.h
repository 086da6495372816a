// Plain configuration structs: what a rondel YAML file means once it has been validated.
//
// These structs carry no behaviour and no YAML types; src/config/ turns a file into a Config
// (see loader.h), and the daemon builds its runtime Snapshot from one. Defaults below are the
// defaults an operator gets when a key is absent; docs/configuration.md documents each one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/core/choices.h"
#include "rondel/core/cidr.h"
#include "rondel/core/result.h"
#include "rondel/core/reported_load.h"

namespace rondel::config {

// Where a value came from in the file, for error messages and the explain API (1-based).
struct Position {
  int line = 0;
  int column = 0;
};

// A listen or connect address. `host` is an IPv4/IPv6 literal, or (backends only) a DNS name
// when `is_name` is true.
struct Address {
  std::string host;
  uint16_t port = 0;
  bool is_name = false;
  std::string to_string() const;  // "127.0.0.1:80", "[::1]:80", "cache.example:80"
};

// Placement and pick choices: core's enums themselves (core/choices.h, with their names).
using core::Algorithm;
using core::ProbeOrder;
using core::ReplicaChoice;
// kLlmPrefix: the prompt of an OpenAI-compatible or Anthropic inference request, read from its
// JSON body (PoolConfig::llm_prefix, docs/routing.md "Inference routing").
enum class HashKeyKind : uint8_t { kUri, kPath, kHeader, kCookie, kQuery, kSrc, kLlmPrefix };
// What to do with a request whose hash key is absent (no such header/cookie/query parameter).
enum class MissingKeyPolicy : uint8_t { kLeastInFlight, kRandom, kHashUri, kReject };
// What one request in flight counts for in the bound (`load_by`): one, or its body's size in
// KiB (an inference request's prefill cost grows with its prompt).
enum class LoadBy : uint8_t { kRequests, kPromptSize };

struct HashKey {
  HashKeyKind kind = HashKeyKind::kUri;
  std::string name;  // header, cookie or query-parameter name; empty for uri/path/src
};

// Where an llm_prefix key's conversation anchor sits (docs/algorithms.md "llm_prefix keys"):
// at the end of the first user message, at the end of the system part, or after `blocks`
// 64-byte blocks of the conversation.
enum class LlmAnchor : uint8_t { kFirstUser, kSystem, kBlocks };
inline constexpr std::string_view kLlmAnchorNames[] = {"first_user", "system", "blocks"};

// Where an llm_prefix tenant's home is (docs/routing.md "Balanced tenant homes"): the active
// tenants spread evenly over the backends by bounded loads over tenants (core/group_homes.h),
// or the first backend of the tenant's own order.
enum class TenantHomes : uint8_t { kBalanced, kHashed };
inline constexpr std::string_view kTenantHomesNames[] = {"balanced", "hashed"};

// An explicit key an llm_prefix pool prefers to the prompt: a request header's value, or a
// top-level string field of the JSON body (prompt_cache_key, user, ...).
struct LlmExplicitKey {
  enum class Where : uint8_t { kHeader, kBody };
  Where where = Where::kHeader;
  std::string name;  // header name (lower case) or body field name
};

// A pool's `llm_prefix` section (hash_key: llm_prefix).
struct LlmPrefixConfig {
  LlmAnchor conversation = LlmAnchor::kFirstUser;
  uint32_t blocks = 16;                      // kBlocks, and raw `prompt` bodies
  std::vector<LlmExplicitKey> explicit_keys;  // first present wins; empty: the prompt only
  uint64_t max_buffer = 1u << 20;             // body bytes held per request until the anchors
  TenantHomes tenant_homes = TenantHomes::kBalanced;
};

// How a backend entry named by DNS is looked up: its A/AAAA records (`address: NAME:PORT`), or
// its SRV records (`srv: _service._proto.NAME`), which carry the ports and weights.
enum class NameLookup : uint8_t { kAddress, kSrv };

// HAProxy's agent-check (`agent_check`, docs/configuration.md): every `interval` one TCP
// connection to the backend's address on `port`, `send` written, one line read back (`up`,
// `down`, `drain`, `maint`, `ready`, `75%`, ...; proxy/agent_answer.h).
struct AgentCheckConfig {
  bool enabled = false;        // true once the section is present, unless `enabled: false`
  uint16_t port = 0;           // the agent's port on the backend's address (required)
  uint64_t interval_ms = 2000;
  uint64_t timeout_ms = 1000;  // connect + the answer line
  std::string send;            // written once connected ("" = nothing)
  bool operator==(const AgentCheckConfig&) const = default;
};

// A backend's own `agent_check`: each key it sets overrides the pool's section.
struct AgentCheckOverride {
  bool present = false;
  std::optional<bool> enabled;
  std::optional<uint16_t> port;
  std::optional<uint64_t> interval_ms, timeout_ms;
  std::optional<std::string> send;
};

// The agent check backend `b` of a pool whose section is `pool` runs with: the pool's keys, then
// the backend's own. A backend section that names a port enables it (unless `enabled: false`).
inline AgentCheckConfig resolve_agent_check(const AgentCheckConfig& pool,
                                            const AgentCheckOverride& b) {
  AgentCheckConfig c = pool;
  if (!b.present) return c;
  if (b.port) {
    c.port = *b.port;
    c.enabled = true;
  }
  if (b.enabled) c.enabled = *b.enabled;
  if (b.interval_ms) c.interval_ms = *b.interval_ms;
  if (b.timeout_ms) c.timeout_ms = *b.timeout_ms;
  if (b.send) c.send = *b.send;
  return c;
}

struct BackendConfig {
  Address address;     // kSrv: host = the SRV name, port 0, is_name true
  std::string id;      // stable identity used for placement; defaults to address.to_string()
  std::string host_name;  // the configured host name when `address` names one (TLS SNI)
  uint32_t weight = 1; // 0 = drained: never chosen, never a crash
  Position position;
  NameLookup lookup = NameLookup::kAddress;
  // `labels` (docs/routing.md "Subsets"): features of this backend that subsets require; on a
  // DNS or SRV entry they apply to every address the name resolves to.
  std::vector<std::string> labels;
  // `agent_check` of this backend, over the pool's (resolve_agent_check); on a DNS or SRV entry
  // it applies to every address the name resolves to.
  AgentCheckOverride agent;
};

// A pool's subset selectors (`subsets`, docs/routing.md "Subsets"): the first rule whose `when`
// matches a request restricts its pick to the backends carrying every label of `require`; no
// match: the whole pool.
enum class SubsetMatch : uint8_t {
  kListener,    // when: { listener: NAME }: the request came in on that listener
  kHeader,      // when: { header: NAME, value: V }: a field NAME (any case) equals V exactly
  kPathPrefix,  // when: { path_prefix: P }: the target's path starts with P
};
struct SubsetRule {
  std::string name;                  // metrics label; defaults to the rule's index ("0", "1", ...)
  SubsetMatch match = SubsetMatch::kListener;
  std::string what;                  // the listener name, the header name or the path prefix
  std::string value;                 // kHeader: the value
  std::vector<std::string> require;  // labels, at least one, each carried by some backend
  Position position;
};

// A placement a pool migrates from (`previous`, docs/routing.md "Gradual migration"): its own
// algorithm, sizes, seed and backends; each backend names one of the pool's backends by id.
struct PlacementConfig {
  bool present = false;
  Algorithm algorithm = Algorithm::kRing;
  uint32_t points_per_weight = 4096;
  uint32_t max_points = 1u << 20;
  uint32_t maglev_table_size = 65537;
  uint64_t seed = 0;                  // 0: the key hash as it is; else mix64(hash, seed)
  struct Member {
    std::string id;
    uint32_t weight = 1;
    Position position;
  };
  std::vector<Member> backends;
  Position position;
};

struct HealthCheckConfig {
  bool enabled = false;
  std::string method = "GET";
  std::string path = "/healthz";
  uint16_t expect_status_min = 200;
  uint16_t expect_status_max = 399;
  uint64_t interval_ms = 2000;
  uint64_t timeout_ms = 1000;
  uint32_t rise = 2;
  uint32_t fall = 3;
};

struct PassiveHealthConfig {
  uint32_t consecutive_failures = 5;  // connect failures or 5xx in a row before ejection; 0 = off
  uint64_t ejection_ms = 10000;       // cool-down before the backend is probed again
  uint32_t max_ejected_percent = 50;  // never eject more than this share of a pool
};

// DNS discovery of backends named by host name (see docs/configuration.md, `dns`). Set at the top
// level for every pool; a pool's own `dns` mapping overrides it key by key.
struct DnsConfig {
  std::vector<Address> nameservers;  // IP literal and port each; empty = /etc/resolv.conf
  uint64_t ttl_ms = 60000;           // a name is re-resolved this often
  uint32_t jitter_percent = 10;      // each interval is drawn from ttl ± this percent
  uint64_t timeout_ms = 2000;        // one query attempt to one nameserver
  uint32_t attempts = 2;             // query attempts per nameserver before giving up
  uint64_t hold_ms = 30000;          // an address missing from answers stays this long; 0 = none
};

// A control-plane API's URL (`discovery` endpoints): http(s)://HOST[:PORT][/PATH], HOST a name
// or an IP literal (IPv6 in brackets); the port defaults to 80 / 443.
struct ApiUrl {
  bool tls = false;
  std::string host;       // without brackets
  uint16_t port = 0;
  std::string base_path;  // "" or "/PATH" without a trailing '/'
  std::string text;       // as written
};
// Parses an ApiUrl; the error is a reason for the caller to place ("must start with http://").
core::Result<ApiUrl> parse_api_url(std::string_view text);

// Where a pool's backends come from besides its `backends` list (`discovery`,
// docs/configuration.md): etcd keys under a prefix, or a Kubernetes Service's EndpointSlices.
enum class DiscoveryKind : uint8_t { kNone, kEtcd, kKubernetes };
struct DiscoveryConfig {
  DiscoveryKind kind = DiscoveryKind::kNone;
  // etcd: the cluster's client URLs (tried in turn) and the key prefix of the pool's backends.
  std::vector<ApiUrl> endpoints;
  std::string prefix;
  // kubernetes: the Service, its namespace and the port (a name, or a number as text); the API
  // server (host empty: in-cluster, from KUBERNETES_SERVICE_HOST/_PORT) and its credentials.
  std::string service;
  std::string namespace_name = "default";
  std::string port;
  ApiUrl server;
  std::string token_file;  // "" = in-cluster: the service account's token (when present);
                           // etcd: a token sent as is in Authorization (re-read per request)
  // etcd: a user whose password (password_file) buys the token the requests carry
  // (/v3/auth/authenticate), asked for again when etcd says it is no longer valid.
  std::string username;
  std::string password_file;
  std::string ca;          // https: PEM CA bundle; "" = in-cluster CA, else the system store
  bool allow_empty = false;     // an answer with no backend empties the pool (else: kept)
  uint64_t timeout_ms = 5000;   // one request's connect + response head
  uint64_t retry_ms = 1000;     // first back-off after a failure (doubled up to 30 s, jitter)
  Position position;
};

// Self-registration (`fleet`, docs/configuration.md): with etcd each instance keeps one key
// under the prefix, under a lease it keeps alive, with its pools' placement fingerprints;
// watching the prefix tells every instance how many they are and whether they agree. On
// Kubernetes the ready endpoints of the instance's own Service are the fleet (N and the
// members; their fingerprints are not shared).
// Largest static fleet size (`fleet: {instances: N}`).
inline constexpr uint64_t kMaxFleetInstances = 1024;

struct FleetConfig {
  // A source is configured (etcd or kubernetes): this instance registers and watches the fleet.
  bool enabled = false;
  // `instances: N` instead of a source: a static fleet size (0 = not given). Either way the
  // bound scales what this instance sees by N (docs/routing.md "Fleets").
  uint32_t instances = 0;
  // kind kEtcd: endpoints, prefix, ca; kKubernetes: service, namespace, port, server,
  // token_file, ca. Either: timeout and retry.
  DiscoveryConfig source;
  std::string id;           // this instance's key under the prefix (kubernetes: its pod name,
                            // targetRef.name); "" = the host name
  // The instances publish their hot-key counts each epoch and route hot keys by the table
  // computed from everyone's (server/fleet_hot.h): through etcd (the default there), or on
  // Kubernetes (off unless set) from each member's admin API at its endpoint address.
  bool share_hot_keys = true;
  uint16_t peer_port = 0;   // kubernetes: the members' admin port; 0 = this instance's own
  // `peers`: a fixed fleet (HAProxy's `peers` section), each member's id and admin address
  // (an IP literal and port), this instance among them by `id`. N is their count; with
  // share_hot_keys the members read each other's counts there. Empty: etcd or kubernetes.
  struct Peer {
    std::string id;
    Address admin;
    Position position;
  };
  std::vector<Peer> peers;
  // `share_load`: every this often each member sends the others its in-flight counts per
  // backend by UDP, from and to the members' admin addresses (server/fleet_load.h), and while
  // every member's are fresh the bound compares the fleet's own counts instead of N times this
  // instance's (docs/routing.md, "Fleets: shared counts"). 0 = off. `peers` and `kubernetes`.
  uint64_t share_load_ms = 0;
  uint64_t ttl_ms = 10000;  // etcd: the lease: a silent instance leaves the fleet this long after
  Position position;
};

// Hot-key replicas (docs/routing.md): keys whose share of the requests over `window_ms` makes
// them hot are spread over their first R distinct successors; cold keys stay home.
struct HotKeysConfig {
  uint32_t share = 5;           // h: percent of one backend's fair share per replica; 0 = off
  uint32_t max_replicas = 0;    // upper bound on R; 0 = the pool's usable backends
  uint64_t window_ms = 1000;    // detector window; the replica table is rebuilt every window/4
  uint32_t capacity = 64;       // space-saving counters per window = most hot keys tracked
  uint32_t min_count = 16;      // a key seen fewer times in the window is never replicated
};

// Backend-reported load (docs/algorithms.md, "Reported load"): each response's `header` carries
// the backend's own load; while the last report is younger than max_age_ms the bound compares
// it (moved by this instance's in-flight change since) instead of the local in-flight count.
enum class ReportRounding : uint8_t { kRandom, kUp };

struct LoadReportConfig {
  bool enabled = false;                        // true once the section is present
  std::string header = "endpoint-load-metrics";  // lower case
  // kOrca when header is endpoint-load-metrics, else kPlain (the value is one number).
  core::LoadHeaderFormat format = core::LoadHeaderFormat::kOrca;
  std::string metric = "named_metrics.in_flight";  // ORCA only
  uint64_t max_age_ms = 1000;
  // Reports that must have arrived within max_age_ms for the bound to use them (1..
  // core::kMaxMinReports); a backend that reports more sparsely is bounded by this instance's
  // own counts, which beat a report refreshed less than about once per service time.
  uint32_t min_reports = 4;
  uint32_t scale = 1;  // load = value * scale (e.g. utilization 0..1 times the capacity)
  // How instances told N share the last places a fresh report shows (core::room_admits):
  // kRandom, each takes one of the last room < N places with probability room / N, so the
  // fleet fills the room on average and holds the cap; kUp, each takes any place below the cap,
  // which keeps more keys home and may overshoot the cap by N - 1 (docs/routing.md).
  ReportRounding rounding = ReportRounding::kRandom;
};

// TLS to a pool's backends (`tls` in a pool, docs/configuration.md). Files are loaded when a
// Snapshot is built (tls::ClientContext), not here.
struct BackendTlsConfig {
  bool enabled = false;          // the pool has a `tls` section
  bool verify = true;            // check the backend's certificate chain and name
  std::string ca;                // PEM CA bundle; "" = the system's default trust store
  std::string sni;               // SNI and verified name; "" = the backend's host name
  uint16_t min_version = 0x0303; // TLS 1.2 (wire version numbers)
  uint16_t max_version = 0x0304; // TLS 1.3
  std::string cert, key;         // optional client certificate (PEM) for backends asking mTLS
  bool session_reuse = true;     // resume sessions per backend (tickets / session ids)
  Position position;
};

// A PROXY protocol header rondel writes at the start of each backend connection.
enum class SendProxyProtocol : uint8_t { kOff, kV2 };

struct PoolConfig {
  std::string name;
  Algorithm algorithm = Algorithm::kRing;
  HashKey hash_key;
  MissingKeyPolicy missing_key = MissingKeyPolicy::kLeastInFlight;
  LoadBy load_by = LoadBy::kRequests;
  uint32_t balance_factor = 125;     // percent; 0 = unbounded (pure consistent hashing)
  uint32_t capacity_slack = 8;       // absolute extra requests allowed above the fair share
  ProbeOrder probe_order = ProbeOrder::kClockwise;
  uint32_t spill_memory = 4096;      // remembered spills per worker (SpillMemory); 0 = off
  uint32_t spill_hysteresis = 0;     // a remembered spill goes home below cap - this
  HotKeysConfig hot_keys;
  ReplicaChoice replica_choice = ReplicaChoice::kLeastLoaded;
  uint32_t points_per_weight = 4096; // ring, skeleton_rendezvous
  uint32_t max_points = 1u << 20;    // ring, skeleton_rendezvous: total-points budget
  uint32_t maglev_table_size = 65537;
  uint32_t retries = 2;              // further backends tried after a connect failure
  uint64_t connect_timeout_ms = 2000;
  uint64_t response_header_timeout_ms = 30000;
  uint64_t backend_idle_timeout_ms = 60000;  // a pooled connection unused this long is closed
  uint64_t backend_io_timeout_ms = 60000;    // no byte either way on a busy backend connection
  uint32_t max_idle_per_backend = 64;
  uint32_t max_connections_per_backend = 0;  // 0 = unlimited
  uint64_t slow_start_ms = 0;
  HealthCheckConfig health;
  AgentCheckConfig agent_check;
  PassiveHealthConfig passive;
  DnsConfig dns;                     // used only by backends named by host name
  DiscoveryConfig discovery;         // backends from etcd or Kubernetes, besides `backends`
  std::vector<BackendConfig> backends;
  Position position;
  // Range-chunk keys (docs/routing.md): with hash_key uri or path, a request with one
  // `Range: bytes=a-...` is placed by its key and chunk index floor(a / range_chunk). 0 = off.
  uint64_t range_chunk = 0;
  // Placement seed: keys are placed by mix64(hash, seed) when non-zero (a new ring for the same
  // backends). Gradual migration: keys whose hash is in the lowest migrate_percent % of the
  // 64-bit space use this pool's placement, the others `previous`.
  uint64_t seed = 0;
  PlacementConfig previous;
  uint32_t migrate_percent = 0;
  LoadReportConfig load_report;
  // Subset selectors, in file order (first match wins); empty: every request uses the pool.
  std::vector<SubsetRule> subsets;
  BackendTlsConfig tls;
  SendProxyProtocol send_proxy_protocol = SendProxyProtocol::kOff;
  LlmPrefixConfig llm_prefix;  // hash_key: llm_prefix only
};

// A listener's PROXY protocol header stage (`proxy_protocol`): every connection must start with
// a v1 or v2 header, and only from a source in `trusted`; the header's address then stands for
// the client's everywhere.
struct ProxyProtocolConfig {
  bool enabled = false;
  std::vector<core::Cidr> trusted;
};

// TLS termination on a listener (docs/configuration.md, `tls`). Certificate files are read and
// checked when a Snapshot is built (rondel_tls), not here.
struct TlsCertificateConfig {
  std::string cert;  // PEM: the certificate, then its chain
  std::string key;   // PEM private key
  Position position;
};
enum class TlsVerify : uint8_t { kNone, kOptional, kRequired };
struct TlsConfig {
  bool enabled = false;                          // the listener has a `tls` section
  std::vector<TlsCertificateConfig> certificates;  // the first is the default (no SNI match)
  std::vector<std::string> alpn = {"http/1.1"};  // server preference
  uint16_t min_version = 0x0303;                 // TLS 1.2 (wire version numbers)
  uint16_t max_version = 0x0304;                 // TLS 1.3
  std::string ciphers;        // TLS 1.2 cipher list; "" = Mozilla intermediate
  std::string ciphersuites;   // TLS 1.3 suites; "" = Mozilla intermediate
  std::string groups;         // key-exchange groups; "" = Mozilla intermediate
  bool session_tickets = true;
  uint64_t ticket_key_rotation_ms = 3600000;     // a new ticket key this often; tickets live 2x
  std::string client_ca;                         // PEM bundle for client certificates; "" = off
  TlsVerify verify = TlsVerify::kNone;           // kRequired by default once client_ca is set
  uint64_t handshake_timeout_ms = 10000;
  uint32_t max_handshakes = 1000;                // in progress per worker; excess closed
  Position position;
};

// Which HTTP/2 a listener offers (ALPN h2 on TLS listeners is chosen by the handshake).
enum class Http2Mode : uint8_t {
  kOff,             // HTTP/1.1 only
  kPriorKnowledge,  // cleartext h2c with prior knowledge: every connection speaks HTTP/2
};

struct ListenerConfig {
  std::string name;
  Address bind;
  std::string pool;
  uint32_t max_connections = 10000;
  uint64_t header_timeout_ms = 10000;   // whole request head must arrive within this
  uint64_t body_timeout_ms = 30000;     // no request body byte for this long
  uint64_t idle_timeout_ms = 60000;     // keep-alive connection with no request
  uint64_t max_request_line = 8192;     // 414 beyond
  uint64_t max_header_bytes = 32768;    // 431 beyond (whole head)
  uint32_t max_headers = 100;           // 431 beyond
  uint64_t max_body_bytes = 0;          // 413 beyond; 0 = unlimited
  // Append the client's address to X-Forwarded-For and set X-Forwarded-Proto (HAProxy's
  // `option forwardfor`); false passes the client's own fields through untouched.
  bool forwarded_headers = true;
  ProxyProtocolConfig proxy_protocol;
  TlsConfig tls;
  // HTTP/2 to clients (issue 16).
  Http2Mode http2 = Http2Mode::kOff;
  uint32_t h2_max_concurrent_streams = 100;   // SETTINGS_MAX_CONCURRENT_STREAMS (nginx: 128)
  uint64_t h2_max_header_list_size = 65536;   // decoded header list of one request; RST beyond
  uint64_t h2_hpack_table_size = 4096;        // SETTINGS_HEADER_TABLE_SIZE
  uint32_t h2_max_resets_per_second = 100;    // rapid reset: incoming RST_STREAM rate, burst x10
  Position position;
};

struct AdminConfig {
  bool enabled = false;
  Address bind;
  uint32_t hot_keys = 10;               // top-K hot keys exported; 0 = off
  // Connection limits (HAProxy's `stats maxconn` and `stats timeout` defaults: 10 and 10s).
  uint32_t max_connections = 10;        // open at once; more are closed at accept
  uint64_t header_timeout_ms = 10000;   // the request head must arrive within this of the accept
  uint64_t idle_timeout_ms = 10000;     // longest wait on the client once the head is in
  // Runtime operations (PUT /api/pools/{pool}/backends/{id}).
  std::string token_file;               // bearer token for writes; "" = the admin is read-only
  std::string state_file;               // operators' backend states kept across restarts; "" = none
};

struct LogConfig {
  std::string access_log;               // "" = off, "-" = stdout, else a file path
  std::string error_log = "-";          // "-" = stderr
  std::string level = "info";           // debug | info | warn | error
  std::string access_format = "text";   // text | json (one JSON object per line); fixed at start
};

// Reload when the configuration file changes (docs/configuration.md, `config_watch`).
struct ConfigWatchConfig {
  bool enabled = false;
  uint64_t debounce_ms = 500;           // quiet time after the last change before the reload
};

struct Config {
  std::string file;                     // path the configuration was read from
  uint32_t workers = 1;
  uint64_t drain_timeout_ms = 30000;
  DnsConfig dns;                        // defaults for every pool's `dns`
  std::vector<ListenerConfig> listeners;
  std::vector<PoolConfig> pools;
  AdminConfig admin;
  LogConfig log;
  ConfigWatchConfig config_watch;
  FleetConfig fleet;
  // Body bytes all requests together may hold while a body key is read (llm_prefix): past it a
  // request routes on what it knows.
  uint64_t buffer_budget = 64u << 20;
};

}  // namespace rondel::config
