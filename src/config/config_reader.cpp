// ConfigReader: maps a YAML document onto Config with the schema of schema.h (keys, types, ranges)
// and runs the checks that span several entries.

#include "config_reader.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "edge_reader.h"
#include "upstream_reader.h"
#include "health_reader.h"
#include "discovery_reader.h"
#include "llm_prefix_reader.h"
#include "load_report_reader.h"
#include "reader_util.h"
#include "scalars.h"
#include "schema.h"
#include "subset_reader.h"

namespace rondel::config {
namespace {

using std::string_view;
using namespace schema;  // the key tables, limits and choices (schema.h)

// Where each cross-checked value of a listener came from (line 0: the value was invalid).
struct ListenerSpots {
  Position name;
  Position bind;
  Position pool;
};

class ConfigReader {
 public:
  explicit ConfigReader(NodeReader& r) : r_(r) {}

  Config read(const YAML::Node& root) {
    Config c;
    MapFields top = root.IsNull() ? MapFields(Position{1, 1}, true)
                                  : r_.map(root, "the configuration", Position{1, 1}, kRootKeys);
    if (!top.is_map()) return c;
    if (auto* f = top.get("workers")) r_.read_unsigned(*f, c.workers, 1, kMaxWorkers);
    if (auto* f = top.get("drain_timeout")) r_.read_duration(*f, c.drain_timeout_ms, 0);
    if (auto* f = top.get("log")) read_log(*f, c.log);
    // Before the pools: a pool's `dns` starts from the top-level one.
    if (auto* f = top.get("dns")) read_dns(*f, c.dns);
    if (auto* f = r_.require(top, "listeners")) read_listeners(*f, c);
    if (auto* f = r_.require(top, "pools")) read_pools(*f, c);
    if (auto* f = top.get("admin")) read_admin(*f, c.admin);
    if (auto* f = top.get("fleet")) {
      read_fleet(r_, *f, c.fleet);
      check_fleet_admin(r_, NodeReader::value_position(*f), c);
    }
    if (auto* f = top.get("config_watch")) read_config_watch(*f, c.config_watch);
    if (auto* f = top.get("buffer_budget")) r_.read_size(*f, c.buffer_budget, 0);
    check_listeners(c);
    return c;
  }

 private:
  template <class Each>
  void for_each_entry(const Field& f, Each each) {
    config::for_each_entry(r_, f, each);
  }

  void read_log(const Field& f, LogConfig& log) {
    MapFields m = r_.map(f.value, quote(f.key), NodeReader::value_position(f), kLogKeys);
    if (auto* g = m.get("access_log")) r_.read_string(*g, log.access_log, true);
    if (auto* g = m.get("error_log")) r_.read_string(*g, log.error_log, false);
    int level = 0;
    if (auto* g = m.get("level"); g && r_.read_choice<int>(*g, kLogLevels, level)) {
      log.level = g->value.Scalar();
    }
    int format = 0;
    if (auto* g = m.get("access_format"); g && r_.read_choice<int>(*g, kAccessFormats, format)) {
      log.access_format = g->value.Scalar();
    }
  }

  bool read_name(const MapFields& m, std::string& out, Position& at) {
    const Field* f = r_.require(m, "name");
    if (f == nullptr || !r_.read_string(*f, out, false)) return false;
    if (!is_plain_name(out)) {
      r_.error(NodeReader::value_position(*f),
               "'name' may contain only letters, digits, '_', '-' and '.', got " + quote(out));
      return false;
    }
    at = NodeReader::value_position(*f);
    return true;
  }

