// oracle_pick (see oracle.h).
#include "oracle.h"

#include <algorithm>

#include "prompt.h"

namespace kvsim {

OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t prompt_tokens, double now,
                         const OracleParams& params) {
  size_t n = servers.size();
  uint64_t total = 0;
  for (const auto& s : servers) total += s.load();
  const TimeModel& t = servers[0].config().time;
  bool bounded = params.factor_percent != 0;
  // ceil(factor / 100 * (total + 1) / n) in integers.
  uint64_t bound = (params.factor_percent * (total + 1) + 100 * n - 1) / (100 * n) + params.slack;
  struct Option {
    size_t server;
    uint32_t matched;
    bool eligible;
    double score;   // backlog + work_weight x the prefill this request adds
    double ttft;    // backlog + its own prefill
  };
  auto option = [&](size_t i) {
    const ServerModel& s = servers[i];
    uint32_t m = s.match(chain);
    double work = t.p1 * (prompt_tokens - std::min(m * kTokensPerBlock, prompt_tokens));
    double backlog = s.prefill_backlog(now);
    return Option{i, m, !bounded || s.load() < bound, backlog + params.work_weight * work,
                  backlog + t.p0 + work};
  };
  auto better = [&](const Option& a, const Option& b) {
    if (a.eligible != b.eligible) return a.eligible;
    if (a.score != b.score) return a.score < b.score;
    if (servers[a.server].load() != servers[b.server].load())
      return servers[a.server].load() < servers[b.server].load();
    return servers[a.server].cache().hashed() < servers[b.server].cache().hashed();
  };
  Option best = option(0);
  uint32_t best_any = best.matched;
  for (size_t i = 1; i < n; ++i) {
    Option o = option(i);
    best_any = std::max(best_any, o.matched);
    if (better(o, best)) best = o;
  }
  return OracleChoice{best.server, best.matched, best.ttft, best_any > best.matched};
}

}  // namespace kvsim
