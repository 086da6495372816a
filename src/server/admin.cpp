// Admin endpoint: the admin connection, the route table and the small views (/healthz, /readyz,
// /metrics, /ui, /api/route); /api/pools and /api/ring are in admin_views.cpp, the metrics in
// metrics.cpp, and the /ui page is compiled in from src/server/ui/index.html.
#include "rondel/server/admin.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "admin_json.h"
#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/http/parser.h"
#include "rondel/proxy/hash_key.h"
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

}  // namespace admin_detail

namespace {

using admin_detail::health_name;
using admin_detail::json_string;
using admin_detail::json_uint;
using admin_detail::url_decode;

constexpr size_t kMaxAdminRequest = 16 * 1024;
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kPrometheus = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kHtml = "text/html; charset=utf-8";

// The reason phrases the admin endpoint sends.
constexpr std::pair<int, std::string_view> kReasons[] = {
    {200, "OK"}, {400, "Bad Request"}, {404, "Not Found"}, {405, "Method Not Allowed"},
    {431, "Request Header Fields Too Large"}, {503, "Service Unavailable"}};

std::string_view reason(int status) noexcept {
  for (const auto& [code, text] : kReasons) {
    if (code == status) return text;
  }
  return "Error";
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
    out_ = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason(status)) +
           "\r\nContent-Type: " +
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
  auto accept = [this](uv_stream_t* server) {
    auto* c = new AdminConn(*this);
    uv_tcp_init(daemon_.loop(), &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
      c->close_handle(reinterpret_cast<uv_handle_t*>(&c->tcp));
      return;
    }
    c->start();
  };
  auto l = net::TcpListener::open(daemon_.loop(), bind.host, bind.port, false, 128, accept);
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

// Where each admin path goes; handle() walks this table.
struct Admin::Route {
  std::string_view path;
  std::string_view content_type;
  int (Admin::*serve)(std::string_view query, std::string& body);
};

void Admin::handle(std::string_view method, std::string_view target, int& status,
                   std::string& ctype, std::string& body) {
  static constexpr Route kRoutes[] = {
      {"/healthz", kText, &Admin::serve_healthz},
      {"/readyz", kText, &Admin::serve_readyz},
      {"/metrics", kPrometheus, &Admin::serve_metrics},
      {"/api/pools", kJson, &Admin::serve_pools},
      {"/api/route", kJson, &Admin::serve_route},
      {"/api/ring", kJson, &Admin::serve_ring},
      {"/ui", kHtml, &Admin::serve_ui},
      {"/ui/", kHtml, &Admin::serve_ui},
  };
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
  ctype = kText;
  if (!daemon_.snapshot()) {
    status = 503;
    body = "shutting down\n";
    return;
  }
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (r.path == path) route = &r;
  }
  if (route == nullptr) {
    status = 404;
    body = "not found\n";
    return;
  }
  if (method != "GET" && method != "HEAD") {
    status = 405;
    body = "method not allowed\n";
    return;
  }
  ctype = route->content_type;
  status = (this->*route->serve)(query, body);
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
  std::string key = url_decode(key_raw);
  uint64_t hash = core::hash64(key);
  std::vector<core::BackendIndex> order(p->size());
  size_t n = p->selector().preference(hash, order);
  std::vector<uint64_t> scratch(p->scratch_words());
  core::PickResult r = p->pick(hash, {}, scratch);
  uint64_t total = p->state().total_in_flight.load();
  uint64_t w_total = p->set().total_weight();
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  out = "{\"pool\":";
  json_string(out, p->name());
  out += ",\"key\":";
  json_string(out, key);
  out += ",\"hash\":\"";
  out += hex;
  out += "\",\"owner\":";
  json_string(out, r.owner != core::kNoBackend ? p->backend(r.owner).id() : "");
  out += ",\"total_in_flight\":";
  json_uint(out, total);
  out += ",\"preference\":[";
  for (size_t i = 0; i < n; ++i) {
    const auto& b = p->backend(order[i]);
    uint32_t w = p->set()[order[i]].weight;
    if (i > 0) out += ',';
    out += "{\"id\":";
    json_string(out, b.id());
    out += ",\"state\":";
    json_string(out, health_name(b.health()));
    out += ",\"in_flight\":";
    json_uint(out, b.in_flight.load());
    out += ",\"capacity\":";
    json_uint(out, core::capacity(total, w, w_total, p->bounded()));
    out += '}';
  }
  out += "],\"chosen\":";
  json_string(out, r.backend != core::kNoBackend ? p->backend(r.backend).id() : "");
  out += ",\"skipped_full\":";
  json_uint(out, r.skipped_full);
  out += ",\"skipped_down\":";
  json_uint(out, r.skipped_excluded);
  out += ",\"all_full\":";
  out += r.all_full ? "true" : "false";
  out += ",\"reason\":";
  std::string why;
  if (r.backend == core::kNoBackend) why = "no usable backend";
  else if (r.backend == r.owner) why = "natural owner has room";
  else if (r.all_full) why = "every usable backend is at capacity: least loaded chosen";
  else
    why = "owner skipped (" + std::to_string(r.skipped_full) + " full, " +
          std::to_string(r.skipped_excluded) + " down): first backend with room in preference order";
  json_string(out, why);
  // Routing-quality decision (docs/routing.md): what route_pick would do now, with R from the
  // hot-key table the workers last published (without a worker's spill memory, so never
  // "sticky"), and the decision actually taken for this key most recently, if recorded.
  uint32_t replicas = 1;
  uint64_t hot_count = 0, hot_total = 0;
  {
    const auto& ps = p->state();
    std::lock_guard<std::mutex> lock(ps.hot_mu);
    hot_total = ps.hot_window_total;
    for (const auto& h : ps.hot) {
      if (h.hash == hash) {
        replicas = h.replicas;
        hot_count = h.count;
      }
    }
  }
  core::RouteResult rr = p->route(hash, {}, scratch, replicas, 0, nullptr);
  out += ",\"decision\":";
  json_string(out, proxy::route_reason_name(rr.reason));
  out += ",\"decision_backend\":";
  json_string(out, rr.pick.backend != core::kNoBackend ? p->backend(rr.pick.backend).id() : "");
  out += ",\"home\":";
  json_string(out, rr.home != core::kNoBackend ? p->backend(rr.home).id() : "");
  out += ",\"replicas\":";
  json_uint(out, rr.replicas);
  out += ",\"hot_count\":";
  json_uint(out, hot_count);
  out += ",\"hot_window_total\":";
  json_uint(out, hot_total);
  const uint64_t rec =
      p->state().recent[hash & (proxy::PoolState::kRecentDecisions - 1)].load(
          std::memory_order_relaxed);
  const bool have_last = rec != 0 && (rec >> 32) == (hash >> 32);
  const auto last_b = static_cast<core::BackendIndex>((rec >> 8) & 0xffff);
  out += ",\"last_decision\":";
  json_string(out, have_last ? proxy::route_reason_name(static_cast<core::RouteReason>(rec & 0xff))
                             : "");
  out += ",\"last_backend\":";
  json_string(out, have_last && last_b < p->size() ? p->backend(last_b).id() : "");
  out += "}\n";
  return true;
}

void Admin::metrics(std::string& out) {
  Metrics* m = daemon_.metrics();
  out = m != nullptr ? m->serialize() : std::string();
}

}  // namespace rondel::server
