// The metric families of /metrics as one table: name, type, label names, help and how to read
// the value(s); collection walks it, and Metrics::families() (docs/metrics.md's test) renders it.
#include <prometheus/client_metric.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>

#include "metrics_shards.h"
#include "rondel/core/bounded.h"
#include "rondel/server/admin_states.h"
#include "rondel/net/proxy_protocol.h"
#include "rondel/server/daemon.h"
#include "rondel/server/metrics.h"
#include "rondel/tls/tls_stats.h"

#ifndef RONDEL_VERSION
#define RONDEL_VERSION "unknown"
#endif

namespace rondel::server {

namespace {

using metrics_detail::HistogramSum;
using metrics_detail::PoolRow;
using metrics_detail::Scrape;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr size_t kMaxLabels = 3;
using LabelNames = std::array<std::string_view, kMaxLabels>;
using Value = std::optional<double>;

// Which rows a family has: one per scrape, per pool or per backend (labels start with `pool`,
// then `backend`), or rows a custom function emits.
enum class Scope : uint8_t { kDaemon, kPool, kBackend, kCustom };

// The values of a family's last label when it takes a fixed set (class, state, result, reason).
struct Variants {
  size_t count = 0;
  std::string_view (*name)(size_t) = nullptr;
};

// The row being read: the scrape, and for pool and backend scopes the pool and backend.
struct Row {
  const Scrape& s;
  const PoolRow* p = nullptr;
  core::BackendIndex b = 0;

  const proxy::Pool& pool() const noexcept { return *p->pool; }
  const proxy::PoolState& ps() const noexcept { return p->pool->state(); }
  const proxy::BackendState& backend() const noexcept { return pool().backend(b); }
  const proxy::BackendCounters& c() const noexcept { return backend().counters; }
  uint32_t weight() const noexcept { return pool().set()[b].weight; }
  uint64_t total_weight() const noexcept { return pool().set().total_weight(); }
};

// Adds samples to one family, pairing the values given with the family's label names.
class FamilyOut {
 public:
  FamilyOut(MetricFamily& f, const LabelNames& names) : f_(f), names_(names) {}

  // `values` has one value per label name of the family, in order.
  void sample(std::span<const std::string_view> values, double v) {
    ClientMetric m;
    m.label = labels(values);
    if (f_.type == MetricType::Counter) m.counter.value = v;
    else m.gauge.value = v;
    f_.metric.push_back(std::move(m));
  }
  void sample(std::initializer_list<std::string_view> values, double v) {
    sample(std::span<const std::string_view>(values.begin(), values.size()), v);
  }
  // A histogram from merged buckets of integers; bounds and sum are divided by `per_unit`.
  template <size_t N>
  void histogram(std::initializer_list<std::string_view> values, const HistogramSum<N>& h,
                 const std::array<uint64_t, N>& bounds, double per_unit) {
    ClientMetric m;
    m.label = labels(std::span<const std::string_view>(values.begin(), values.size()));
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= N; ++i) {
      cumulative += h.buckets[i];
      double bound = i < N ? static_cast<double>(bounds[i]) / per_unit
                           : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, bound});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = static_cast<double>(h.sum) / per_unit;
    f_.metric.push_back(std::move(m));
  }

 private:
  std::vector<ClientMetric::Label> labels(std::span<const std::string_view> values) const {
    std::vector<ClientMetric::Label> out;
    out.reserve(values.size());
    for (size_t i = 0; i < values.size() && i < kMaxLabels; ++i) {
      out.push_back({std::string(names_[i]), std::string(values[i])});
    }
    return out;
  }
  MetricFamily& f_;
  const LabelNames& names_;
};

using Read = Value (*)(const Row&, size_t variant);
using Emit = void (*)(const Scrape&, FamilyOut&);

struct Family {
  std::string_view name;
  MetricType type;
  LabelNames labels;
  Scope scope;
  std::string_view help;
  Variants variants = {};
  Read read = nullptr;  // kDaemon, kPool, kBackend: the value of a row (nullopt: no sample)
  Emit emit = nullptr;  // kCustom
};

