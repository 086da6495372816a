// Admin endpoint: the route table and the small views (/healthz, /readyz,
// /metrics, /ui, /api/route, POST /api/diff); the connection is in admin_conn.cpp, /api/pools
// and /api/ring in admin_views.cpp, the metrics in metrics.cpp, and the /ui page is compiled in
// from src/server/ui/index.html.
#include "rondel/server/admin.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "admin_json.h"
#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/http/parser.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/load_report.h"
#include "rondel/proxy/router.h"
#include "rondel/util/json_writer.h"
#include "rondel/config/loader.h"
#include "rondel/server/config_diff.h"
#include "rondel/server/daemon.h"
#include "rondel/server/metrics.h"

namespace rondel::server {

// The /ui page, generated at build time (see src/server/CMakeLists.txt).
extern const std::string_view kUiIndexHtml;

namespace admin_detail {

namespace {
int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

namespace {
// %XX decoded (an invalid escape kept as is); '+' a space when `plus_is_space`.
std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_is_space && s[i] == '+' ? ' ' : s[i];
  }
  return out;
}
}  // namespace

std::string url_decode(std::string_view s) { return percent_decode(s, true); }
std::string path_decode(std::string_view s) { return percent_decode(s, false); }

}  // namespace admin_detail

namespace {

using admin_detail::health_name;
using admin_detail::json_string;
using admin_detail::json_uint;
using admin_detail::url_decode;

constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kPrometheus = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kHtml = "text/html; charset=utf-8";
// Paths below this one name a pool's backend (admin_ops.cpp); /api/pools itself is a view.
constexpr std::string_view kBackendPathPrefix = "/api/pools/";

}  // namespace

// Where each admin path goes; handle() walks this table.
struct Admin::Route {
  std::string_view path;
  std::string_view content_type;
  int (Admin::*serve)(std::string_view query, std::string& body);
};

void Admin::handle(std::string_view method, std::string_view target, int& status,
                   std::string& ctype, std::string& body) {
  AdminResponse res;
  handle(AdminRequest{method, target, {}, {}}, res);
  status = res.status;
  ctype = std::move(res.content_type);
  body = std::move(res.body);
}

void Admin::handle(const AdminRequest& req, AdminResponse& res) {
  static constexpr Route kRoutes[] = {
      {"/healthz", kText, &Admin::serve_healthz},
      {"/readyz", kText, &Admin::serve_readyz},
      {"/metrics", kPrometheus, &Admin::serve_metrics},
      {"/api/pools", kJson, &Admin::serve_pools},
      {"/api/route", kJson, &Admin::serve_route},
      {"/api/ring", kJson, &Admin::serve_ring},
      {"/api/certificates", kJson, &Admin::serve_certificates},
      {"/api/fleet", kJson, &Admin::serve_fleet},
      {"/api/fleet/record", kJson, &Admin::serve_fleet_record},
      {"/api/fleet/load", kJson, &Admin::serve_fleet_load},
      {"/ui", kHtml, &Admin::serve_ui},
      {"/ui/", kHtml, &Admin::serve_ui},
  };
  const std::string_view target = req.target;
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
  res.content_type = kText;
  if (!daemon_.snapshot()) {
    res.status = 503;
    res.body = "shutting down\n";
    return;
  }
  if (path.starts_with(kBackendPathPrefix)) {
    serve_backend(req, path, res);
    return;
  }
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (r.path == path) route = &r;
  }
  if (route == nullptr) {
    res.status = 404;
    res.body = "not found\n";
    return;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.body = "method not allowed\n";
    res.headers = "Allow: GET, HEAD\r\n";
    return;
  }
  res.content_type = route->content_type;
  res.status = (this->*route->serve)(query, res.body);
}

bool Admin::accepts_post(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/api/diff" || path == "/api/route";
}

