// Admin: the operator's HTTP endpoint on its own listener: health, readiness, Prometheus metrics,
// JSON views of pools, rings and routing decisions, and a live HTML view of the ring (/ui).
// Served on the daemon's loop; never proxies; never shows secrets or file paths. GET and HEAD
// (405 otherwise), unknown paths 404. The paths are one table (Admin::handle) that a loop
// walks; every JSON view is written with rondel::util::JsonWriter. One write operation:
// PUT /api/pools/{pool}/backends/{id} (admin_ops.cpp), which needs the bearer token of
// `admin.token_file`; one read-only POST: /api/diff (the reload dry-run). Connections are
// bounded in number and time by `admin.max_connections`, `header_timeout` and `idle_timeout`
// (admin_conn.cpp).
#pragma once

#include <uv.h>

#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/result.h"
#include "rondel/net/listener.h"

namespace rondel::server {

class Daemon;

// One admin request as the connection read it (views into the connection's buffers).
struct AdminRequest {
  std::string_view method;
  std::string_view target;
  std::string_view authorization;  // the Authorization field's value, "" when absent
  std::string_view body;           // the request body (at most kMaxAdminBody bytes)
};

// The answer to one admin request.
struct AdminResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::string headers;  // extra header lines, each ending in CRLF (e.g. WWW-Authenticate)
};

class AdminConn;

class Admin {
 public:
  Admin(Daemon& daemon) : daemon_(daemon) {}
  ~Admin();
  // Takes the connection limits of `cfg` (at start and on each reload; connections already
  // open keep the timeouts they were given). The cap used is max_connections, but at most
  // 1/16 of the process's descriptor limit (RLIMIT_NOFILE), so that admin connections never
  // hold the descriptors the data listeners need; returns the log fields when it lowered the
  // cap that way, else "".
  std::string configure(const config::AdminConfig& cfg);
  core::Result<bool> open(const config::Address& bind);
  // Closes the listener and every admin connection (shutdown; the destructor calls it).
  void close() noexcept;
  uint16_t port() const noexcept { return listener_ ? listener_->port() : 0; }
  // Admin connections open now (each from its accept to its close), and the cap in use.
  size_t connections() const noexcept { return conns_.size(); }
  uint32_t max_connections() const noexcept { return limits_.max_connections; }

  // Answers one request: fills status, content type and body. Exposed for unit tests.
  void handle(std::string_view method, std::string_view target, int& status,
              std::string& content_type, std::string& body);
  void handle(const AdminRequest& req, AdminResponse& res);

  // Largest request body accepted (larger ones get 413).
  static constexpr size_t kMaxAdminBody = 4096;

  // POST routes, which read a request body (at most kMaxPostBody bytes). Read-only: none
  // changes the running configuration. accepts_post: whether `target` is one.
  static constexpr size_t kMaxPostBody = 1 << 20;
  static bool accepts_post(std::string_view target) noexcept;
  // POST /api/diff: the reload dry-run (config_diff.h) of the YAML file in `request_body`
  // against the running configuration: 200 with diff_json, 400 with the file's errors as
  // {"errors":["(posted):LINE:COL: ..."]}.
  void handle_post(std::string_view target, std::string_view request_body, int& status,
                   std::string& content_type, std::string& body);

 private:
  friend class AdminConn;
  struct Limits {
    uint32_t max_connections = 10;
    uint64_t header_timeout_ms = 10000;
    uint64_t idle_timeout_ms = 10000;
  };
  struct Route;
  // Accepts and closes at once a connection over the cap (counted, logged).
  void refuse(uv_stream_t* server);
  // The route table's handlers: fill `body`, return the status.
  int serve_healthz(std::string_view query, std::string& body);
  int serve_readyz(std::string_view query, std::string& body);
  int serve_metrics(std::string_view query, std::string& body);
  int serve_pools(std::string_view query, std::string& body);
  int serve_route(std::string_view query, std::string& body);
  int serve_ring(std::string_view query, std::string& body);
  int serve_ui(std::string_view query, std::string& body);
  // /api/certificates: each TLS listener's certificates, their names and expiry (no file paths).
  int serve_certificates(std::string_view query, std::string& body);
  // The fleet this instance belongs to (Fleet::json); 404 without `fleet`.
  int serve_fleet(std::string_view query, std::string& body);
  // This instance's fleet record (Fleet::record): what the other members of a Kubernetes fleet
  // read for the hot-key counts they share.
  int serve_fleet_record(std::string_view query, std::string& body);
  int serve_fleet_load(std::string_view query, std::string& body);

  // GET/HEAD/PUT /api/pools/{pool}/backends/{id} (admin_ops.cpp).
  void serve_backend(const AdminRequest& req, std::string_view path, AdminResponse& res);
  void put_backend(const AdminRequest& req, const std::string& pool, const std::string& id,
                   AdminResponse& res);
  // Whether `authorization` carries the configured bearer token; else fills res (401/403).
  bool authorize(std::string_view authorization, AdminResponse& res);

  void api_pools(std::string& body);
  bool api_route(std::string_view query, std::string& body);
  // POST /api/route?pool=NAME with a request body: the body key an llm_prefix pool derives from
  // it (admin_route_body.cpp) and the decision a request with it would get now. Hashes and
  // offsets only, never prompt text. Returns the status.
  int api_route_body(std::string_view query, std::string_view request_body, std::string& out);
  bool api_ring(std::string_view query, std::string& body);
  void metrics(std::string& body);

  Daemon& daemon_;
  net::TcpListener* listener_ = nullptr;
  Limits limits_;
  std::vector<AdminConn*> conns_;     // open connections (at most the cap: a vector is enough)
  uint64_t refused_ = 0;              // connections refused over the cap, since start
  uint64_t refused_logged_at_ = 0;    // loop time of the last admin_connection_refused line
};

}  // namespace rondel::server
