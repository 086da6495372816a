// Metrics: Prometheus families built from the proxy's counters at scrape time, plus the few
// per-exchange series (duration and hop histograms, spill pairs) and the hot-key summaries.
// docs/metrics.md lists every family served here; keep the two in step.
#include "rondel/server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/server/daemon.h"

#ifndef RONDEL_VERSION
#define RONDEL_VERSION "unknown"
#endif

namespace rondel::server {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Pairs series per pool beyond which spills are counted under owner=backend="_other", so that a
// pathological pool cannot grow the exposition without bound (N^2 pairs).
constexpr size_t kMaxSpillPairs = 1024;
constexpr const char* kOtherPair = "_other";

const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const prometheus::Histogram::BucketBoundaries kHopBuckets = {0, 1, 2, 3, 4, 6, 8, 16, 32};

std::string_view algorithm_label(config::Algorithm a) {
  switch (a) {
    case config::Algorithm::kRing: return "ring";
    case config::Algorithm::kRendezvous: return "rendezvous";
    case config::Algorithm::kMaglev: return "maglev";
  }
  return "unknown";
}

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

// Families assembled at scrape time (a deque: references handed out stay valid as it grows).
struct Families {
  std::deque<MetricFamily> list;

  MetricFamily& add(std::string name, std::string help, MetricType type) {
    list.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return list.back();
  }
};

void sample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) m.counter.value = v;
  else m.gauge.value = v;
  f.metric.push_back(std::move(m));
}

double d(uint64_t v) { return static_cast<double>(v); }

// Active health-check results of one backend, when its counters have them (the checker is
// being added to the proxy separately; until then the family is served without samples).
template <class C>
void health_check_samples(MetricFamily& f, const std::vector<ClientMetric::Label>& pb,
                          const C& c) {
  if constexpr (requires { c.health_checks_ok.load(); c.health_checks_failed.load(); }) {
    auto ok = pb, failed = pb;
    ok.push_back({"result", "ok"});
    failed.push_back({"result", "failed"});
    sample(f, std::move(ok), d(c.health_checks_ok.load(std::memory_order_relaxed)));
    sample(f, std::move(failed), d(c.health_checks_failed.load(std::memory_order_relaxed)));
  }
}

// Active health-check results in a row (the checker's rise/fall state), when BackendState has it.
template <class B>
void health_streak_samples(MetricFamily& f, const std::vector<ClientMetric::Label>& pb,
                           const B& b) {
  if constexpr (requires { b.check_successes; b.check_failures; }) {
    auto ok = pb, failed = pb;
    ok.push_back({"result", "ok"});
    failed.push_back({"result", "failed"});
    sample(f, std::move(ok), d(b.check_successes));
    sample(f, std::move(failed), d(b.check_failures));
  }
}

}  // namespace

struct Metrics::Impl {
  struct BackendSeries {
    prometheus::Histogram* duration = nullptr;
  };
  // Per pool name: lives across reloads as long as the pool exists.
  struct PoolSeries {
    std::string name;
    prometheus::Histogram* hops = nullptr;
    uint64_t client_bytes_in = 0, client_bytes_out = 0;
    uint32_t hot_k = 0;
    std::unique_ptr<core::HotKeys> hot;
    std::map<std::string, BackendSeries, std::less<>> backends;  // by backend id
    std::map<std::pair<std::string, std::string>, prometheus::Counter*> pairs;  // (owner, chosen)
  };
  // Per pool of the current snapshot: direct pointers, so the exchange hook never looks up a
  // label map.
  struct PoolCache {
    const proxy::Pool* pool = nullptr;
    PoolSeries* series = nullptr;
    std::vector<BackendSeries*> backends;                     // by backend index
    std::unordered_map<uint32_t, prometheus::Counter*> pairs;  // owner << 16 | chosen
    std::vector<double> shares;
    bool shares_ready = false;
  };

