// Fleet: the lease-kept registration key and the watch of every instance's key.
#include "fleet.h"

#include <uv.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

#include "api_client.h"
#include "discovery_source.h"
#include "etcd_client.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace json = boost::json;
using djson::at;
using djson::str;

namespace {

// Logs and metrics name the fleet's sources as if they served a pool called this.
constexpr std::string_view kFleetPool = "fleet";

// One pool's counts of a member's record; a malformed one is left out (the member then adds
// nothing to that pool's epoch, on every instance alike).
void read_hot(const std::string& pool, const json::value& rec, FleetMember& m) {
  const auto count_at = [](const json::value* v) {
    return v != nullptr && (v->is_uint64() || (v->is_int64() && v->get_int64() >= 0));
  };
  const json::value* epoch = at(rec, "epoch");
  const json::value* total = at(rec, "total");
  const json::value* keys = at(rec, "keys");
  if (!count_at(epoch) || !count_at(total) || keys == nullptr || !keys->is_array()) return;
  FleetHotRecord r;
  r.epoch = epoch->to_number<uint64_t>();
  r.counts.total = total->to_number<uint64_t>();
  for (const json::value& k : keys->get_array()) {
    const json::array* pair = k.if_array();
    if (pair == nullptr || pair->size() != 2 || !(*pair)[0].is_string()) return;
    const json::string& hex = (*pair)[0].get_string();
    uint64_t hash = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), hash, 16);
    if (ec != std::errc() || end != hex.data() + hex.size() || hex.size() != 16) return;
    if (!count_at(&(*pair)[1])) return;
    r.counts.keys.push_back({hash, (*pair)[1].to_number<uint64_t>()});
  }
  m.hot[pool] = std::move(r);
}

// This instance's record: {"id", "fingerprints": {POOL: HEX}, "hot": {POOL: {"epoch": E,
// "total": T, "keys": [["HASH16", COUNT], ...]}}} ("hot" only with counts). What its etcd key
// holds and what /api/fleet/record serves.
std::string record_json(const std::string& id,
                        const std::map<std::string, std::string>& fingerprints,
                        const std::map<std::string, FleetHotRecord>& hot) {
  util::JsonWriter w;
  w.begin();
  w.field("id", id);
  w.begin("fingerprints");
  for (const auto& [pool, fp] : fingerprints) w.field(pool, fp);
  w.end();
  if (!hot.empty()) {
    w.begin("hot");
    for (const auto& [pool, rec] : hot) {
      w.begin(pool);
      w.field("epoch", rec.epoch);
      w.field("total", rec.counts.total);
      w.begin_array("keys");
      for (const core::HotCount& k : rec.counts.keys) {
        char hex[24];
        std::snprintf(hex, sizeof hex, "%016" PRIx64, k.hash);
        w.begin_array();
        w.value(std::string_view(hex));
        w.value(k.count);
        w.end_array();
      }
      w.end_array();
      w.end();
    }
    w.end();
  }
  w.end();
  return w.take();
}

// A member's record (record_json's text) into `m` (id `id`): false with `why` when it is not
// one.
bool read_record(const std::string& id, std::string_view text, FleetMember& m, std::string& why) {
  const json::value v = djson::parse(text);
  const json::value* f = at(v, "fingerprints");
  const json::object* fps = f != nullptr ? f->if_object() : nullptr;
  if (fps == nullptr) {
    why = "not an instance record ({\"id\", \"fingerprints\": {POOL: HEX}})";
    return false;
  }
  m.id = id;
  if (const json::value* rid = at(v, "id"); rid != nullptr && rid->is_string()) {
    m.read_id = std::string(rid->get_string());
  }
  for (const auto& [pool, fp] : *fps) {
    if (fp.is_string()) m.fingerprints[std::string(pool)] = std::string(fp.get_string());
  }
  if (const json::value* hot = at(v, "hot"); hot != nullptr && hot->is_object()) {
    for (const auto& [pool, rec] : hot->get_object()) read_hot(std::string(pool), rec, m);
  }
  return true;
}

std::string host_name() {
  char buf[256];
  size_t len = sizeof buf;
  return uv_os_gethostname(buf, &len) == 0 ? std::string(buf, len) : std::string("rondel");
}

}  // namespace

