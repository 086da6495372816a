// The readers of a pool's health sections, `health_check`, `hot_keys` and `passive_health`
// (docs/configuration.md): each reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

void read_health(NodeReader& r, const Field& f, HealthCheckConfig& h);
// `expect_status: "200-399"` (within read_health).
void read_status_range(NodeReader& r, const Field& f, HealthCheckConfig& h);
void read_hot_keys(NodeReader& r, const Field& f, HotKeysConfig& h);
void read_passive(NodeReader& r, const Field& f, PassiveHealthConfig& p);

}  // namespace rondel::config