  void read_listeners(const Field& f, Config& c) {
    for_each_entry(f, [&](const YAML::Node& node, Position fallback) {
      MapFields m = r_.map(node, "each entry of 'listeners'", fallback, kListenerKeys);
      if (!m.is_map()) return;
      ListenerConfig l;
      ListenerSpots spots;
      l.position = m.position();
      read_name(m, l.name, spots.name);
      if (auto* g = r_.require(m, "bind"); g && r_.read_address(*g, l.bind, false, true)) {
        spots.bind = NodeReader::value_position(*g);
      }
      if (auto* g = r_.require(m, "pool"); g && r_.read_string(*g, l.pool, false)) {
        spots.pool = NodeReader::value_position(*g);
      }
      read_scalars<ListenerConfig>(r_, m, kListenerScalars, l);
      if (auto* g = m.get("proxy_protocol")) read_proxy_protocol(r_, *g, l.proxy_protocol);
      if (auto* g = m.get("tls")) read_tls(r_, *g, l.tls);
      if (auto* g = m.get("http2")) r_.read_choice<Http2Mode>(*g, kHttp2Modes, l.http2);
      c.listeners.push_back(std::move(l));
      listener_spots_.push_back(spots);
    });
  }

  void read_pools(const Field& f, Config& c) {
    std::unordered_map<std::string, int> first_line;
    for_each_entry(f, [&](const YAML::Node& node, Position fallback) {
      MapFields m = r_.map(node, "each entry of 'pools'", fallback, kPoolKeys);
      if (!m.is_map()) return;
      PoolConfig p;
      p.position = m.position();
      Position name_at;
      if (read_name(m, p.name, name_at)) {
        auto [it, inserted] = first_line.emplace(p.name, name_at.line);
        if (!inserted) {
          r_.error(name_at, "duplicate pool name " + quote(p.name) + " (first at line " +
                                std::to_string(it->second) + ")");
        }
        pool_names_.push_back(p.name);
      }
      p.dns = c.dns;
      pool_labels_.clear();
      read_pool_fields(m, p);
      if (auto* g = m.get("subsets")) read_subsets(r_, *g, p, c.listeners, pool_labels_);
      c.pools.push_back(std::move(p));
    });
  }

  void read_pool_fields(const MapFields& m, PoolConfig& p) {
    read_scalars<PoolConfig>(r_, m, kPoolScalars, p);
    if (auto* g = m.get("algorithm")) r_.read_choice<Algorithm>(*g, kAlgorithms, p.algorithm);
    if (auto* g = m.get("hash_key")) read_hash_key(*g, p.hash_key);
    if (auto* g = m.get("missing_key")) {
      r_.read_choice<MissingKeyPolicy>(*g, kMissingKeyPolicies, p.missing_key);
    }
    if (auto* g = m.get("balance_factor")) read_balance_factor(*g, p.balance_factor);
    if (auto* g = m.get("probe_order")) r_.read_choice<ProbeOrder>(*g, kProbeOrders, p.probe_order);
    // llm_prefix: the detector sizes tenants' sets; a tenant gets one more backend per backend's
    // fair share it carries (share 100), not per 5% of one (docs/routing.md "Inference routing").
    if (p.hash_key.kind == HashKeyKind::kLlmPrefix) p.hot_keys.share = kLlmHotShare;
    if (auto* g = m.get("hot_keys")) read_hot_keys(r_, *g, p.hot_keys);
    if (auto* g = m.get("load_report")) read_load_report(r_, *g, p.load_report);
    if (auto* g = m.get("load_by"); g && r_.read_choice<LoadBy>(*g, kLoadBys, p.load_by)) {
      if (p.load_by == LoadBy::kPromptSize && p.load_report.enabled) {
        r_.error(NodeReader::value_position(*g),
                 "'load_by: prompt_size' and 'load_report' are two loads for one bound: give one");
      }
    }
    if (auto* g = m.get("llm_prefix")) {
      read_llm_prefix(r_, *g, p.llm_prefix);
      if (p.hash_key.kind != HashKeyKind::kLlmPrefix) {
        r_.error(NodeReader::value_position(*g), "'llm_prefix' needs 'hash_key: llm_prefix'");
      }
    }
    if (auto* g = m.get("replica_choice")) {
      r_.read_choice<ReplicaChoice>(*g, kReplicaChoices, p.replica_choice);
    }
    const Field* table = m.get("maglev_table_size");
    bool table_ok = false;
    if (table) table_ok = read_table_size(*table, p.maglev_table_size);
    if (auto* g = m.get("health_check")) read_health(r_, *g, p.health);
    if (auto* g = m.get("agent_check")) read_pool_agent_check(r_, *g, p.agent_check);
    if (auto* g = m.get("passive_health")) read_passive(r_, *g, p.passive);
    if (auto* g = m.get("dns")) read_dns(*g, p.dns);
    if (auto* g = m.get("tls")) read_backend_tls(r_, *g, p.tls);
    if (auto* g = m.get("send_proxy_protocol")) {
      r_.read_choice<SendProxyProtocol>(*g, kSendProxyProtocols, p.send_proxy_protocol);
    }
    const Field* discovery = m.get("discovery");
    if (discovery != nullptr) read_discovery(r_, *discovery, p.discovery);
    // With a discovery source the list is optional: the source may bring every backend.
    if (auto* g = discovery == nullptr ? r_.require(m, "backends") : m.get("backends")) {
      read_backends(*g, p);
    }
    if (auto* g = m.get("range_chunk")) read_range_chunk(*g, p);
    if (auto* g = m.get("previous")) read_previous(*g, p);
    if (auto* g = m.get("migrate_percent")) {
      if (r_.read_unsigned(*g, p.migrate_percent, 0, 100) && !p.previous.present) {
        r_.error(NodeReader::value_position(*g), "'migrate_percent' needs a 'previous' placement");
      }
    }

    // Maglev gives each weighted backend at least one slot of the table (core/maglev.h).
    // The ring needs no such check: every backend keeps at least one point (core/ring.h).
    const size_t weighted = static_cast<size_t>(std::count_if(
        p.backends.begin(), p.backends.end(), [](const BackendConfig& b) { return b.weight > 0; }));
    if (table_ok && p.algorithm == Algorithm::kMaglev && weighted > p.maglev_table_size) {
      r_.error(NodeReader::value_position(*table),
               "'maglev_table_size' (" + std::to_string(p.maglev_table_size) +
                   ") is less than the " + std::to_string(weighted) +
                   " backends with a positive weight");
    }
  }

