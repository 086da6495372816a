// The reader of a pool's backend-side `tls` section (docs/configuration.md): every error goes
// through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// `tls: { verify, ca, sni, min_version, max_version, cert, key, session_reuse }` in a pool.
void read_backend_tls(NodeReader& r, const Field& f, BackendTlsConfig& t);

}  // namespace rondel::config
