// The reader of a pool's `load_report` section (backend-reported load, docs/configuration.md):
// reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// Fills `out` (enabled = true) from the mapping `f`: header (an HTTP token, stored lower case;
// endpoint-load-metrics selects the ORCA parser, any other name a plain number), metric (ORCA
// only: a name of [A-Za-z0-9_.-]), max_age (a duration >= 1 ms), scale (1..1,000,000).
void read_load_report(NodeReader& r, const Field& f, LoadReportConfig& out);

}  // namespace rondel::config