// grant -> put -> keep-alive every ttl/3 -> ...; a failure or a lost lease grants a new one.
class FleetRegistrar final : public EtcdClient {
 public:
  FleetRegistrar(Discovery& owner, const config::FleetConfig& cfg, std::string id)
      : EtcdClient(owner, std::string(kFleetPool), "fleet-registrar", cfg.source),
        ttl_s_(cfg.ttl_ms / 1000), key_(cfg.source.prefix + id), id_(std::move(id)) {}

  std::string name() const override { return "etcd:" + key_; }
  std::string_view kind() const noexcept override { return "fleet"; }
  bool registered() const noexcept { return registered_; }

  void set_record(const std::map<std::string, std::string>& fingerprints,
                  const std::map<std::string, FleetHotRecord>& hot) {
    std::string record = record_json(id_, fingerprints, hot);
    if (record == record_) return;
    record_ = std::move(record);
    dirty_ = true;
    if (call_ == nullptr && !lease_.empty()) put();  // else after the step under way
  }

 private:
  void begin() noexcept override { grant(); }
  void on_retry() noexcept override {
    if (lease_.empty()) grant();
    else if (dirty_) put();
    else keep_alive();
  }

  void fail(SourceError why, const std::string& detail) {
    registered_ = false;
    lease_.clear();  // the old lease expires by itself
    retry(why, detail);
  }

  void grant() noexcept {
    json::object body;
    body["TTL"] = std::to_string(ttl_s_);
    post("/v3/lease/grant", json::serialize(body), nullptr, [this](std::string_view error) {
      json::value v;
      if (!answer("lease grant", error, v)) return;
      lease_ = std::string(str(at(v, "ID")));
      if (lease_.empty()) return fail(SourceError::kParse, "lease grant: no ID");
      put();
    });
  }

  void put() noexcept {
    dirty_ = false;
    json::object body;
    body["key"] = etcd_base64(key_);
    body["value"] = etcd_base64(record_);
    body["lease"] = lease_;
    post("/v3/kv/put", json::serialize(body), nullptr, [this](std::string_view error) {
      json::value v;
      if (!answer("put", error, v)) return fail_quietly();
      registered_ = true;
      mark_up();
      next();
    });
  }

  void keep_alive() noexcept {
    json::object body;
    body["ID"] = lease_;
    post("/v3/lease/keepalive", json::serialize(body), nullptr, [this](std::string_view error) {
      json::value v;
      if (!answer("lease keep-alive", error, v)) return fail_quietly();
      const json::value* result = at(v, "result");
      if (result == nullptr || etcd_int(*result, "TTL") <= 0) {
        // The lease expired (etcd was away longer than the TTL): a new one, the key again.
        log(proxy::Level::kWarn, "fleet_lease_lost", "id=" + id_ + " lease=" + lease_);
        registered_ = false;
        lease_.clear();
        return grant();
      }
      next();
    });
  }

  // After a step: the record changed meanwhile, or the next keep-alive in a third of the TTL.
  void next() {
    if (dirty_) return put();
    retry_in(ttl_s_ * 1000 / 3);
  }

  // answer() already counted, logged and scheduled the retry: only forget the lease.
  void fail_quietly() {
    registered_ = false;
    lease_.clear();
  }

  uint64_t ttl_s_;
  std::string key_;
  std::string id_;
  std::string record_ = "{}";
  std::string lease_;  // "" = none
  bool dirty_ = true;
  bool registered_ = false;
};

// Every key under the prefix is one instance.
class FleetWatcher final : public EtcdPrefix {
 public:
  FleetWatcher(Discovery& owner, const config::FleetConfig& cfg)
      : EtcdPrefix(owner, std::string(kFleetPool), "fleet-watcher", cfg.source) {}

  std::string name() const override { return "etcd:" + cfg_.prefix; }
  std::string_view kind() const noexcept override { return "fleet"; }
  const std::map<std::string, FleetMember>& members() const noexcept { return members_; }

 private:
  void reset() override { members_.clear(); }

  bool apply(const std::string& key, const std::string* value, std::string& why) override {
    const std::string id = key.substr(std::min(key.size(), cfg_.prefix.size()));
    if (value == nullptr) {
      members_.erase(id);
      return true;
    }
    FleetMember m;
    if (!read_record(id, *value, m, why)) return false;
    members_[id] = std::move(m);
    return true;
  }

