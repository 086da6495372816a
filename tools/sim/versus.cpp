// Interleaved lookup timing of several placements (rondel-sim --versus).
#include "versus.h"

#include <algorithm>
#include <chrono>

#include "balance.h"
#include "placement.h"

namespace rondel::sim {

core::Result<std::vector<VersusEntry>> run_versus(const SimOptions& opt) {
  std::vector<AlgoChoice> algos{opt.algo};
  algos.insert(algos.end(), opt.versus.begin(), opt.versus.end());
  std::vector<SimBackend> pool;
  for (uint32_t g = 0; g < opt.backends; ++g) {
    pool.push_back(make_backend(g, opt.weights.empty() ? 1 : opt.weights[g]));
  }
  std::vector<Placement> placements;
  std::vector<VersusEntry> out;
  const size_t max_keys = std::min<size_t>(opt.keys, size_t{1} << 20);
  for (AlgoChoice a : algos) {
    auto p = Placement::build(a, pool, opt);
    if (!p) return p.error();
    VersusEntry e;
    e.algo = a;
    if (const core::Selector* sel = p->selector()) e.memory_bytes = sel->memory_bytes();
    // Flat rendezvous costs O(N) per lookup: time about 2e7 score computations per rep.
    e.probe_keys = a == AlgoChoice::kRendezvous
                       ? std::clamp<size_t>(20000000 / opt.backends, 1000, max_keys)
                       : max_keys;
    out.push_back(e);
    placements.push_back(std::move(*p));
  }
  std::vector<uint64_t> hashes(max_keys);
  for (size_t i = 0; i < max_keys; ++i) hashes[i] = key_hash(opt.seed, i);
  std::vector<std::vector<double>> reps(algos.size());
  uint64_t sink = 0;
  for (uint32_t rep = 0; rep < std::max<uint32_t>(3, opt.lookup_reps); ++rep) {
    for (size_t a = 0; a < algos.size(); ++a) {
      const Placement& p = placements[a];
      const size_t k = out[a].probe_keys;
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < k; ++i) sink += p.owner_index(hashes[i]);
      auto t1 = std::chrono::steady_clock::now();
      reps[a].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / k);
    }
  }
  volatile uint64_t keep = sink;  // Keeps the timed lookups observable to the optimizer.
  (void)keep;
  for (size_t a = 0; a < algos.size(); ++a) {
    std::vector<double>& v = reps[a];
    std::sort(v.begin(), v.end());
    out[a].lookup_ns = v[v.size() / 2];
    out[a].ratio_to_first = out[a].lookup_ns / out[0].lookup_ns;
  }
  return out;
}

}  // namespace rondel::sim