void Admin::handle_post(std::string_view target, std::string_view request_body, int& status,
                        std::string& ctype, std::string& body) {
  ctype = kJson;
  const auto snap = daemon_.snapshot();
  if (!snap) {
    status = 503;
    ctype = kText;
    body = "shutting down\n";
    return;
  }
  const std::string_view path = target.substr(0, target.find('?'));
  if (path == "/api/route") {
    const std::string_view query =
        target.size() > path.size() ? target.substr(path.size() + 1) : std::string_view();
    status = api_route_body(query, request_body, body);
    return;
  }
  config::LoadResult lr = config::load_string(request_body, "(posted)");
  util::JsonWriter w;
  if (!lr.ok()) {
    status = 400;
    w.begin();
    w.begin_array("errors");
    for (const auto& e : lr.errors) w.value(e.to_string());
    w.end_array();
    w.end();
    body = w.str() + "\n";
    return;
  }
  auto diffs = diff_configs(snap->config(), lr.config);
  if (!diffs) {
    status = 400;
    w.begin();
    w.begin_array("errors");
    w.value(diffs.error().message);
    w.end_array();
    w.end();
    body = w.str() + "\n";
    return;
  }
  status = 200;
  body = diff_json(*diffs);
}

int Admin::serve_healthz(std::string_view, std::string& body) {
  body = "ok\n";
  return 200;
}

// Ready: a configuration is loaded, the daemon is not draining and every pool has a backend up
// with weight > 0.
int Admin::serve_readyz(std::string_view, std::string& body) {
  const auto& snap = daemon_.snapshot();
  bool ready = snap != nullptr && !daemon_.draining();
  if (ready) {
    for (const auto& p : snap->pools()) {
      bool any = false;
      for (size_t i = 0; i < p->size(); ++i) {
        any |= p->backend(static_cast<core::BackendIndex>(i)).usable() &&
               p->set()[static_cast<core::BackendIndex>(i)].weight > 0;
      }
      ready &= any;
    }
  }
  body = ready ? "ready\n" : "not ready\n";
  return ready ? 200 : 503;
}

int Admin::serve_metrics(std::string_view, std::string& body) {
  metrics(body);
  return 200;
}

int Admin::serve_pools(std::string_view, std::string& body) {
  api_pools(body);
  return 200;
}

int Admin::serve_route(std::string_view query, std::string& body) {
  return api_route(query, body) ? 200 : 400;
}

int Admin::serve_ring(std::string_view query, std::string& body) {
  return api_ring(query, body) ? 200 : 400;
}

int Admin::serve_ui(std::string_view, std::string& body) {
  body = kUiIndexHtml;
  return 200;
}

