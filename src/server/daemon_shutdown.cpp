// Daemon: signals (SIGHUP reload, SIGUSR1 log reopening, SIGTERM/SIGINT drain), the graceful
// drain and its deadline, and the shutdown that closes every handle once the drain ends.
#include <csignal>
#include <string>

#include "rondel/server/daemon.h"
#include "rondel/server/admin.h"
#include "rondel/server/discovery.h"
#include "rondel/server/metrics.h"
#include "config_watch.h"
#include "fleet.h"
#include "fleet_hot.h"
#include "fleet_load.h"
#include "systemd_notify.h"

namespace rondel::server {

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
      for (auto& t : d->threads_) t->reopen_logs();
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
  if (pending_) {
    log_.log(proxy::Level::kInfo, "reload_abandoned", "reason=shutdown");
    pending_.reset();
  }
  log_.log(proxy::Level::kInfo, "shutdown_started",
           "in_flight=" + std::to_string(total_exchanges()));
  SystemdNotify::stopping("draining in_flight=" + std::to_string(total_exchanges()));
  for (auto& e : listeners_) {
    if (e.listener != nullptr) e.listener->close();
  }
  listeners_.clear();
  for (auto& t : threads_) t->drain();
  worker_->drain();
  uint64_t ms = worker_->snapshot() ? worker_->snapshot()->config().drain_timeout_ms : 0;
  uv_timer_start(&drain_timer_, &on_drain_deadline, ms > 0 ? ms : 1, 0);
}

void Daemon::on_drain_deadline(uv_timer_t* t) noexcept {
  auto* d = static_cast<Daemon*>(t->data);
  d->log_.log(proxy::Level::kWarn, "drain_timeout",
              "closing=" + std::to_string(d->total_sessions()));
  d->finish_shutdown();
}

void Daemon::finish_shutdown() noexcept {
  if (stopped_) return;
  stopped_ = true;
  pending_.reset();
  health_->stop();
  agent_->stop();
  if (fleet_load_) fleet_load_->stop();
  if (fleet_hot_) fleet_hot_->stop();
  if (fleet_) fleet_->stop();
  discovery_->stop();
  if (watch_) watch_->stop();
  worker_->close_all();
  for (auto& t : threads_) t->stop();  // each closes its sessions and pooled connections
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
  if (metrics_) metrics_->set_snapshot(nullptr);
  log_.log(proxy::Level::kInfo, "shutdown_complete");
  access_sink_.flush();
  error_sink_.flush();
}

}  // namespace rondel::server
