// The reader of a pool's `discovery` section (backends from etcd or Kubernetes,
// docs/configuration.md): reports every error through the NodeReader, at FILE:LINE:COL. Nothing
// here contacts a source: `rondel -c` checks the settings only.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// Fills `out` from the mapping `f`: exactly one of `etcd` {endpoints: [URL...], prefix, ca} and
// `kubernetes` {service, namespace, port, server, token_file, ca}, then allow_empty, timeout and
// retry.
void read_discovery(NodeReader& r, const Field& f, DiscoveryConfig& out);
// Fills `out` (enabled) from the top-level mapping `fleet`: exactly one of `etcd` {endpoints,
// prefix, ca} and `kubernetes` (as in read_discovery), id (no spaces or '/'), ttl (whole
// seconds, >= 2 s), timeout, retry.
void read_fleet(NodeReader& r, const Field& f, FleetConfig& out);
// The fleet's needs of the `admin` section, once both are read (errors at `at`, the `fleet`
// mapping): members that read each other's hot-key records do it on the admin API, and shared
// counts (`share_load`) go from and to the admin address, so sharing without one could never
// work: an error, not a silence.
void check_fleet_admin(NodeReader& r, Position at, const Config& c);

}  // namespace rondel::config