namespace {

// The explain API's sentence for a decision (kept from earlier versions: tools read it).
std::string route_sentence(const proxy::RouteDecision& d) {
  if (d.backend == core::kNoBackend) return "no usable backend";
  if (d.backend == d.owner) return "natural owner has room";
  if (d.all_full) return "every usable backend is at capacity: least loaded chosen";
  if (d.reason == core::RouteReason::kReplica) return "hot key: served by one of its replicas";
  return "owner skipped (" + std::to_string(d.skipped_full) + " full, " +
         std::to_string(d.skipped_excluded) + " down): first backend with room in preference order";
}

// The `range` parameter of /api/route (bytes=A-B, or A-B): the chunk a request with that Range
// header would be placed by under `range_chunk`; `hash` becomes the chunk's hash.
struct RangeQuery {
  std::string range;  // "" without the parameter
  uint64_t chunk = 0;
  bool chunked = false;
};
RangeQuery range_query(const proxy::Pool& p, std::string_view target, uint64_t& hash) {
  RangeQuery q;
  std::string_view raw;
  if (!proxy::find_query_param(target, "range", raw) || raw.empty()) return q;
  q.range = url_decode(raw);
  if (q.range.find('=') == std::string::npos) q.range.insert(0, "bytes=");
  q.chunked = p.config().range_chunk > 0 &&
              proxy::range_chunk_index(q.range, p.config().range_chunk, q.chunk);
  if (q.chunked) hash = proxy::chunk_hash(hash, q.chunk);
  return q;
}

// The subset of /api/route: the one a request with the `listener`, `path` and
// `header=NAME:VALUE` parameters would be selected into (Pool::select_subset).
uint8_t subset_query(const proxy::Pool& p, std::string_view target) {
  if (p.subset_count() == 0) return proxy::Pool::kNoSubset;
  std::string_view raw;
  std::string listener, path = "/", header;
  if (proxy::find_query_param(target, "listener", raw)) listener = url_decode(raw);
  if (proxy::find_query_param(target, "path", raw) && !raw.empty()) path = url_decode(raw);
  if (proxy::find_query_param(target, "header", raw)) header = url_decode(raw);
  const size_t colon = header.find(':');
  http::Header h;
  if (colon != std::string::npos) {
    h.name = std::string_view(header).substr(0, colon);
    h.value = std::string_view(header).substr(colon + 1);
    while (!h.value.empty() && h.value.front() == ' ') h.value.remove_prefix(1);
  }
  http::RequestHead head;
  head.target = path;
  head.headers = std::span<const http::Header>(&h, colon != std::string::npos ? 1 : 0);
  return p.select_subset(listener, head);
}

// The subset used ("" for the whole pool), its required labels and its member count.
void write_subset(util::JsonWriter& w, const proxy::Pool& p, uint8_t s) {
  if (p.subset_count() == 0) return;
  w.field("subset", s == proxy::Pool::kNoSubset ? std::string() : p.subset_counters(s).name);
  if (s == proxy::Pool::kNoSubset) return;
  w.begin_array("require");
  for (const std::string& l : p.config().subsets[s].require) w.value(l);
  w.end_array();
  w.field("subset_members", uint64_t{p.subset(s).size()});
}

// The bound's totals, in-flight and weight, over the pool or (a subset) over its members.
void bound_totals(const proxy::Pool& p, uint8_t s, uint64_t& in_flight, uint64_t& weight) {
  in_flight = p.state().total_in_flight.load();
  weight = p.set().total_weight();
  if (s == proxy::Pool::kNoSubset) return;
  in_flight = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const auto b = static_cast<core::BackendIndex>(i);
    if (p.subset(s).contains(b)) in_flight += p.backend(b).in_flight.load();
  }
  weight = p.subset(s).total_weight();
}

// The key's count in the pool's hot-key window (0 if not hot); `window_total` gets the window's.
uint64_t hot_count_of(const proxy::Pool& p, uint64_t hash, uint64_t& window_total) {
  const auto& ps = p.state();
  std::lock_guard<std::mutex> lock(ps.hot_mu);
  window_total = ps.hot_window_total;
  uint64_t count = 0;
  for (const auto& h : ps.hot) {
    if (h.hash == hash) count = h.count;
  }
  return count;
}

// The key's preference order with each backend's state, in-flight count and capacity.
void write_preference(util::JsonWriter& w, const proxy::Pool& p,
                      std::span<const core::BackendIndex> order, uint64_t total, uint64_t w_total) {
  // The load the bound compares (proxy::effective_load_of on uv_now's clock): in_flight
  // itself unless reports, a fleet's N or the members' shared counts say more.
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
  w.begin_array("preference");
  for (core::BackendIndex i : order) {
    const auto& b = p.backend(i);
    w.begin();
    w.field("id", b.id());
    w.field("state", health_name(b.health()));
    w.field("in_flight", uint64_t{b.in_flight.load()});
    w.field("load", uint64_t{proxy::reads_fleet_loads(p)
                                 ? proxy::effective_load_of(p, i, static_cast<uint64_t>(now.count()))
                                 : b.in_flight.load()});
    w.field("capacity", core::capacity(total, p.set()[i].weight, w_total, p.bounded()));
    w.end();
  }
  w.end_array();
}

}  // namespace

