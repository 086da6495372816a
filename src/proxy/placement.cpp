// A pool's placement from its configuration (Pool::build and the reload dry-run).
#include "rondel/proxy/placement.h"

#include <utility>
#include <vector>

namespace rondel::proxy {

std::string placement_id(const config::BackendConfig& b) {
  return b.id.empty() ? b.address.to_string() : b.id;
}

core::Result<Placement> build_placement(const config::PoolConfig& cfg) {
  std::vector<core::BackendSpec> specs;
  specs.reserve(cfg.backends.size());
  for (const auto& b : cfg.backends) specs.push_back({placement_id(b), b.weight});
  if (specs.empty()) specs.push_back({"(no backend)", 1});
  auto set = core::BackendSet::create(std::move(specs));
  if (!set) return core::fail("pool " + cfg.name + ": " + set.error().message);
  auto sel = core::Selector::build(*set, selector_options(cfg));
  if (!sel) return core::fail("pool " + cfg.name + ": " + sel.error().message);
  return Placement{std::move(*set), std::move(*sel)};
}

}  // namespace rondel::proxy
