// Builds the placement under test and translates core backend indexes to simulator numbers.
#include "placement.h"

#include <chrono>
#include <cstdio>
#include <unordered_map>


namespace rondel::sim {

SimBackend make_backend(uint32_t g, uint32_t weight) {
  char id[32];
  std::snprintf(id, sizeof id, "10.0.%u.%u:8080", g / 256, g % 256);
  return SimBackend{g, core::BackendSpec{id, weight}};
}

core::SelectorOptions selector_options(AlgoChoice algo, const SimOptions& opt) {
  core::SelectorOptions so;
  so.algorithm = selector_algorithm(algo);
  so.points_per_weight = opt.points;
  so.maglev_table_size = opt.maglev_table;
  return so;
}

core::Result<Placement> Placement::build(AlgoChoice algo, const std::vector<SimBackend>& pool,
                                         const SimOptions& opt) {
  Placement p;
  if (algo == AlgoChoice::kJump) {
    for (const SimBackend& b : pool) p.global_of_index_.push_back(b.global);
    return p;
  }
  std::vector<core::BackendSpec> specs;
  std::unordered_map<std::string, uint32_t> global_of_id;
  for (const SimBackend& b : pool) {
    specs.push_back(b.spec);
    global_of_id.emplace(b.spec.id, b.global);
  }
  auto set = core::BackendSet::create(std::move(specs));
  if (!set) return set.error();
  p.set_ = std::make_unique<core::BackendSet>(std::move(*set));
  auto t0 = std::chrono::steady_clock::now();
  auto sel = core::Selector::build(*p.set_, selector_options(algo, opt));
  auto t1 = std::chrono::steady_clock::now();
  if (!sel) return sel.error();
  p.build_seconds_ = std::chrono::duration<double>(t1 - t0).count();
  for (size_t i = 0; i < p.set_->size(); ++i) {
    p.global_of_index_.push_back(
        global_of_id.at((*p.set_)[static_cast<core::BackendIndex>(i)].id));
  }
  p.selector_.emplace(std::move(*sel));
  return p;
}

}  // namespace rondel::sim
