// Admin endpoint: /healthz, /readyz, /metrics, /api/pools, /api/route, /api/ring and the /ui
// page (metrics come from metrics.cpp; the page is compiled in from src/server/ui/index.html).
#include "rondel/server/admin.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/http/parser.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/router.h"
#include "rondel/util/json_writer.h"
#include "rondel/server/daemon.h"
#include "rondel/server/metrics.h"

namespace rondel::server {

// The /ui page, generated at build time (see src/server/CMakeLists.txt).
extern const std::string_view kUiIndexHtml;

namespace {

constexpr size_t kMaxAdminRequest = 16 * 1024;
// Most arcs /api/ring returns; bigger rings are resampled into this many equal slots.
constexpr size_t kMaxRingArcs = 2048;

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void json_num(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  out += buf;
}

void json_uint(std::string& out, uint64_t v) { out += std::to_string(v); }

std::string_view algorithm_name(config::Algorithm a) {
  switch (a) {
    case config::Algorithm::kRing: return "ring";
    case config::Algorithm::kRendezvous: return "rendezvous";
    case config::Algorithm::kMaglev: return "maglev";
  }
  return "?";
}

std::string_view health_name(proxy::Health h) {
  switch (h) {
    case proxy::Health::kUp: return "up";
    case proxy::Health::kDown: return "down";
    case proxy::Health::kEjected: return "ejected";
  }
  return "?";
}

// Decodes %XX and '+' in a query value.
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
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
    out += s[i] == '+' ? ' ' : s[i];
  }
  return out;
}

// One admin connection: reads one request, answers it, closes.
class AdminConn final : public net::HandleCloser {
 public:
  AdminConn(Admin& admin) : admin_(admin), parser_(http::Limits{}) {}
  uv_tcp_t tcp{};
  uv_write_t write_req{};

  void start() {
    tcp.data = this;
    write_req.data = this;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp), &on_alloc, &on_read);
  }

 private:
  void on_all_closed() noexcept override { delete this; }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
    auto* c = static_cast<AdminConn*>(h->data);
    *buf = uv_buf_init(c->rbuf_, sizeof c->rbuf_);
  }

  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) noexcept {
    auto* c = static_cast<AdminConn*>(s->data);
    if (n < 0) {
      c->close_handle(reinterpret_cast<uv_handle_t*>(&c->tcp));
      return;
    }
    c->received_ += static_cast<size_t>(n);
    const char* p = buf->base;
    size_t len = static_cast<size_t>(n);
    while (len > 0 && !c->answered_) {
      http::Step st = c->parser_.feed(p, len);
      p += st.consumed;
      len -= st.consumed;
      if (st.event == http::Event::kError) {
        c->respond(c->parser_.error().status, "text/plain", "bad request\n");
        return;
      }
      if (st.event == http::Event::kHead) {
        const auto& h = c->parser_.head();
        int status = 200;
        std::string ctype, body;
        c->admin_.handle(h.method, h.target, status, ctype, body);
        c->respond(status, ctype, body, h.method == "HEAD");
        return;
      }
      if (st.event == http::Event::kNeedMore) break;
    }
    if (c->received_ > kMaxAdminRequest) c->respond(431, "text/plain", "request too large\n");
  }

  void respond(int status, std::string_view ctype, std::string_view body, bool head_only = false) {
    answered_ = true;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp));
    const char* reason = status == 200 ? "OK" : status == 404 ? "Not Found"
                       : status == 405 ? "Method Not Allowed" : status == 503 ? "Service Unavailable"
                       : status == 400 ? "Bad Request" : "Error";
    out_ = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " +
           std::string(ctype) + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    if (!head_only) out_ += body;
    uv_buf_t b = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
    if (uv_write(&write_req, reinterpret_cast<uv_stream_t*>(&tcp), &b, 1, &on_written) != 0) {
      close_handle(reinterpret_cast<uv_handle_t*>(&tcp));
    }
  }

  static void on_written(uv_write_t* req, int) noexcept {
    auto* c = static_cast<AdminConn*>(req->data);
    c->close_handle(reinterpret_cast<uv_handle_t*>(&c->tcp));
  }

  Admin& admin_;
  http::RequestParser parser_;
  char rbuf_[4096];
  size_t received_ = 0;
  bool answered_ = false;
  std::string out_;
};

}  // namespace

