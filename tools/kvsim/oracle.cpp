// oracle_pick (see oracle.h).
#include "oracle.h"

namespace kvsim {

OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t factor_percent,
                         uint32_t slack) {
  uint64_t total = 0;
  for (const auto& s : servers) total += s.load();
  uint64_t n = servers.size();
  // ceil(factor / 100 * (total + 1) / n) in integers.
  uint64_t bound = factor_percent == 0 ? UINT64_MAX
                                       : (factor_percent * (total + 1) + 100 * n - 1) / (100 * n) + slack;
  OracleChoice best;
  bool found = false;
  uint32_t best_any = 0;
  for (size_t i = 0; i < servers.size(); ++i) {
    uint32_t m = servers[i].match(chain);
    if (m > best_any) best_any = m;
    if (servers[i].load() >= bound) continue;
    const ServerModel& b = servers[best.server];
    bool better = !found || m > best.matched_blocks ||
                  (m == best.matched_blocks &&
                   (servers[i].load() < b.load() ||
                    (servers[i].load() == b.load() && servers[i].cache().hashed() < b.cache().hashed())));
    if (better) {
      best = OracleChoice{i, m, false};
      found = true;
    }
  }
  if (!found) {  // cannot happen with a bound >= the mean; keep a defined answer anyway
    for (size_t i = 1; i < servers.size(); ++i)
      if (servers[i].load() < servers[best.server].load()) best.server = i;
    best.matched_blocks = servers[best.server].match(chain);
  }
  best.spilled = best_any > best.matched_blocks;
  return best;
}

}  // namespace kvsim