  // range_chunk: a size; only for keys naming one object (hash_key uri or path).
  void read_range_chunk(const Field& f, PoolConfig& p) {
    if (!r_.read_size(f, p.range_chunk, 1)) return;
    if (p.hash_key.kind != HashKeyKind::kUri && p.hash_key.kind != HashKeyKind::kPath) {
      r_.error(NodeReader::value_position(f),
               "'range_chunk' needs 'hash_key: uri' or 'hash_key: path' (a chunk is a byte "
               "range of the object the key names)");
      p.range_chunk = 0;
    }
  }

  // previous: the placement keys migrate from; its backends name the pool's backends by id.
  void read_previous(const Field& f, PoolConfig& p) {
    PlacementConfig& prev = p.previous;
    MapFields m = r_.map(f.value, quote(f.key), NodeReader::value_position(f), kPreviousKeys);
    if (!m.is_map()) return;
    prev.present = true;
    prev.position = m.position();
    if (auto* g = m.get("algorithm")) r_.read_choice<Algorithm>(*g, kAlgorithms, prev.algorithm);
    if (auto* g = m.get("points_per_weight")) {
      r_.read_unsigned(*g, prev.points_per_weight, 1, kMaxPointsPerWeight);
    }
    if (auto* g = m.get("max_points")) r_.read_unsigned(*g, prev.max_points, 1, kMaxRingPoints);
    if (auto* g = m.get("maglev_table_size")) read_table_size(*g, prev.maglev_table_size);
    if (auto* g = m.get("seed")) r_.read_u64(*g, prev.seed, 0, UINT64_MAX);
    const Field* list = r_.require(m, "backends");
    if (list == nullptr) return;
    for_each_entry(*list, [&](const YAML::Node& node, Position fallback) {
      MapFields b =
          r_.map(node, "each entry of 'previous.backends'", fallback, kPreviousBackendKeys);
      if (!b.is_map()) return;
      PlacementConfig::Member mb;
      mb.position = b.position();
      Address a;
      if (auto* g = b.get("id")) {
        r_.read_string(*g, mb.id, false);
      } else if (auto* g2 = b.get("address"); g2 && r_.read_address(*g2, a, true, false)) {
        mb.id = a.to_string();
      } else if (g2 == nullptr) {
        r_.error(mb.position, "each entry of 'previous.backends' needs 'id' or 'address'");
      }
      if (auto* g = b.get("weight")) r_.read_unsigned(*g, mb.weight, 0, kMaxWeight);
      if (mb.id.empty()) return;
      const bool known = std::any_of(p.backends.begin(), p.backends.end(),
                                     [&](const BackendConfig& c) { return c.id == mb.id; });
      if (!known) {
        r_.error(mb.position, "previous backend " + quote(mb.id) +
                                  " is not a backend of the pool (keep a removed backend in "
                                  "'backends' with weight 0 while keys migrate off it)");
        return;
      }
      const bool twice =
          std::any_of(prev.backends.begin(), prev.backends.end(),
                      [&](const PlacementConfig::Member& o) { return o.id == mb.id; });
      if (twice) {
        r_.error(mb.position, "duplicate previous backend " + quote(mb.id));
        return;
      }
      prev.backends.push_back(std::move(mb));
    });
    const bool any_weight =
        std::any_of(prev.backends.begin(), prev.backends.end(),
                    [](const PlacementConfig::Member& b) { return b.weight > 0; });
    if (!any_weight && !prev.backends.empty()) {
      r_.error(NodeReader::position_of(list->key_node),
               "every previous backend has weight 0; at least one needs a positive weight");
    }
  }