double d(uint64_t v) noexcept { return static_cast<double>(v); }
double d(const std::atomic<uint64_t>& a) noexcept {
  return static_cast<double>(a.load(std::memory_order_relaxed));
}
double d(const std::atomic<uint32_t>& a) noexcept {
  return static_cast<double>(a.load(std::memory_order_relaxed));
}

// --- label value sets -------------------------------------------------------------------------

constexpr std::array<std::string_view, 5> kClasses = {"2xx", "3xx", "4xx", "5xx", "other"};
constexpr std::array<std::string_view, 3> kStates = {"up", "down", "ejected"};
constexpr std::array<proxy::Health, 3> kStateHealth = {proxy::Health::kUp, proxy::Health::kDown,
                                                       proxy::Health::kEjected};
constexpr std::array<std::string_view, 2> kConnStates = {"idle", "busy"};
constexpr std::array<std::string_view, 2> kResults = {"ok", "failed"};
constexpr std::array<std::string_view, 4> kAlgorithms = {"ring", "rendezvous", "maglev",
                                                         "skeleton_rendezvous"};
constexpr std::array<config::Algorithm, 4> kAlgorithmValues = {
    config::Algorithm::kRing, config::Algorithm::kRendezvous, config::Algorithm::kMaglev,
    config::Algorithm::kSkeletonRendezvous};

constexpr std::array<proxy::AdminState, 3> kAdminStates = {
    proxy::AdminState::kReady, proxy::AdminState::kDrain, proxy::AdminState::kMaint};
constexpr Variants kAdminStateV{kAdminStates.size(), [](size_t i) {
                                  return admin_state_name(kAdminStates[i]);
                                }};
constexpr Variants kClassV{kClasses.size(), [](size_t i) { return kClasses[i]; }};
constexpr Variants kStateV{kStates.size(), [](size_t i) { return kStates[i]; }};
constexpr Variants kConnStateV{kConnStates.size(), [](size_t i) { return kConnStates[i]; }};
constexpr Variants kResultV{kResults.size(), [](size_t i) { return kResults[i]; }};
constexpr Variants kAlgorithmV{kAlgorithms.size(), [](size_t i) { return kAlgorithms[i]; }};
constexpr Variants kRejectV{static_cast<size_t>(proxy::Reject::kCount), [](size_t i) {
                              return proxy::reject_name(static_cast<proxy::Reject>(i));
                            }};
constexpr Variants kPlacementV{2, [](size_t i) {
  return proxy::placement_name(static_cast<core::PlacementVersion>(i));
}};
constexpr Variants kTlsFailureV{static_cast<size_t>(tls::HandshakeFailure::kCount), [](size_t i) {
  return tls::handshake_failure_name(static_cast<tls::HandshakeFailure>(i));
}};
constexpr Variants kTlsVersionV{static_cast<size_t>(tls::TlsVersion::kCount), [](size_t i) {
  return tls::tls_version_name(static_cast<tls::TlsVersion>(i));
}};
constexpr Variants kTlsAlpnV{static_cast<size_t>(tls::AlpnResult::kCount), [](size_t i) {
  return tls::alpn_result_name(static_cast<tls::AlpnResult>(i));
}};
constexpr Variants kH2ErrorV{std::size(proxy::kH2ErrorNames),
                             [](size_t i) { return proxy::kH2ErrorNames[i]; }};
constexpr Variants kH2FloodV{std::size(proxy::kH2FloodNames),
                             [](size_t i) { return proxy::kH2FloodNames[i]; }};
constexpr Variants kRouteV{proxy::kRouteReasons, [](size_t i) {
                             return proxy::route_reason_name(static_cast<core::RouteReason>(i));
                           }};

// --- readers that need more than one line -----------------------------------------------------

Value status_class(const Row& r, size_t i) {
  const auto& c = r.c();
  const std::atomic<uint64_t>* known[] = {&c.responses_2xx, &c.responses_3xx, &c.responses_4xx,
                                          &c.responses_5xx};
  if (i < 4) return d(*known[i]);
  uint64_t sum = 0;
  for (const auto* k : known) sum += k->load(std::memory_order_relaxed);
  uint64_t all = c.requests.load(std::memory_order_relaxed);
  return d(all > sum ? all - sum : 0);
}

