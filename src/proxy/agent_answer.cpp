// HAProxy agent-check answers: the line parser and the per-backend agent state.
#include "rondel/proxy/agent_answer.h"

#include "rondel/util/ascii.h"

namespace rondel::proxy {

namespace {

constexpr bool is_separator(char c) noexcept {
  return c == ' ' || c == '\t' || c == ',';
}

// `N%` with N decimal digits in 0..kMaxAgentPercent; -1 otherwise.
int32_t percent_of(std::string_view w) noexcept {
  if (w.size() < 2 || w.size() > 5 || w.back() != '%') return -1;
  uint32_t v = 0;
  for (char c : w.substr(0, w.size() - 1)) {
    if (!util::is_digit(c)) return -1;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  return v <= kMaxAgentPercent ? static_cast<int32_t>(v) : -1;
}

// Applies one word to `a`; false when it is not one of the protocol's.
bool apply_word(std::string_view w, AgentAnswer& a) noexcept {
  if (util::iequals(w, "up")) {
    a.health = AgentHealth::kUp;
  } else if (util::iequals(w, "down") || util::iequals(w, "fail") ||
             util::iequals(w, "stopped")) {
    a.health = AgentHealth::kDown;
  } else if (util::iequals(w, "ready")) {
    a.admin = AgentAdmin::kReady;
  } else if (util::iequals(w, "drain")) {
    a.admin = AgentAdmin::kDrain;
  } else if (util::iequals(w, "maint")) {
    a.admin = AgentAdmin::kMaint;
  } else if (int32_t p = percent_of(w); p >= 0) {
    a.weight_percent = p;
  } else {
    return false;
  }
  return true;
}

}  // namespace

AgentAnswer parse_agent_answer(std::string_view line) noexcept {
  AgentAnswer a;
  if (size_t nl = line.find('\n'); nl != std::string_view::npos) line = line.substr(0, nl);
  if (line.size() > kMaxAgentAnswer) return a;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_separator(line[i])) ++i;
    size_t end = i;
    while (end < line.size() && !is_separator(line[end])) ++end;
    if (end > i && apply_word(line.substr(i, end - i), a)) ++a.known_words;
    i = end;
  }
  return a;
}

AgentSummary AgentState::summary() const noexcept {
  const AgentHealth h = health.load(std::memory_order_acquire);
  const AgentAdmin m = admin.load(std::memory_order_acquire);
  if (h == AgentHealth::kDown) return AgentSummary::kDown;
  if (m == AgentAdmin::kMaint) return AgentSummary::kMaint;
  if (m == AgentAdmin::kDrain) return AgentSummary::kDrain;
  return answered.load(std::memory_order_acquire) ? AgentSummary::kUp : AgentSummary::kNone;
}

void AgentState::reset() noexcept {
  health.store(AgentHealth::kUnknown, std::memory_order_release);
  admin.store(AgentAdmin::kUnknown, std::memory_order_release);
  weight_percent.store(100, std::memory_order_relaxed);
  answered.store(false, std::memory_order_relaxed);
  last_ok.store(false, std::memory_order_relaxed);
  last.clear();
  error.clear();
}

}  // namespace rondel::proxy