Admin::~Admin() { close(); }

core::Result<bool> Admin::open(const config::Address& bind) {
  auto l = net::TcpListener::open(daemon_.loop(), bind.host, bind.port, false, 128,
                                  [this](uv_stream_t* server) {
                                    auto* c = new AdminConn(*this);
                                    uv_tcp_init(daemon_.loop(), &c->tcp);
                                    c->tcp.data = c;
                                    if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
                                      c->close_handle(reinterpret_cast<uv_handle_t*>(&c->tcp));
                                      return;
                                    }
                                    c->start();
                                  });
  if (!l) return l.error();
  listener_ = *l;
  return true;
}

void Admin::close() noexcept {
  if (listener_ != nullptr) {
    listener_->close();
    listener_ = nullptr;
  }
}

void Admin::handle(std::string_view method, std::string_view target, int& status,
                   std::string& ctype, std::string& body) {
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
  ctype = "text/plain; charset=utf-8";
  if (!daemon_.snapshot()) {
    status = 503;
    body = "shutting down\n";
    return;
  }
  bool known = path == "/healthz" || path == "/readyz" || path == "/metrics" ||
               path == "/api/pools" || path == "/api/route" || path == "/api/ring" ||
               path == "/ui" || path == "/ui/";
  if (!known) {
    status = 404;
    body = "not found\n";
    return;
  }
  if (method != "GET" && method != "HEAD") {
    status = 405;
    body = "method not allowed\n";
    return;
  }
  status = 200;
  if (path == "/healthz") {
    body = "ok\n";
  } else if (path == "/readyz") {
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
    status = ready ? 200 : 503;
    body = ready ? "ready\n" : "not ready\n";
  } else if (path == "/metrics") {
    ctype = "text/plain; version=0.0.4; charset=utf-8";
    metrics(body);
  } else if (path == "/api/pools") {
    ctype = "application/json";
    api_pools(body);
  } else if (path == "/api/ring") {
    ctype = "application/json";
    if (!api_ring(query, body)) status = 400;
  } else if (path == "/ui" || path == "/ui/") {
    ctype = "text/html; charset=utf-8";
    body = kUiIndexHtml;
  } else {
    ctype = "application/json";
    if (!api_route(query, body)) status = 400;
  }
}

