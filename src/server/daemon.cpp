// Daemon: start-up, SIGHUP reload with key-movement report, periodic tick (signals and the
// drain: daemon_shutdown.cpp).
#include "rondel/server/daemon.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <unordered_set>

#include "rondel/config/loader.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/body_key.h"
#include "rondel/proxy/passive_health.h"
#include "rondel/server/admin.h"
#include "rondel/server/discovery.h"
#include "rondel/server/metrics.h"
#include "config_watch.h"
#include "fleet.h"
#include "fleet_hot.h"
#include "fleet_load.h"
#include "systemd_notify.h"

namespace rondel::server {

namespace {

bool lr_workers_changed(uint32_t configured, uint32_t running) {
  return (configured < 1 ? 1 : configured) != running;
}

constexpr uint64_t kTickMs = 200;
// How long start-up waits for the first answers for backends named by DNS.
constexpr uint64_t kStartDnsWaitMs = 5000;
// How long a reload naming new hosts waits for their first answers before switching anyway.
constexpr uint64_t kReloadDnsWaitMs = 5000;
constexpr size_t kMoveSamples = 65536;
constexpr uint64_t kMoveSeed = 0x4d4f564544000000ull;  // "MOVED"

// Share of sampled hashes whose natural owner id differs between two builds of a pool.
double moved_share(const proxy::Pool& before, const proxy::Pool& after) {
  if (before.empty() || after.empty()) return before.empty() && after.empty() ? 0.0 : 1.0;
  size_t moved = 0;
  for (size_t j = 0; j < kMoveSamples; ++j) {
    uint64_t h = core::mix64(j, kMoveSeed);
    const auto& a = before.backend(before.selector().owner(h)).id();
    const auto& b = after.backend(after.selector().owner(h)).id();
    moved += a == b ? 0 : 1;
  }
  return static_cast<double>(moved) / kMoveSamples;
}

}  // namespace

Daemon::Daemon(std::string config_path) : config_path_(std::move(config_path)) {
  uv_loop_init(&loop_);
}

Daemon::~Daemon() {
  stop_threads();  // they call the metrics hook and use stats_: join before anything goes
  admin_.reset();
  watch_.reset();
  health_.reset();
  agent_.reset();
  fleet_load_.reset();
  fleet_hot_.reset();
  fleet_.reset();
  discovery_.reset();
  worker_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
}

bool Daemon::start(config::Config cfg) {
  error_sink_.open(cfg.log.error_log, stderr);
  if (!access_sink_.open(cfg.log.access_log, stdout)) {
    std::fprintf(stderr, "cannot open access log %s\n", cfg.log.access_log.c_str());
    return false;
  }
  proxy::Level level = proxy::Level::kInfo;
  proxy::parse_level(cfg.log.level, level);
  proxy::AccessFormat access_format = proxy::AccessFormat::kText;
  proxy::parse_access_format(cfg.log.access_format, access_format);
  access_sink_.set_format(access_format);
  log_.set_level(level);
  workers_ = cfg.workers < 1 ? 1 : cfg.workers;
  worker_ = std::make_unique<proxy::Worker>(&loop_, log_, access_sink_, stats_, 0);
  for (uint32_t id = 1; id < workers_; ++id) {
    threads_.push_back(std::make_unique<WorkerThread>(id, stats_, cfg.log.access_log,
                                                      cfg.log.error_log, level, access_format));
  }
  discovery_ = std::make_unique<Discovery>(&loop_, log_, [this] { on_dns_change(); });
  health_ = std::make_unique<proxy::HealthChecker>(
      &loop_, log_, [this](const std::string&, proxy::BackendState&) { refresh_pools(); });
  agent_ = std::make_unique<proxy::AgentChecker>(
      &loop_, log_, [this](const std::string&, proxy::BackendState&) { refresh_pools(); });
  discovery_->add(cfg);
  wait_for_dns(cfg);
  if (auto tok = read_admin_token(cfg); !tok) {
    log_.log(proxy::Level::kError, "admin_token_unreadable", tok.error().message);
    return false;
  }
  load_admin_states(cfg);

  auto snap = build_snapshot(cfg, ++generation_);
  if (!snap) {
    log_.log(proxy::Level::kError, "config_invalid", snap.error().message);
    return false;
  }
  configure_fleet(cfg);
  publish(*snap);
  after_publish(nullptr);
  if (!apply_listeners(cfg, true)) return false;
  if (!open_admin(cfg)) return false;
  install_signals();
  uv_timer_init(&loop_, &tick_);
  tick_.data = this;
  uv_timer_start(&tick_, &on_tick, kTickMs, kTickMs);
  uv_timer_init(&loop_, &drain_timer_);
  drain_timer_.data = this;
  reload_stats_.last_ok_unix = std::time(nullptr);
  for (auto& t : threads_) t->start();
  wait_for_workers();  // "started" and READY=1 mean every worker listens
  log_.log(proxy::Level::kInfo, "started",
           "config=" + config_path_ + " pools=" + std::to_string(cfg.pools.size()) +
               " workers=" + std::to_string(workers_));
  base_cfg_ = std::move(cfg);
  started_ = true;
  watch_ = std::make_unique<ConfigWatch>(&loop_, config_path_, log_, [this] { reload(); });
  watch_->configure(base_cfg_.config_watch.enabled, base_cfg_.config_watch.debounce_ms);
  SystemdNotify::ready("serving generation=" + std::to_string(generation_));
  return true;
}

void Daemon::wait_for_dns(const config::Config& cfg) {
  if (discovery_->settled(cfg)) return;
  // Nothing else runs yet: turn the loop until every name has its first answer (or failure),
  // with a timer bounding the wait.
  uv_timer_t deadline;
  uv_timer_init(&loop_, &deadline);
  bool expired = false;
  deadline.data = &expired;
  uv_timer_start(&deadline, [](uv_timer_t* t) noexcept { *static_cast<bool*>(t->data) = true; },
                 kStartDnsWaitMs, 0);
  while (!expired && !discovery_->settled(cfg)) uv_run(&loop_, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&deadline), nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);  // runs the close callback; `deadline` may then go
  if (expired) log_.log(proxy::Level::kWarn, "dns_start_timeout", "waited_ms=" +
                                                                      std::to_string(kStartDnsWaitMs));
}