  explicit Impl(Daemon& d)
      : daemon(d),
        worker(d.worker()),
        registry(std::make_shared<prometheus::Registry>()),
        duration(prometheus::BuildHistogram()
                     .Name("rondel_request_duration_seconds")
                     .Help("Time from a request's head to the end of its exchange, per backend.")
                     .Register(*registry)),
        hops(prometheus::BuildHistogram()
                 .Name("rondel_pick_hops")
                 .Help("Backends passed over (full, down or failed) before the one that served "
                       "the request.")
                 .Register(*registry)),
        pairs(prometheus::BuildCounter()
                  .Name("rondel_spillover_pairs_total")
                  .Help("Requests served by another backend than their natural owner, by "
                        "(owner, backend).")
                  .Register(*registry)) {}

  Daemon& daemon;
  // The worker directly (not through the daemon): exchanges that end while the daemon is
  // destroying its worker still find the snapshot.
  proxy::Worker& worker;
  // Guards everything below: the exchange hook runs on every worker's thread, the admin views
  // on the daemon's loop thread.
  std::mutex mu;
  // The snapshot the daemon published last (set_snapshot); the per-snapshot caches follow it.
  std::shared_ptr<const proxy::Snapshot> snap;
  static uint64_t now_ms() noexcept { return uv_hrtime() / 1000000; }
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Histogram>& hops;
  prometheus::Family<prometheus::Counter>& pairs;

  std::map<std::string, std::unique_ptr<PoolSeries>, std::less<>> pools;
  std::vector<PoolCache> cache;
  const proxy::Snapshot* cache_snap = nullptr;
  uint64_t cache_gen = 0;
  std::vector<double> empty_shares;

  PoolSeries& pool_series(const std::string& name) {
    auto it = pools.find(name);
    if (it != pools.end()) return *it->second;
    auto ps = std::make_unique<PoolSeries>();
    ps->name = name;
    ps->hops = &hops.Add({{"pool", name}}, kHopBuckets);
    return *pools.emplace(name, std::move(ps)).first->second;
  }

  BackendSeries& backend_series(PoolSeries& ps, const std::string& id) {
    auto it = ps.backends.find(id);
    if (it != ps.backends.end()) return it->second;
    BackendSeries bs;
    bs.duration = &duration.Add({{"pool", ps.name}, {"backend", id}}, kDurationBuckets);
    return ps.backends.emplace(id, bs).first->second;
  }

  prometheus::Counter& pair_counter(PoolSeries& ps, const std::string& owner,
                                    const std::string& chosen) {
    auto key = std::make_pair(owner, chosen);
    auto it = ps.pairs.find(key);
    if (it != ps.pairs.end()) return *it->second;
    if (ps.pairs.size() >= kMaxSpillPairs) key = {kOtherPair, kOtherPair};
    it = ps.pairs.find(key);
    if (it != ps.pairs.end()) return *it->second;
    auto* c = &pairs.Add({{"pool", ps.name}, {"owner", key.first}, {"backend", key.second}});
    ps.pairs.emplace(key, c);
    return *c;
  }

  // Rebuilds the per-snapshot cache when a new snapshot was published, and drops the series of
  // pools and backends that left the configuration. Two comparisons when nothing changed.
  void refresh() {
    if (!snap) {
      cache.clear();
      cache_snap = nullptr;
      return;
    }
    if (snap.get() == cache_snap && snap->generation() == cache_gen) return;
    cache_snap = snap.get();
    cache_gen = snap->generation();
    cache.clear();
    uint32_t k = snap->config().admin.hot_keys;
    for (const auto& p : snap->pools()) {
      PoolCache pc;
      pc.pool = p.get();
      pc.series = &pool_series(p->name());
      PoolSeries& ps = *pc.series;
      if (ps.hot_k != k) {
        ps.hot_k = k;
        ps.hot.reset();
        if (k > 0) {
          size_t cap = std::clamp<size_t>(size_t{k} * 8, 64, 65536);
          ps.hot = std::make_unique<core::HotKeys>(cap, kHotKeyWindowMs);
        }
      }
      for (size_t i = 0; i < p->size(); ++i) {
        pc.backends.push_back(
            &backend_series(ps, p->backend(static_cast<core::BackendIndex>(i)).id()));
      }
      // Forget the backends that are gone (their series would otherwise be exported forever).
      for (auto it = ps.backends.begin(); it != ps.backends.end();) {
        bool kept = false;
        for (size_t i = 0; i < p->size() && !kept; ++i) {
          kept = p->backend(static_cast<core::BackendIndex>(i)).id() == it->first;
        }
        if (kept) {
          ++it;
          continue;
        }
        duration.Remove(it->second.duration);
        for (auto pit = ps.pairs.begin(); pit != ps.pairs.end();) {
          if (pit->first.first == it->first || pit->first.second == it->first) {
            pairs.Remove(pit->second);
            pit = ps.pairs.erase(pit);
          } else {
            ++pit;
          }
        }
        it = ps.backends.erase(it);
      }
      cache.push_back(std::move(pc));
    }
    for (auto it = pools.begin(); it != pools.end();) {
      if (snap->find_pool(it->first) != nullptr) {
        ++it;
        continue;
      }
      PoolSeries& ps = *it->second;
      hops.Remove(ps.hops);
      for (auto& [id, bs] : ps.backends) duration.Remove(bs.duration);
      for (auto& [key, c] : ps.pairs) pairs.Remove(c);
      it = pools.erase(it);
    }
  }

