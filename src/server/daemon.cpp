// Daemon: start-up, SIGHUP reload with key-movement report, graceful drain, periodic tick.
#include "rondel/server/daemon.h"

#include <csignal>
#include <cstdio>
#include <ctime>

#include "rondel/config/loader.h"
#include "rondel/core/hash.h"
#include "rondel/server/admin.h"

namespace rondel::server {

namespace {

constexpr uint64_t kTickMs = 200;
constexpr size_t kMoveSamples = 65536;
constexpr uint64_t kMoveSeed = 0x4d4f564544000000ull;  // "MOVED"

// Share of sampled hashes whose natural owner id differs between two builds of a pool.
double moved_share(const proxy::Pool& before, const proxy::Pool& after) {
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
  admin_.reset();
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
  log_.set_level(level);
  worker_ = std::make_unique<proxy::Worker>(&loop_, log_, access_sink_, stats_);

  auto snap = proxy::Snapshot::build(cfg, registry_, pool_states_, ++generation_);
  if (!snap) {
    log_.log(proxy::Level::kError, "config_invalid", snap.error().message);
    return false;
  }
  worker_->publish(*snap);
  if (!apply_listeners(cfg, true)) return false;
  if (cfg.admin.enabled) {
    admin_ = std::make_unique<Admin>(*this);
    auto ok = admin_->open(cfg.admin.bind);
    if (!ok) {
      log_.log(proxy::Level::kError, "admin_bind_failed", ok.error().message);
      return false;
    }
    admin_bind_ = cfg.admin.bind.to_string();
    log_.log(proxy::Level::kInfo, "admin_listening",
             "addr=" + cfg.admin.bind.host + ":" + std::to_string(admin_->port()));
  }
  install_signals();
  uv_timer_init(&loop_, &tick_);
  tick_.data = this;
  uv_timer_start(&tick_, &on_tick, kTickMs, kTickMs);
  uv_timer_init(&loop_, &drain_timer_);
  drain_timer_.data = this;
  reload_stats_.last_ok_unix = std::time(nullptr);
  log_.log(proxy::Level::kInfo, "started",
           "config=" + config_path_ + " pools=" + std::to_string(cfg.pools.size()));
  return true;
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
    auto l = net::TcpListener::open(&loop_, lc.bind.host, lc.bind.port, false, 1024,
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
    next.push_back({lc.name, bind, *l});
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
  return true;
}

bool Daemon::reload() {
  if (draining_) return false;
  log_.log(proxy::Level::kInfo, "reload_started", "config=" + config_path_);
  config::LoadResult lr = config::load_file(config_path_);
  if (!lr.ok()) {
    for (const auto& e : lr.errors) log_.log(proxy::Level::kError, "reload_error", e.to_string());
    reload_stats_.failed.fetch_add(1);
    log_.log(proxy::Level::kError, "reload_failed",
             "errors=" + std::to_string(lr.errors.size()) + " keeping=generation:" +
                 std::to_string(worker_->snapshot()->generation()));
    return false;
  }
  auto old = worker_->snapshot();
  auto snap = proxy::Snapshot::build(lr.config, registry_, pool_states_, generation_ + 1);
  if (!snap) {
    log_.log(proxy::Level::kError, "reload_failed", snap.error().message);
    reload_stats_.failed.fetch_add(1);
    return false;
  }
  if (!apply_listeners(lr.config, false)) {
    reload_stats_.failed.fetch_add(1);
    log_.log(proxy::Level::kError, "reload_failed", "reason=listener");
    return false;
  }
  ++generation_;
  std::vector<std::pair<std::string, double>> moved;
  for (const auto& p : (*snap)->pools()) {
    const proxy::Pool* before = old->find_pool(p->name());
    double share = before != nullptr ? moved_share(*before, *p) : 1.0;
    moved.emplace_back(p->name(), share);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", share);
    log_.log(proxy::Level::kInfo, "reload_moved", "pool=" + p->name() + " share=" + buf);
  }
  worker_->publish(*snap);
  registry_.prune();
  reload_stats_.last_moved = std::move(moved);
  reload_stats_.ok.fetch_add(1);
  reload_stats_.last_ok_unix = std::time(nullptr);
  log_.log(proxy::Level::kInfo, "reload_ok", "generation=" + std::to_string(generation_));
  return true;
}

void Daemon::install_signals() {
  struct S {
    uv_signal_t* h;
    int sig;
  } sigs[] = {{&sig_hup_, SIGHUP}, {&sig_term_, SIGTERM}, {&sig_int_, SIGINT}, {&sig_usr1_, SIGUSR1}};
  for (auto& s : sigs) {
    uv_signal_init(&loop_, s.h);
    s.h->data = this;
    uv_signal_start(s.h, &on_signal, s.sig);
  }
}

void Daemon::on_signal(uv_signal_t* h, int signum) noexcept {
  auto* d = static_cast<Daemon*>(h->data);
  switch (signum) {
    case SIGHUP:
      d->reload();
      break;
    case SIGUSR1:
      d->access_sink_.reopen();
      d->error_sink_.reopen();
      d->log_.log(proxy::Level::kInfo, "logs_reopened");
      break;
    default:
      d->shutdown();
      break;
  }
}

void Daemon::shutdown() {
  if (draining_) return;
  draining_ = true;
  log_.log(proxy::Level::kInfo, "shutdown_started",
           "in_flight=" + std::to_string(worker_->active_exchanges()));
  for (auto& e : listeners_) {
    if (e.listener != nullptr) e.listener->close();
  }
  listeners_.clear();
  worker_->drain();
  uint64_t ms = worker_->snapshot() ? worker_->snapshot()->config().drain_timeout_ms : 0;
  uv_timer_start(&drain_timer_, &on_drain_deadline, ms > 0 ? ms : 1, 0);
}

void Daemon::on_drain_deadline(uv_timer_t* t) noexcept {
  auto* d = static_cast<Daemon*>(t->data);
  d->log_.log(proxy::Level::kWarn, "drain_timeout",
              "closing=" + std::to_string(d->worker_->sessions()));
  d->finish_shutdown();
}

void Daemon::on_tick(uv_timer_t* t) noexcept {
  auto* d = static_cast<Daemon*>(t->data);
  d->access_sink_.flush();
  d->error_sink_.flush();
  d->check_health();
  if (d->draining_ && d->worker_->sessions() == 0) d->finish_shutdown();
}

void Daemon::check_health() noexcept {
  const auto& snap = worker_->snapshot();
  if (!snap) return;
  uint64_t now = uv_now(&loop_);
  for (const auto& p : snap->pools()) {
    for (size_t i = 0; i < p->size(); ++i) {
      auto& b = p->backend(static_cast<core::BackendIndex>(i));
      if (b.health() == proxy::Health::kEjected && b.ejected_until_ms <= now) {
        b.set_health(proxy::Health::kUp);
        b.note_success();
        p->state().unusable.fetch_sub(1, std::memory_order_relaxed);
        log_.log(proxy::Level::kInfo, "backend_restored", "pool=" + p->name() + " backend=" + b.id());
      }
    }
  }
}

void Daemon::finish_shutdown() noexcept {
  if (stopped_) return;
  stopped_ = true;
  worker_->close_all();
  if (admin_) admin_->close();
  uv_timer_stop(&tick_);
  uv_timer_stop(&drain_timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&drain_timer_), nullptr);
  for (uv_signal_t* s : {&sig_hup_, &sig_term_, &sig_int_, &sig_usr1_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(s), nullptr);
  }
  // Releasing the configuration closes the pooled backend connections.
  worker_->publish(nullptr);
  log_.log(proxy::Level::kInfo, "shutdown_complete");
  access_sink_.flush();
  error_sink_.flush();
}

int Daemon::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  access_sink_.flush();
  return 0;
}

}  // namespace rondel::server
