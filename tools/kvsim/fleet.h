// Fleet: kvsim's simulated servers on one libuv loop: a listener per server and for the oracle,
// each request run through its server's model, its answer timed by the model (model seconds
// divided by the speedup), /stats.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "api.h"
#include "connection.h"
#include "options.h"
#include "server_model.h"

namespace kvsim {

class Fleet final : public RequestHandler {
 public:
  Fleet(uv_loop_t* loop, Options options);
  ~Fleet() override;
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Binds every listener and prints "listening HOST:PORT" for each server, in order, then
  // "oracle HOST:PORT" for the oracle.
  bool listen(std::string& error);

  void on_request(Connection& c, HttpRequest request) noexcept override;
  void on_closed(Connection& c) noexcept override;

  // The /stats document (see --help and docs/benchmarks.md).
  std::string stats_json() const;

 private:
  struct Active;
  struct Listener {
    uv_tcp_t tcp{};
    Fleet* fleet = nullptr;
    int endpoint = 0;  // server index, or -1 for the oracle
  };

  double model_now() const;
  void handle_completion(Connection& c, const HttpRequest& request, bool chat) noexcept;
  void start(const std::vector<Started>& started);
  void arm(Active& a, double at_model_time);
  void tick(Active& a);
  void complete(Active& a);
  std::string orca_header(size_t server) const;
  static void on_connection(uv_stream_t* server, int status) noexcept;
  static void on_timer(uv_timer_t* t) noexcept;

  uv_loop_t* loop_;
  Options options_;
  std::vector<ServerModel> servers_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<int> ports_;  // each server's bound port
  std::unordered_map<uint64_t, Active*> active_;
  uint64_t next_id_ = 0;
  uint64_t start_ns_;
  uint64_t oracle_requests_ = 0;
  uint64_t oracle_spills_ = 0;
  uint64_t rejected_ = 0;
  std::vector<Started> started_scratch_;
};

}  // namespace kvsim
