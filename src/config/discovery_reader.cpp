// A pool's `discovery` section: the etcd or Kubernetes source of its backends.
#include "discovery_reader.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "reader_util.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

namespace {

// A Kubernetes object name as Services and namespaces use it (RFC 1123 label, DNS-1035 for
// Services): lower-case letters, digits and '-', at most 63, starting and ending alphanumeric.
bool k8s_label(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool read_url(NodeReader& r, const Field& f, const YAML::Node& node, ApiUrl& out) {
  Field one{f.key, f.key_node, node};
  std::string text;
  if (!r.read_string(one, text, false)) return false;
  auto url = parse_api_url(text);
  if (!url) {
    r.error(NodeReader::value_position(one),
            "bad URL " + quote(text) + " for " + quote(f.key) + ": " + url.error().message);
    return false;
  }
  out = std::move(*url);
  return true;
}

void read_etcd(NodeReader& r, const Field& f, DiscoveryConfig& out) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kEtcdKeys);
  if (!m.is_map()) return;
  if (auto* g = r.require(m, "endpoints")) {
    for_each_entry(r, *g, [&](const YAML::Node& node, Position) {
      ApiUrl u;
      if (read_url(r, *g, node, u)) out.endpoints.push_back(std::move(u));
    });
  }
  if (auto* g = r.require(m, "prefix"); g && r.read_string(*g, out.prefix, false)) {
    if (has_space_or_control(out.prefix)) {
      r.error(NodeReader::value_position(*g),
              "'prefix' must have no spaces or control characters, got " + quote(out.prefix));
    }
  }
  if (auto* g = m.get("ca")) r.read_string(*g, out.ca, false);
  if (auto* g = m.get("token_file")) r.read_string(*g, out.token_file, false);
  const Field* user = m.get("username");
  const Field* password = m.get("password_file");
  if (user != nullptr) r.read_string(*user, out.username, false);
  if (password != nullptr) r.read_string(*password, out.password_file, false);
  if ((user == nullptr) != (password == nullptr)) {
    r.error(NodeReader::value_position(user != nullptr ? *user : *password),
            "'username' and 'password_file' go together");
  } else if (user != nullptr && m.get("token_file") != nullptr) {
    r.error(NodeReader::value_position(*user),
            "'username' and 'token_file' are two ways to authenticate: give one");
  }
}

void read_kubernetes(NodeReader& r, const Field& f, DiscoveryConfig& out) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kKubernetesKeys);
  if (!m.is_map()) return;
  if (auto* g = r.require(m, "service"); g && r.read_string(*g, out.service, false)) {
    if (!k8s_label(out.service, 63)) {
      r.error(NodeReader::value_position(*g),
              "'service' must be a Service name (lower-case letters, digits and '-', at most "
              "63), got " + quote(out.service));
    }
  }
  if (auto* g = m.get("namespace"); g && r.read_string(*g, out.namespace_name, false)) {
    if (!k8s_label(out.namespace_name, 63)) {
      r.error(NodeReader::value_position(*g),
              "'namespace' must be a namespace name (lower-case letters, digits and '-', at "
              "most 63), got " + quote(out.namespace_name));
    }
  }
  if (auto* g = r.require(m, "port"); g && r.read_string(*g, out.port, false)) {
    const bool number = out.port.find_first_not_of("0123456789") == std::string::npos;
    const bool ok = number ? (out.port.size() <= 5 && std::stoul(out.port) >= 1 &&
                              std::stoul(out.port) <= 65535)
                           : k8s_label(out.port, 15);
    if (!ok) {
      r.error(NodeReader::value_position(*g),
              "'port' must be a port name (lower-case letters, digits and '-', at most 15) or "
              "a number 1..65535, got " + quote(out.port));
    }
  }
  if (auto* g = m.get("server")) read_url(r, *g, g->value, out.server);
  if (auto* g = m.get("token_file")) r.read_string(*g, out.token_file, false);
  if (auto* g = m.get("ca")) r.read_string(*g, out.ca, false);
}

// Exactly one of `etcd` and `kubernetes` of the section `what` into `out`.
void read_source(NodeReader& r, const MapFields& m, const std::string& what,
                 DiscoveryConfig& out) {
  const Field* etcd = m.get("etcd");
  const Field* k8s = m.get("kubernetes");
  if (etcd != nullptr && k8s != nullptr) {
    r.error(NodeReader::value_position(*k8s),
            quote(what) + " takes one source: 'etcd' or 'kubernetes', not both");
  } else if (etcd != nullptr) {
    out.kind = DiscoveryKind::kEtcd;
    read_etcd(r, *etcd, out);
  } else if (k8s != nullptr) {
    out.kind = DiscoveryKind::kKubernetes;
    read_kubernetes(r, *k8s, out);
  } else {
    r.error(m.position(), quote(what) + " needs a source: 'etcd' or 'kubernetes'");
  }
}

}  // namespace

