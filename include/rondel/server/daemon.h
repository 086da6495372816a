// Daemon: owns the event loop, listeners, signals and the current Snapshot; reloads on SIGHUP and
// drains on SIGTERM/SIGINT.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/net/listener.h"
#include "rondel/proxy/agent_check.h"
#include "rondel/proxy/health_check.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"
#include "rondel/server/admin_states.h"
#include "rondel/server/worker_thread.h"

namespace rondel::server {

class Admin;
class ConfigWatch;
class Discovery;
class Fleet;
class FleetHot;
class FleetLoad;
class Metrics;

struct ReloadStats {
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<int64_t> last_ok_unix{0};
  // Share of the key space whose natural owner changed in the last successful reload, per pool.
  std::vector<std::pair<std::string, double>> last_moved;
};

class Daemon {
 public:
  explicit Daemon(std::string config_path);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts serving `cfg` (already validated). Returns false with the errors logged when a
  // listener cannot bind or the snapshot cannot be built.
  bool start(config::Config cfg);
  // Runs the loop until shutdown completes; returns the process exit code.
  int run();

  // Re-reads the configuration file; on any error keeps the running configuration. When the new
  // file names hosts not resolved yet, the switch waits (without blocking the loop) for their
  // first answer, at most kReloadDnsWaitMs; the outcome is logged as reload_ok / reload_failed.
  bool reload();
  void shutdown();

  uv_loop_t* loop() noexcept { return &loop_; }
  // Worker 0, which runs on the daemon's loop (workers 1..N-1 run on their own threads).
  proxy::Worker& worker() noexcept { return *worker_; }
  uint32_t workers() const noexcept { return workers_; }
  proxy::WorkerStats& stats() noexcept { return stats_; }
  const ReloadStats& reload_stats() const noexcept { return reload_stats_; }
  proxy::Logger& log() noexcept { return log_; }
  const std::shared_ptr<const proxy::Snapshot>& snapshot() const noexcept {
    return worker_->snapshot();
  }
  bool draining() const noexcept { return draining_; }
  Metrics* metrics() noexcept { return metrics_.get(); }  // null when admin is off
  // DNS and the watched sources (etcd, Kubernetes) of the pools' backends. Loop thread.
  const Discovery* discovery() const noexcept { return discovery_.get(); }
  // The fleet this instance registers in (`fleet`); null when not configured. Loop thread.
  const Fleet* fleet() const noexcept { return fleet_.get(); }
  // The fleet's shared hot keys (`fleet: {etcd, share_hot_keys}`); null when not shared.
  const FleetHot* fleet_hot() const noexcept { return fleet_hot_.get(); }
  const FleetLoad* fleet_load() const noexcept { return fleet_load_.get(); }
  // N, the instances sharing the backends: `fleet: {instances}`, else the members the fleet
  // source sees (at least 1), else 1. Stored into every pool on each tick (check_health).
  uint32_t fleet_size() const noexcept;

  // Runtime operations (the admin API's PUT on a backend). The bearer token read from
  // `admin.token_file` at start and on each reload; empty when none is configured (the admin
  // listener is then read-only).
  const std::string& admin_token() const noexcept { return admin_token_; }
  const AdminStates& admin_states() const noexcept { return admin_states_; }
  // What set_backend_admin did.
  enum class AdminOutcome : uint8_t {
    kChanged,    // stored, written to the state file and applied
    kUnchanged,  // the backend already had this setting
    kRejected,   // the placement cannot be built with it (e.g. every weight 0): nothing changed
    kNotSaved,   // the state file could not be written: nothing changed
  };
  struct AdminResult {
    AdminOutcome outcome = AdminOutcome::kUnchanged;
    std::string error;  // kRejected, kNotSaved: why
  };
  // Gives backend `id` of pool `pool` the operator's setting `s`: stored, written to the state
  // file (when configured) and applied now; a weight change rebuilds the placement (the moved
  // share is logged as admin_moved). The pool and backend must exist in the running snapshot
  // (the caller checks). Loop thread.
  AdminResult set_backend_admin(const std::string& pool, const std::string& id,
                                const AdminSetting& s);

