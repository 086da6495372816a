// Agent checks: per-backend probe timers, one-shot TCP connections to the agent, and the
// answers applied to the backend's agent flags and weight percentage.
#include "rondel/proxy/agent_check.h"

#include <algorithm>
#include <new>
#include <unordered_map>

#include "rondel/core/hash.h"
#include "rondel/net/out_queue.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/backend_socket.h"
#include "rondel/proxy/snapshot.h"

namespace rondel::proxy {

namespace {

// Sets or clears `f` on `b`; true when it changed.
bool put_flag(BackendState& b, HealthFlag f, bool on) noexcept {
  return on ? b.set_flag(f) : b.clear_flag(f);
}

}  // namespace

AgentChange apply_agent_answer(BackendState& b, std::string_view line, const AgentAnswer& a,
                               uint64_t now_ms) noexcept {
  AgentState& st = b.agent;
  AgentChange ch;
  const bool was_usable = b.usable();
  if (a.health != AgentHealth::kUnknown) {
    st.health.store(a.health, std::memory_order_release);
    ch.flags |= put_flag(b, HealthFlag::kAgentDown, a.health == AgentHealth::kDown);
  }
  if (a.admin != AgentAdmin::kUnknown) {
    st.admin.store(a.admin, std::memory_order_release);
    ch.flags |= put_flag(b, HealthFlag::kAgentAdmin, a.admin != AgentAdmin::kReady);
  }
  if (a.weight_percent >= 0) {
    const auto pct = static_cast<uint32_t>(a.weight_percent);
    ch.weight = st.weight_percent.exchange(pct, std::memory_order_relaxed) != pct;
  }
  if (a.known()) st.answered.store(true, std::memory_order_release);
  // Back in rotation because of this answer: slow start ramps its capacity (the pool's).
  if (!was_usable && b.usable()) b.ramp_start_ms = now_ms;
  try {
    st.last.assign(line.substr(0, kMaxAgentAnswer));
    st.error.clear();
  } catch (...) {
    // The line is for the views only.
  }
  return ch;
}

AgentChange clear_agent(BackendState& b, uint64_t now_ms) noexcept {
  AgentChange ch;
  const bool was_usable = b.usable();
  ch.flags |= b.clear_flag(HealthFlag::kAgentDown);
  ch.flags |= b.clear_flag(HealthFlag::kAgentAdmin);
  ch.weight = b.agent.weight_percent.load(std::memory_order_relaxed) != 100;
  b.agent.reset();
  if (!was_usable && b.usable()) b.ramp_start_ms = now_ms;
  return ch;
}

class AgentAttempt;

// The schedule of one backend's agent checks. Deletes itself once stopped and its timer closed.
class AgentProbe final : public net::HandleCloser {
 public:
  AgentProbe(AgentChecker& owner, std::string pool, std::shared_ptr<BackendState> state,
             const config::AgentCheckConfig& cfg, uint64_t first_ms)
      : owner_(owner), pool_(std::move(pool)), state_(std::move(state)), cfg_(cfg) {
    uv_timer_init(owner_.loop_, &timer_);
    timer_.data = this;
    uv_timer_start(&timer_, &on_timer, first_ms, 0);
  }
  void stop() noexcept;
  // The attempt ended: an answer line (answered) or why there was none.
  void result(bool answered, std::string_view line_or_why) noexcept;

  AgentChecker& owner_;
  std::string pool_;
  std::shared_ptr<BackendState> state_;
  config::AgentCheckConfig cfg_;
  AgentAttempt* attempt_ = nullptr;
  bool seen_ = false;  // sync() mark

 private:
  void on_all_closed() noexcept override { delete this; }
  static void on_timer(uv_timer_t* t) noexcept;
  uv_timer_t timer_{};
};

// One check: connect to the agent's port, write `send`, read one line (up to '\n', or what came
// before the agent closed). Deletes itself when closed.
class AgentAttempt final : public net::HandleCloser, private net::TransportEvents {
 public:
  explicit AgentAttempt(AgentProbe& probe) : probe_(&probe) {}