core::Result<std::shared_ptr<const proxy::Snapshot>> Daemon::build_snapshot(
    const config::Config& cfg, uint64_t generation) {
  config::Config expanded = discovery_->expand(cfg);
  report_skipped_weights(admin_states_.apply_weights(expanded));
  for (const auto& p : expanded.pools) {
    // At start-up a pool with nothing to serve is a configuration error (exit 2). Once running,
    // one name that resolves to nothing must not block every reload and every other pool's DNS
    // update: that pool is built empty and answers 503 until its names resolve again.
    // A pool with a discovery source may start empty (its source down or not yet listing
    // anything): it answers 503 until the source lists a backend.
    if (p.backends.empty() && !started_ && p.discovery.kind == config::DiscoveryKind::kNone) {
      return core::fail("pool " + p.name + ": no backend (its host names resolved to no address)");
    }
  }
  auto snap = proxy::Snapshot::build(std::move(expanded), registry_, pool_states_,
                                     listener_states_, generation);
  if (!snap) return snap;
  for (const std::string& change : admin_states_.apply_states(**snap)) {
    log_.log(proxy::Level::kInfo, "backend_admin_state", "backend=" + change);
  }
  for (const auto& p : (*snap)->pools()) {
    if (!p->empty()) continue;
    p->state().empty_builds.fetch_add(1, std::memory_order_relaxed);
    const bool source = p->config().discovery.kind != config::DiscoveryKind::kNone;
    log_.log(proxy::Level::kWarn, "pool_without_backends",
             "pool=" + p->name() + " generation=" + std::to_string(generation) + " reason=" +
                 (source ? "source_lists_nothing" : "names_resolved_to_nothing"));
  }
  return snap;
}

std::vector<std::pair<std::string, double>> Daemon::report_moved(const proxy::Snapshot& prev,
                                                                 const proxy::Snapshot& next,
                                                                 std::string_view msg) {
  std::vector<std::pair<std::string, double>> moved;
  for (const auto& p : next.pools()) {
    const proxy::Pool* before = prev.find_pool(p->name());
    double share = before != nullptr ? moved_share(*before, *p) : 1.0;
    moved.emplace_back(p->name(), share);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", share);
    log_.log(proxy::Level::kInfo, msg, "pool=" + p->name() + " share=" + buf);
  }
  return moved;
}

void Daemon::after_publish(const std::shared_ptr<const proxy::Snapshot>& prev) {
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  uint64_t now = uv_now(&loop_);
  if (prev) {
    // Slow start for backends this pool did not have (not at start-up, when every backend is
    // new and ramping them all together would change nothing).
    for (const auto& p : snap->pools()) {
      const proxy::Pool* before = prev->find_pool(p->name());
      if (before == nullptr || p->config().slow_start_ms == 0) continue;
      std::unordered_set<const proxy::BackendState*> had;
      for (size_t i = 0; i < before->size(); ++i) {
        had.insert(&before->backend(static_cast<core::BackendIndex>(i)));
      }
      for (size_t i = 0; i < p->size(); ++i) {
        auto& b = p->backend(static_cast<core::BackendIndex>(i));
        if (had.count(&b) == 0) b.ramp_start_ms = now;
      }
    }
  }
  health_->sync(*snap, now);
  agent_->sync(*snap, now);
  refresh_pools();
  share_fleet_size();  // on the new pools at once
  if (fleet_) fleet_->set_placement(*snap);
}