  void read_balance_factor(const Field& f, uint32_t& out) {
    uint32_t v = 0;
    if (!r_.read_unsigned(f, v, 0, kMaxBalanceFactor)) return;
    if (v != 0 && v < kMinBalanceFactor) {
      r_.error(NodeReader::value_position(f),
               "'balance_factor' must be 0 (no bound) or between 101 and 10000 percent, got " +
                   std::to_string(v) + " (100 would leave no slack above the average load)");
      return;
    }
    out = v;
  }

  bool read_table_size(const Field& f, uint32_t& out) {
    uint32_t v = 0;
    if (!r_.read_unsigned(f, v, 2, kMaxMaglevTableSize)) return false;
    if (!is_prime(v)) {
      r_.error(
          NodeReader::value_position(f),
          "'maglev_table_size' must be a prime number (such as 65537), got " + std::to_string(v));
      return false;
    }
    out = v;
    return true;
  }

  void read_hash_key(const Field& f, HashKey& out) {
    constexpr string_view kForms =
        "uri, path, header:NAME, cookie:NAME, query:NAME, src or llm_prefix";
    if (!f.value.IsScalar()) {
      r_.report_type(f, std::string("one of ") + std::string(kForms));
      return;
    }
    const std::string& text = f.value.Scalar();
    const Position at = NodeReader::value_position(f);
    const size_t colon = text.find(':');
    const string_view kind = string_view(text).substr(0, colon);
    const string_view name =
        colon == std::string::npos ? string_view() : string_view(text).substr(colon + 1);
    constexpr Choice<HashKeyKind> kKinds[] = {
        {"uri", HashKeyKind::kUri},       {"path", HashKeyKind::kPath},
        {"src", HashKeyKind::kSrc},       {"header", HashKeyKind::kHeader},
        {"cookie", HashKeyKind::kCookie}, {"query", HashKeyKind::kQuery},
        {"llm_prefix", HashKeyKind::kLlmPrefix}};
    const auto* found = std::find_if(std::begin(kKinds), std::end(kKinds),
                                     [&](const auto& c) { return c.name == kind; });
    if (found == std::end(kKinds)) {
      r_.error(at, "'hash_key' must be one of " + std::string(kForms) + "; got " + quote(text));
      return;
    }
    HashKey key;
    key.kind = found->value;
    const bool named = key.kind == HashKeyKind::kHeader || key.kind == HashKeyKind::kCookie ||
                       key.kind == HashKeyKind::kQuery;
    if (!named) {
      if (colon != std::string::npos) {
        r_.error(at, "'hash_key' " + std::string(kind) + " takes no ':NAME', got " + quote(text));
        return;
      }
    } else if (name.empty()) {
      r_.error(at, "'hash_key' needs a name after '" + std::string(kind) + ":', as in " +
                       std::string(kind) + ":X-Cache-Key");
      return;
    } else if (key.kind == HashKeyKind::kQuery
                   ? has_space_or_control(name) || name.find_first_of("&=#") != string_view::npos
                   : !is_token(name)) {
      r_.error(at, "'hash_key' has an invalid " + std::string(kind) + " name " + quote(name));
      return;
    }
    key.name = std::string(name);
    out = std::move(key);
  }

