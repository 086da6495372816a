// Backend is the listening side of rondel-test-backend: it owns the listener, the signal
// handlers, the state every connection shares (options, counters, cache model, ledger, health)
// and the list of open connections.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "ledger.h"
#include "lru_cache.h"
#include "options.h"
#include "rondel/core/result.h"

namespace rondel::test_backend {

class Connection;

// Counters reported by /_stats. Gauges (in_flight, connections_open) survive /_reset.
struct Stats {
  uint64_t requests = 0;
  uint64_t in_flight = 0;
  uint64_t max_in_flight = 0;
  uint64_t bytes_in = 0;  // Request body bytes received by counted requests.
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_out = 0;  // Response body bytes of counted requests.
  uint64_t connections_open = 0;
  uint64_t connections_total = 0;
};

class Backend {
 public:
  // Does not touch the network; call start(). `loop` must outlive the Backend.
  Backend(uv_loop_t* loop, Options options);
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Opens the ledger, binds, listens and installs SIGTERM/SIGINT handlers. Returns the bound
  // address as "HOST:PORT" (the real port when 0 was asked for).
  core::Result<std::string> start();

  // Closes the listener, the signal handlers and every connection; uv_run then returns once
  // their close callbacks have run. Idempotent.
  void stop() noexcept;

  uv_loop_t* loop() const noexcept { return loop_; }
  const Options& options() const noexcept { return options_; }
  Stats& stats() noexcept { return stats_; }
  LruCache& cache() noexcept { return cache_; }
  Ledger& ledger() noexcept { return ledger_; }
  bool healthy() const noexcept { return healthy_; }
  void set_healthy(bool healthy) noexcept { healthy_ = healthy; }

  // The "X-Backend: NAME\r\n" header block sent on every response.
  std::string_view fixed_headers() const noexcept { return fixed_headers_; }
  // Body pattern: byte i of a generated body is pattern()[i % pattern_period()].
  std::string_view pattern() const noexcept { return pattern_; }
  size_t pattern_period() const noexcept { return options_.name.size() + 1; }
  // Default response body size: NAME "\n" unless --size was given.
  uint64_t default_size() const noexcept { return options_.size.value_or(pattern_period()); }

  // One read buffer shared by every connection: the loop is single-threaded and each read is
  // parsed completely inside its read callback, so no two reads use it at once.
  uv_buf_t read_buffer() noexcept { return uv_buf_init(read_buffer_, sizeof read_buffer_); }

  // Zeroes the counters (not the gauges) and empties the cache model.
  void reset_counters() noexcept;

  // Renders Stats as the /_stats JSON object.
  std::string stats_json() const;

  // Connection bookkeeping, called by Connection only.
  void link(Connection* c) noexcept;
  void unlink(Connection* c) noexcept;

 private:
  static void on_connection(uv_stream_t* server, int status) noexcept;
  static void on_signal(uv_signal_t* handle, int signum) noexcept;
  static void on_handle_closed(uv_handle_t* handle) noexcept;

  uv_loop_t* loop_;
  Options options_;
  Stats stats_;
  LruCache cache_;
  Ledger ledger_;
  bool healthy_;
  bool stopping_ = false;
  std::string fixed_headers_;
  std::string pattern_;
  Connection* connections_ = nullptr;  // Intrusive list through Connection::prev_/next_.
  // Handles are members: main() runs the loop until their close callbacks have run, before the
  // Backend is destroyed.
  uv_tcp_t listener_{};
  uv_signal_t sigterm_{};
  uv_signal_t sigint_{};
  bool listener_open_ = false;
  bool signals_open_ = false;
  char read_buffer_[64 * 1024];
};

}  // namespace rondel::test_backend
