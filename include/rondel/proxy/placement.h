// Building a pool's placement from its configuration: the one code Pool::build and the reload
// dry-run (server/config_diff.cpp) share, so the dry-run measures the placement a reload builds.
#pragma once

#include <string>

#include "rondel/config/config.h"
#include "rondel/core/backend_set.h"
#include "rondel/core/result.h"
#include "rondel/core/selector.h"

namespace rondel::proxy {

// The placement id of a configured backend: its `id`, else its address ("host:port").
std::string placement_id(const config::BackendConfig& b);

// The selector options of a configured placement: a pool's own (config::PoolConfig) or the one
// it migrates from (config::PlacementConfig), which name the same fields.
template <class PlacementFields>
core::SelectorOptions selector_options(const PlacementFields& c) noexcept {
  core::SelectorOptions so;
  so.algorithm = c.algorithm;
  so.points_per_weight = c.points_per_weight;
  so.max_points = c.max_points;
  so.maglev_table_size = c.maglev_table_size;
  return so;
}

// A pool's current placement: the backend set over its backends in configuration order (ids by
// placement_id) and the selector over it. A pool without backends (its names resolved to
// nothing) gets one placeholder entry that is no backend, so the pool exists and every pick
// answers kNoBackend. Errors: "pool NAME: " and the set's or the selector's message. Allocates;
// not on the data path (config load, reload, dry-run).
struct Placement {
  core::BackendSet set;
  core::Selector selector;
};
core::Result<Placement> build_placement(const config::PoolConfig& cfg);

}  // namespace rondel::proxy