  // A backend's `id` (the address's ADDRESS:PORT unless given): where it was read goes to
  // `id_at` (cleared when it was refused). False on an error.
  bool read_backend_id(const Field& g, BackendConfig& b, Position& id_at) {
    id_at = Position{};
    if (b.address.is_name) {
      // Each address the name resolves to becomes its own backend, with id ADDRESS:PORT.
      r_.error(NodeReader::value_position(g),
               "'id' cannot be set for a backend named by DNS (" + quote(b.address.to_string()) +
                   "): each address it resolves to is a backend with id ADDRESS:PORT");
      return false;
    }
    std::string id;
    if (r_.read_string(g, id, false) && !has_space_or_control(id)) {
      b.id = std::move(id);
      id_at = NodeReader::value_position(g);
      return true;
    }
    if (!id.empty()) {
      r_.error(NodeReader::value_position(g), "'id' must not contain spaces, got " + quote(id));
    }
    return false;
  }

  void read_backends(const Field& f, PoolConfig& p) {
    std::unordered_map<std::string, int> first_line;
    size_t entries = 0;
    for_each_entry(f, [&](const YAML::Node& node, Position fallback) {
      ++entries;
      MapFields m = r_.map(node, "each entry of 'backends'", fallback, kBackendKeys);
      if (!m.is_map()) return;
      BackendConfig b;
      b.position = m.position();
      bool ok = true;
      Position id_at;
      if (auto* g = m.get("labels")) ok &= read_labels(r_, *g, b.labels, pool_labels_);
      if (auto* g = m.get("agent_check")) {
        const bool named_port = read_agent_check(r_, *g, b.agent);
        const AgentCheckConfig a = resolve_agent_check(p.agent_check, b.agent);
        if (a.enabled && a.port == 0 && !named_port && g->value.IsMap()) {
          r_.error(NodeReader::value_position(*g),
                   "'agent_check' needs a 'port': the pool's 'agent_check' sets none");
        }
      }
      if (const Field* s = m.get("srv")) {
        if (!read_srv_backend(m, *s, b) || !ok) return;
        auto [it, inserted] = first_line.emplace(b.id, NodeReader::value_position(*s).line);
        if (!inserted) {
          r_.error(NodeReader::value_position(*s), "duplicate SRV name " + quote(b.address.host) +
                                                       " (first at line " +
                                                       std::to_string(it->second) + ")");
        }
        p.backends.push_back(std::move(b));
        return;
      }
      if (auto* g = r_.require(m, "address"); g && r_.read_address(*g, b.address, true, false)) {
        id_at = NodeReader::value_position(*g);
        b.id = b.address.to_string();
        if (b.address.is_name) b.host_name = b.address.host;
      } else {
        ok = false;
      }
      if (auto* g = m.get("weight")) ok &= r_.read_unsigned(*g, b.weight, 0, kMaxWeight);
      if (auto* g = m.get("id")) ok &= read_backend_id(*g, b, id_at);
      if (id_at.line > 0) {
        auto [it, inserted] = first_line.emplace(b.id, id_at.line);
        if (!inserted) {
          r_.error(id_at, "duplicate backend id " + quote(b.id) + " (first at line " +
                              std::to_string(it->second) + ")");
        }
      }
      if (ok) p.backends.push_back(std::move(b));
    });
    const Position at = NodeReader::position_of(f.key_node);
    if (entries > kMaxBackends) {
      r_.error(at, "'backends' has " + std::to_string(entries) + " entries; a pool holds at most " +
                       std::to_string(kMaxBackends));
    }
    if (entries > 0 && entries == p.backends.size()) {
      bool any_weight = false;
      for (const BackendConfig& b : p.backends) any_weight |= b.weight > 0;
      if (!any_weight) {
        r_.error(at, "every backend " +
                         (p.name.empty() ? std::string() : "of pool " + quote(p.name) + " ") +
                         "has weight 0; at least one needs a positive weight");
      }
    }
  }

