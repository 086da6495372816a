// The metric families of /metrics as one table: name, type, label names, help and how to read
// the value(s); collection walks it, and Metrics::families() (docs/metrics.md's test) renders it.
#include <prometheus/client_metric.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>

#include "discovery_source.h"
#include "fleet.h"
#include "fleet_hot.h"
#include "metrics_shards.h"
#include "rondel/core/bounded.h"
#include "rondel/core/reported_load.h"
#include "rondel/proxy/load_report.h"
#include "rondel/server/admin_states.h"
#include "rondel/net/proxy_protocol.h"
#include "rondel/server/daemon.h"
#include "rondel/server/discovery.h"
#include "rondel/server/metrics.h"
#include "metric_labels.h"
#include "rondel/tls/client_context.h"
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

constexpr std::array<proxy::AdminState, 3> kAdminStates = {
    proxy::AdminState::kReady, proxy::AdminState::kDrain, proxy::AdminState::kMaint};
constexpr Variants kAdminStateV{kAdminStates.size(), [](size_t i) {
                                  return admin_state_name(kAdminStates[i]);
                                }};
constexpr Variants kAgentStateV{proxy::kAgentSummaries,
                                [](size_t i) { return proxy::kAgentSummaryNames[i]; }};
constexpr Variants kAgentResultV{proxy::kAgentResults,
                                 [](size_t i) { return proxy::kAgentResultNames[i]; }};
constexpr Variants kClassV{kClasses.size(), [](size_t i) { return kClasses[i]; }};
constexpr Variants kStateV{kStates.size(), [](size_t i) { return kStates[i]; }};
constexpr Variants kConnStateV{kConnStates.size(), [](size_t i) { return kConnStates[i]; }};
constexpr Variants kResultV{kResults.size(), [](size_t i) { return kResults[i]; }};
constexpr Variants kAlgorithmV{std::size(core::kAlgorithmNames),
                               [](size_t i) { return core::kAlgorithmNames[i]; }};
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
constexpr Variants kBackendTlsV{static_cast<size_t>(tls::BackendHandshake::kCount), [](size_t i) {
  return tls::backend_handshake_name(static_cast<tls::BackendHandshake>(i));
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
// Backend load reports by core::ReportStatus (ok, missing, malformed, ...).
constexpr Variants kReportV{core::kReportStatuses, [](size_t i) {
                              return core::report_status_name(static_cast<core::ReportStatus>(i));
                            }};
uint64_t steady_now_ms() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

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

// With `load_by: prompt_size` the bound counts KiB of request bodies, and so does the capacity.
bool by_cost(const Row& r) noexcept {
  return r.pool().config().load_by == config::LoadBy::kPromptSize;
}

Value in_flight_cost(const Row& r, size_t) {
  if (!by_cost(r)) return std::nullopt;
  return d(r.backend().in_flight_cost);
}

Value capacity(const Row& r, size_t) {
  uint64_t total = (by_cost(r) ? r.ps().total_in_flight_cost : r.ps().total_in_flight)
                       .load(std::memory_order_relaxed);
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
  if (r.pool().config().algorithm != static_cast<core::Algorithm>(i)) return std::nullopt;
  return d(r.pool().selector().points());
}
Value ring_memory(const Row& r, size_t i) {
  if (r.pool().config().algorithm != static_cast<core::Algorithm>(i)) return std::nullopt;
  return d(r.pool().selector().memory_bytes());
}

Value hot_keys_replicated(const Row& r, size_t) {
  std::lock_guard<std::mutex> lock(r.ps().hot_mu);
  return d(r.ps().hot.size());
}

// --- custom rows ------------------------------------------------------------------------------

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

// One source per pool: while a reload that changes a pool's source waits for the new one's
// first answer, both run; the one serving (the first started) is shown.
std::vector<const DiscoverySource*> pool_sources(const Scrape& s) {
  std::vector<const DiscoverySource*> out;
  if (s.daemon.discovery() == nullptr) return out;
  for (const DiscoverySource* src : s.daemon.discovery()->sources()) {
    if (std::none_of(out.begin(), out.end(),
                     [src](const DiscoverySource* o) { return o->pool() == src->pool(); })) {
      out.push_back(src);
    }
  }
  return out;
}

void discovery_up(const Scrape& s, FamilyOut& o) {
  for (const DiscoverySource* src : pool_sources(s)) {
    o.sample({src->pool(), src->kind()}, src->up() ? 1.0 : 0.0);
  }
}

void discovery_errors(const Scrape& s, FamilyOut& o) {
  for (const DiscoverySource* src : pool_sources(s)) {
    for (size_t i = 0; i < kSourceErrorNames.size(); ++i) {
      o.sample({src->pool(), src->kind(), kSourceErrorNames[i]}, d(src->errors(i)));
    }
  }
}

void fleet_instances(const Scrape& s, FamilyOut& o) {
  // The N the bound scales by: the fleet's members, or a static `fleet: {instances}`.
  if (s.daemon.fleet() != nullptr || s.daemon.fleet_size() > 1) o.sample({}, d(s.daemon.fleet_size()));
}

void fleet_registered(const Scrape& s, FamilyOut& o) {
  if (const Fleet* f = s.daemon.fleet()) o.sample({}, f->registered() ? 1.0 : 0.0);
}

void fleet_fingerprints(const Scrape& s, FamilyOut& o) {
  const Fleet* f = s.daemon.fleet();
  if (f == nullptr) return;
  for (const auto& [id, m] : f->members()) {
    for (const auto& [pool, fp] : m.fingerprints) o.sample({pool, id, fp}, 1);
  }
}

void fleet_disagrees(const Scrape& s, FamilyOut& o) {
  const Fleet* f = s.daemon.fleet();
  if (f == nullptr || !f->fingerprints_shared()) return;  // unknown, so absent
  for (const auto& p : s.pools) {
    o.sample({p.pool->name()}, f->disagrees(p.pool->name()) ? 1.0 : 0.0);
  }
}

void fleet_hot_keys(const Scrape& s, FamilyOut& o) {
  const FleetHot* h = s.daemon.fleet_hot();
  if (h == nullptr) return;
  for (const auto& [pool, t] : h->tables()) {
    o.sample({pool}, t.table != nullptr ? d(t.hot.size()) : -1.0);
  }
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

bool body_keyed(const PoolRow& p) noexcept {
  return p.pool->config().hash_key.kind == config::HashKeyKind::kLlmPrefix;
}

void body_key_sources(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    if (!body_keyed(p)) continue;
    for (size_t k = 0; k < proxy::kBodyKeySources; ++k) {
      o.sample({p.pool->name(), proxy::kBodyKeySourceNames[k]}, d(p.body_keys[k]));
    }
  }
}

void body_key_offsets(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    if (body_keyed(p)) o.histogram({p.pool->name()}, p.key_offsets, metrics_detail::kOffsetBounds, 1);
  }
}

void body_key_decisions(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    if (body_keyed(p)) {
      o.histogram({p.pool->name()}, p.key_decisions, metrics_detail::kDecisionBoundsUs, 1e6);
    }
  }
}

