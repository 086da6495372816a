// The edge sections of a listener: `proxy_protocol` and `tls` (split from config_reader.cpp, which
// calls them; same NodeReader, same FILE:LINE:COL errors).
#include "edge_reader.h"

#include <algorithm>
#include <string_view>

#include "reader_util.h"
#include "schema.h"

namespace rondel::config {
namespace {

using namespace schema;

void read_alpn(NodeReader& r, const Field& f, std::vector<std::string>& out) {
  if (!r.read_sequence(f)) return;
  std::vector<std::string> list;
  for (const YAML::Node& entry : f.value) {
    Field one{f.key, f.key_node, entry};
    std::string name;
    if (!r.read_string(one, name, false)) return;
    if (std::find(std::begin(kAlpnProtocols), std::end(kAlpnProtocols), name) ==
        std::end(kAlpnProtocols)) {
      r.error(NodeReader::value_position(one),
               "'alpn' protocols are http/1.1 and h2, got " + quote(name));
      return;
    }
    list.push_back(std::move(name));
  }
  if (std::find(list.begin(), list.end(), "http/1.1") == list.end()) {
    r.error(NodeReader::value_position(f),
             "'alpn' must include http/1.1");
    return;
  }
  out = std::move(list);
}

}  // namespace

// `proxy_protocol: { trusted: [CIDR, ...] }`; each CIDR error at the entry.
void read_proxy_protocol(NodeReader& r, const Field& f, ProxyProtocolConfig& pp) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kProxyProtocolKeys);
  if (!m.is_map()) return;
  const Field* t = r.require(m, "trusted");
  if (t == nullptr) return;
  bool ok = true;
  std::vector<core::Cidr> trusted;
  for_each_entry(r, *t, [&](const YAML::Node& node, Position fallback) {
    Field entry{t->key, t->key_node, node};
    std::string text;
    if (!r.read_string(entry, text, false)) {
      ok = false;
      return;
    }
    core::Cidr cidr;
    std::string why;
    if (!core::Cidr::parse(text, cidr, why)) {
      Position at = NodeReader::position_of(node);
      r.error(at.line > 0 ? at : fallback,
               "'trusted' entry " + quote(text) + " is not a network (CIDR): " + why);
      ok = false;
      return;
    }
    trusted.push_back(cidr);
  });
  if (!ok || trusted.empty()) return;
  pp.enabled = true;
  pp.trusted = std::move(trusted);
}

void read_tls(NodeReader& r, const Field& f, TlsConfig& t) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kTlsKeys);
  if (!m.is_map()) return;
  t.enabled = true;
  t.position = NodeReader::value_position(f);
  if (auto* g = r.require(m, "certificates")) {
    for_each_entry(r, *g, [&](const YAML::Node& node, Position fallback) {
      MapFields cm = r.map(node, "each entry of 'certificates'", fallback, kTlsCertificateKeys);
      if (!cm.is_map()) return;
      TlsCertificateConfig cert;
      cert.position = cm.position();
      if (auto* h = r.require(cm, "cert")) r.read_string(*h, cert.cert, false);
      if (auto* h = r.require(cm, "key")) r.read_string(*h, cert.key, false);
      t.certificates.push_back(std::move(cert));
    });
  }
  if (auto* g = m.get("alpn")) read_alpn(r, *g, t.alpn);
  if (auto* g = m.get("min_version")) r.read_choice<uint16_t>(*g, kTlsVersions, t.min_version);
  if (auto* g = m.get("max_version")) r.read_choice<uint16_t>(*g, kTlsVersions, t.max_version);
  if (t.min_version > t.max_version) {
    r.error(t.position, "'min_version' is above 'max_version'");
  }
  if (auto* g = m.get("ciphers")) r.read_string(*g, t.ciphers, false);
  if (auto* g = m.get("ciphersuites")) r.read_string(*g, t.ciphersuites, false);
  if (auto* g = m.get("groups")) r.read_string(*g, t.groups, false);
  if (auto* g = m.get("session_tickets")) r.read_bool(*g, t.session_tickets);
  if (auto* g = m.get("ticket_key_rotation")) {
    r.read_duration(*g, t.ticket_key_rotation_ms, kMinTicketRotationMs);
  }
  if (auto* g = m.get("client_ca"); g && r.read_string(*g, t.client_ca, false)) {
    t.verify = TlsVerify::kRequired;
  }
  if (auto* g = m.get("verify")) {
    r.read_choice<TlsVerify>(*g, kTlsVerifyModes, t.verify);
    if (t.verify != TlsVerify::kNone && t.client_ca.empty()) {
      r.error(NodeReader::value_position(*g), "'verify' needs 'client_ca' (the CA bundle)");
    }
  }
  if (auto* g = m.get("handshake_timeout")) r.read_duration(*g, t.handshake_timeout_ms, 1);
  if (auto* g = m.get("max_handshakes")) r.read_unsigned(*g, t.max_handshakes, 1, kU32Max);
}

}  // namespace rondel::config