 private:
  bool apply_listeners(const config::Config& cfg, bool at_start);
  // Publishes `snap` to every worker and to the metrics; marks the backends it dropped retired.
  void wait_for_workers() noexcept;  // until every worker thread applied what was sent
  void publish(std::shared_ptr<const proxy::Snapshot> snap);
  // Open client sessions / running exchanges of all workers.
  size_t total_sessions() const noexcept;
  size_t total_exchanges() const noexcept;
  void stop_threads() noexcept;
  // Builds a snapshot of `cfg` with its DNS names expanded to the cached addresses.
  core::Result<std::shared_ptr<const proxy::Snapshot>> build_snapshot(const config::Config& cfg,
                                                                      uint64_t generation);
  bool finish_reload(config::Config cfg);
  // Tells systemd (Type=notify) that a reload ended without changing the configuration.
  void notify_reload_failed() noexcept;
  // Logs `msg pool=X share=Y` per pool of `next` and returns the shares.
  std::vector<std::pair<std::string, double>> report_moved(const proxy::Snapshot& prev,
                                                           const proxy::Snapshot& next,
                                                           std::string_view msg);
  // After a publish: slow start for backends new to their pool, health-check probes, weights.
  void after_publish(const std::shared_ptr<const proxy::Snapshot>& prev);
  void refresh_pools() noexcept;
  void share_fleet_size() noexcept;  // fleet_size() into every pool's PoolState
  void on_dns_change();
  void watch_connect_failures();
  void wait_for_dns(const config::Config& cfg);
  void install_signals();
  // At start: logs the admin section's warnings (admin_checks.h) and, when the admin endpoint
  // is on, sets up the metrics and opens the admin listener; false when it cannot bind.
  bool open_admin(const config::Config& cfg);
  // Gives the admin listener (if open) the connection limits of `admin`, logging a lowered cap.
  void configure_admin(const config::AdminConfig& admin);
  // Reads admin.token_file of `cfg` into admin_token_ (cleared when none is configured).
  core::Result<bool> read_admin_token(const config::Config& cfg);
  // Loads admin.state_file of `cfg` (at start), logging what it skipped.
  void load_admin_states(const config::Config& cfg);
  // Logs (admin_state_skipped) each weight override left out that the previous build did not
  // leave out already, so a DNS update does not repeat the same lines.
  void report_skipped_weights(const std::vector<SkippedWeight>& skipped);
  // The weight overrides of the running configuration, with the stored settings, left out.
  std::vector<SkippedWeight> skipped_weights();
  void check_health() noexcept;
  static void on_signal(uv_signal_t* h, int signum) noexcept;
  static void on_tick(uv_timer_t* t) noexcept;
  static void on_drain_deadline(uv_timer_t* t) noexcept;
  void finish_shutdown() noexcept;

  std::string config_path_;
  uv_loop_t loop_{};
  proxy::LogSink error_sink_;
  proxy::LogSink access_sink_;
  proxy::Logger log_{error_sink_};
  proxy::WorkerStats stats_;
  std::unique_ptr<proxy::Worker> worker_;
  uint32_t workers_ = 1;  // fixed at start (a reload that changes `workers:` needs a restart)
  std::vector<std::unique_ptr<WorkerThread>> threads_;  // workers 1..N-1
  proxy::BackendRegistry registry_;
  std::vector<std::pair<std::string, std::shared_ptr<proxy::PoolState>>> pool_states_;
  proxy::ListenerStates listener_states_;
  uint64_t generation_ = 0;
  ReloadStats reload_stats_;
  config::Config base_cfg_;                  // the running file's configuration (names unexpanded)
  std::optional<config::Config> pending_;    // a valid reload waiting for its names' first answers
  uint64_t pending_deadline_ms_ = 0;
  std::unique_ptr<proxy::HealthChecker> health_;
  std::unique_ptr<proxy::AgentChecker> agent_;  // agent_check (HAProxy's agent-check)
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<Fleet> fleet_;  // after discovery_: its sources use it
  std::unique_ptr<FleetHot> fleet_hot_;  // after fleet_, which it writes to: shared hot keys
  std::unique_ptr<FleetLoad> fleet_load_;  // after fleet_, whose members it reads: shared counts
  std::string fleet_admin_at_;  // the admin address fleet_load_ sends from ("" = none)
  // Starts, keeps or replaces fleet_ for `cfg` (start and every successful reload).
  void configure_fleet(const config::Config& cfg);
  std::unique_ptr<ConfigWatch> watch_;  // config_watch: reload when the file changes
  bool started_ = false;

  struct ListenerEntry {
    std::string name;
    std::string bind;  // as configured
    std::string host;
    net::TcpListener* listener = nullptr;
  };
  std::vector<ListenerEntry> listeners_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<Metrics> metrics_;  // with the admin listener; feeds on worker exchanges
  std::string admin_bind_;
  AdminStates admin_states_;
  std::vector<std::string> skipped_logged_;  // the messages of the last report_skipped_weights
  std::string admin_token_;

  uv_signal_t sig_hup_{}, sig_term_{}, sig_int_{}, sig_usr1_{};
  uv_timer_t tick_{};
  uv_timer_t drain_timer_{};
  bool draining_ = false;
  bool stopped_ = false;
};

}  // namespace rondel::server
