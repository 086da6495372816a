// HAProxy-style agent checks (`agent_check`): every `interval` one TCP connection to a backend's
// address on the agent's port, the `send` string written, one answer line read
// (proxy/agent_answer.h), and the answer applied to the backend's state:
//   - `down` / `fail` / `stopped` set HealthFlag::kAgentDown, `up` clears it;
//   - `drain` / `maint` set HealthFlag::kAgentAdmin, `ready` clears it (and `maint` pauses the
//     active health checks, as the operator's maint does);
//   - `N%` scales the backend's effective weight, the bound's capacity (Pool::refresh_weights),
//     never its placement: no answer moves a key; 0% leaves it no capacity, so its keys walk on.
// The agent owns those two flags and the percentage; the operator's AdminState (kAdminDown) is
// never touched: the backend is out while either says so. A check without an answer (refused,
// reset, timeout, closed before a line, a line past kMaxAgentAnswer) or an answer without a known
// word changes nothing (HAProxy: connectivity is the health check's business). Each check is
// counted in AgentState::checks by AgentResult.
//
// One probe per backend whose resolved agent_check is on (config::resolve_agent_check), over
// BackendSocket (the connector of backend connections and health checks; plain TCP: the agent
// speaks no TLS). Loop thread only (the daemon's); never throws out of a callback.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/proxy/agent_answer.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/probe_roster.h"

namespace rondel::proxy {

class Snapshot;
class AgentProbe;
class AgentAttempt;

// What apply_agent_answer changed.
struct AgentChange {
  bool flags = false;   // kAgentDown or kAgentAdmin set or cleared
  bool weight = false;  // the weight percentage changed
  bool any() const noexcept { return flags || weight; }
};

// Applies one answer line's words to `b` (its AgentState, its two agent flags), as described
// above, and records the line. `now_ms` starts slow start when the answer brought the backend
// back into rotation. Loop thread (the AgentChecker's); O(1) besides copying the line.
AgentChange apply_agent_answer(BackendState& b, std::string_view line, const AgentAnswer& a,
                               uint64_t now_ms) noexcept;
// Turns the agent off for `b`: clears its two flags and resets its AgentState (counts kept).
AgentChange clear_agent(BackendState& b, uint64_t now_ms) noexcept;

class AgentChecker {
 public:
  // Called after an answer changed a backend's agent flags or weight percentage (loop thread):
  // the daemon recomputes the effective weights. `pool` is the pool's name.
  using OnChange = std::function<void(const std::string& pool, BackendState& backend)>;

  AgentChecker(uv_loop_t* loop, Logger& log, OnChange on_change);
  ~AgentChecker();  // stops every probe (their handles finish closing on the loop)
  AgentChecker(const AgentChecker&) = delete;
  AgentChecker& operator=(const AgentChecker&) = delete;

  // Makes the probes match `snap`: one per backend whose resolved agent_check is on (new ones
  // first fire within min(interval, 1 s)), settings of kept ones updated, the others stopped; a
  // backend whose agent is no longer configured has its agent state cleared (on_change then).
  // O(backends) plus one allocation per new probe; call after each publish.
  void sync(const Snapshot& snap, uint64_t now_ms);
  // Stops every probe; in-progress checks are aborted. Idempotent.
  void stop() noexcept;
  size_t probes() const noexcept { return probes_.size(); }

 private:
  friend class AgentProbe;
  friend class AgentAttempt;
  void report(AgentProbe& probe, bool answered, std::string_view line_or_why) noexcept;

  uv_loop_t* loop_;
  Logger& log_;
  OnChange on_change_;
  ProbeRoster<AgentProbe> probes_{0x7f4a7c159e3779b9ull};
};

}  // namespace rondel::proxy
