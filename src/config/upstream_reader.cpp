// A pool's `tls` section: TLS from rondel to the pool's backends (called by config_reader.cpp;
// same NodeReader, same FILE:LINE:COL errors). Files are only named here; tls::ClientContext
// loads them when a snapshot is built.
#include "upstream_reader.h"

#include "reader_util.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

void read_backend_tls(NodeReader& r, const Field& f, BackendTlsConfig& t) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kBackendTlsKeys);
  if (!m.is_map()) return;
  t.enabled = true;
  t.position = NodeReader::value_position(f);
  if (auto* g = m.get("verify")) r.read_bool(*g, t.verify);
  if (auto* g = m.get("ca")) r.read_string(*g, t.ca, false);
  if (auto* g = m.get("sni")) r.read_string(*g, t.sni, false);
  if (auto* g = m.get("min_version")) r.read_choice<uint16_t>(*g, kTlsVersions, t.min_version);
  if (auto* g = m.get("max_version")) r.read_choice<uint16_t>(*g, kTlsVersions, t.max_version);
  if (t.min_version > t.max_version) r.error(t.position, "'min_version' is above 'max_version'");
  const Field* cert = m.get("cert");
  const Field* key = m.get("key");
  if (cert != nullptr) r.read_string(*cert, t.cert, false);
  if (key != nullptr) r.read_string(*key, t.key, false);
  if ((cert == nullptr) != (key == nullptr)) {
    r.error(NodeReader::value_position(cert != nullptr ? *cert : *key),
            "'cert' and 'key' (the client certificate) go together");
  }
  if (auto* g = m.get("session_reuse")) r.read_bool(*g, t.session_reuse);
}

}  // namespace rondel::config