  // A backend entry `srv: _service._proto.NAME`: every target of the name's SRV records (lowest
  // priority) is a backend; the records give the ports and weights, so `address`, `weight` and
  // `id` are refused next to it.
  bool read_srv_backend(const MapFields& m, const Field& s, BackendConfig& b) {
    bool ok = true;
    for (const char* key : {"address", "weight", "id"}) {
      if (const Field* g = m.get(key)) {
        r_.error(NodeReader::position_of(g->key_node),
                 quote(key) + " cannot be set next to 'srv': the SRV records give each target's "
                              "port and weight, and its id TARGET:PORT");
        ok = false;
      }
    }
    std::string name;
    if (!r_.read_string(s, name, false)) return false;
    if (!name.empty() && name.back() == '.') name.pop_back();  // the root: "x.example." = "x.example"
    Address a;
    if (address_problem(name + ":1", true, a) != nullptr || !a.is_name) {
      r_.error(NodeReader::value_position(s),
               "'srv' must be a DNS name such as _http._tcp.cache.example, got " + quote(name));
      return false;
    }
    b.address = Address{name, 0, true};
    b.id = "srv:" + name;  // never a backend's id: only for the duplicate check
    b.lookup = NameLookup::kSrv;
    return ok;
  }

  void read_dns(const Field& f, DnsConfig& d) {
    MapFields m = r_.map(f.value, quote(f.key), NodeReader::value_position(f), kDnsKeys);
    if (!m.is_map()) return;
    if (auto* g = m.get("nameservers")) {
      std::vector<Address> servers;
      bool ok = r_.read_sequence(*g);
      if (ok) {
        for (const YAML::Node& entry : g->value) {
          Field one{g->key, g->key_node, entry};
          Address a;
          if (r_.read_address(one, a, false, false)) servers.push_back(std::move(a));
          else ok = false;
        }
      }
      if (ok) d.nameservers = std::move(servers);
    }
    if (auto* g = m.get("ttl")) r_.read_duration(*g, d.ttl_ms, kMinDnsTtlMs);
    if (auto* g = m.get("jitter")) read_percent(*g, d.jitter_percent);
    if (auto* g = m.get("timeout")) r_.read_duration(*g, d.timeout_ms, 1);
    if (auto* g = m.get("attempts")) r_.read_unsigned(*g, d.attempts, 1, kMaxDnsAttempts);
    if (auto* g = m.get("hold")) r_.read_duration(*g, d.hold_ms, 0);
  }

  // "10%" or a bare integer, 0..100.
  void read_percent(const Field& f, uint32_t& out) {
    constexpr string_view kExpected = "a percentage from 0% to 100%, such as 10%";
    if (!f.value.IsScalar()) {
      r_.report_type(f, kExpected);
      return;
    }
    string_view text = f.value.Scalar();
    if (!text.empty() && text.back() == '%') text.remove_suffix(1);
    uint64_t v = 0;
    if (!parse_unsigned(text, v) || v > 100) {
      r_.error(NodeReader::value_position(f), quote(f.key) + " must be " + std::string(kExpected) +
                                                   ", got " + quote(f.value.Scalar()));
      return;
    }
    out = static_cast<uint32_t>(v);
  }