  PoolCache* find_cache(const proxy::Pool* p) {
    for (auto& pc : cache) {
      if (pc.pool == p) return &pc;
    }
    return nullptr;
  }

  void on_exchange(const proxy::ExchangeRecord& rec) {
    refresh();
    const proxy::Pool& pool = *rec.pool;
    PoolCache* pc = find_cache(rec.pool);
    PoolSeries* ps = pc != nullptr ? pc->series : nullptr;
    if (ps == nullptr) {
      // An exchange that started under an older snapshot: look the pool up by name (rare: only
      // while a reload is being rolled out).
      auto it = pools.find(pool.name());
      if (it == pools.end()) return;
      ps = it->second.get();
    }
    ps->client_bytes_in += rec.bytes_in;
    ps->client_bytes_out += rec.bytes_out;
    if (rec.backend == core::kNoBackend || rec.backend >= pool.size()) return;
    BackendSeries* bs = nullptr;
    if (pc != nullptr) {
      bs = pc->backends[rec.backend];
    } else {
      auto it = ps->backends.find(pool.backend(rec.backend).id());
      if (it != ps->backends.end()) bs = &it->second;
    }
    if (bs != nullptr) bs->duration->Observe(static_cast<double>(rec.duration_us) / 1e6);
    ps->hops->Observe(rec.hops);
    // A spill: keyed request (the key is empty for least-in-flight routing) not served by its
    // natural owner. This matches the proxy's own PoolState::spilled for every key policy except
    // missing_key: random, whose requests carry no key here.
    bool spilled = !rec.key.empty() && rec.owner != core::kNoBackend && rec.owner != rec.backend &&
                   rec.owner < pool.size();
    if (!spilled) return;
    if (pc != nullptr) {
      uint32_t k = (uint32_t{rec.owner} << 16) | rec.backend;
      auto it = pc->pairs.find(k);
      if (it == pc->pairs.end()) {
        auto* c = &pair_counter(*ps, pool.backend(rec.owner).id(), pool.backend(rec.backend).id());
        it = pc->pairs.emplace(k, c).first;
      }
      it->second->Increment();
    } else {
      pair_counter(*ps, pool.backend(rec.owner).id(), pool.backend(rec.backend).id()).Increment();
    }
    if (ps->hot) {
      ps->hot->advance(now_ms());
      ps->hot->observe(core::hash64(rec.key), rec.key, 1);
    }
  }

  std::vector<core::HotKeys::Entry> top(PoolSeries& ps) {
    if (!ps.hot) return {};
    ps.hot->advance(now_ms());
    return ps.hot->top(ps.hot_k);
  }

  const std::vector<double>& shares(PoolCache& pc) {
    if (!pc.shares_ready) {
      pc.shares = pc.pool->selector().key_shares();
      pc.shares_ready = true;
    }
    return pc.shares;
  }

  void collect_state(Families& fs);
  void routing_samples(Families& fs);
};

