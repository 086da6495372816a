// Sampled move matrix between two placements, and the ideal (least possible) move.
#include "rondel/core/placement_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "rondel/core/hash.h"

namespace rondel::core {

PlacementDiff diff_placements(const BackendSet& old_set, const Selector& old_sel,
                              const BackendSet& new_set, const Selector& new_sel,
                              uint64_t samples) {
  PlacementDiff d;
  d.samples = samples;
  if (samples == 0) return d;
  // Old index -> new index of the same id (kNoBackend when the id is gone).
  std::vector<BackendIndex> same(old_set.size(), kNoBackend);
  for (size_t i = 0; i < old_set.size(); ++i) {
    if (auto j = new_set.find(old_set[static_cast<BackendIndex>(i)].id)) same[i] = *j;
  }
  std::map<std::pair<BackendIndex, BackendIndex>, uint64_t> cells;
  uint64_t moved = 0;
  for (uint64_t k = 0; k < samples; ++k) {
    const uint64_t h = mix64(k, kDiffSampleSeed);
    const BackendIndex a = old_sel.owner(h);
    const BackendIndex b = new_sel.owner(h);
    if (same[a] == b) continue;
    ++moved;
    ++cells[{a, b}];
  }
  const double n = static_cast<double>(samples);
  d.moved = static_cast<double>(moved) / n;
  d.moved_stderr = std::sqrt(d.moved * (1.0 - d.moved) / n);
  for (const auto& [key, count] : cells) {
    d.moves.push_back({old_set[key.first].id, new_set[key.second].id,
                       static_cast<double>(count) / n});
  }
  std::sort(d.moves.begin(), d.moves.end(), [](const MoveShare& x, const MoveShare& y) {
    if (x.share != y.share) return x.share > y.share;
    return std::tie(x.from, x.to) < std::tie(y.from, y.to);
  });
  return d;
}

double ideal_moved_share(const std::vector<BackendSpec>& old_specs,
                         const std::vector<BackendSpec>& new_specs) {
  auto shares = [](const std::vector<BackendSpec>& specs) {
    std::map<std::string, double> out;
    double total = 0;
    for (const BackendSpec& s : specs) total += s.weight;
    if (total == 0) return out;
    for (const BackendSpec& s : specs) out[s.id] += s.weight / total;
    return out;
  };
  const auto before = shares(old_specs);
  const auto after = shares(new_specs);
  double lost = 0;
  for (const auto& [id, share] : before) {
    const auto it = after.find(id);
    lost += std::max(0.0, share - (it == after.end() ? 0.0 : it->second));
  }
  return lost;
}

}  // namespace rondel::core
