// The oracle router: the best any router could do, since it reads every server's cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "server_model.h"

namespace kvsim {

struct OracleChoice {
  size_t server = 0;
  uint32_t matched_blocks = 0;
  bool spilled = false;  // a server over the bound held a longer prefix than the one chosen
};

// Picks, for a request whose prompt has block chain `chain`, the server holding the longest
// cached prefix among those whose load (running + waiting) is under the bound
// ceil(factor_percent / 100 x (total load + 1) / servers) + slack (bounded loads, Mirrokni,
// Thorup and Zadimoghaddam 2018, with rondel's capacity_slack, so that a handful of requests
// does not count as overload); ties go to the least loaded, then to the one holding the fewest
// cached blocks (a new prefix goes where it evicts least), then to the lowest index.
// factor_percent 0: no bound. Pure; O(servers x blocks). servers must not be empty.
OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t factor_percent,
                         uint32_t slack);

}  // namespace kvsim