Value capacity(const Row& r, size_t) {
  uint64_t total = r.ps().total_in_flight.load(std::memory_order_relaxed);
  return d(core::capacity(total, r.weight(), r.total_weight(), r.pool().bounded()));
}

Value connections(const Row& r, size_t i) {
  uint64_t idle = r.backend().idle_count();
  uint64_t open = r.backend().open_connections.load(std::memory_order_relaxed);
  return d(i == 0 ? idle : open > idle ? open - idle : 0);
}

// Only pools with active health checks have health-check samples.
Value health_checks(const Row& r, size_t i) {
  if (!r.pool().config().health.enabled) return std::nullopt;
  return d(i == 0 ? r.c().health_checks_ok : r.c().health_checks_failed);
}
Value health_streak(const Row& r, size_t i) {
  if (!r.pool().config().health.enabled) return std::nullopt;
  return d(i == 0 ? r.backend().check_successes : r.backend().check_failures);
}

// The placement structure's size, under the pool's algorithm only.
Value ring_points(const Row& r, size_t i) {
  if (r.pool().config().algorithm != kAlgorithmValues[i]) return std::nullopt;
  return d(r.pool().selector().points());
}
Value ring_memory(const Row& r, size_t i) {
  if (r.pool().config().algorithm != kAlgorithmValues[i]) return std::nullopt;
  return d(r.pool().selector().memory_bytes());
}

Value hot_keys_replicated(const Row& r, size_t) {
  std::lock_guard<std::mutex> lock(r.ps().hot_mu);
  return d(r.ps().hot.size());
}

// --- custom rows ------------------------------------------------------------------------------

// A label value from request bytes: valid UTF-8 only (Prometheus rejects anything else: no
// overlong forms, no surrogates, nothing past U+10FFFF), control characters replaced by '?'.
std::string safe_label(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += c < 0x20 || c == 0x7F ? '?' : static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) {
      auto cc = static_cast<unsigned char>(s[i + j]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    out.append(s.data() + i, len);
    i += len;
  }
  return out;
}

std::string hex16(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// One row per certificate of each TLS listener: its expiry, labelled by its first DNS name.
void tls_expiry(const Scrape& s, FamilyOut& o) {
  if (s.snap == nullptr) return;
  const auto& ls = s.snap->config().listeners;
  const auto& ctxs = s.snap->tls_contexts();
  for (size_t i = 0; i < ls.size() && i < ctxs.size(); ++i) {
    if (!ctxs[i]) continue;
    for (const auto& c : ctxs[i]->certificates()) {
      std::string_view name = c.names.empty() ? std::string_view(c.subject) : c.names.front();
      o.sample({ls[i].name, name}, static_cast<double>(c.not_after_unix));
    }
  }
}

void build_info(const Scrape&, FamilyOut& o) { o.sample({RONDEL_VERSION}, 1); }

// One sample per pool, always 1, with the fingerprint (16 hex digits) as a label: instances
// agree when `count by (pool) (count by (pool, fingerprint) (...))` is 1.
void placement_fingerprints(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, p.pool->placement_fingerprint());
    o.sample({p.pool->name(), hex}, 1);
  }
}

void moved_shares(const Scrape& s, FamilyOut& o) {
  for (const auto& [pool, share] : s.daemon.reload_stats().last_moved) o.sample({pool}, share);
}

void durations(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (size_t i = 0; i < p.durations.size(); ++i) {
      o.histogram({p.pool->name(), p.pool->backend(static_cast<core::BackendIndex>(i)).id()},
                  p.durations[i], metrics_detail::kDurationBoundsUs, 1e6);
    }
  }
}

void hops(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    o.histogram({p.pool->name()}, p.hops, metrics_detail::kHopBounds, 1);
  }
}

void spill_pairs(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& pc : p.pairs) o.sample({p.pool->name(), pc.owner, pc.backend}, d(pc.count));
  }
}

void hot_replicas(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    const auto& ps = p.pool->state();
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    for (const auto& h : ps.hot) {
      o.sample({p.pool->name(), hex16(h.hash), safe_label(h.key)}, d(h.replicas));
    }
  }
}