void spill_pairs(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& pc : p.pairs) o.sample({p.pool->name(), pc.owner, pc.backend}, d(pc.count));
  }
}

// Per subset name (config `subsets`: the rule's name or index), every name the pool has had.
// (Plain functions, not a template over the member: under -fsanitize=address GCC cannot fold
// the table's `emit != nullptr` check for a function template's address.)
void subset_counter(const Scrape& s, FamilyOut& o,
                    std::atomic<uint64_t> proxy::PoolState::SubsetCounters::*counter) {
  for (const auto& p : s.pools) {
    const auto& ps = p.pool->state();
    std::lock_guard<std::mutex> lock(ps.subsets_mu);
    for (const auto& c : ps.subsets) o.sample({p.pool->name(), c->name}, d((*c).*counter));
  }
}
void subset_requests(const Scrape& s, FamilyOut& o) {
  subset_counter(s, o, &proxy::PoolState::SubsetCounters::requests);
}
void subset_unavailable(const Scrape& s, FamilyOut& o) {
  subset_counter(s, o, &proxy::PoolState::SubsetCounters::unavailable);
}

void hot_replicas(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    const auto& ps = p.pool->state();
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    for (const auto& h : ps.hot) {
      o.sample({p.pool->name(), hash_hex16(h.hash), safe_label(h.key)}, d(h.replicas));
    }
  }
}

void hot_spills(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& e : p.hot) {
      o.sample({p.pool->name(), hash_hex16(e.hash), safe_label(e.key)}, d(e.count));
    }
  }
}

void hot_spills_error(const Scrape& s, FamilyOut& o) {
  for (const auto& p : s.pools) {
    for (const auto& e : p.hot) {
      o.sample({p.pool->name(), hash_hex16(e.hash), safe_label(e.key)}, d(e.error));
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

#include "metric_family_table.inc"

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