void Daemon::configure_fleet(const config::Config& cfg) {
  // Kubernetes members read each other's counts on this instance's own admin port unless
  // peer_port says otherwise (every member of a Deployment runs the same configuration).
  config::FleetConfig fc = cfg.fleet;
  if (fc.source.kind == config::DiscoveryKind::kKubernetes &&
      (fc.share_hot_keys || fc.share_load_ms > 0) && fc.peer_port == 0 && cfg.admin.enabled) {
    fc.peer_port = cfg.admin.bind.port;
  }
  // Shared counts are sent from the admin address: a new one makes the fleet anew too.
  const std::string admin_at = cfg.admin.enabled ? cfg.admin.bind.to_string() : std::string();
  if (fleet_ && Fleet::same_settings(fleet_->config(), fc) && fleet_admin_at_ == admin_at) return;
  fleet_admin_at_ = admin_at;
  fleet_load_.reset();
  fleet_hot_.reset();
  fleet_.reset();
  if (fc.enabled) fleet_ = std::make_unique<Fleet>(*discovery_, fc);
  if (fleet_ && fc.share_hot_keys &&
      (fc.source.kind == config::DiscoveryKind::kEtcd || fleet_->polls_peers())) {
    fleet_hot_ = std::make_unique<FleetHot>(&loop_, *fleet_, [this] {
      return worker_ ? worker_->snapshot() : std::shared_ptr<const proxy::Snapshot>();
    });
  }
  if (fleet_ && fc.share_load_ms > 0) {
    fleet_load_ = std::make_unique<FleetLoad>(&loop_, *fleet_, fc.share_load_ms, cfg.admin.bind,
                                              admin_token_, log_, [this] {
      return worker_ ? worker_->snapshot() : std::shared_ptr<const proxy::Snapshot>();
    });
  }
}

void Daemon::refresh_pools() noexcept {
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  uint64_t now = uv_now(&loop_);
  for (const auto& p : snap->pools()) p->refresh_weights(now);
}

bool Daemon::apply_listeners(const config::Config& cfg, bool at_start) {
  std::vector<ListenerEntry> next;
  std::vector<net::TcpListener*> opened;
  for (const auto& lc : cfg.listeners) {
    std::string bind = lc.bind.to_string();
    bool kept = false;
    for (auto& e : listeners_) {
      if (e.listener != nullptr && e.name == lc.name && e.bind == bind) {
        next.push_back(e);
        e.listener = nullptr;  // moved
        kept = true;
        break;
      }
    }
    if (kept) continue;
    std::string name = lc.name;
    auto l = net::TcpListener::open(&loop_, lc.bind.host, lc.bind.port, workers_ > 1, 1024,
                                    [this, name](uv_stream_t* server) {
                                      worker_->accept(server, name);
                                    });
    if (!l) {
      log_.log(proxy::Level::kError, "listen_failed",
               "listener=" + lc.name + " error=\"" + l.error().message + "\"");
      for (auto* o : opened) o->close();
      // Put back what was moved.
      for (auto& e : next) {
        for (auto& old : listeners_) {
          if (old.listener == nullptr && old.name == e.name && old.bind == e.bind) {
            old.listener = e.listener;
          }
        }
      }
      (void)at_start;
      return false;
    }
    opened.push_back(*l);
    next.push_back({lc.name, bind, lc.bind.host, *l});
    log_.log(proxy::Level::kInfo, "listening",
             "name=" + lc.name + " addr=" + lc.bind.host + ":" + std::to_string((*l)->port()));
  }
  for (auto& e : listeners_) {
    if (e.listener != nullptr) {
      log_.log(proxy::Level::kInfo, "listener_closed", "name=" + e.name);
      e.listener->close();
    }
  }
  listeners_ = std::move(next);
  if (!threads_.empty()) {
    // The other workers listen on the ports worker 0 bound (SO_REUSEPORT).
    std::vector<ListenerSpec> specs;
    for (const auto& e : listeners_) specs.push_back({e.name, e.host, e.listener->port()});
    for (auto& t : threads_) t->set_listeners(specs);
    if (started_) wait_for_workers();  // "reload_ok": every worker accepts on the new set
  }
  return true;
}

