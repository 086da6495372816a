// oracle_pick (see oracle.h).
#include "oracle.h"

#include <algorithm>

#include "prompt.h"

namespace kvsim {

OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t prompt_tokens, double now,
                         uint32_t factor_percent, uint32_t slack) {
  uint64_t total = 0;
  for (const auto& s : servers) total += s.load();
  uint64_t n = servers.size();
  // ceil(factor / 100 * (total + 1) / n) in integers.
  uint64_t bound = factor_percent == 0
                       ? UINT64_MAX
                       : (factor_percent * (total + 1) + 100 * n - 1) / (100 * n) + slack;
  OracleChoice best;
  bool found = false;
  uint32_t best_any = 0;
  auto before = [&](size_t i, double ttft) {  // is server i (expecting ttft) a better pick?
    if (!found) return true;
    if (ttft != best.expected_ttft) return ttft < best.expected_ttft;
    const ServerModel& a = servers[i];
    const ServerModel& b = servers[best.server];
    if (a.load() != b.load()) return a.load() < b.load();
    return a.cache().hashed() < b.cache().hashed();
  };
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerModel& s = servers[i];
    uint32_t m = s.match(chain);
    best_any = std::max(best_any, m);
    if (found && s.load() >= bound) continue;
    const TimeModel& t = s.config().time;
    uint32_t cached = std::min(m * kTokensPerBlock, prompt_tokens);
    double ttft = s.prefill_backlog(now) + t.p0 + t.p1 * (prompt_tokens - cached);
    // The first server is taken whatever its load, so that there is an answer; an over-bound
    // one is replaced by the first under the bound.
    bool over = s.load() >= bound;
    bool best_over = found && servers[best.server].load() >= bound;
    if ((best_over && !over) || before(i, ttft)) {
      best = OracleChoice{i, m, ttft, false};
      found = true;
    }
  }
  best.spilled = best_any > best.matched_blocks;
  return best;
}

}  // namespace kvsim
