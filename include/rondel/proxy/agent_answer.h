// HAProxy agent-check answers: the parser of one answer line (pure: no I/O, no allocation) and
// what a backend's agent last said (AgentState, kept in its BackendState). The protocol is
// HAProxy's (configuration manual, "agent-check"): docs/configuration.md ("agent_check").
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rondel::proxy {

// The agent's opinion of the backend's health: `up`, or `down` / `fail` / `stopped`.
enum class AgentHealth : uint8_t { kUnknown, kUp, kDown };
// The agent's administrative request: `ready`, `drain` or `maint`.
enum class AgentAdmin : uint8_t { kUnknown, kReady, kDrain, kMaint };

// Longest answer line read or parsed (HAProxy reads one line of its check buffer); a longer one
// is no answer.
inline constexpr size_t kMaxAgentAnswer = 512;
// Highest weight percentage taken (HAProxy refuses a relative weight past its maximum weight
// 256 of 100); a larger one is an unknown word.
inline constexpr uint32_t kMaxAgentPercent = 256;

// What one answer line says. A dimension the line does not name keeps its previous value.
struct AgentAnswer {
  AgentHealth health = AgentHealth::kUnknown;  // last health word of the line
  AgentAdmin admin = AgentAdmin::kUnknown;     // last admin word of the line
  int32_t weight_percent = -1;                 // last `N%` (0..kMaxAgentPercent); -1 = none
  uint16_t known_words = 0;                    // words understood
  bool known() const noexcept { return known_words > 0; }
};

// Parses one answer line: the bytes up to the first '\n' (a '\r' before it is dropped); the rest
// of the line from a '#' on is a description and ignored (HAProxy: `down#reason`). Words are
// separated by spaces, tabs and commas and compared case-insensitively: `up`; `down`, `fail`,
// `stopped`; `ready`, `drain`, `maint`; `N%` with N in 0..256. Everything else (a bare number,
// `maxconn:N`, garbage) is skipped. A line longer than kMaxAgentAnswer answers nothing. O(line).
AgentAnswer parse_agent_answer(std::string_view line) noexcept;

// The summary the views show (metrics `state` label, /api/pools "agent.state").
enum class AgentSummary : uint8_t { kNone, kUp, kDrain, kMaint, kDown };
inline constexpr size_t kAgentSummaries = 5;
inline constexpr std::array<std::string_view, kAgentSummaries> kAgentSummaryNames = {
    "none", "up", "drain", "maint", "down"};
// Results of one check (metrics `result` label): an answer with a known word, an answer with
// none (garbage, empty: nothing changes), no answer (refused, timeout, closed, too long: nothing
// changes either).
enum class AgentResult : uint8_t { kOk, kIgnored, kFailed };
inline constexpr size_t kAgentResults = 3;
inline constexpr std::array<std::string_view, kAgentResults> kAgentResultNames = {"ok", "ignored",
                                                                                 "failed"};

// A backend's agent as the last answers left it. The atomics are written by the AgentChecker (the
// daemon's loop) and read by any thread; the strings only on the daemon's loop (admin views).
struct AgentState {
  std::atomic<AgentHealth> health{AgentHealth::kUnknown};
  std::atomic<AgentAdmin> admin{AgentAdmin::kUnknown};
  // Scales the backend's effective weight (the bound's capacity; Pool::refresh_weights), never
  // its placement. 100 until an answer names a percentage.
  std::atomic<uint32_t> weight_percent{100};
  std::array<std::atomic<uint64_t>, kAgentResults> checks{};  // by AgentResult
  std::atomic<bool> answered{false};  // some check got an answer with a known word
  std::atomic<bool> last_ok{false};   // the last check did
  std::string last;                  // the last answer line (daemon loop only)
  std::string error;                 // why the last check had no answer, "" (daemon loop only)

  // none (no answer yet), else down > maint > drain > up.
  AgentSummary summary() const noexcept;
  // Back to "no agent" (checks turned off): unknown, 100%, the strings cleared; counts kept.
  void reset() noexcept;
};

}  // namespace rondel::proxy