void Daemon::wait_for_workers() noexcept {
  // A worker applies a command within one turn of its loop; the limit only guards the daemon's
  // loop against a worker stuck in a callback.
  constexpr std::chrono::milliseconds kLimit{2000};
  for (auto& t : threads_) {
    if (!t->wait_applied(kLimit)) {
      log_.log(proxy::Level::kWarn, "worker_slow",
               "worker=" + std::to_string(t->id()) + " commands not applied within 2000 ms");
    }
  }
}

void Daemon::publish(std::shared_ptr<const proxy::Snapshot> snap) {
  const auto& old = worker_->snapshot();
  if (old && snap) {
    // Backends the new snapshot no longer names: their connections close instead of going
    // idle, and each worker closes its idle ones when the new snapshot reaches it.
    std::unordered_set<const proxy::BackendState*> kept;
    for (const auto& p : snap->pools()) {
      for (size_t i = 0; i < p->size(); ++i) kept.insert(&p->backend(static_cast<core::BackendIndex>(i)));
    }
    for (const auto& p : old->pools()) {
      for (size_t i = 0; i < p->size(); ++i) {
        auto& b = p->backend(static_cast<core::BackendIndex>(i));
        if (kept.count(&b) == 0) b.retired.store(true, std::memory_order_relaxed);
      }
    }
  }
  if (snap) proxy::BodyBudget::set_limit(snap->config().buffer_budget);
  for (auto& t : threads_) t->publish(snap);
  if (metrics_) metrics_->set_snapshot(snap);
  worker_->publish(std::move(snap));
}

size_t Daemon::total_sessions() const noexcept {
  size_t n = worker_ ? worker_->sessions() : 0;
  for (const auto& t : threads_) n += t->sessions();
  return n;
}

size_t Daemon::total_exchanges() const noexcept {
  size_t n = worker_ ? worker_->active_exchanges() : 0;
  for (const auto& t : threads_) n += t->active_exchanges();
  return n;
}

void Daemon::stop_threads() noexcept {
  for (auto& t : threads_) t->stop();
  for (auto& t : threads_) t->join();
}

bool Daemon::reload() {
  if (draining_) return false;
  log_.log(proxy::Level::kInfo, "reload_started", "config=" + config_path_);
  SystemdNotify::reloading();
  config::LoadResult lr = config::load_file(config_path_);
  if (!lr.ok()) {
    for (const auto& e : lr.errors) log_.log(proxy::Level::kError, "reload_error", e.to_string());
    reload_stats_.failed.fetch_add(1);
    log_.log(proxy::Level::kError, "reload_failed",
             "errors=" + std::to_string(lr.errors.size()) + " keeping=generation:" +
                 std::to_string(worker_->snapshot()->generation()));
    notify_reload_failed();
    return false;
  }
  discovery_->add(lr.config);
  if (!discovery_->settled(lr.config)) {
    // New host names: switch once they have answered (on_dns_change) or at the deadline (tick).
    if (pending_) log_.log(proxy::Level::kInfo, "reload_superseded");
    pending_ = std::move(lr.config);
    pending_deadline_ms_ = uv_now(&loop_) + kReloadDnsWaitMs;
    log_.log(proxy::Level::kInfo, "reload_waiting_dns");
    return true;
  }
  pending_.reset();
  return finish_reload(std::move(lr.config));
}

bool Daemon::finish_reload(config::Config cfg) {
  auto old = worker_->snapshot();
  auto snap = build_snapshot(cfg, generation_ + 1);
  if (!snap) {
    log_.log(proxy::Level::kError, "reload_failed", snap.error().message);
    reload_stats_.failed.fetch_add(1);
    discovery_->retain(base_cfg_);
    notify_reload_failed();
    return false;
  }
  if (!apply_listeners(cfg, false)) {
    reload_stats_.failed.fetch_add(1);
    log_.log(proxy::Level::kError, "reload_failed", "reason=listener");
    discovery_->retain(base_cfg_);
    notify_reload_failed();
    return false;
  }
  ++generation_;
  configure_admin(cfg.admin);
  if (auto tok = read_admin_token(cfg); !tok) {
    log_.log(proxy::Level::kError, "admin_token_unreadable",
             tok.error().message + " (the admin listener is read-only until it is readable)");
  }
  auto moved = report_moved(*old, **snap, "reload_moved");
  if (lr_workers_changed(cfg.workers, workers_)) {
    log_.log(proxy::Level::kWarn, "workers_unchanged",
             "configured=" + std::to_string(cfg.workers) + " running=" +
                 std::to_string(workers_) + " reason=needs_restart");
  }
  configure_fleet(cfg);
  publish(*snap);
  base_cfg_ = std::move(cfg);
  discovery_->retain(base_cfg_);
  watch_->configure(base_cfg_.config_watch.enabled, base_cfg_.config_watch.debounce_ms);
  after_publish(old);
  old.reset();
  registry_.prune();
  reload_stats_.last_moved = std::move(moved);
  reload_stats_.ok.fetch_add(1);
  reload_stats_.last_ok_unix = std::time(nullptr);
  log_.log(proxy::Level::kInfo, "reload_ok", "generation=" + std::to_string(generation_));
  SystemdNotify::ready("serving generation=" + std::to_string(generation_) + " (reload ok)");
  return true;
}

