// BackendSet validation and the id-ordered indices placement relies on.
#include "rondel/core/backend_set.h"

#include <algorithm>
#include <numeric>

#include "rondel/core/hash.h"

namespace rondel::core {

Result<BackendSet> BackendSet::create(std::vector<BackendSpec> specs) {
  if (specs.empty()) return fail("no backends");
  if (specs.size() > kMaxBackends) {
    return fail("more than 65535 backends (" + std::to_string(specs.size()) + ")");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].id.empty()) return fail("backend #" + std::to_string(i) + " has an empty id");
  }

  BackendSet set;
  const size_t n = specs.size();
  set.by_id_.resize(n);
  std::iota(set.by_id_.begin(), set.by_id_.end(), BackendIndex{0});
  // std::string compares with char_traits<char>, which orders bytes as unsigned char.
  std::sort(set.by_id_.begin(), set.by_id_.end(),
            [&](BackendIndex a, BackendIndex b) { return specs[a].id < specs[b].id; });
  for (size_t k = 1; k < n; ++k) {
    if (specs[set.by_id_[k - 1]].id == specs[set.by_id_[k]].id) {
      return fail("duplicate backend id '" + specs[set.by_id_[k]].id + "'");
    }
  }
  set.id_rank_.resize(n);
  for (size_t k = 0; k < n; ++k) set.id_rank_[set.by_id_[k]] = static_cast<BackendIndex>(k);

  set.id_hashes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    set.id_hashes_[i] = hash64(specs[i].id);
    set.total_weight_ += specs[i].weight;
    if (specs[i].weight > 0) ++set.eligible_count_;
  }
  set.specs_ = std::move(specs);
  return set;
}

std::optional<BackendIndex> BackendSet::find(std::string_view id) const noexcept {
  auto it = std::lower_bound(by_id_.begin(), by_id_.end(), id,
                             [&](BackendIndex a, std::string_view v) { return specs_[a].id < v; });
  if (it == by_id_.end() || specs_[*it].id != id) return std::nullopt;
  return *it;
}

}  // namespace rondel::core
