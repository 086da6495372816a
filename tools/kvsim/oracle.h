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
  double expected_ttft = 0;     // model seconds, before decode
  bool spilled = false;  // a server over the bound held a longer prefix than the one chosen
};

// Picks, for a request arriving at model time `now` with `prompt_tokens` tokens and block chain
// `chain`, the server where its first token would come soonest: the least prefill backlog plus
// p0 + p1 x (tokens not cached there), knowing every cache and queue exactly. So a long cached
// prefix wins unless the server holding it has a longer queue than recomputing the prefix costs
// (a short prefix shared by every request, such as one system prompt, does not pile all requests
// onto the first server that cached it). Only servers whose load (running + waiting) is under
// ceil(factor_percent / 100 x (total load + 1) / servers) + slack are candidates (bounded loads,
// Mirrokni, Thorup and Zadimoghaddam 2018, with rondel's capacity_slack); factor_percent 0: no
// bound. Ties go to the least loaded, then to the one holding the fewest cached blocks (a new
// prefix goes where it evicts least), then to the lowest index. `spilled`: another server held a
// longer prefix than the one chosen. Pure; O(servers x blocks). servers must not be empty.
OracleChoice oracle_pick(const std::vector<ServerModel>& servers,
                         const std::vector<uint64_t>& chain, uint32_t prompt_tokens, double now,
                         uint32_t factor_percent, uint32_t slack);

}  // namespace kvsim