void Metrics::Impl::collect_state(Families& fs) {
  const auto& ws = daemon.stats();
  const auto& rs = daemon.reload_stats();

  auto& build = fs.add("rondel_build_info", "Always 1; the version of the running binary.",
                       MetricType::Gauge);
  sample(build, {{"version", RONDEL_VERSION}}, 1);
  auto& gen = fs.add("rondel_config_generation",
                     "Generation of the configuration snapshot being served (1 at start, +1 per "
                     "successful reload).", MetricType::Gauge);
  sample(gen, {}, snap ? d(snap->generation()) : 0);

  // Daemon-wide counters.
  auto& cconn = fs.add("rondel_client_connections_open", "Client connections open now.",
                       MetricType::Gauge);
  sample(cconn, {}, d(ws.client_connections_open.load(std::memory_order_relaxed)));
  auto& cconn_t = fs.add("rondel_client_connections_total", "Client connections accepted.",
                         MetricType::Counter);
  sample(cconn_t, {}, d(ws.client_connections_total.load(std::memory_order_relaxed)));
  auto& bconn = fs.add("rondel_backend_connections_open",
                       "Backend connections open now (idle and busy, every pool).",
                       MetricType::Gauge);
  sample(bconn, {}, d(ws.backend_connections_open.load(std::memory_order_relaxed)));
  auto& reqs = fs.add("rondel_client_requests_total",
                      "Request heads received from clients (including rejected ones).",
                      MetricType::Counter);
  sample(reqs, {}, d(ws.requests.load(std::memory_order_relaxed)));
  auto& retries = fs.add("rondel_retries_total",
                         "Requests re-sent to another backend after a connect failure.",
                         MetricType::Counter);
  sample(retries, {}, d(ws.retries.load(std::memory_order_relaxed)));
  auto& rej = fs.add("rondel_rejected_requests_total",
                     "Requests refused or failed before a full response, by reason.",
                     MetricType::Counter);
  for (size_t i = 0; i < static_cast<size_t>(proxy::Reject::kCount); ++i) {
    sample(rej, {{"reason", std::string(proxy::reject_name(static_cast<proxy::Reject>(i)))}},
           d(ws.rejected[i].load(std::memory_order_relaxed)));
  }

  // Reloads.
  auto& reloads = fs.add("rondel_reloads_total", "Configuration reloads, by result.",
                         MetricType::Counter);
  sample(reloads, {{"result", "ok"}}, d(rs.ok.load(std::memory_order_relaxed)));
  sample(reloads, {{"result", "failed"}}, d(rs.failed.load(std::memory_order_relaxed)));
  auto& last_ok = fs.add("rondel_last_reload_success_timestamp_seconds",
                         "Unix time of the last successful configuration load (start or reload).",
                         MetricType::Gauge);
  sample(last_ok, {}, static_cast<double>(rs.last_ok_unix.load(std::memory_order_relaxed)));
  auto& moved = fs.add("rondel_reload_moved_key_share",
                       "Share of the key space whose natural owner changed in the last successful "
                       "reload, per pool.", MetricType::Gauge);
  for (const auto& [pool, share] : rs.last_moved) sample(moved, {{"pool", pool}}, share);

  // Pools.
  auto& p_req = fs.add("rondel_pool_requests_total", "Requests routed to a pool.",
                       MetricType::Counter);
  auto& p_inf = fs.add("rondel_pool_in_flight", "Requests in flight in a pool.", MetricType::Gauge);
  auto& p_unus = fs.add("rondel_pool_unusable_backends", "Backends of a pool that are down or "
                        "ejected.", MetricType::Gauge);
  auto& p_spill = fs.add("rondel_spillover_total",
                         "Requests not served by their natural owner (the owner was full, down or "
                         "failed).", MetricType::Counter);
  auto& p_full = fs.add("rondel_pick_all_full_total",
                        "Picks that found every eligible backend at capacity (least loaded used).",
                        MetricType::Counter);
  auto& p_nob = fs.add("rondel_pool_no_backend_total",
                       "Requests answered 503 because no backend was eligible.",
                       MetricType::Counter);
  auto& p_cin = fs.add("rondel_client_received_bytes_total",
                       "Request bytes received from clients, per pool.", MetricType::Counter);
  auto& p_cout = fs.add("rondel_client_sent_bytes_total",
                        "Response bytes sent to clients, per pool.", MetricType::Counter);
  auto& p_pts = fs.add("rondel_ring_points",
                       "Points of the placement structure (ring points or Maglev table entries; "
                       "0 for rendezvous).", MetricType::Gauge);
  auto& p_mem = fs.add("rondel_ring_memory_bytes",
                       "Heap bytes held by the placement structure.", MetricType::Gauge);
  auto& p_hc = fs.add("rondel_pool_health_check_enabled",
                      "1 when active health checks are configured for the pool.",
                      MetricType::Gauge);

  auto& b_req = fs.add("rondel_requests_total",
                       "Exchanges completed per backend, by response status class (other: no "
                       "status, e.g. aborted).", MetricType::Counter);
  auto& b_inf = fs.add("rondel_backend_in_flight", "Requests in flight on a backend.",
                       MetricType::Gauge);
  auto& b_cap = fs.add("rondel_backend_capacity",
                       "In-flight requests a backend may hold now under the bounded-load cap "
                       "(counting the next request).", MetricType::Gauge);
  auto& b_state = fs.add("rondel_backend_state", "1 for the backend's current state, else 0.",
                         MetricType::Gauge);
  auto& b_w = fs.add("rondel_backend_weight", "Configured weight of a backend.", MetricType::Gauge);
  auto& b_ws = fs.add("rondel_backend_weight_share", "Backend weight over the pool's total weight.",
                      MetricType::Gauge);
  auto& b_ks = fs.add("rondel_backend_key_share",
                      "Share of the key space the backend naturally owns.", MetricType::Gauge);
  auto& b_spill = fs.add("rondel_backend_spill_in_total",
                         "Requests served by a backend although another backend owned the key.",
                         MetricType::Counter);
  auto& b_rx = fs.add("rondel_backend_received_bytes_total", "Response bytes received from a "
                      "backend.", MetricType::Counter);
  auto& b_tx = fs.add("rondel_backend_sent_bytes_total", "Request bytes sent to a backend.",
                      MetricType::Counter);
  auto& b_cerr = fs.add("rondel_backend_connect_errors_total", "Failed connects to a backend.",
                        MetricType::Counter);
  auto& b_to = fs.add("rondel_backend_timeouts_total", "Exchanges with a backend that timed out.",
                      MetricType::Counter);
  auto& b_err = fs.add("rondel_backend_errors_total",
                       "Exchanges with a backend that ended without a full response (other than "
                       "connect errors and timeouts).", MetricType::Counter);
  auto& b_retry = fs.add("rondel_backend_retries_total",
                         "Requests retried away from a backend after it failed.",
                         MetricType::Counter);
  auto& b_conn = fs.add("rondel_backend_connections", "Connections to a backend, by state.",
                        MetricType::Gauge);
  auto& b_hc = fs.add("rondel_backend_health_checks_total",
                      "Active health-check probes of a backend, by result.", MetricType::Counter);
  auto& b_hcs = fs.add("rondel_backend_health_check_streak",
                       "Active health-check results in a row for a backend (ok: successes, "
                       "failed: failures; compared with the pool's rise and fall).",
                       MetricType::Gauge);

  auto& hot = fs.add("rondel_hot_key_spills",
                     "Spilled requests of the hottest keys over the last one to two hot-key "
                     "windows (Space-Saving upper bound).", MetricType::Gauge);
  auto& hot_err = fs.add("rondel_hot_key_spills_error",
                         "Maximum overestimate of rondel_hot_key_spills for the same key.",
                         MetricType::Gauge);

  if (!snap) return;
  for (auto& pc : cache) {
    const proxy::Pool& p = *pc.pool;
    const auto& st = p.state();
    const std::string& pn = p.name();
    std::string alg(algorithm_label(p.config().algorithm));
    uint64_t total = st.total_in_flight.load(std::memory_order_relaxed);
    uint64_t w_total = p.set().total_weight();
    sample(p_req, {{"pool", pn}}, d(st.requests.load(std::memory_order_relaxed)));
    sample(p_inf, {{"pool", pn}}, d(total));
    sample(p_unus, {{"pool", pn}}, d(st.unusable.load(std::memory_order_relaxed)));
    sample(p_spill, {{"pool", pn}}, d(st.spilled.load(std::memory_order_relaxed)));
    sample(p_full, {{"pool", pn}}, d(st.all_full.load(std::memory_order_relaxed)));
    sample(p_nob, {{"pool", pn}}, d(st.no_backend.load(std::memory_order_relaxed)));
    sample(p_cin, {{"pool", pn}}, d(pc.series->client_bytes_in));
    sample(p_cout, {{"pool", pn}}, d(pc.series->client_bytes_out));
    sample(p_pts, {{"pool", pn}, {"algorithm", alg}}, d(p.selector().points()));
    sample(p_mem, {{"pool", pn}, {"algorithm", alg}}, d(p.selector().memory_bytes()));
    sample(p_hc, {{"pool", pn}}, p.config().health.enabled ? 1 : 0);
    const auto& ks = shares(pc);
    for (size_t i = 0; i < p.size(); ++i) {
      auto idx = static_cast<core::BackendIndex>(i);
      const auto& b = p.backend(idx);
      const auto& c = b.counters;
      uint32_t w = p.set()[idx].weight;
      std::vector<ClientMetric::Label> pb = {{"pool", pn}, {"backend", b.id()}};
      auto with = [&](const char* k, std::string v) {
        auto l = pb;
        l.push_back({k, std::move(v)});
        return l;
      };
      uint64_t r2 = c.responses_2xx.load(std::memory_order_relaxed);
      uint64_t r3 = c.responses_3xx.load(std::memory_order_relaxed);
      uint64_t r4 = c.responses_4xx.load(std::memory_order_relaxed);
      uint64_t r5 = c.responses_5xx.load(std::memory_order_relaxed);
      uint64_t all = c.requests.load(std::memory_order_relaxed);
      uint64_t known = r2 + r3 + r4 + r5;
      sample(b_req, with("class", "2xx"), d(r2));
      sample(b_req, with("class", "3xx"), d(r3));
      sample(b_req, with("class", "4xx"), d(r4));
      sample(b_req, with("class", "5xx"), d(r5));
      sample(b_req, with("class", "other"), d(all > known ? all - known : 0));
      sample(b_inf, pb, d(b.in_flight.load(std::memory_order_relaxed)));
      sample(b_cap, pb, d(core::capacity(total, w, w_total, p.bounded())));
      proxy::Health h = b.health();
      sample(b_state, with("state", "up"), h == proxy::Health::kUp ? 1 : 0);
      sample(b_state, with("state", "down"), h == proxy::Health::kDown ? 1 : 0);
      sample(b_state, with("state", "ejected"), h == proxy::Health::kEjected ? 1 : 0);
      sample(b_w, pb, w);
      sample(b_ws, pb, w_total ? static_cast<double>(w) / static_cast<double>(w_total) : 0.0);
      sample(b_ks, pb, i < ks.size() ? ks[i] : 0.0);
      sample(b_spill, pb, d(c.spill_in.load(std::memory_order_relaxed)));
      sample(b_rx, pb, d(c.bytes_in.load(std::memory_order_relaxed)));
      sample(b_tx, pb, d(c.bytes_out.load(std::memory_order_relaxed)));
      sample(b_cerr, pb, d(c.connect_errors.load(std::memory_order_relaxed)));
      sample(b_to, pb, d(c.timeouts.load(std::memory_order_relaxed)));
      sample(b_err, pb, d(c.errors.load(std::memory_order_relaxed)));
      sample(b_retry, pb, d(c.retries.load(std::memory_order_relaxed)));
      uint64_t idle = b.idle_count();
      uint64_t open = b.open_connections;
      sample(b_conn, with("state", "idle"), d(idle));
      sample(b_conn, with("state", "busy"), d(open > idle ? open - idle : 0));
      health_check_samples(b_hc, pb, c);
      if (p.config().health.enabled) health_streak_samples(b_hcs, pb, b);
    }
    for (const auto& e : top(*pc.series)) {
      std::vector<ClientMetric::Label> l = {
          {"pool", pn}, {"hash", hex16(e.hash)}, {"key", safe_label(e.key)}};
      sample(hot, l, d(e.count));
      sample(hot_err, l, d(e.error));
    }
  }
  routing_samples(fs);
}

