// The readers of a pool's health sections, `health_check`, `hot_keys` and `passive_health`
// (docs/configuration.md): each reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

void read_health(NodeReader& r, const Field& f, HealthCheckConfig& h);
// `expect_status: "200-399"` (within read_health).
void read_status_range(NodeReader& r, const Field& f, HealthCheckConfig& h);
// `agent_check` of a backend: the keys it sets (each overrides the pool's). True when it names
// `port` (valid or not).
bool read_agent_check(NodeReader& r, const Field& f, AgentCheckOverride& o);
// `agent_check` of a pool: on unless `enabled: false`; an enabled section needs `port`.
void read_pool_agent_check(NodeReader& r, const Field& f, AgentCheckConfig& a);
void read_hot_keys(NodeReader& r, const Field& f, HotKeysConfig& h);
void read_passive(NodeReader& r, const Field& f, PassiveHealthConfig& p);

}  // namespace rondel::config