void read_discovery(NodeReader& r, const Field& f, DiscoveryConfig& out) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kDiscoveryKeys);
  if (!m.is_map()) return;
  out.position = m.position();
  read_source(r, m, "discovery", out);
  if (auto* g = m.get("allow_empty")) r.read_bool(*g, out.allow_empty);
  if (auto* g = m.get("timeout")) r.read_duration(*g, out.timeout_ms, 1);
  if (auto* g = m.get("retry")) r.read_duration(*g, out.retry_ms, kMinDiscoveryRetryMs);
}

namespace {

// `share_load`: an interval from kMinShareLoadMs to kMaxShareLoadMs.
bool read_share_load(NodeReader& r, const Field& g, uint64_t& out) {
  if (!r.read_duration(g, out, kMinShareLoadMs)) return false;
  if (out > kMaxShareLoadMs) {
    r.error(NodeReader::value_position(g),
            "'share_load' must be at most 10s (counts older than 4 intervals are not used)");
    return false;
  }
  return true;
}

// `peers: [{id, admin}, ...]`: a fixed fleet whose members read each other's hot-key counts at
// their admin addresses. Excludes a source; `id` must name one of them.
void read_peers(NodeReader& r, const MapFields& m, const Field& list, FleetConfig& out) {
  for (const char* key : {"etcd", "kubernetes", "ttl", "timeout", "peer_port"}) {
    if (const Field* g = m.get(key)) {
      r.error(NodeReader::value_position(*g),
              quote(key) + " does not apply to a fleet of 'peers' (a fixed member list)");
    }
  }
  for_each_entry(r, list, [&](const YAML::Node& node, Position fallback) {
    MapFields e = r.map(node, "each entry of 'peers'", fallback, kFleetPeerKeys);
    if (!e.is_map()) return;
    FleetConfig::Peer p;
    p.position = e.position();
    const Field* id = r.require(e, "id");
    const Field* admin = r.require(e, "admin");
    if (id == nullptr || admin == nullptr) return;
    if (!r.read_string(*id, p.id, false) || !r.read_address(*admin, p.admin, false, false)) return;
    if (has_space_or_control(p.id) || p.id.find('/') != std::string::npos) {
      r.error(NodeReader::value_position(*id),
              "'id' must have no spaces, control characters or '/', got " + quote(p.id));
      return;
    }
    for (const FleetConfig::Peer& o : out.peers) {
      if (o.id == p.id) {
        r.error(NodeReader::value_position(*id), "peer " + quote(p.id) + " is listed twice");
        return;
      }
    }
    out.peers.push_back(std::move(p));
  });
  if (out.peers.size() > kMaxFleetInstances) {
    r.error(NodeReader::value_position(list), "'peers' lists more than 1024 instances");
  }
  const Field* g = m.get("id");
  if (g == nullptr) {
    r.error(NodeReader::value_position(list),
            "a fleet of 'peers' needs 'id': which of them this instance is");
  } else if (r.read_string(*g, out.id, false)) {
    const bool listed = std::any_of(out.peers.begin(), out.peers.end(),
                                    [&](const FleetConfig::Peer& p) { return p.id == out.id; });
    if (!listed && !out.peers.empty()) {
      r.error(NodeReader::value_position(*g),
              "'id' " + quote(out.id) + " is not one of 'peers': list this instance too");
    }
  }
  if (auto* g = m.get("retry")) r.read_duration(*g, out.source.retry_ms, kMinDiscoveryRetryMs);
  if (auto* g = m.get("share_hot_keys")) r.read_bool(*g, out.share_hot_keys);
  if (auto* g = m.get("share_load")) read_share_load(r, *g, out.share_load_ms);
}

}  // namespace