  void synced() override {
    mark_up();
    if (members_.size() != logged_) {
      logged_ = members_.size();
      log(proxy::Level::kInfo, "fleet_size", "instances=" + std::to_string(logged_));
    }
  }

  std::map<std::string, FleetMember> members_;
  size_t logged_ = SIZE_MAX;
};

Fleet::Fleet(Discovery& discovery, const config::FleetConfig& cfg)
    : cfg_(cfg), id_(cfg.id.empty() ? host_name() : cfg.id) {
  if (cfg_.source.kind == config::DiscoveryKind::kKubernetes) {
    k8s_ = make_k8s_source(discovery, std::string(kFleetPool), "fleet-kubernetes", cfg_.source);
    k8s_->set_on_change([this] { k8s_changed(); });
    k8s_->start();
    return;
  }
  if (!cfg_.peers.empty()) {
    // A fixed fleet: every listed instance is a member from the start.
    for (const config::FleetConfig::Peer& p : cfg_.peers) {
      listed_[p.id].id = p.id;
      peer_addrs_[p.id] = p.admin;
    }
    return;
  }
  registrar_ = new FleetRegistrar(discovery, cfg_, id_);
  watcher_ = new FleetWatcher(discovery, cfg_);
  registrar_->start();
  watcher_->start();
}

Fleet::~Fleet() { stop(); }

void Fleet::stop() noexcept {
  for (auto& [id, call] : peer_calls_) call->cancel();
  peer_calls_.clear();
  if (registrar_ != nullptr) std::exchange(registrar_, nullptr)->stop();
  if (watcher_ != nullptr) std::exchange(watcher_, nullptr)->stop();
  if (k8s_ != nullptr) {
    k8s_->set_on_change([] {});  // it outlives this Fleet until its handles are closed
    std::exchange(k8s_, nullptr)->stop();
  }
}

bool Fleet::same_settings(const config::FleetConfig& a, const config::FleetConfig& b) {
  auto key = [](const config::FleetConfig& f) {
    std::string k = std::string(f.enabled ? "1" : "0") + discovery_settings_key(f.source) + '\0' +
                    f.id + '\0' + std::to_string(f.ttl_ms) + (f.share_hot_keys ? "s" : "-") +
                    std::to_string(f.peer_port) + '/' + std::to_string(f.share_load_ms);
    for (const config::FleetConfig::Peer& p : f.peers) k += '\0' + p.id + '=' + p.admin.to_string();
    return k;
  };
  return key(a) == key(b);
}

void Fleet::k8s_changed() {
  std::map<std::string, FleetMember> before = std::move(listed_);
  listed_.clear();
  peer_addrs_.clear();
  for (const SourceBackend& b : k8s_->backends()) {
    if (b.weight == 0) continue;  // serving but terminating: leaving the fleet
    FleetMember& m = listed_[b.id];
    m.id = b.id;
    peer_addrs_[b.id] = config::Address{b.address.host, cfg_.peer_port, false};
    if (b.id == id_) {
      m.fingerprints = placement_;
      m.hot = hot_;
    } else if (auto it = before.find(b.id); it != before.end()) {
      // What was read from it stays (its counts of this epoch, its fingerprints).
      m.hot = std::move(it->second.hot);
      m.fingerprints = std::move(it->second.fingerprints);
    }
  }
}

bool Fleet::polls_peers() const noexcept {
  if (!cfg_.share_hot_keys) return false;
  return !cfg_.peers.empty() || (k8s_ != nullptr && cfg_.peer_port != 0);
}

std::string Fleet::record() const { return record_json(id_, placement_, hot_); }

void Fleet::poll_peers(uv_loop_t* loop, uint64_t timeout_ms) {
  if (!polls_peers()) return;
  for (const auto& [id, addr] : peer_addrs_) {
    // One call per peer at a time: a peer still answering the last one is skipped.
    if (id == id_ || peer_calls_.count(id) != 0 || addr.port == 0) continue;
    auto done = [this, id](std::string_view error, uint16_t status, std::string& body) {
      peer_calls_.erase(id);
      auto it = listed_.find(id);
      if (it == listed_.end()) return;  // it left meanwhile
      FleetMember m;
      std::string why;
      // The record must be the member's own: an address reused by another instance (a pod
      // IP, a list with one address twice) must not lend it someone else's counts.
      if (!error.empty() || status != 200 || !read_record(id, body, m, why) || m.read_id != id) {
        // Nothing from it this epoch: the others agree without its counts, and its placement
        // is not voted on until it answers again.
        it->second.hot.clear();
        it->second.fingerprints.clear();
        return;
      }
      it->second.hot = std::move(m.hot);
      it->second.fingerprints = std::move(m.fingerprints);
    };
    peer_calls_[id] =
        get_small(loop, addr, "/api/fleet/record", timeout_ms, kMaxPeerRecord, std::move(done));
  }
}