void hot_spills(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& e : p.hot) {
      o.sample({p.pool->name(), hex16(e.hash), safe_label(e.key)}, d(e.count));
    }
  }
}

void hot_spills_error(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& e : p.hot) {
      o.sample({p.pool->name(), hex16(e.hash), safe_label(e.key)}, d(e.error));
    }
  }
}

// PROXY protocol header stage: one row per listener with `proxy_protocol` (and per reason or
// version), from the listener's shared counters.
template <class Each>
void proxy_listeners(const Scrape& s, Each each) {
  if (s.snap == nullptr) return;
  for (const auto& l : s.snap->config().listeners) {
    if (!l.proxy_protocol.enabled) continue;
    proxy::ListenerRoute r = s.snap->route(l.name);
    if (r.state) each(l.name, r.state->proxy_protocol);
  }
}

void proxy_protocol_rejects(const Scrape& s, FamilyOut& o) {
  proxy_listeners(s, [&](std::string_view name, const net::ProxyProtocolCounters& c) {
    for (size_t i = 0; i < net::kProxyRejects; ++i) {
      o.sample({name, net::proxy_reject_name(static_cast<net::ProxyReject>(i))}, d(c.rejects[i]));
    }
  });
}

void proxy_protocol_headers(const Scrape& s, FamilyOut& o) {
  proxy_listeners(s, [&](std::string_view name, const net::ProxyProtocolCounters& c) {
    for (size_t i = 0; i < net::kProxyVersions; ++i) {
      o.sample({name, net::proxy_version_name(static_cast<net::ProxyVersion>(i))}, d(c.headers[i]));
    }
  });
}

// --- the table, in the order of docs/metrics.md -----------------------------------------------

constexpr MetricType kCounter = MetricType::Counter;
constexpr MetricType kGauge = MetricType::Gauge;
constexpr MetricType kHistogram = MetricType::Histogram;
constexpr LabelNames kNone = {};
constexpr LabelNames kP = {"pool"};
constexpr LabelNames kPB = {"pool", "backend"};

