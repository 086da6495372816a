// The admin JSON views of pools and rings (/api/pools, /api/ring), written with the one JSON
// writer; field names and shapes are what src/server/ui/index.html and the tests read.
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

#include "admin_json.h"
#include "rondel/core/bounded.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/server/admin.h"

#include "fleet.h"
#include "fleet_hot.h"
#include "fleet_load.h"
#include "rondel/server/admin_states.h"
#include "rondel/server/daemon.h"
#include "rondel/server/metrics.h"

namespace rondel::server {

namespace {

using admin_detail::algorithm_name;
using admin_detail::agent_object;
using admin_detail::health_name;
using util::JsonWriter;

// Most arcs /api/ring returns; bigger rings are resampled into this many equal slots.
constexpr size_t kMaxRingArcs = 2048;

std::string hex16(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// The pool's own settings and counters.
void pool_fields(JsonWriter& j, const proxy::Pool& p) {
  const auto& cfg = p.config();
  const auto& st = p.state();
  j.field("name", p.name());
  j.field("algorithm", algorithm_name(cfg.algorithm));
  j.field("fingerprint", hex16(p.placement_fingerprint()));
  j.field("balance_factor", cfg.balance_factor);
  j.field("total_in_flight", st.total_in_flight.load());
  j.field("requests", st.requests.load());
  j.field("spilled", st.spilled.load());
  j.field("all_full", st.all_full.load());
  j.field("capacity_slack", cfg.capacity_slack);
  j.field("spill_memory", cfg.spill_memory);
  j.field("spill_hysteresis", cfg.spill_hysteresis);
  j.field("hot_share", cfg.hot_keys.share);
  j.begin("routed");
  for (size_t r = 0; r < proxy::kRouteReasons; ++r) {
    j.field(proxy::route_reason_name(static_cast<core::RouteReason>(r)),
            st.routed[r].load(std::memory_order_relaxed));
  }
  j.end();
  j.begin_array("hot_replicas");
  {
    std::lock_guard<std::mutex> lock(st.hot_mu);
    for (const auto& h : st.hot) {
      j.begin();
      j.field("key", h.key);
      j.field("count", h.count);
      j.field("replicas", h.replicas);
      j.end();
    }
  }
  j.end_array();
  j.field("ring_points", p.selector().points());
  j.field("ring_bytes", p.selector().memory_bytes());
}

// One element of the pool's "backends" array.
void backend_object(JsonWriter& j, const proxy::Pool& p, core::BackendIndex idx,
                    const std::vector<double>& shares) {
  const auto& b = p.backend(idx);
  uint32_t w = p.set()[idx].weight;
  uint64_t w_total = p.set().total_weight();
  uint64_t total = p.state().total_in_flight.load();
  j.begin();
  j.field("id", b.id());
  j.field("address", b.addr_text());
  j.field("weight", w);
  j.field("state", health_name(b.health()));
  j.field("admin_state", admin_state_name(b.admin_state()));
  j.begin_array("labels");  // config `labels` (subsets)
  for (const std::string& l : p.config().backends[idx].labels) j.value(l);
  j.end_array();
  j.field("in_flight", b.in_flight.load());
  j.field("capacity", core::capacity(total, w, w_total, p.bounded()));
  j.field("key_share", idx < shares.size() ? shares[idx] : 0.0);
  j.field("weight_share", w_total ? static_cast<double>(w) / static_cast<double>(w_total) : 0.0);
  j.field("requests", b.counters.requests.load());
  j.field("spill_in", b.counters.spill_in.load());
  j.field("connect_errors", b.counters.connect_errors.load());
  j.field("open_connections", b.open_connections.load());
  j.field("idle_connections", b.idle_count());
  // The weight the bound uses now (slow start, the agent's percentage), in weight units.
  j.field("effective_weight", static_cast<double>(p.effective_weight(idx)) /
                                  static_cast<double>(proxy::Pool::kWeightScale));
  const config::PoolConfig& pc = p.config();
  agent_object(j, b,
               config::resolve_agent_check(pc.agent_check, idx < pc.backends.size()
                                                               ? pc.backends[idx].agent
                                                               : config::AgentCheckOverride{})
                   .enabled);
  j.end();
}

// The hot keys and spill pairs the metrics keep for the pool.
void metrics_fields(JsonWriter& j, Metrics& met, const std::string& pool) {
  j.begin_array("hot_keys");
  for (const auto& e : met.hot_keys(pool)) {
    j.begin();
    j.field("hash", hex16(e.hash));
    j.field("key", e.key);
    j.field("count", e.count);
    j.field("error", e.error);
    j.end();
  }
  j.end_array();
  j.begin_array("spill_pairs");
  for (const auto& sp : met.spill_pairs(pool)) {
    j.begin();
    j.field("owner", sp.owner);
    j.field("backend", sp.backend);
    j.field("count", sp.count);
    j.end();
  }
  j.end_array();
}

using Runs = std::vector<std::pair<uint64_t, core::BackendIndex>>;

void push_run(Runs& runs, uint64_t start, core::BackendIndex owner) {
  if (!runs.empty() && runs.back().second == owner) return;
  runs.emplace_back(start, owner);
}

// A ring's arcs: exact when it has at most kMaxRingArcs runs of one owner, else resampled into
// kMaxRingArcs equal slots (each slot takes the owner of its midpoint). Sets `exact`.
Runs ring_runs(const core::Ring& ring, bool& exact) {
  Runs runs;
  auto pos = ring.positions();
  auto own = ring.owners();
  // Keys whose top 32 bits are in (pos[j-1], pos[j]] belong to point j; [0, pos[0]] and
  // (pos[P-1], 2^32) to point 0.
  push_run(runs, 0, own[0]);
  for (size_t j = 1; j < pos.size(); ++j) push_run(runs, uint64_t{pos[j - 1]} + 1, own[j]);
  if (uint64_t{pos.back()} + 1 < (uint64_t{1} << 32)) {
    push_run(runs, uint64_t{pos.back()} + 1, own[0]);
  }
  exact = runs.size() <= kMaxRingArcs;
  if (exact) return runs;
  Runs all = std::move(runs);
  runs.clear();
  size_t r = 0;
  for (size_t s = 0; s < kMaxRingArcs; ++s) {
    uint64_t start = (uint64_t{s} << 32) / kMaxRingArcs;
    uint64_t mid = ((2 * uint64_t{s} + 1) << 31) / kMaxRingArcs;
    while (r + 1 < all.size() && all[r + 1].first <= mid) ++r;
    push_run(runs, start, all[r].second);
  }
  return runs;
}

// Rendezvous and Maglev have no circle: one arc per backend, sized by its key share.
Runs share_runs(const std::vector<double>& shares) {
  Runs runs;
  double acc = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    if (shares[i] <= 0) continue;
    runs.emplace_back(static_cast<uint64_t>(acc * 4294967296.0),
                      static_cast<core::BackendIndex>(i));
    acc += shares[i];
  }
  return runs;
}

}  // namespace

void Admin::api_pools(std::string& out) {
  const auto& snap = daemon_.snapshot();
  Metrics* met = daemon_.metrics();
  JsonWriter j;
  j.begin();
  j.field("generation", snap ? snap->generation() : 0);
  j.begin_array("pools");
  for (const auto& p : snap->pools()) {
    j.begin();
    pool_fields(j, *p);
    std::vector<double> computed;
    if (met == nullptr) computed = p->selector().key_shares();
    const std::vector<double>& shares = met != nullptr ? met->key_shares(*p) : computed;
    j.begin_array("backends");
    for (size_t i = 0; i < p->size(); ++i) {
      backend_object(j, *p, static_cast<core::BackendIndex>(i), shares);
    }
    j.end_array();
    if (met != nullptr) metrics_fields(j, *met, p->name());
    j.end();
  }
  j.end_array();
  j.end();
  j.newline();
  out = j.take();
}

// Arcs of the pool's placement as [start, backend index] pairs in ascending start order over
// the 32-bit circle; an arc ends where the next begins (the last at 2^32). See ring_runs and
// share_runs for how rings and the other algorithms are drawn.
bool Admin::api_ring(std::string_view query, std::string& out) {
  std::string_view pool_name;
  std::string target = "/?";
  target += query;
  const auto& snap = daemon_.snapshot();
  const proxy::Pool* p = nullptr;
  if (proxy::find_query_param(target, "pool", pool_name)) {
    p = snap->find_pool(admin_detail::url_decode(pool_name));
  } else if (!snap->pools().empty()) {
    p = snap->pools().front().get();
  }
  if (p == nullptr) {
    out = "{\"error\":\"usage: /api/ring?pool=NAME\"}\n";
    return false;
  }
  bool exact = false;
  const core::Ring* ring = p->selector().ring();
  Runs runs;
  if (ring != nullptr && ring->points() > 0) {
    runs = ring_runs(*ring, exact);
  } else if (Metrics* met = daemon_.metrics()) {
    runs = share_runs(met->key_shares(*p));
  } else {
    runs = share_runs(p->selector().key_shares());
  }
  JsonWriter j;
  j.begin();
  j.field("pool", p->name());
  j.field("generation", snap->generation());
  j.field("algorithm", algorithm_name(p->config().algorithm));
  j.field("points", p->selector().points());
  j.field("exact", exact);
  j.begin_array("backends");
  for (size_t i = 0; i < p->size(); ++i) {
    j.value(p->backend(static_cast<core::BackendIndex>(i)).id());
  }
  j.end_array();
  j.begin_array("arcs");
  for (const auto& [start, owner] : runs) {
    j.begin_array();
    j.value(start);
    j.value(owner);
    j.end_array();
  }
  j.end_array();
  j.end();
  j.newline();
  out = j.take();
  return true;
}

int Admin::serve_fleet_record(std::string_view, std::string& out) {
  const Fleet* fleet = daemon_.fleet();
  if (fleet == nullptr) {
    out = "{\"error\":\"no fleet configured\"}";
    return 404;
  }
  out = fleet->record();
  return 200;
}

int Admin::serve_fleet_load(std::string_view, std::string& out) {
  const Fleet* fleet = daemon_.fleet();
  const auto& snap = daemon_.snapshot();
  if (fleet == nullptr || !snap) {
    out = "{\"error\":\"no fleet configured\"}";
    return 404;
  }
  out = FleetLoad::load_json(fleet->id(), *snap);
  return 200;
}

int Admin::serve_fleet(std::string_view, std::string& out) {
  const Fleet* fleet = daemon_.fleet();
  if (fleet == nullptr) {
    out = "{\"error\":\"no fleet configured\"}";
    return 404;
  }
  const FleetHot* hot = daemon_.fleet_hot();
  const FleetLoad* load = daemon_.fleet_load();
  out = fleet->json([hot, load](util::JsonWriter& w) {
    if (hot != nullptr) hot->write_json(w);
    if (load != nullptr) load->write_json(w);
  });
  return 200;
}

int Admin::serve_certificates(std::string_view, std::string& out) {
  const auto& snap = daemon_.snapshot();
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  JsonWriter j;
  j.begin();
  j.field("generation", snap->generation());
  j.begin_array("listeners");
  const auto& ls = snap->config().listeners;
  for (size_t i = 0; i < ls.size(); ++i) {
    const auto& ctx = snap->tls_contexts()[i];
    if (!ctx) continue;
    j.begin();
    j.field("listener", ls[i].name);
    j.begin_array("certificates");
    for (const auto& c : ctx->certificates()) {
      j.begin();
      j.field("subject", c.subject);
      j.begin_array("names");
      for (const auto& n : c.names) j.value(n);
      j.end_array();
      j.field("not_before", c.not_before_unix);
      j.field("not_after", c.not_after_unix);
      j.field("expires_in_days", (c.not_after_unix - now) / 86400);
      j.end();
    }
    j.end_array();
    j.end();
  }
  j.end_array();
  j.end();
  j.newline();
  out = j.take();
  return 200;
}

}  // namespace rondel::server