// Routing-quality families (docs/routing.md): why requests went where they went, and the
// hot-key replicas the workers last published.
void Metrics::Impl::routing_samples(Families& fs) {
  const auto& snap = worker.snapshot();
  auto& routed = fs.add("rondel_routed_requests_total",
                        "Routing decisions (first pick of each keyed request) by reason: home, "
                        "replica (hot key on one of its replicas), sticky (remembered spill), "
                        "spill (home full), all_full, none (no eligible backend).",
                        MetricType::Counter);
  auto& hot_n = fs.add("rondel_hot_keys_replicated",
                       "Hot keys currently spread over more than one backend.",
                       MetricType::Gauge);
  auto& hot_r = fs.add("rondel_hot_key_replicas",
                       "Backends a hot key is spread over (R), per hot key.", MetricType::Gauge);
  if (!snap) return;
  for (const auto& p : snap->pools()) {
    const auto& st = p->state();
    const std::string& pn = p->name();
    for (size_t r = 0; r < proxy::kRouteReasons; ++r) {
      sample(routed, {{"pool", pn},
                      {"reason", std::string(proxy::route_reason_name(
                                     static_cast<core::RouteReason>(r)))}},
             d(st.routed[r].load(std::memory_order_relaxed)));
    }
    std::lock_guard<std::mutex> lock(st.hot_mu);
    sample(hot_n, {{"pool", pn}}, d(st.hot.size()));
    for (const auto& h : st.hot) {
      sample(hot_r, {{"pool", pn}, {"hash", hex16(h.hash)}, {"key", safe_label(h.key)}},
             d(h.replicas));
    }
  }
}