constexpr Family kFamilies[] = {
    // Requests and latency.
    {"rondel_client_requests_total", kCounter, kNone, Scope::kDaemon,
     "Request heads received from clients (including rejected ones).", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().requests); }},
    {"rondel_pool_requests_total", kCounter, kP, Scope::kPool, "Requests routed to a pool.", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().requests); }},
    {"rondel_requests_total", kCounter, {"pool", "backend", "class"}, Scope::kBackend,
     "Exchanges completed per backend, by response status class (other: no status, e.g. "
     "aborted).", kClassV, status_class},
    {"rondel_request_duration_seconds", kHistogram, kPB, Scope::kCustom,
     "Time from a request's head to the end of its exchange, per backend.", {}, nullptr,
     durations},
    {"rondel_client_received_bytes_total", kCounter, kP, Scope::kPool,
     "Request bytes received from clients, per pool.", {},
     [](const Row& r, size_t) -> Value { return d(r.p->client_bytes_in); }},
    {"rondel_client_sent_bytes_total", kCounter, kP, Scope::kPool,
     "Response bytes sent to clients, per pool.", {},
     [](const Row& r, size_t) -> Value { return d(r.p->client_bytes_out); }},
    {"rondel_backend_sent_bytes_total", kCounter, kPB, Scope::kBackend,
     "Request bytes sent to a backend.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().bytes_out); }},
    {"rondel_backend_received_bytes_total", kCounter, kPB, Scope::kBackend,
     "Response bytes received from a backend.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().bytes_in); }},
    {"rondel_rejected_requests_total", kCounter, {"reason"}, Scope::kDaemon,
     "Requests refused or failed before a full response, by reason.", kRejectV,
     [](const Row& r, size_t i) -> Value { return d(r.s.daemon.stats().rejected[i]); }},
    {"rondel_pool_no_backend_total", kCounter, kP, Scope::kPool,
     "Requests answered 503 because no backend was eligible.", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().no_backend); }},
    {"rondel_pool_empty_builds_total", kCounter, kP, Scope::kPool,
     "Configuration builds (reloads, DNS updates) that left a pool with no backend because its "
     "host names resolved to no address.", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().empty_builds); }},

    // Load and capacity.
    {"rondel_pool_in_flight", kGauge, kP, Scope::kPool, "Requests in flight in a pool.", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().total_in_flight); }},
    {"rondel_backend_in_flight", kGauge, kPB, Scope::kBackend, "Requests in flight on a backend.",
     {}, [](const Row& r, size_t) -> Value { return d(r.backend().in_flight); }},
    {"rondel_backend_capacity", kGauge, kPB, Scope::kBackend,
     "In-flight requests a backend may hold now under the bounded-load cap (counting the next "
     "request).", {}, capacity},
    {"rondel_backend_weight", kGauge, kPB, Scope::kBackend, "Configured weight of a backend.", {},
     [](const Row& r, size_t) -> Value { return r.weight(); }},
    {"rondel_backend_weight_share", kGauge, kPB, Scope::kBackend,
     "Backend weight over the pool's total weight.", {},
     [](const Row& r, size_t) -> Value {
       return r.total_weight() ? d(r.weight()) / d(r.total_weight()) : 0.0;
     }},
    {"rondel_backend_key_share", kGauge, kPB, Scope::kBackend,
     "Share of the key space the backend naturally owns.", {},
     [](const Row& r, size_t) -> Value {
       return r.b < r.p->shares->size() ? (*r.p->shares)[r.b] : 0.0;
     }},
    {"rondel_ring_points", kGauge, {"pool", "algorithm"}, Scope::kPool,
     "Points of the placement structure (ring or skeleton points, Maglev table entries; 0 "
     "for rendezvous).", kAlgorithmV, ring_points},
    {"rondel_ring_memory_bytes", kGauge, {"pool", "algorithm"}, Scope::kPool,
     "Heap bytes held by the placement structure.", kAlgorithmV, ring_memory},

    // Spillover and hot keys.
    {"rondel_spillover_total", kCounter, kP, Scope::kPool,
     "Requests not served by their natural owner (the owner was full, down or failed).", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().spilled); }},
    {"rondel_spillover_pairs_total", kCounter, {"pool", "owner", "backend"}, Scope::kCustom,
     "Requests served by another backend than their natural owner, by (owner, backend).", {},
     nullptr, spill_pairs},
    {"rondel_backend_spill_in_total", kCounter, kPB, Scope::kBackend,
     "Requests served by a backend although another backend owned the key.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().spill_in); }},
    {"rondel_pick_hops", kHistogram, kP, Scope::kCustom,
     "Backends passed over (full, down or failed) before the one that served the request.", {},
     nullptr, hops},
    {"rondel_pick_all_full_total", kCounter, kP, Scope::kPool,
     "Picks that found every eligible backend at capacity (least loaded used).", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().all_full); }},
    {"rondel_routed_requests_total", kCounter, {"pool", "reason"}, Scope::kPool,
     "Routing decisions (first pick of each keyed request) by reason: home, replica (hot key on "
     "one of its replicas), sticky (remembered spill), spill (home full), all_full, none (no "
     "eligible backend).", kRouteV,
     [](const Row& r, size_t i) -> Value { return d(r.ps().routed[i]); }},
    {"rondel_placement_requests_total", kCounter, {"pool", "placement"}, Scope::kPool,
     "First picks of hashed requests by the placement that placed them: current, or previous "
     "while the pool migrates from a previous placement (migrate_percent).", kPlacementV,
     [](const Row& r, size_t i) -> Value { return d(r.ps().placement_routed[i]); }},
    {"rondel_hot_keys_replicated", kGauge, kP, Scope::kPool,
     "Hot keys currently spread over more than one backend.", {}, hot_keys_replicated},
    {"rondel_hot_key_replicas", kGauge, {"pool", "hash", "key"}, Scope::kCustom,
     "Backends a hot key is spread over (R), per hot key.", {}, nullptr, hot_replicas},
    {"rondel_hot_key_spills", kGauge, {"pool", "hash", "key"}, Scope::kCustom,
     "Spilled requests of the hottest keys over the last one to two hot-key windows "
     "(Space-Saving upper bound).", {}, nullptr, hot_spills},
    {"rondel_hot_key_spills_error", kGauge, {"pool", "hash", "key"}, Scope::kCustom,
     "Maximum overestimate of rondel_hot_key_spills for the same key.", {}, nullptr,
     hot_spills_error},

    // Backend health and errors.
    {"rondel_backend_state", kGauge, {"pool", "backend", "state"}, Scope::kBackend,
     "1 for the backend's current state, else 0.", kStateV,
     [](const Row& r, size_t i) -> Value { return r.backend().health() == kStateHealth[i]; }},
    {"rondel_backend_admin_state", kGauge, {"pool", "backend", "state"}, Scope::kBackend,
     "1 for the state an operator set through the admin API (ready, drain, maint), else 0.",
     kAdminStateV,
     [](const Row& r, size_t i) -> Value { return r.backend().admin_state() == kAdminStates[i]; }},
    {"rondel_pool_placement_fingerprint", kGauge, {"pool", "fingerprint"}, Scope::kCustom,
     "Always 1; the fingerprint label is a 64-bit digest (16 hex digits) of the pool's effective "
     "placement (backend ids, weights, algorithm, its size, usable backends).", {}, nullptr,
     placement_fingerprints},
    {"rondel_pool_unusable_backends", kGauge, kP, Scope::kPool,
     "Backends of a pool that are down, ejected, drained or in maintenance.", {},
     [](const Row& r, size_t) -> Value { return d(r.ps().unusable); }},
    {"rondel_pool_health_check_enabled", kGauge, kP, Scope::kPool,
     "1 when active health checks are configured for the pool.", {},
     [](const Row& r, size_t) -> Value { return r.pool().config().health.enabled ? 1 : 0; }},
    {"rondel_backend_health_checks_total", kCounter, {"pool", "backend", "result"},
     Scope::kBackend, "Active health-check probes of a backend, by result.", kResultV,
     health_checks},
    {"rondel_backend_health_check_streak", kGauge, {"pool", "backend", "result"}, Scope::kBackend,
     "Active health-check results in a row for a backend (ok: successes, failed: failures; "
     "compared with the pool's rise and fall).", kResultV, health_streak},
    {"rondel_backend_connect_errors_total", kCounter, kPB, Scope::kBackend,
     "Failed connects to a backend.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().connect_errors); }},
    {"rondel_backend_timeouts_total", kCounter, kPB, Scope::kBackend,
     "Exchanges with a backend that timed out.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().timeouts); }},
    {"rondel_backend_errors_total", kCounter, kPB, Scope::kBackend,
     "Exchanges with a backend that ended without a full response (other than connect errors "
     "and timeouts).", {}, [](const Row& r, size_t) -> Value { return d(r.c().errors); }},
    {"rondel_backend_retries_total", kCounter, kPB, Scope::kBackend,
     "Requests retried away from a backend after it failed.", {},
     [](const Row& r, size_t) -> Value { return d(r.c().retries); }},
    {"rondel_retries_total", kCounter, kNone, Scope::kDaemon,
     "Requests re-sent to another backend after a connect failure.", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().retries); }},

    // Connections.
    {"rondel_client_connections_open", kGauge, kNone, Scope::kDaemon,
     "Client connections open now.", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().client_connections_open); }},
    {"rondel_client_connections_total", kCounter, kNone, Scope::kDaemon,
     "Client connections accepted.", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().client_connections_total); }},
    {"rondel_backend_connections_open", kGauge, kNone, Scope::kDaemon,
     "Backend connections open now (idle and busy, every pool).", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().backend_connections_open); }},
    {"rondel_backend_connections", kGauge, {"pool", "backend", "state"}, Scope::kBackend,
     "Connections to a backend, by state.", kConnStateV, connections},
    {"rondel_proxy_protocol_headers_total", kCounter, {"listener", "version"}, Scope::kCustom,
     "PROXY protocol headers accepted on a listener with proxy_protocol, by version.", {},
     nullptr, proxy_protocol_headers},
    {"rondel_proxy_protocol_rejects_total", kCounter, {"listener", "reason"}, Scope::kCustom,
     "Connections closed in the PROXY protocol header stage, by reason.", {}, nullptr,
     proxy_protocol_rejects},

    // HTTP/2 to clients.
    {"rondel_h2_connections_total", kCounter, kNone, Scope::kDaemon,
     "HTTP/2 client connections accepted.", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().h2_connections); }},
    {"rondel_h2_connections_open", kGauge, kNone, Scope::kDaemon,
     "HTTP/2 client connections open now.", {},
     [](const Row& r, size_t) -> Value {
       const auto& st = r.s.daemon.stats();
       return d(st.h2_connections) - d(st.h2_connections_closed);
     }},
    {"rondel_h2_streams_total", kCounter, kNone, Scope::kDaemon,
     "HTTP/2 request streams opened by clients.", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().h2_streams); }},
    {"rondel_h2_resets_received_total", kCounter, {"code"}, Scope::kDaemon,
     "RST_STREAM frames received from HTTP/2 clients, by error code.", kH2ErrorV,
     [](const Row& r, size_t i) -> Value { return d(r.s.daemon.stats().h2_resets_received[i]); }},
    {"rondel_h2_resets_sent_total", kCounter, {"code"}, Scope::kDaemon,
     "RST_STREAM frames sent to HTTP/2 clients, by error code.", kH2ErrorV,
     [](const Row& r, size_t i) -> Value { return d(r.s.daemon.stats().h2_resets_sent[i]); }},
    {"rondel_h2_goaways_sent_total", kCounter, kNone, Scope::kDaemon,
     "GOAWAY frames sent to HTTP/2 clients (drain, defences, errors).", {},
     [](const Row& r, size_t) -> Value { return d(r.s.daemon.stats().h2_goaways_sent); }},
    {"rondel_h2_defences_total", kCounter, {"defence"}, Scope::kDaemon,
     "HTTP/2 defences that fired, by kind.", kH2FloodV,
     [](const Row& r, size_t i) -> Value { return d(r.s.daemon.stats().h2_floods[i]); }},

    // Configuration and reloads.
    {"rondel_build_info", kGauge, {"version"}, Scope::kCustom,
     "Always 1; the version of the running binary.", {}, nullptr, build_info},
    {"rondel_config_generation", kGauge, kNone, Scope::kDaemon,
     "Generation of the configuration snapshot being served (1 at start, +1 per successful "
     "reload).", {},
     [](const Row& r, size_t) -> Value { return r.s.snap ? d(r.s.snap->generation()) : 0.0; }},
    {"rondel_reloads_total", kCounter, {"result"}, Scope::kDaemon,
     "Configuration reloads, by result.", kResultV,
     [](const Row& r, size_t i) -> Value {
       const auto& rs = r.s.daemon.reload_stats();
       return d(i == 0 ? rs.ok : rs.failed);
     }},
    {"rondel_last_reload_success_timestamp_seconds", kGauge, kNone, Scope::kDaemon,
     "Unix time of the last successful configuration load (start or reload).", {},
     [](const Row& r, size_t) -> Value {
       return static_cast<double>(
           r.s.daemon.reload_stats().last_ok_unix.load(std::memory_order_relaxed));
     }},
    {"rondel_reload_moved_key_share", kGauge, kP, Scope::kCustom,
     "Share of the key space whose natural owner changed in the last successful reload, per "
     "pool.", {}, nullptr, moved_shares},

    // TLS termination.
    {"rondel_tls_handshakes_total", kCounter, {"version"}, Scope::kDaemon,
     "TLS handshakes completed, by protocol version.", kTlsVersionV,
     [](const Row&, size_t i) -> Value { return d(tls::tls_stats().ok_by_version[i]); }},
    {"rondel_tls_handshakes_alpn_total", kCounter, {"protocol"}, Scope::kDaemon,
     "TLS handshakes completed, by the ALPN protocol chosen (none: the client offered none).",
     kTlsAlpnV, [](const Row&, size_t i) -> Value { return d(tls::tls_stats().ok_by_alpn[i]); }},
    {"rondel_tls_handshake_failures_total", kCounter, {"reason"}, Scope::kDaemon,
     "TLS handshakes that did not complete, by reason.", kTlsFailureV,
     [](const Row&, size_t i) -> Value { return d(tls::tls_stats().failed[i]); }},
    {"rondel_tls_resumptions_total", kCounter, kNone, Scope::kDaemon,
     "TLS handshakes that resumed a session (session ticket).", {},
     [](const Row&, size_t) -> Value { return d(tls::tls_stats().resumed); }},
    {"rondel_tls_handshakes_in_progress", kGauge, kNone, Scope::kDaemon,
     "TLS handshakes under way now, every worker.", {},
     [](const Row&, size_t) -> Value {
       return static_cast<double>(tls::tls_stats().in_progress.load(std::memory_order_relaxed));
     }},
    {"rondel_tls_certificate_expiry_timestamp_seconds", kGauge, {"listener", "name"},
     Scope::kCustom, "Unix time a loaded certificate expires, per listener and its first name.",
     {}, nullptr, tls_expiry},
};

