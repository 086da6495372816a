// Admin: the operator's HTTP endpoint on its own listener: health, readiness, Prometheus metrics,
// JSON views of pools, rings and routing decisions, and a live HTML view of the ring (/ui).
// Served on the daemon's loop; never proxies; never shows secrets or file paths. GET and HEAD
// (405 otherwise), plus the read-only POST /api/diff (reload dry-run); unknown paths 404. The paths are one table (Admin::handle) that a loop
// walks; every JSON view is written with rondel::util::JsonWriter.
#pragma once

#include <uv.h>

#include <string>
#include <string_view>

#include "rondel/config/config.h"
#include "rondel/core/result.h"
#include "rondel/net/listener.h"

namespace rondel::server {

class Daemon;

class Admin {
 public:
  Admin(Daemon& daemon) : daemon_(daemon) {}
  ~Admin();
  core::Result<bool> open(const config::Address& bind);
  void close() noexcept;
  uint16_t port() const noexcept { return listener_ ? listener_->port() : 0; }

  // Answers one request: fills status, content type and body. Exposed for unit tests.
  void handle(std::string_view method, std::string_view target, int& status,
              std::string& content_type, std::string& body);

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
  struct Route;
  // The route table's handlers: fill `body`, return the status.
  int serve_healthz(std::string_view query, std::string& body);
  int serve_readyz(std::string_view query, std::string& body);
  int serve_metrics(std::string_view query, std::string& body);
  int serve_pools(std::string_view query, std::string& body);
  int serve_route(std::string_view query, std::string& body);
  int serve_ring(std::string_view query, std::string& body);
  int serve_ui(std::string_view query, std::string& body);

  void api_pools(std::string& body);
  bool api_route(std::string_view query, std::string& body);
  bool api_ring(std::string_view query, std::string& body);
  void metrics(std::string& body);

  Daemon& daemon_;
  net::TcpListener* listener_ = nullptr;
};

}  // namespace rondel::server
