// The oracle router: the best any router could do, since it reads every server's cache and queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "server_model.h"

namespace kvsim {

struct OracleChoice {
  size_t server = 0;
  uint32_t matched_blocks = 0;  // on the chosen server
  double expected_ttft = 0;     // backlog + p0 + p1 x uncached tokens, model seconds
  bool spilled = false;         // another server held a longer prefix than the one chosen
};

struct OracleParams {
  uint32_t factor_percent = 125;  // load bound; 0: none
  uint32_t slack = 8;
  double work_weight = 3;
};

// Picks, for a request arriving at model time `now` with `prompt_tokens` tokens and block chain
// `chain`, among the servers whose load (running + waiting) is under
// ceil(factor_percent / 100 x (total + 1) / servers) + slack (bounded loads, Mirrokni, Thorup and
// Zadimoghaddam 2018, with rondel's capacity_slack), the one with the least
//   prefill backlog (ServerModel::prefill_backlog, known exactly) + work_weight x p1 x the
//   tokens not cached there.
// A weight of 1 is the soonest first token for this request alone, which moves conversations
// off their cached contexts whenever a queue forms and spends the servers on recomputing them;
// a large weight is the longest cached prefix, which piles every request sharing one system
// prompt onto the first server that cached it. docs/benchmarks.md measures both ends; 3 keeps
// the oracle ahead on every trace there. If no server is under the bound, all are candidates.
// Ties go to the least loaded, then the emptiest cache (a new prefix goes where it evicts
// least), then the lowest index. Pure; O(servers x blocks). servers must not be empty.
OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t prompt_tokens, double now,
                         const OracleParams& params);

}  // namespace kvsim