// A family's labels match its scope and reader: pool rows are labelled `pool` first, backend
// rows `pool`, `backend`; a fixed variant set adds exactly one last label.
constexpr bool well_formed(const Family& f) {
  size_t n = 0;
  while (n < kMaxLabels && !f.labels[n].empty()) ++n;
  if (f.scope == Scope::kCustom) return f.emit != nullptr && f.read == nullptr;
  size_t fixed = f.scope == Scope::kPool ? 1 : f.scope == Scope::kBackend ? 2 : 0;
  if (fixed >= 1 && f.labels[0] != "pool") return false;
  if (fixed == 2 && f.labels[1] != "backend") return false;
  return f.read != nullptr && f.emit == nullptr && n == fixed + (f.variants.count > 0 ? 1 : 0);
}
constexpr bool names_unique() {
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    for (size_t j = i + 1; j < std::size(kFamilies); ++j) {
      if (kFamilies[i].name == kFamilies[j].name) return false;
    }
  }
  return true;
}
static_assert(std::all_of(std::begin(kFamilies), std::end(kFamilies), well_formed));
static_assert(names_unique());

// The rows of one family of a fixed scope: one sample per row, or one per variant.
void emit_row(const Family& f, const Row& row, std::array<std::string_view, kMaxLabels> values,
              size_t fixed, FamilyOut& o) {
  if (f.variants.count == 0) {
    if (Value v = f.read(row, 0)) o.sample(std::span(values.data(), fixed), *v);
    return;
  }
  for (size_t i = 0; i < f.variants.count; ++i) {
    values[fixed] = f.variants.name(i);
    if (Value v = f.read(row, i)) o.sample(std::span(values.data(), fixed + 1), *v);
  }
}

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
    default: return "untyped";
  }
}

}  // namespace

