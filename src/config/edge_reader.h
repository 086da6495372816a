// The readers of a listener's edge sections, `proxy_protocol` and `tls` (docs/configuration.md):
// each reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// `proxy_protocol: { trusted: [CIDR, ...] }`; each CIDR error at its entry.
void read_proxy_protocol(NodeReader& r, const Field& f, ProxyProtocolConfig& pp);
// `tls: { certificates: [...], alpn, versions, tickets, client_ca, verify, limits }`.
void read_tls(NodeReader& r, const Field& f, TlsConfig& t);

}  // namespace rondel::config