void Admin::api_pools(std::string& out) {
  const auto& snap = daemon_.snapshot();
  Metrics* met = daemon_.metrics();
  out = "{\"generation\":";
  json_uint(out, snap ? snap->generation() : 0);
  out += ",\"pools\":[";
  bool first_pool = true;
  for (const auto& p : snap->pools()) {
    if (!first_pool) out += ',';
    first_pool = false;
    const auto& cfg = p->config();
    const auto& st = p->state();
    out += "{\"name\":";
    json_string(out, p->name());
    out += ",\"algorithm\":";
    json_string(out, algorithm_name(cfg.algorithm));
    out += ",\"balance_factor\":";
    json_uint(out, cfg.balance_factor);
    out += ",\"total_in_flight\":";
    json_uint(out, st.total_in_flight.load());
    out += ",\"requests\":";
    json_uint(out, st.requests.load());
    out += ",\"spilled\":";
    json_uint(out, st.spilled.load());
    out += ",\"all_full\":";
    json_uint(out, st.all_full.load());
    out += ",\"capacity_slack\":";
    json_uint(out, cfg.capacity_slack);
    out += ",\"spill_memory\":";
    json_uint(out, cfg.spill_memory);
    out += ",\"spill_hysteresis\":";
    json_uint(out, cfg.spill_hysteresis);
    out += ",\"hot_share\":";
    json_uint(out, cfg.hot_keys.share);
    out += ",\"routed\":{";
    for (size_t r = 0; r < proxy::kRouteReasons; ++r) {
      if (r > 0) out += ',';
      json_string(out, proxy::route_reason_name(static_cast<core::RouteReason>(r)));
      out += ':';
      json_uint(out, st.routed[r].load(std::memory_order_relaxed));
    }
    out += "},\"hot_replicas\":[";
    {
      std::lock_guard<std::mutex> lock(st.hot_mu);
      for (size_t h = 0; h < st.hot.size(); ++h) {
        if (h > 0) out += ',';
        out += "{\"key\":";
        json_string(out, st.hot[h].key);
        out += ",\"count\":";
        json_uint(out, st.hot[h].count);
        out += ",\"replicas\":";
        json_uint(out, st.hot[h].replicas);
        out += '}';
      }
    }
    out += ']';
    out += ",\"ring_points\":";
    json_uint(out, p->selector().points());
    out += ",\"ring_bytes\":";
    json_uint(out, p->selector().memory_bytes());
    out += ",\"backends\":[";
    std::vector<double> computed;
    if (met == nullptr) computed = p->selector().key_shares();
    const std::vector<double>& shares = met != nullptr ? met->key_shares(*p) : computed;
    uint64_t total = st.total_in_flight.load();
    uint64_t w_total = p->set().total_weight();
    for (size_t i = 0; i < p->size(); ++i) {
      auto idx = static_cast<core::BackendIndex>(i);
      const auto& b = p->backend(idx);
      uint32_t w = p->set()[idx].weight;
      if (i > 0) out += ',';
      out += "{\"id\":";
      json_string(out, b.id());
      out += ",\"address\":";
      json_string(out, b.addr_text());
      out += ",\"weight\":";
      json_uint(out, w);
      out += ",\"state\":";
      json_string(out, health_name(b.health()));
      out += ",\"in_flight\":";
      json_uint(out, b.in_flight.load());
      out += ",\"capacity\":";
      json_uint(out, core::capacity(total, w, w_total, p->bounded()));
      out += ",\"key_share\":";
      json_num(out, i < shares.size() ? shares[i] : 0.0);
      out += ",\"weight_share\":";
      json_num(out, w_total ? static_cast<double>(w) / static_cast<double>(w_total) : 0.0);
      out += ",\"requests\":";
      json_uint(out, b.counters.requests.load());
      out += ",\"spill_in\":";
      json_uint(out, b.counters.spill_in.load());
      out += ",\"connect_errors\":";
      json_uint(out, b.counters.connect_errors.load());
      out += ",\"open_connections\":";
      json_uint(out, b.open_connections);
      out += ",\"idle_connections\":";
      json_uint(out, b.idle_count());
      out += '}';
    }
    out += ']';
    if (met != nullptr) {
      out += ",\"hot_keys\":[";
      bool first = true;
      for (const auto& e : met->hot_keys(p->name())) {
        if (!first) out += ',';
        first = false;
        char hex[24];
        std::snprintf(hex, sizeof hex, "%016" PRIx64, e.hash);
        out += "{\"hash\":\"";
        out += hex;
        out += "\",\"key\":";
        json_string(out, e.key);
        out += ",\"count\":";
        json_uint(out, e.count);
        out += ",\"error\":";
        json_uint(out, e.error);
        out += '}';
      }
      out += "],\"spill_pairs\":[";
      first = true;
      for (const auto& sp : met->spill_pairs(p->name())) {
        if (!first) out += ',';
        first = false;
        out += "{\"owner\":";
        json_string(out, sp.owner);
        out += ",\"backend\":";
        json_string(out, sp.backend);
        out += ",\"count\":";
        json_uint(out, sp.count);
        out += '}';
      }
      out += ']';
    }
    out += '}';
  }
  out += "]}\n";
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
    out = "{\"error\":\"usage: /api/route?pool=NAME&key=KEY\"}\n";
    return false;
  }
  const std::string key = url_decode(key_raw);
  const uint64_t hash = core::hash64(key);
  const proxy::RouteDecision d = proxy::Router::explain(*p, hash);
  const proxy::LastDecision last = proxy::Router::last_decision(*p, hash);
  auto id_of = [p](core::BackendIndex b) -> std::string_view {
    return b != core::kNoBackend ? std::string_view(p->backend(b).id()) : std::string_view();
  };
  std::vector<core::BackendIndex> order(p->size());
  const size_t n = p->selector().preference(hash, order);
  const uint64_t total = p->state().total_in_flight.load();
  const uint64_t w_total = p->set().total_weight();
  uint64_t hot_count = 0, hot_total = 0;
  {
    const auto& ps = p->state();
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    hot_total = ps.hot_window_total;
    for (const auto& h : ps.hot) {
      if (h.hash == hash) hot_count = h.count;
    }
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  util::JsonWriter w;
  w.begin();
  w.field("pool", p->name());
  w.field("key", key);
  w.field("hash", hex);
  w.field("owner", id_of(d.owner));
  w.field("total_in_flight", total);
  w.begin_array("preference");
  for (size_t i = 0; i < n; ++i) {
    const auto& b = p->backend(order[i]);
    w.begin();
    w.field("id", b.id());
    w.field("state", health_name(b.health()));
    w.field("in_flight", uint64_t{b.in_flight.load()});
    w.field("capacity", core::capacity(total, p->set()[order[i]].weight, w_total, p->bounded()));
    w.end();
  }
  w.end_array();
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

// Arcs of the pool's placement as [start, backend index] pairs in ascending start order over
// the 32-bit circle; an arc ends where the next begins (the last at 2^32). Ring: exact when it
// has at most kMaxRingArcs runs of one owner, else resampled into kMaxRingArcs equal slots (each
// slot takes the owner of its midpoint). Rendezvous and Maglev have no circle: one arc per
// backend, sized by its key share, so the page can still draw the split.
bool Admin::api_ring(std::string_view query, std::string& out) {
  std::string_view pool_name;
  std::string target = "/?";
  target += query;
  const auto& snap = daemon_.snapshot();
  const proxy::Pool* p = nullptr;
  if (proxy::find_query_param(target, "pool", pool_name)) {
    p = snap->find_pool(url_decode(pool_name));
  } else if (!snap->pools().empty()) {
    p = snap->pools().front().get();
  }
  if (p == nullptr) {
    out = "{\"error\":\"usage: /api/ring?pool=NAME\"}\n";
    return false;
  }
  std::vector<std::pair<uint64_t, core::BackendIndex>> runs;
  auto push = [&runs](uint64_t start, core::BackendIndex owner) {
    if (!runs.empty() && runs.back().second == owner) return;
    runs.emplace_back(start, owner);
  };
  bool exact = true;
  const core::Ring* ring = p->selector().ring();
  if (ring != nullptr && ring->points() > 0) {
    auto pos = ring->positions();
    auto own = ring->owners();
    // Keys whose top 32 bits are in (pos[j-1], pos[j]] belong to point j; [0, pos[0]] and
    // (pos[P-1], 2^32) to point 0.
    push(0, own[0]);
    for (size_t j = 1; j < pos.size(); ++j) push(uint64_t{pos[j - 1]} + 1, own[j]);
    if (uint64_t{pos.back()} + 1 < (uint64_t{1} << 32)) push(uint64_t{pos.back()} + 1, own[0]);
    if (runs.size() > kMaxRingArcs) {
      exact = false;
      std::vector<std::pair<uint64_t, core::BackendIndex>> all = std::move(runs);
      runs.clear();
      size_t r = 0;
      for (size_t s = 0; s < kMaxRingArcs; ++s) {
        uint64_t start = (uint64_t{s} << 32) / kMaxRingArcs;
        uint64_t mid = ((2 * uint64_t{s} + 1) << 31) / kMaxRingArcs;
        while (r + 1 < all.size() && all[r + 1].first <= mid) ++r;
        push(start, all[r].second);
      }
    }
  } else {
    exact = false;
    const std::vector<double> computed =
        daemon_.metrics() == nullptr ? p->selector().key_shares() : std::vector<double>{};
    const std::vector<double>& shares =
        daemon_.metrics() != nullptr ? daemon_.metrics()->key_shares(*p) : computed;
    double acc = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (shares[i] <= 0) continue;
      runs.emplace_back(static_cast<uint64_t>(acc * 4294967296.0), static_cast<core::BackendIndex>(i));
      acc += shares[i];
    }
  }
  out = "{\"pool\":";
  json_string(out, p->name());
  out += ",\"generation\":";
  json_uint(out, snap->generation());
  out += ",\"algorithm\":";
  json_string(out, algorithm_name(p->config().algorithm));
  out += ",\"points\":";
  json_uint(out, p->selector().points());
  out += ",\"exact\":";
  out += exact ? "true" : "false";
  out += ",\"backends\":[";
  for (size_t i = 0; i < p->size(); ++i) {
    if (i > 0) out += ',';
    json_string(out, p->backend(static_cast<core::BackendIndex>(i)).id());
  }
  out += "],\"arcs\":[";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) out += ',';
    out += '[';
    json_uint(out, runs[i].first);
    out += ',';
    json_uint(out, runs[i].second);
    out += ']';
  }
  out += "]}\n";
  return true;
}

}  // namespace rondel::server
