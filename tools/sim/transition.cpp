// rondel-sim --to-*: share of keys whose owner changes between two pool configurations.
#include "transition.h"

#include <vector>

#include "balance.h"
#include "placement.h"

namespace rondel::sim {

core::Result<TransitionReport> run_transition(const SimOptions& opt) {
  std::vector<SimBackend> before;
  for (uint32_t g = 0; g < opt.backends; ++g) {
    before.push_back(make_backend(g, opt.weights.empty() ? 1 : opt.weights[g]));
  }
  const uint32_t n_after = opt.to_backends ? opt.to_backends : opt.backends;
  std::vector<SimBackend> after;
  for (uint32_t g = 0; g < n_after; ++g) {
    const uint32_t w = !opt.to_weights.empty() ? opt.to_weights[g]
                       : !opt.weights.empty() && g < opt.weights.size() ? opt.weights[g]
                                                                         : 1;
    // A renamed backend: same place in the list, a global number (so an id) no pool has.
    const bool renamed = opt.to_rename >= 0 && g == static_cast<uint32_t>(opt.to_rename);
    after.push_back(make_backend(renamed ? 65535 - g : g, w));
  }
  auto a = Placement::build(opt.algo, before, opt);
  if (!a) return a.error();
  auto b = Placement::build(opt.to_algo, after, opt);
  if (!b) return b.error();
  TransitionReport r;
  r.keys = opt.keys;
  uint64_t moved = 0;
  for (uint64_t i = 0; i < opt.keys; ++i) {
    const uint64_t h = key_hash(opt.seed, i);
    if (a->owner_global(h) != b->owner_global(h)) ++moved;
  }
  r.moved = static_cast<double>(moved) / static_cast<double>(opt.keys);
  return r;
}

}  // namespace rondel::sim