// One answer, the data path's: Router::explain runs the pick a new request for the key would
// get now (scratch spill memory, R from the workers' published replica table). `chosen` and
// `decision_backend` name the same backend (both kept for existing readers).
bool Admin::api_route(std::string_view query, std::string& out) {
  std::string_view pool_name, key_raw;
  std::string target = "/?";
  target += query;
  bool has_pool = proxy::find_query_param(target, "pool", pool_name);
  bool has_key = proxy::find_query_param(target, "key", key_raw);
  const auto& snap = daemon_.snapshot();
  const proxy::Pool* p = has_pool ? snap->find_pool(url_decode(pool_name)) : nullptr;
  if (p == nullptr || !has_key) {
    out = "{\"error\":\"usage: /api/route?pool=NAME&key=KEY[&range=bytes=A-B][&listener=L][&path=P][&header=NAME:VALUE]\"}\n";
    return false;
  }
  const std::string key = url_decode(key_raw);
  uint64_t hash = core::hash64(key);
  const RangeQuery rq = range_query(*p, target, hash);
  const std::string& range = rq.range;
  const uint8_t subset = subset_query(*p, target);
  const proxy::RouteDecision d = proxy::Router::explain(*p, hash, subset);
  const proxy::LastDecision last = proxy::Router::last_decision(*p, hash);
  auto id_of = [p](core::BackendIndex b) -> std::string_view {
    return b != core::kNoBackend ? std::string_view(p->backend(b).id()) : std::string_view();
  };
  std::vector<core::BackendIndex> order(p->size());
  size_t n = p->selector(d.placement).preference(p->placement_hash(d.placement, hash), order);
  if (subset != proxy::Pool::kNoSubset) {  // the subset's preference order: its members only
    n = static_cast<size_t>(std::remove_if(order.begin(), order.begin() + static_cast<long>(n),
                                           [&](auto b) { return !p->subset(subset).contains(b); }) -
                            order.begin());
  }
  uint64_t total = 0, w_total = 0;
  bound_totals(*p, subset, total, w_total);
  uint64_t hot_total = 0;
  const uint64_t hot_count = hot_count_of(*p, hash, hot_total);
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  util::JsonWriter w;
  w.begin();
  w.field("pool", p->name());
  w.field("key", key);
  w.field("hash", hex);
  if (!range.empty()) {
    w.field("range", range);
    w.field("range_chunk", p->config().range_chunk);
    w.field("chunk", rq.chunked ? std::to_string(rq.chunk) : std::string());  // "": hashed whole
  }
  w.field("owner", id_of(d.owner));
  write_subset(w, *p, subset);
  if (p->has_previous()) {
    // Gradual migration: the key's home under each placement, and which one applied.
    auto home_in = [p, hash](core::PlacementVersion v) {
      return p->selector(v).owner(p->placement_hash(v, hash));
    };
    w.field("placement", proxy::placement_name(d.placement));
    w.field("migrate_percent", uint64_t{p->config().migrate_percent});
    w.field("current_home", id_of(home_in(core::PlacementVersion::kCurrent)));
    w.field("previous_home", id_of(home_in(core::PlacementVersion::kPrevious)));
  }
  w.field("total_in_flight", total);
  write_preference(w, *p, std::span<const core::BackendIndex>(order.data(), n), total, w_total);
  w.field("chosen", id_of(d.backend));
  w.field("skipped_full", uint64_t{d.skipped_full});
  w.field("skipped_down", uint64_t{d.skipped_excluded});
  w.field("all_full", d.all_full);
  w.field("reason", route_sentence(d));
  w.field("decision", proxy::route_reason_name(d.reason));
  w.field("decision_backend", id_of(d.backend));
  w.field("home", id_of(d.home));
  w.field("replicas", uint64_t{d.replicas});
  w.field("hot_count", hot_count);
  w.field("hot_window_total", hot_total);
  w.field("last_decision", last.found ? proxy::route_reason_name(last.reason) : "");
  w.field("last_backend", last.found ? id_of(last.backend) : "");
  w.end();
  out = w.str();
  out += '\n';
  return true;
}

void Admin::metrics(std::string& out) {
  Metrics* m = daemon_.metrics();
  out = m != nullptr ? m->serialize() : std::string();
}

}  // namespace rondel::server