Metrics::Metrics(Daemon& daemon) : impl_(std::make_unique<Impl>(daemon)) {}

Metrics::~Metrics() = default;

void Metrics::on_exchange(void* ctx, const proxy::ExchangeRecord& rec) noexcept {
  if (ctx == nullptr || rec.pool == nullptr) return;
  try {
    Impl& impl = *static_cast<Metrics*>(ctx)->impl_;
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.on_exchange(rec);
  } catch (...) {
    // Only allocation can throw here (a new series); losing one observation is acceptable.
  }
}

void Metrics::set_snapshot(std::shared_ptr<const proxy::Snapshot> snap) {
  std::shared_ptr<const proxy::Snapshot> old;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    old = std::move(impl_->snap);
    impl_->snap = std::move(snap);
    impl_->refresh();
  }
  // `old` (maybe the last reference to a snapshot) is released outside the lock.
}

std::string Metrics::serialize() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->refresh();
  Families fs;
  impl_->collect_state(fs);
  std::vector<MetricFamily> all = impl_->registry->Collect();
  all.insert(all.end(), std::make_move_iterator(fs.list.begin()),
             std::make_move_iterator(fs.list.end()));
  return prometheus::TextSerializer().Serialize(all);
}

std::vector<core::HotKeys::Entry> Metrics::hot_keys(std::string_view pool) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->refresh();
  auto it = impl_->pools.find(pool);
  if (it == impl_->pools.end()) return {};
  return impl_->top(*it->second);
}

const std::vector<double>& Metrics::key_shares(const proxy::Pool& pool) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->refresh();
  Impl::PoolCache* pc = impl_->find_cache(&pool);
  if (pc == nullptr) return impl_->empty_shares;
  return impl_->shares(*pc);
}

std::vector<Metrics::SpillPair> Metrics::spill_pairs(std::string_view pool) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->refresh();
  std::vector<SpillPair> out;
  auto it = impl_->pools.find(pool);
  if (it == impl_->pools.end()) return out;
  for (const auto& [key, c] : it->second->pairs) {
    out.push_back({key.first, key.second, static_cast<uint64_t>(c->Value())});
  }
  return out;
}

}  // namespace rondel::server