void Daemon::notify_reload_failed() noexcept {
  // The old configuration keeps serving: the service is ready again, with the failure in STATUS.
  SystemdNotify::ready("serving generation=" + std::to_string(generation_) +
                       " (reload failed, kept the running configuration)");
}

void Daemon::on_dns_change() {
  if (!started_ || stopped_) return;
  // Named after what changed: a watched source only (discovery_*), or DNS answers (dns_*).
  const std::string kind = discovery_->take_source_only() ? "discovery" : "dns";
  if (pending_ && discovery_->settled(*pending_)) {
    config::Config cfg = std::move(*pending_);
    pending_.reset();
    finish_reload(std::move(cfg));  // uses every cached answer, this one included
    return;
  }
  auto old = worker_->snapshot();
  auto snap = build_snapshot(base_cfg_, generation_ + 1);
  if (!snap) {
    log_.log(proxy::Level::kError, kind + "_update_failed",
             "error=\"" + snap.error().message + "\" keeping=generation:" +
                 std::to_string(old->generation()));
    return;
  }
  ++generation_;
  report_moved(*old, **snap, kind + "_moved");
  publish(*snap);
  after_publish(old);
  old.reset();
  registry_.prune();
  log_.log(proxy::Level::kInfo, kind + "_update", "generation=" + std::to_string(generation_));
}

void Daemon::watch_connect_failures() {
  if (discovery_->resolvers() == 0) return;
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  // Collect first: drop() may schedule a rebuild, never run one, so the snapshot stays valid.
  for (const auto& p : snap->pools()) {
    for (size_t i = 0; i < p->size(); ++i) {
      auto& b = p->backend(static_cast<core::BackendIndex>(i));
      uint64_t errors = b.counters.connect_errors.load(std::memory_order_relaxed);
      if (errors == b.connect_errors_seen) continue;
      b.connect_errors_seen = errors;
      if (discovery_->owns(p->name(), b.id())) discovery_->drop(p->name(), b.id());
    }
  }
}

void Daemon::on_tick(uv_timer_t* t) noexcept {
  auto* d = static_cast<Daemon*>(t->data);
  d->access_sink_.flush();
  d->error_sink_.flush();
  if (d->stopped_) return;
  d->check_health();
  d->watch_connect_failures();
  if (d->pending_ && (d->discovery_->settled(*d->pending_) ||
                      uv_now(&d->loop_) >= d->pending_deadline_ms_)) {
    config::Config cfg = std::move(*d->pending_);
    d->pending_.reset();
    if (!d->discovery_->settled(cfg)) d->log_.log(proxy::Level::kWarn, "reload_dns_timeout");
    d->finish_reload(std::move(cfg));
  }
  if (d->draining_ && d->total_sessions() == 0) d->finish_shutdown();
}

void Daemon::check_health() noexcept {
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  uint64_t now = uv_now(&loop_);
  for (const auto& p : snap->pools()) {
    // Ejections happen on the workers as failures arrive (PassiveHealth::note_failure); the tick
    // only ends the cool-downs, then ramps the weights of what came back.
    proxy::PassiveHealth::restore_due(*p, now, log_);
    p->refresh_weights(now);
  }
  share_fleet_size();
}

void Daemon::share_fleet_size() noexcept {
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  const uint32_t n = fleet_size();
  for (const auto& p : snap->pools()) {
    p->state().fleet_instances.store(n, std::memory_order_relaxed);
    p->state().detectors.store(n * workers_, std::memory_order_relaxed);
  }
}

uint32_t Daemon::fleet_size() const noexcept {
  if (base_cfg_.fleet.instances > 0) return base_cfg_.fleet.instances;
  if (fleet_ == nullptr) return 1;
  return std::max<uint32_t>(static_cast<uint32_t>(fleet_->members().size()), 1);
}

int Daemon::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  stop_threads();
  access_sink_.flush();
  return 0;
}

}  // namespace rondel::server