namespace metrics_detail {

void collect_families(const Scrape& s, std::vector<MetricFamily>& out) {
  for (const Family& f : kFamilies) {
    out.push_back(MetricFamily{std::string(f.name), std::string(f.help), f.type, {}});
    FamilyOut o(out.back(), f.labels);
    switch (f.scope) {
      case Scope::kDaemon: emit_row(f, Row{s}, {}, 0, o); break;
      case Scope::kPool:
        for (const auto& p : s.pools) emit_row(f, Row{s, &p}, {p.pool->name()}, 1, o);
        break;
      case Scope::kBackend:
        for (const auto& p : s.pools) {
          for (size_t i = 0; i < p.pool->size(); ++i) {
            auto idx = static_cast<core::BackendIndex>(i);
            emit_row(f, Row{s, &p, idx}, {p.pool->name(), p.pool->backend(idx).id()}, 2, o);
          }
        }
        break;
      case Scope::kCustom: f.emit(s, o); break;
    }
  }
}

}  // namespace metrics_detail

std::vector<Metrics::FamilyInfo> Metrics::families() {
  std::vector<FamilyInfo> out;
  for (const Family& f : kFamilies) {
    FamilyInfo fi{f.name, type_name(f.type), {}, f.help};
    for (auto l : f.labels) {
      if (!l.empty()) fi.labels.push_back(l);
    }
    out.push_back(std::move(fi));
  }
  return out;
}

}  // namespace rondel::server