  void read_admin(const Field& f, AdminConfig& a) {
    MapFields m = r_.map(f.value, quote(f.key), NodeReader::value_position(f), kAdminKeys);
    if (!m.is_map()) return;
    a.enabled = true;
    if (auto* g = m.get("enabled")) r_.read_bool(*g, a.enabled);
    const Field* bind = a.enabled ? r_.require(m, "bind") : m.get("bind");
    if (bind && r_.read_address(*bind, a.bind, false, true))
      admin_bind_ = NodeReader::value_position(*bind);
    read_scalars<AdminConfig>(r_, m, kAdminScalars, a);
    if (auto* g = m.get("token_file")) r_.read_string(*g, a.token_file, false);
    if (auto* g = m.get("state_file")) r_.read_string(*g, a.state_file, false);
  }

  // `config_watch:` present means on, unless it says `enabled: false`.
  void read_config_watch(const Field& f, ConfigWatchConfig& w) {
    MapFields m = r_.map(f.value, quote(f.key), NodeReader::value_position(f), kConfigWatchKeys);
    if (!m.is_map()) return;
    w.enabled = true;
    if (auto* g = m.get("enabled")) r_.read_bool(*g, w.enabled);
    if (auto* g = m.get("debounce")) r_.read_duration(*g, w.debounce_ms, 1);
  }

  // Unique listener names and binds; every listener's pool exists; admin bind not taken.
  void check_listeners(const Config& c) {
    std::unordered_map<std::string, int> names;
    std::unordered_map<std::string, int> binds;  // address -> line of its first bind
    for (size_t i = 0; i < c.listeners.size(); ++i) {
      const ListenerConfig& l = c.listeners[i];
      const ListenerSpots& at = listener_spots_[i];
      if (at.name.line > 0) {
        auto [it, inserted] = names.emplace(l.name, at.name.line);
        if (!inserted) {
          r_.error(at.name, "duplicate listener name " + quote(l.name) + " (first at line " +
                                std::to_string(it->second) + ")");
        }
      }
      // Port 0 asks the kernel for any free port: two such listeners never collide.
      if (at.bind.line > 0 && l.bind.port != 0) {
        auto [it, inserted] = binds.emplace(l.bind.to_string(), at.bind.line);
        if (!inserted) {
          r_.error(at.bind, "duplicate listener bind address " + quote(l.bind.to_string()) +
                                " (first at line " + std::to_string(it->second) + ")");
        }
      }
      if (at.pool.line > 0 &&
          std::find(pool_names_.begin(), pool_names_.end(), l.pool) == pool_names_.end()) {
        std::vector<string_view> known(pool_names_.begin(), pool_names_.end());
        std::string message = "listener " + (at.name.line > 0 ? quote(l.name) + " " : "") +
                              "uses unknown pool " + quote(l.pool);
        if (string_view hint = closest_match(l.pool, known); !hint.empty()) {
          message += " (did you mean " + quote(hint) + "?)";
        }
        r_.error(at.pool, std::move(message));
      }
    }
    if (c.admin.enabled && admin_bind_.line > 0 && c.admin.bind.port != 0) {
      auto it = binds.find(c.admin.bind.to_string());
      if (it != binds.end()) {
        r_.error(admin_bind_, "admin bind address " + quote(c.admin.bind.to_string()) +
                                  " is already a listener's (line " + std::to_string(it->second) +
                                  ")");
      }
    }
  }

  NodeReader& r_;
  std::vector<ListenerSpots> listener_spots_;  // parallel to Config::listeners
  std::vector<std::string> pool_names_;        // valid pool names, in file order
  std::vector<std::string> pool_labels_;       // the current pool's distinct backend labels
  Position admin_bind_;
};

}  // namespace

Config read_config(const YAML::Node& root, NodeReader& reader) {
  return ConfigReader(reader).read(root);
}

}  // namespace rondel::config
