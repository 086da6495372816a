// Admin: the operator's HTTP endpoint on its own listener: health, readiness, Prometheus metrics,
// JSON views of pools, rings and routing decisions, and a live HTML view of the ring (/ui).
// Served on the daemon's loop; never proxies; never shows secrets or file paths. GET and HEAD
// only (405 otherwise), unknown paths 404. The paths are one table (Admin::handle) that a loop
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
  // /api/certificates: each TLS listener's certificates, their names and expiry (no file paths).
  int serve_certificates(std::string_view query, std::string& body);

  void api_pools(std::string& body);
  bool api_route(std::string_view query, std::string& body);
  bool api_ring(std::string_view query, std::string& body);
  void metrics(std::string& body);

  Daemon& daemon_;
  net::TcpListener* listener_ = nullptr;
};

}  // namespace rondel::server
