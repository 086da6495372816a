// The readers of backend labels and a pool's subset selectors (`labels`, `subsets`,
// docs/routing.md "Subsets"): each reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// A backend entry's `labels: [a, b]` into `out`. `pool_labels` collects the pool's distinct
// labels across its backends: the label that would be the 65th is an error at its position.
bool read_labels(NodeReader& r, const Field& f, std::vector<std::string>& out,
                 std::vector<std::string>& pool_labels);

// A pool's `subsets` list into p.subsets, after p.backends is read: each rule needs one `when`
// (listener, header with value, or path_prefix) and a non-empty `require` of labels in
// `known_labels` (the pool's, as read_labels collected them); a `listener` must name one of
// `listeners`.
void read_subsets(NodeReader& r, const Field& f, PoolConfig& p,
                  std::span<const ListenerConfig> listeners,
                  const std::vector<std::string>& known_labels);

}  // namespace rondel::config