void read_fleet(NodeReader& r, const Field& f, FleetConfig& out) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kFleetKeys);
  if (!m.is_map()) return;
  out.position = m.position();
  out.source.position = m.position();
  if (const Field* n = m.get("instances")) {
    // A static fleet: N given, nothing registered or watched.
    uint64_t v = 0;
    if (r.read_u64(*n, v, 1, kMaxFleetInstances)) out.instances = static_cast<uint32_t>(v);
    if (m.get("etcd") != nullptr || m.get("kubernetes") != nullptr) {
      r.error(NodeReader::value_position(*n),
              "'instances' is a static fleet size: with 'etcd' or 'kubernetes' the fleet "
              "counts its members itself; give one");
    }
    for (const char* key :
         {"id", "ttl", "timeout", "retry", "share_hot_keys", "peer_port", "share_load"}) {
      if (const Field* g = m.get(key)) {
        r.error(NodeReader::value_position(*g),
                quote(key) + " needs a fleet source ('etcd' or 'kubernetes'), not 'instances'");
      }
    }
    if (const Field* g = m.get("peers")) {
      r.error(NodeReader::value_position(*g),
              "'peers' lists the fleet and 'instances' states its size: give one");
    }
    return;
  }
  out.enabled = true;
  if (const Field* list = m.get("peers")) {
    read_peers(r, m, *list, out);
    return;
  }
  read_source(r, m, "fleet", out.source);
  if (auto* g = m.get("id"); g && r.read_string(*g, out.id, false)) {
    if (has_space_or_control(out.id) || out.id.find('/') != std::string::npos) {
      r.error(NodeReader::value_position(*g),
              "'id' must have no spaces, control characters or '/', got " + quote(out.id));
    }
  }
  if (auto* g = m.get("ttl"); g && r.read_duration(*g, out.ttl_ms, kMinFleetTtlMs)) {
    if (out.ttl_ms % 1000 != 0) {
      r.error(NodeReader::value_position(*g), "'ttl' must be whole seconds (an etcd lease)");
    }
  }
  if (auto* g = m.get("timeout")) r.read_duration(*g, out.source.timeout_ms, 1);
  if (auto* g = m.get("retry")) r.read_duration(*g, out.source.retry_ms, kMinDiscoveryRetryMs);
  if (auto* g = m.get("share_hot_keys")) r.read_bool(*g, out.share_hot_keys);
  // On Kubernetes the members read each other's counts from their admin APIs, which the
  // cluster's network policy must allow: off unless asked.
  if (out.source.kind == DiscoveryKind::kKubernetes && m.get("share_hot_keys") == nullptr) {
    out.share_hot_keys = false;
  }
  if (const Field* g = m.get("share_load");
      g && read_share_load(r, *g, out.share_load_ms) &&
      out.source.kind != DiscoveryKind::kKubernetes) {
    r.error(NodeReader::value_position(*g),
            "'share_load' reads the other members' counts at their admin addresses, which an "
            "etcd fleet does not list: use 'peers' or 'kubernetes'");
  }
  if (const Field* g = m.get("peer_port")) {
    uint64_t v = 0;
    if (r.read_u64(*g, v, 1, 65535)) out.peer_port = static_cast<uint16_t>(v);
    if (out.source.kind != DiscoveryKind::kKubernetes) {
      r.error(NodeReader::value_position(*g),
              "'peer_port' is where Kubernetes members read each other's hot-key counts; an "
              "etcd fleet shares them through etcd");
    }
  }
}

void check_fleet_admin(NodeReader& r, Position at, const Config& c) {
  const FleetConfig& f = c.fleet;
  if (f.enabled && f.share_load_ms > 0) {
    // The members' counts go from each one's admin address to the others', whose listed port
    // must be where they come from.
    if (!c.admin.enabled || c.admin.bind.port == 0) {
      r.error(at, "'share_load' sends and receives the members' counts on the admin "
                  "address: give 'admin' a bind address with a fixed port");
    } else if (f.peer_port != 0 && f.peer_port != c.admin.bind.port) {
      r.error(at, "'share_load' sends each member's counts from its admin port: 'peer_port' "
                  "must be that port (" + std::to_string(c.admin.bind.port) + "), not " +
                  std::to_string(f.peer_port));
    }
  }
  if (!f.enabled || !f.share_hot_keys || c.admin.enabled) return;
  if (!f.peers.empty()) {
    r.error(at, "a fleet of 'peers' shares hot keys on the admin API: give 'admin' a bind "
                "address, or set share_hot_keys: false");
  } else if (f.source.kind == DiscoveryKind::kKubernetes && f.peer_port == 0) {
    r.error(at, "'share_hot_keys' on Kubernetes reads the members' admin APIs: give 'admin' "
                "a bind address (or 'peer_port')");
  }
}

}  // namespace rondel::config
