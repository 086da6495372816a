// The rondel configuration schema as data: every key each section accepts, the value limits and
// the named choices. Internal to src/config/; read by ConfigReader (config_reader.cpp), which owns
// the code that applies them.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "node_reader.h"
#include "scalar_keys.h"
#include "rondel/config/config.h"
#include "rondel/core/backend_set.h"
#include "rondel/core/maglev.h"
#include "rondel/core/subset.h"

namespace rondel::config::schema {

using std::string_view;


constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

constexpr uint32_t kMaxWorkers = 64;
// The core indexes a pool's backends with 16 bits (core::BackendIndex).
constexpr size_t kMaxBackends = core::kMaxBackends;
// Weights and balance factors are bounded so that the capacity formula
// c·(total+1)·w_i fits in 64 bits with c <= 10000 percent and w_i <= 65535.
constexpr uint64_t kMaxWeight = 65535;
constexpr uint64_t kMinBalanceFactor = 101;
constexpr uint64_t kMaxBalanceFactor = 10000;
constexpr uint64_t kMaxPointsPerWeight = 65535;
// Routing-quality knobs (docs/routing.md). A SpillMemory of 2^24 entries is 128 MiB per worker
// and pool: anything larger is a typo.
constexpr uint64_t kMaxSpillMemory = 1u << 24;
constexpr uint64_t kMaxHotShare = 1000;  // h: up to ten backends' fair shares per replica
constexpr uint64_t kMaxReplicas = 64;           // core::RouteRequest::kMaxReplicas
constexpr uint64_t kMaxHotCapacity = 4096;      // counters per window (two windows)
constexpr uint64_t kMinHotWindowMs = 10;
// 6 bytes per ring point (core/ring.h): 16M points is a 96 MiB ring, far past any need.
constexpr uint64_t kMaxRingPoints = 1u << 24;
// Maglev paper (Eisenbud et al., NSDI 2016) section 3.4 uses 65537; core caps M at 2^24.
constexpr uint64_t kMaxMaglevTableSize = core::kMaglevMaxTableSize;
constexpr uint64_t kMaxHotKeys = 10000;

// Subsets (docs/routing.md "Subsets"): a pool's distinct backend labels are one 64-bit mask
// (core::kMaxLabels); its selectors are counted per rule in the metrics, so they are bounded.
constexpr size_t kMaxLabels = core::kMaxLabels;
constexpr size_t kMaxSubsetRules = 64;
constexpr string_view kSubsetKeys[] = {"name", "when", "require"};
constexpr string_view kSubsetWhenKeys[] = {"listener", "header", "value", "path_prefix"};

constexpr string_view kRootKeys[] = {"workers", "drain_timeout", "log",  "listeners",
                                     "pools",   "admin",         "dns",
                                     "config_watch", "fleet", "buffer_budget"};
constexpr string_view kConfigWatchKeys[] = {"enabled", "debounce"};
constexpr string_view kLogKeys[] = {"access_log", "error_log", "level", "access_format"};
constexpr string_view kListenerKeys[] = {"name",
                                         "bind",
                                         "pool",
                                         "max_connections",
                                         "header_timeout",
                                         "body_timeout",
                                         "idle_timeout",
                                         "max_request_line",
                                         "max_header_bytes",
                                         "max_headers",
                                         "max_body_bytes",
                                         "forwarded_headers",
                                         "proxy_protocol", "tls",
                                         "http2",
                                         "h2_max_concurrent_streams",
                                         "h2_max_header_list_size",
                                         "h2_hpack_table_size",
                                         "h2_max_resets_per_second"};
// The listener's scalar keys, one row each (scalar_keys.h).
using L = ListenerConfig;
constexpr ScalarKey<L> kListenerScalars[] = {
    count("max_connections", &L::max_connections, 1, kU32Max),
    duration("header_timeout", &L::header_timeout_ms, 1),
    duration("body_timeout", &L::body_timeout_ms, 1),
    duration("idle_timeout", &L::idle_timeout_ms, 1),
    size("max_request_line", &L::max_request_line, 1),
    size("max_header_bytes", &L::max_header_bytes, 1),
    count("max_headers", &L::max_headers, 1, kU32Max),
    size("max_body_bytes", &L::max_body_bytes, 0),
    flag("forwarded_headers", &L::forwarded_headers),
    count("h2_max_concurrent_streams", &L::h2_max_concurrent_streams, 1, kU32Max),
    size("h2_max_header_list_size", &L::h2_max_header_list_size, 1),
    size("h2_hpack_table_size", &L::h2_hpack_table_size, 0),
    count("h2_max_resets_per_second", &L::h2_max_resets_per_second, 1, kU32Max),
};
constexpr string_view kProxyProtocolKeys[] = {"trusted"};
constexpr string_view kPoolKeys[] = {"name",
                                     "algorithm",
                                     "hash_key",
                                     "missing_key",
                                     "balance_factor",
                                     "capacity_slack",
                                     "probe_order",
                                     "spill_memory",
                                     "spill_hysteresis",
                                     "hot_keys",
                                     "replica_choice",
                                     "points_per_weight",
                                     "max_points",
                                     "maglev_table_size",
                                     "retries",
                                     "connect_timeout",
                                     "response_header_timeout",
                                     "backend_idle_timeout",
                                     "backend_io_timeout",
                                     "max_idle_per_backend",
                                     "max_connections_per_backend",
                                     "slow_start",
                                     "health_check",
                                     "agent_check",
                                     "passive_health",
                                     "dns",
                                     "discovery",
                                     "backends",
                                     "range_chunk",
                                     "seed",
                                     "previous",
                                     "migrate_percent",
                                     "load_report",
                                     "subsets",
                                     "tls",
                                     "send_proxy_protocol",
                                     "llm_prefix",
                                     "load_by"};
// The pool's scalar keys, one row each (scalar_keys.h); keys with checks across fields
// (maglev_table_size, range_chunk, migrate_percent, balance_factor) are read in code.
using P = PoolConfig;
constexpr ScalarKey<P> kPoolScalars[] = {
    count("capacity_slack", &P::capacity_slack, 0, kU32Max),
    count("spill_memory", &P::spill_memory, 0, kMaxSpillMemory),
    count("spill_hysteresis", &P::spill_hysteresis, 0, kU32Max),
    count("points_per_weight", &P::points_per_weight, 1, kMaxPointsPerWeight),
    count("max_points", &P::max_points, 1, kMaxRingPoints),
    count("retries", &P::retries, 0, kU32Max),
    duration("connect_timeout", &P::connect_timeout_ms, 1),
    duration("response_header_timeout", &P::response_header_timeout_ms, 1),
    duration("backend_idle_timeout", &P::backend_idle_timeout_ms, 1),
    duration("backend_io_timeout", &P::backend_io_timeout_ms, 1),
    count("max_idle_per_backend", &P::max_idle_per_backend, 0, kU32Max),
    count("max_connections_per_backend", &P::max_connections_per_backend, 0, kU32Max),
    duration("slow_start", &P::slow_start_ms, 0),
    count64("seed", &P::seed, 0, UINT64_MAX),
};
// Backend-reported load (docs/algorithms.md): `load_report` of a pool.
// A pool's `discovery` section (discovery_reader.cpp): one source, etcd or kubernetes.
constexpr string_view kDiscoveryKeys[] = {"etcd", "kubernetes", "allow_empty", "timeout", "retry"};
constexpr string_view kEtcdKeys[] = {"endpoints", "prefix",   "ca",
                                     "token_file", "username", "password_file"};
constexpr string_view kKubernetesKeys[] = {"service", "namespace", "port", "server", "token_file",
                                           "ca"};
constexpr uint64_t kMinDiscoveryRetryMs = 10;
constexpr string_view kFleetKeys[] = {"etcd",  "kubernetes", "instances",      "id",
                                      "ttl",   "timeout",    "retry",          "share_hot_keys",
                                      "peer_port", "peers",  "share_load"};
// `share_load`: at least this interval (each member sends every other member a datagram each).
constexpr uint64_t kMinShareLoadMs = 5;
constexpr uint64_t kMaxShareLoadMs = 10000;
constexpr string_view kFleetPeerKeys[] = {"id", "admin"};
// etcd leases are whole seconds, and a keep-alive goes every third of the TTL.
constexpr uint64_t kMinFleetTtlMs = 2000;
constexpr string_view kLoadReportKeys[] = {"header", "metric", "max_age", "min_reports",
                                             "scale",  "rounding"};
constexpr uint32_t kMaxLoadReportScale = 1'000'000;
// Gradual migration (docs/routing.md): the placement keys move from, under `previous`.
constexpr string_view kPreviousKeys[] = {"algorithm",         "points_per_weight", "max_points",
                                         "maglev_table_size", "seed",              "backends"};
constexpr string_view kPreviousBackendKeys[] = {"id", "address", "weight"};
constexpr string_view kHealthKeys[] = {"enabled",  "method",  "path", "expect_status",
                                       "interval", "timeout", "rise", "fall"};
// HAProxy's agent-check (health_reader.cpp): a pool's `agent_check`, and a backend's own, whose
// keys override the pool's.
constexpr string_view kAgentCheckKeys[] = {"enabled", "port", "interval", "timeout", "send"};
constexpr uint64_t kMaxAgentSend = 1024;  // bytes of `send`
constexpr string_view kPassiveKeys[] = {"consecutive_failures", "ejection_time",
                                        "max_ejected_percent"};
// hash_key: llm_prefix (llm_prefix_reader.cpp).
constexpr string_view kLlmPrefixKeys[] = {"conversation", "blocks", "explicit", "max_buffer",
                                          "tenant_homes"};
constexpr auto kLlmAnchors = choices_of<LlmAnchor>(kLlmAnchorNames);
constexpr auto kTenantHomes = choices_of<TenantHomes>(kTenantHomesNames);
constexpr uint64_t kMaxLlmBlocks = 1u << 20;
constexpr uint64_t kMinLlmBuffer = 1024;
constexpr uint32_t kLlmHotShare = 200;  // hot_keys.share's default under hash_key: llm_prefix
constexpr string_view kHotKeysKeys[] = {"share", "max_replicas", "window", "capacity",
                                        "min_count"};
constexpr string_view kBackendKeys[] = {"address", "weight", "id", "srv", "labels", "agent_check"};
constexpr string_view kTlsKeys[] = {"certificates", "alpn",         "min_version",
                                    "max_version",  "ciphers",      "ciphersuites",
                                    "groups",       "session_tickets", "ticket_key_rotation",
                                    "client_ca",    "verify",       "handshake_timeout",
                                    "max_handshakes"};
constexpr string_view kTlsCertificateKeys[] = {"cert", "key"};
constexpr Choice<uint16_t> kTlsVersions[] = {{"TLSv1.2", 0x0303}, {"TLSv1.3", 0x0304}};
constexpr Choice<TlsVerify> kTlsVerifyModes[] = {{"none", TlsVerify::kNone},
                                                 {"optional", TlsVerify::kOptional},
                                                 {"required", TlsVerify::kRequired}};
// ALPN protocols a listener may name; h2 is accepted and not offered until HTTP/2 is served.
constexpr string_view kAlpnProtocols[] = {"http/1.1", "h2"};
// A ticket key lives two rotations; below a second it would churn on every handshake.
constexpr uint64_t kMinTicketRotationMs = 1000;
// A pool's `tls` section: TLS to its backends (upstream_reader.cpp).
constexpr string_view kBackendTlsKeys[] = {"verify", "ca",   "sni",  "min_version",
                                           "max_version", "cert", "key", "session_reuse"};
constexpr Choice<SendProxyProtocol> kSendProxyProtocols[] = {{"off", SendProxyProtocol::kOff},
                                                            {"v2", SendProxyProtocol::kV2}};
constexpr string_view kAdminKeys[] = {"enabled",         "bind",           "hot_keys",
                                      "token_file",      "state_file",     "max_connections",
                                      "header_timeout",  "idle_timeout"};
// A cap on admin connections beyond this is a typo (each holds a descriptor; the daemon also
// keeps it under 1/16 of the descriptor limit).
constexpr uint64_t kMaxAdminConnections = 65535;
// The admin section's scalar keys, one row each (scalar_keys.h).
using A = AdminConfig;
constexpr ScalarKey<A> kAdminScalars[] = {
    count("hot_keys", &A::hot_keys, 0, kMaxHotKeys),
    count("max_connections", &A::max_connections, 1, kMaxAdminConnections),
    duration("header_timeout", &A::header_timeout_ms, 1),
    duration("idle_timeout", &A::idle_timeout_ms, 1),
};
constexpr string_view kDnsKeys[] = {"nameservers", "ttl", "jitter", "timeout", "attempts", "hold"};
// Re-resolving more often than this only loads the nameserver.
constexpr uint64_t kMinDnsTtlMs = 100;
constexpr uint64_t kMaxDnsAttempts = 16;

constexpr Choice<Http2Mode> kHttp2Modes[] = {{"off", Http2Mode::kOff},
                                             {"prior_knowledge", Http2Mode::kPriorKnowledge}};
// Core's enums, from core's name tables (core/choices.h).
constexpr auto kAlgorithms = choices_of<Algorithm>(core::kAlgorithmNames);
constexpr auto kProbeOrders = choices_of<ProbeOrder>(core::kProbeOrderNames);
constexpr auto kReplicaChoices = choices_of<ReplicaChoice>(core::kReplicaChoiceNames);
constexpr Choice<ReportRounding> kReportRoundings[] = {{"random", ReportRounding::kRandom},
                                                       {"up", ReportRounding::kUp}};
constexpr Choice<LoadBy> kLoadBys[] = {{"requests", LoadBy::kRequests},
                                       {"prompt_size", LoadBy::kPromptSize}};
constexpr Choice<MissingKeyPolicy> kMissingKeyPolicies[] = {
    {"least_in_flight", MissingKeyPolicy::kLeastInFlight},
    {"random", MissingKeyPolicy::kRandom},
    {"uri", MissingKeyPolicy::kHashUri},
    {"reject", MissingKeyPolicy::kReject}};
constexpr Choice<int> kLogLevels[] = {{"debug", 0}, {"info", 1}, {"warn", 2}, {"error", 3}};
constexpr Choice<int> kAccessFormats[] = {{"text", 0}, {"json", 1}};

}  // namespace rondel::config::schema