void Fleet::set_placement(const proxy::Snapshot& snap) {
  placement_.clear();
  for (const auto& p : snap.pools()) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, p->placement_fingerprint());
    placement_[p->name()] = hex;
  }
  if (registrar_ != nullptr) registrar_->set_record(placement_, hot_);
  if (auto it = listed_.find(id_); it != listed_.end()) {
    it->second.fingerprints = placement_;
  }
}

void Fleet::set_hot(std::map<std::string, FleetHotRecord> hot) {
  hot_ = std::move(hot);
  if (registrar_ != nullptr) registrar_->set_record(placement_, hot_);
  if (auto it = listed_.find(id_); it != listed_.end()) it->second.hot = hot_;
}

const std::map<std::string, FleetMember>& Fleet::members() const noexcept {
  static const std::map<std::string, FleetMember> kNone;
  if (k8s_ != nullptr || !cfg_.peers.empty()) return listed_;
  return watcher_ != nullptr ? watcher_->members() : kNone;
}

bool Fleet::registered() const noexcept {
  if (k8s_ != nullptr || !cfg_.peers.empty()) return listed_.count(id_) != 0;
  return registrar_ != nullptr && registrar_->registered();
}

bool Fleet::watching() const noexcept {
  if (!cfg_.peers.empty()) return true;  // nothing to watch: the list is the configuration
  if (k8s_ != nullptr) return k8s_->up();
  return watcher_ != nullptr && watcher_->up();
}

bool Fleet::fingerprints_shared() const noexcept {
  return cfg_.source.kind == config::DiscoveryKind::kEtcd || polls_peers();
}

std::string Fleet::majority(const std::string& pool) const {
  if (!fingerprints_shared()) return {};
  std::map<std::string, size_t> votes;
  size_t voters = 0;
  for (const auto& [id, m] : members()) {
    auto it = m.fingerprints.find(pool);
    if (it == m.fingerprints.end()) continue;
    ++voters;
    ++votes[it->second];
  }
  for (const auto& [fp, n] : votes) {
    if (2 * n > voters) return fp;
  }
  return {};
}

bool Fleet::disagrees(const std::string& pool) const {
  auto own = placement_.find(pool);
  if (own == placement_.end()) return false;
  const std::string m = majority(pool);
  return !m.empty() && m != own->second;
}

std::string Fleet::json(const std::function<void(util::JsonWriter&)>& extra) const {
  const bool shared = fingerprints_shared();
  util::JsonWriter w;
  w.begin();
  w.field("id", id_);
  w.field("source", !cfg_.peers.empty()                                 ? "peers"
                    : cfg_.source.kind == config::DiscoveryKind::kEtcd ? "etcd"
                                                                        : "kubernetes");
  w.field("instances", static_cast<uint64_t>(members().size()));
  w.field("registered", registered());
  w.field("watching", watching());
  w.field("fingerprints_shared", shared);
  w.begin_array("members");
  for (const auto& [id, m] : members()) {
    w.begin();
    w.field("id", id);
    if (!shared && id != id_) {
      w.field("fingerprints", "unknown");  // an EndpointSlice carries none
    } else {
      w.begin("fingerprints");
      for (const auto& [pool, fp] : m.fingerprints) w.field(pool, fp);
      w.end();
    }
    w.end();
  }
  w.end_array();
  w.begin_array("pools");
  for (const auto& [pool, fp] : placement_) {
    w.begin();
    w.field("pool", pool);
    w.field("fingerprint", fp);
    if (shared) {
      w.field("majority", majority(pool));
      w.field("disagrees", disagrees(pool));
    } else {
      w.field("majority", "unknown");
      w.null_field("disagrees");
    }
    w.end();
  }
  w.end_array();
  if (extra) extra(w);
  w.end();
  return w.take();
}

}  // namespace rondel::server
