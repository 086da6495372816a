// Active health checks: per-backend probe timers and one-shot HTTP check connections, over TLS
// for a pool with `tls` (the same context, server name and verification as its requests).
#include "rondel/proxy/health_check.h"

#include <algorithm>
#include <unordered_map>

#include "rondel/core/hash.h"
#include "rondel/http/parser.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/passive_health.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/backend_socket.h"

namespace rondel::proxy {

class HealthAttempt;

// The schedule of one backend's checks. Deletes itself once stopped and its timer is closed.
class HealthProbe final : public net::HandleCloser {
 public:
  HealthProbe(HealthChecker& owner, std::string pool, std::shared_ptr<BackendState> state,
              const config::HealthCheckConfig& cfg, uint64_t first_ms)
      : owner_(owner), pool_(std::move(pool)), state_(std::move(state)), cfg_(cfg) {
    uv_timer_init(owner_.loop_, &timer_);
    timer_.data = this;
    uv_timer_start(&timer_, &on_timer, first_ms, 0);
  }
  void stop() noexcept;
  void result(bool ok, std::string_view why) noexcept;

  HealthChecker& owner_;
  std::string pool_;
  std::shared_ptr<BackendState> state_;
  config::HealthCheckConfig cfg_;
  // The pool's load_report: a check's response carries a report too (out-of-band polling).
  config::LoadReportConfig load_report_;
  std::shared_ptr<const tls::ClientContext> tls_;  // the pool's backend TLS, null: plain
  std::string host_name_;                          // the backend's configured host name
  HealthAttempt* attempt_ = nullptr;
  bool seen_ = false;  // sync() mark

 private:
  void on_all_closed() noexcept override { delete this; }
  static void on_timer(uv_timer_t* t) noexcept;
  uv_timer_t timer_{};
};

// One check: connect (BackendSocket, the connector backend connections use, TLS included), send
// the request, read the response head. Deletes itself when closed.
class HealthAttempt final : public net::HandleCloser, private net::TransportEvents {
 public:
  explicit HealthAttempt(HealthProbe& probe) : probe_(&probe), parser_(http::Limits{}) {}

  void start() noexcept {
    uv_loop_t* loop = probe_->owner_.loop_;
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    uv_timer_start(&timer_, &on_timeout, probe_->cfg_.timeout_ms, 0);
    const BackendState& st = *probe_->state_;
    request_ = probe_->cfg_.method + " " + probe_->cfg_.path + " HTTP/1.1\r\nHost: " +
               st.addr_text() +
               "\r\nUser-Agent: rondel-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    parser_.begin(probe_->cfg_.method == "HEAD");
    const BackendTarget target{probe_->tls_, probe_->host_name_, {}, 0};
    int rc = sock_.connect(loop, st, target, *this);
    if (rc != 0) finish(false, std::string("connect_") + uv_err_name(rc));
  }

  // Detaches from the probe and closes without reporting.
  void abort() noexcept {
    probe_ = nullptr;
    close();
  }

 private:
  void close() noexcept {
    if (closing()) return;
    close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
    if (sock_.close()) close_other();  // on_transport_closed follows
  }
  void on_all_closed() noexcept override { delete this; }

  void finish(bool ok, std::string_view why) noexcept {
    if (closing()) return;
    HealthProbe* p = probe_;
    probe_ = nullptr;
    close();
    if (p != nullptr) p->result(ok, why);
  }

  void on_transport_connected(int status) noexcept override {
    if (closing()) return;
    if (status == UV_EPROTO && sock_.tls() != nullptr) {
      finish(false, "tls_" + std::string(tls::backend_handshake_name(
                                 sock_.tls()->handshake_result())));
      return;
    }
    if (status != 0) {
      finish(false, std::string("connect_") + uv_err_name(status));
      return;
    }
    out_.push(request_.data(), request_.size());
    int rc = sock_.write(out_);
    if (rc < 0) {
      finish(false, std::string("write_") + uv_err_name(rc));
      return;
    }
    rc = sock_.start_reading();
    if (rc != 0) finish(false, std::string("io_") + uv_err_name(rc));
  }

  void on_transport_written(int status) noexcept override {
    out_.pending = false;
    out_.clear();
    if (status < 0) finish(false, std::string("write_") + uv_err_name(status));
  }

  void on_transport_alloc(uv_buf_t* buf) noexcept override {
    *buf = uv_buf_init(buf_, sizeof buf_);
  }

  void on_transport_read(ssize_t nread) noexcept override {
    if (closing() || nread == 0) return;
    if (nread < 0) {
      finish(false, nread == UV_EOF ? "closed_before_response"
                                    : std::string("read_") + uv_err_name(static_cast<int>(nread)));
      return;
    }
    parse(buf_, static_cast<size_t>(nread));
  }

  void on_transport_closed() noexcept override { other_closed(); }

  // Feeds response bytes to the parser; false once the attempt ended (a status or an error).
  bool parse(const char* p, size_t left) noexcept {
    for (;;) {
      http::Step st = parser_.feed(p, left);
      p += st.consumed;
      left -= st.consumed;
      switch (st.event) {
        case http::Event::kHead: {
          uint16_t code = parser_.head().status;
          if (code < 200) {
            // An interim response: wait for the final one.
            continue;
          }
          const auto& cfg = probe_->cfg_;
          if (const auto& lr = probe_->load_report_; lr.enabled) {
            report_from(lr, parser_.head(), uv_now(probe_->owner_.loop_), probe_->state_->report,
                        ReportSource::kHealthCheck);
          }
          bool ok = code >= cfg.expect_status_min && code <= cfg.expect_status_max;
          finish(ok, "status_" + std::to_string(code));
          return false;
        }
        case http::Event::kMessageEnd:
          parser_.begin(probe_->cfg_.method == "HEAD");  // after a 1xx
          continue;
        case http::Event::kBody:
          continue;
        case http::Event::kNeedMore:
          return true;
        case http::Event::kError:
          finish(false, std::string("bad_response_") + std::string(parser_.error().reason));
          return false;
      }
    }
  }

