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
#include "rondel/tls/client_tls.h"

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

// One check: connect, send the request, read the response head. Deletes itself when closed.
class HealthAttempt final : public net::HandleCloser {
 public:
  explicit HealthAttempt(HealthProbe& probe) : probe_(&probe), parser_(http::Limits{}) {}

  void start() noexcept {
    uv_loop_t* loop = probe_->owner_.loop_;
    uv_tcp_init(loop, &tcp_);
    uv_timer_init(loop, &timer_);
    tcp_.data = this;
    timer_.data = this;
    connect_.data = this;
    write_.data = this;
    uv_timer_start(&timer_, &on_timeout, probe_->cfg_.timeout_ms, 0);
    const BackendState& st = *probe_->state_;
    request_ = probe_->cfg_.method + " " + probe_->cfg_.path + " HTTP/1.1\r\nHost: " +
               st.addr_text() +
               "\r\nUser-Agent: rondel-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    parser_.begin(probe_->cfg_.method == "HEAD");
    int rc = uv_tcp_connect(&connect_, &tcp_, reinterpret_cast<const sockaddr*>(&st.addr()),
                            &on_connect);
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
    close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  }
  void on_all_closed() noexcept override { delete this; }

  void finish(bool ok, std::string_view why) noexcept {
    if (closing()) return;
    HealthProbe* p = probe_;
    probe_ = nullptr;
    close();
    if (p != nullptr) p->result(ok, why);
  }

  static void on_connect(uv_connect_t* req, int status) noexcept {
    auto* a = static_cast<HealthAttempt*>(req->data);
    if (a->closing()) return;
    if (status != 0) {
      a->finish(false, std::string("connect_") + uv_err_name(status));
      return;
    }
    int rc = 0;
    if (a->probe_->tls_) {
      a->tls_ = tls::ClientTls::start(a->probe_->tls_, a->probe_->state_->id(), a->tls_name());
      if (!a->tls_) {
        a->finish(false, "tls_no_memory");
        return;
      }
      a->tls_step();  // the ClientHello
    } else {
      a->out_ = a->request_;
      rc = a->flush();
    }
    if (rc == 0) rc = uv_read_start(a->stream(), &on_alloc, &on_read);
    if (rc != 0) a->finish(false, std::string("io_") + uv_err_name(rc));
  }

  // The server name as BackendConn sends it: `sni`, the host name, else the address.
  std::string tls_name() const {
    std::string name(probe_->tls_->server_name(probe_->host_name_));
    if (!name.empty()) return name;
    const std::string& a = probe_->state_->addr_text();
    if (!a.empty() && a.front() == '[') return a.substr(1, a.find(']') - 1);
    return a.substr(0, a.rfind(':'));
  }

  // Writes out_ (and, on TLS, the ciphertext produced since) one write at a time.
  int flush() noexcept {
    if (writing_) return 0;
    if (tls_) {
      out_ += tls_->wire();
      tls_->wire().clear();
    }
    if (out_.empty()) return 0;
    flight_.swap(out_);
    out_.clear();
    uv_buf_t buf = uv_buf_init(flight_.data(), static_cast<unsigned>(flight_.size()));
    int rc = uv_write(&write_, stream(), &buf, 1, &on_written);
    writing_ = rc == 0;
    return rc;
  }

  static void on_written(uv_write_t* req, int status) noexcept {
    auto* a = static_cast<HealthAttempt*>(req->data);
    a->writing_ = false;
    if (a->closing()) return;
    int rc = status != 0 ? status : a->flush();
    if (rc != 0) a->finish(false, std::string("write_") + uv_err_name(rc));
  }

  // Advances the TLS handshake; once done, sends the request. False when the attempt ended.
  bool tls_step() noexcept {
    tls::ClientTls::Step step = tls_->handshake();
    if (step == tls::ClientTls::Step::kFailed) {
      finish(false, "tls_" + std::string(tls::backend_handshake_name(tls_->result())));
      return false;
    }
    if (step == tls::ClientTls::Step::kDone) {
      handshaken_ = true;
      if (!tls_->write(request_.data(), request_.size())) {
        finish(false, "tls_write");
        return false;
      }
    }
    if (int rc = flush(); rc != 0) {
      finish(false, std::string("write_") + uv_err_name(rc));
      return false;
    }
    return true;
  }