  void start() noexcept {
    uv_loop_t* loop = probe_->owner_.loop_;
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    uv_timer_start(&timer_, &on_timeout, probe_->cfg_.timeout_ms, 0);
    try {
      send_ = probe_->cfg_.send;  // its own copy: a reload may replace the probe's settings
    } catch (...) {
      fail("no_memory");
      return;
    }
    BackendTarget target;
    target.port = probe_->cfg_.port;
    const int rc = sock_.connect(loop, *probe_->state_, target, *this);
    if (rc != 0) fail(std::string("connect_") + uv_err_name(rc));
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

  void finish(bool answered, std::string_view text) noexcept {
    if (closing()) return;
    AgentProbe* p = probe_;
    probe_ = nullptr;
    close();  // `text` may point into line_: it lives until on_all_closed
    if (p != nullptr) p->result(answered, text);
  }
  void fail(std::string why) noexcept { finish(false, why); }

  void on_transport_connected(int status) noexcept override {
    if (closing()) return;
    if (status != 0) {
      fail(std::string("connect_") + uv_err_name(status));
      return;
    }
    if (!send_.empty()) {
      out_.push(send_.data(), send_.size());
      const int rc = sock_.write(out_);
      if (rc < 0) {
        fail(std::string("write_") + uv_err_name(rc));
        return;
      }
    }
    const int rc = sock_.start_reading();
    if (rc != 0) fail(std::string("io_") + uv_err_name(rc));
  }

  void on_transport_written(int status) noexcept override {
    out_.pending = false;
    out_.clear();
    if (status < 0) fail(std::string("write_") + uv_err_name(status));
  }

  void on_transport_alloc(uv_buf_t* buf) noexcept override {
    *buf = uv_buf_init(buf_ + used_, static_cast<unsigned>(sizeof buf_ - used_));
  }

  void on_transport_read(ssize_t nread) noexcept override {
    if (closing() || nread == 0) return;
    if (nread < 0) {
      if (nread != UV_EOF) {
        fail(std::string("read_") + uv_err_name(static_cast<int>(nread)));
      } else if (used_ == 0) {
        fail("closed_without_answer");
      } else {
        finish(true, std::string_view(buf_, used_));  // the agent closed after its line
      }
      return;
    }
    const size_t before = used_;
    used_ += static_cast<size_t>(nread);
    const std::string_view got(buf_, used_);
    if (size_t nl = got.find('\n', before); nl != std::string_view::npos) {
      finish(true, got.substr(0, nl > 0 && got[nl - 1] == '\r' ? nl - 1 : nl));
    } else if (used_ > kMaxAgentAnswer) {
      fail("answer_too_long");
    }
  }

  void on_transport_closed() noexcept override { other_closed(); }

  static void on_timeout(uv_timer_t* t) noexcept {
    static_cast<AgentAttempt*>(t->data)->fail("timeout");
  }

  AgentProbe* probe_;
  BackendSocket sock_;
  uv_timer_t timer_{};
  net::OutQueue out_;
  std::string send_;
  char buf_[kMaxAgentAnswer + 2];  // one more byte than a line may hold, and its '\n'
  size_t used_ = 0;
};

void AgentProbe::on_timer(uv_timer_t* t) noexcept {
  auto* p = static_cast<AgentProbe*>(t->data);
  if (p->closing() || p->attempt_ != nullptr) return;
  p->attempt_ = new (std::nothrow) AgentAttempt(*p);
  if (p->attempt_ == nullptr) {
    uv_timer_start(&p->timer_, &on_timer, p->cfg_.interval_ms, 0);
    return;
  }
  p->attempt_->start();  // may report synchronously
}

void AgentProbe::stop() noexcept {
  if (attempt_ != nullptr) {
    attempt_->abort();
    attempt_ = nullptr;
  }
  uv_timer_stop(&timer_);
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
}

void AgentProbe::result(bool answered, std::string_view line_or_why) noexcept {
  attempt_ = nullptr;
  if (closing()) return;
  owner_.report(*this, answered, line_or_why);
  uv_timer_start(&timer_, &on_timer, cfg_.interval_ms, 0);
}

AgentChecker::AgentChecker(uv_loop_t* loop, Logger& log, OnChange on_change)
    : loop_(loop), log_(log), on_change_(std::move(on_change)) {}

AgentChecker::~AgentChecker() { stop(); }

void AgentChecker::stop() noexcept { probes_.stop_all(); }

void AgentChecker::sync(const Snapshot& snap, uint64_t now_ms) {
  probes_.begin();
  for (const auto& pool : snap.pools()) {
    const config::PoolConfig& pc = pool->config();
    for (size_t i = 0; i < pool->size(); ++i) {
      const auto idx = static_cast<core::BackendIndex>(i);
      BackendState& b = pool->backend(idx);
      const config::AgentCheckConfig cfg =
          i < pc.backends.size() ? config::resolve_agent_check(pc.agent_check, pc.backends[i].agent)
                                 : pc.agent_check;
      if (!cfg.enabled || cfg.port == 0) {
        if (!probes_.had(b) && b.agent.summary() == AgentSummary::kNone &&
            !b.has_flag(HealthFlag::kAgentDown) && !b.has_flag(HealthFlag::kAgentAdmin)) {
          continue;
        }
        // Only the agent sets these; with no agent they would never be cleared.
        if (clear_agent(b, now_ms).any()) {
          log_.log(Level::kInfo, "agent_off", "pool=" + pool->name() + " backend=" + b.id());
          if (on_change_) on_change_(pool->name(), b);
        }
        continue;
      }
      if (AgentProbe* p = probes_.keep(b)) {
        p->cfg_ = cfg;
        continue;
      }
      probes_.add(new AgentProbe(*this, pool->name(), pool->backend_ptr(idx), cfg,
                                 probes_.first_delay(cfg.interval_ms, now_ms, i)));
    }
  }
  probes_.sweep();
}

void AgentChecker::report(AgentProbe& probe, bool answered, std::string_view text) noexcept {
  BackendState& b = *probe.state_;
  AgentState& st = b.agent;
  if (!answered) {
    st.checks[static_cast<size_t>(AgentResult::kFailed)].fetch_add(1, std::memory_order_relaxed);
    st.last_ok.store(false, std::memory_order_relaxed);
    try {
      st.error.assign(text);
    } catch (...) {
    }
    if (log_.enabled(Level::kDebug)) {
      log_.log(Level::kDebug, "agent_check_failed",
               "pool=" + probe.pool_ + " backend=" + b.id() + " reason=" + std::string(text));
    }
    return;
  }
  const AgentAnswer a = parse_agent_answer(text);
  if (!a.known()) {
    st.checks[static_cast<size_t>(AgentResult::kIgnored)].fetch_add(1, std::memory_order_relaxed);
    st.last_ok.store(false, std::memory_order_relaxed);
    try {
      st.last.assign(text.substr(0, kMaxAgentAnswer));
      st.error = "no_known_word";
    } catch (...) {
    }
    return;
  }
  st.checks[static_cast<size_t>(AgentResult::kOk)].fetch_add(1, std::memory_order_relaxed);
  st.last_ok.store(true, std::memory_order_relaxed);
  const AgentSummary before = st.summary();
  const AgentChange ch = apply_agent_answer(b, text, a, uv_now(loop_));
  const AgentSummary after = st.summary();
  if (before != after || ch.weight) {
    log_.log(after == AgentSummary::kUp ? Level::kInfo : Level::kWarn, "backend_agent",
             "pool=" + probe.pool_ + " backend=" + b.id() + " state=" +
                 std::string(kAgentSummaryNames[static_cast<size_t>(after)]) + " weight=" +
                 std::to_string(st.weight_percent.load(std::memory_order_relaxed)) + "%");
  }
  if (ch.any() && on_change_) on_change_(probe.pool_, b);
}

}  // namespace rondel::proxy