  static void on_timeout(uv_timer_t* t) noexcept {
    auto* a = static_cast<HealthAttempt*>(t->data);
    a->finish(false, "timeout");
  }

  HealthProbe* probe_;
  http::ResponseParser parser_;
  BackendSocket sock_;
  uv_timer_t timer_{};
  std::string request_;
  net::OutQueue out_;
  char buf_[4096];
};

void HealthProbe::on_timer(uv_timer_t* t) noexcept {
  auto* p = static_cast<HealthProbe*>(t->data);
  if (p->closing() || p->attempt_ != nullptr) return;
  if (p->state_->admin_state() == AdminState::kMaint ||
      p->state_->agent.admin.load(std::memory_order_acquire) == AgentAdmin::kMaint) {
    // Paused while an operator or the backend's agent keeps it in maintenance: ask again next
    // interval.
    uv_timer_start(&p->timer_, &on_timer, p->cfg_.interval_ms, 0);
    return;
  }
  p->attempt_ = new HealthAttempt(*p);
  p->attempt_->start();  // may report synchronously
}

void HealthProbe::stop() noexcept {
  if (attempt_ != nullptr) {
    attempt_->abort();
    attempt_ = nullptr;
  }
  uv_timer_stop(&timer_);
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
}

void HealthProbe::result(bool ok, std::string_view why) noexcept {
  attempt_ = nullptr;
  if (closing()) return;
  owner_.report(*this, ok, why);
  uv_timer_start(&timer_, &on_timer, cfg_.interval_ms, 0);
}

HealthChecker::HealthChecker(uv_loop_t* loop, Logger& log, OnChange on_change)
    : loop_(loop), log_(log), on_change_(std::move(on_change)) {}

HealthChecker::~HealthChecker() { stop(); }

void HealthChecker::stop() noexcept { probes_.stop_all(); }

void HealthChecker::sync(const Snapshot& snap, uint64_t now_ms) {
  probes_.begin();
  for (const auto& pool : snap.pools()) {
    const config::HealthCheckConfig& hc = pool->config().health;
    for (size_t i = 0; i < pool->size(); ++i) {
      BackendState& b = pool->backend(static_cast<core::BackendIndex>(i));
      if (!hc.enabled) {
        if (b.clear_flag(HealthFlag::kFailedActiveCheck)) {
          // Only checks set this flag; with no checks it would never be cleared.
          b.check_failures = b.check_successes = 0;
          b.ramp_start_ms = now_ms;
          log_.log(Level::kInfo, "backend_up",
                   "pool=" + pool->name() + " backend=" + b.id() + " reason=checks_disabled");
          if (on_change_) on_change_(pool->name(), b);
        }
        continue;
      }
      const std::string host_name(pool->backend_host_name(static_cast<core::BackendIndex>(i)));
      HealthProbe* p = probes_.keep(b);
      if (p != nullptr) {
        p->cfg_ = hc;
      } else {
        p = new HealthProbe(*this, pool->name(),
                            pool->backend_ptr(static_cast<core::BackendIndex>(i)), hc,
                            probes_.first_delay(hc.interval_ms, now_ms, i));
        probes_.add(p);
      }
      p->load_report_ = pool->config().load_report;
      p->tls_ = pool->backend_tls();
      p->host_name_ = host_name;
    }
  }
  probes_.sweep();
}

void HealthChecker::report(HealthProbe& probe, bool ok, std::string_view why) noexcept {
  BackendState& b = *probe.state_;
  const config::HealthCheckConfig& cfg = probe.cfg_;
  const bool was_down = b.has_flag(HealthFlag::kFailedActiveCheck);
  bool changed = false;
  if (ok) {
    b.counters.health_checks_ok.fetch_add(1, std::memory_order_relaxed);
    ++b.check_successes;
    b.check_failures = 0;
    if (was_down && b.check_successes >= cfg.rise) {
      changed = b.clear_flag(HealthFlag::kFailedActiveCheck);
      PassiveHealth::note_success(b);
      b.ramp_start_ms = uv_now(loop_);
      log_.log(Level::kInfo, "backend_up",
               "pool=" + probe.pool_ + " backend=" + b.id() + " checks=" +
                   std::to_string(b.check_successes));
    }
  } else {
    b.counters.health_checks_failed.fetch_add(1, std::memory_order_relaxed);
    ++b.check_failures;
    b.check_successes = 0;
    if (log_.enabled(Level::kDebug)) {
      log_.log(Level::kDebug, "health_check_failed",
               "pool=" + probe.pool_ + " backend=" + b.id() + " reason=" + std::string(why));
    }
    if (!was_down && b.check_failures >= cfg.fall) {
      changed = b.set_flag(HealthFlag::kFailedActiveCheck);
      log_.log(Level::kWarn, "backend_down",
               "pool=" + probe.pool_ + " backend=" + b.id() + " checks=" +
                   std::to_string(b.check_failures) + " reason=" + std::string(why));
    }
  }
  if (changed && on_change_) on_change_(probe.pool_, b);
}

}  // namespace rondel::proxy