  // TLS: decrypts what arrived into buf_ and parses it. Plain reads are parsed as they come.
  void tls_read(const char* p, size_t n) noexcept {
    tls_->feed(p, n);
    if (!handshaken_ && (!tls_step() || !handshaken_)) return;
    for (;;) {
      ssize_t got = tls_->read(plain_, sizeof plain_);
      if (got == 0) return;
      if (got < 0) {
        finish(false, "closed_before_response");
        return;
      }
      if (!parse(plain_, static_cast<size_t>(got))) return;
    }
  }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
    auto* a = static_cast<HealthAttempt*>(h->data);
    *buf = uv_buf_init(a->buf_, sizeof a->buf_);
  }

  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept {
    auto* a = static_cast<HealthAttempt*>(s->data);
    if (a->closing() || nread == 0) return;
    if (nread < 0) {
      a->finish(false, nread == UV_EOF ? "closed_before_response"
                                       : std::string("read_") + uv_err_name(static_cast<int>(nread)));
      return;
    }
    if (a->tls_) a->tls_read(buf->base, static_cast<size_t>(nread));
    else a->parse(buf->base, static_cast<size_t>(nread));
  }

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

  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }

  HealthProbe* probe_;
  http::ResponseParser parser_;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_connect_t connect_{};
  uv_write_t write_{};
  std::string request_;
  std::string out_, flight_;  // bytes to write next, the write in flight
  std::unique_ptr<tls::ClientTls> tls_;
  bool writing_ = false;
  bool handshaken_ = false;
  char buf_[4096];
  char plain_[4096];  // TLS: decrypted response bytes
};

void HealthProbe::on_timer(uv_timer_t* t) noexcept {
  auto* p = static_cast<HealthProbe*>(t->data);
  if (p->closing() || p->attempt_ != nullptr) return;
  if (p->state_->admin_state() == AdminState::kMaint) {
    // Paused while an operator keeps the backend in maintenance: ask again next interval.
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

void HealthChecker::stop() noexcept {
  for (HealthProbe* p : probes_) p->stop();
  probes_.clear();
}

void HealthChecker::sync(const Snapshot& snap, uint64_t now_ms) {
  std::unordered_map<const BackendState*, HealthProbe*> by_state;
  by_state.reserve(probes_.size());
  for (HealthProbe* p : probes_) {
    p->seen_ = false;
    by_state.emplace(p->state_.get(), p);
  }
  for (const auto& pool : snap.pools()) {
    const config::HealthCheckConfig& hc = pool->config().health;
    for (size_t i = 0; i < pool->size(); ++i) {
      BackendState& b = pool->backend(static_cast<core::BackendIndex>(i));
      auto it = by_state.find(&b);
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
      if (it != by_state.end()) {
        it->second->cfg_ = hc;
        it->second->load_report_ = pool->config().load_report;
        it->second->tls_ = pool->backend_tls();
        it->second->host_name_ = host_name;
        it->second->seen_ = true;
        continue;
      }
      // Spread the first checks over the first interval (at most one second), so a pool's
      // backends are not all probed in the same loop iteration.
      seed_ = core::mix64(seed_, now_ms + i);
      uint64_t spread = std::min<uint64_t>(hc.interval_ms, 1000);
      auto* p = new HealthProbe(*this, pool->name(), pool->backend_ptr(static_cast<core::BackendIndex>(i)),
                                hc, spread > 1 ? seed_ % spread : 0);
      p->load_report_ = pool->config().load_report;
      p->tls_ = pool->backend_tls();
      p->host_name_ = host_name;
      p->seen_ = true;
      probes_.push_back(p);
    }
  }
  std::erase_if(probes_, [](HealthProbe* p) {
    if (p->seen_) return false;
    p->stop();
    return true;
  });
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
