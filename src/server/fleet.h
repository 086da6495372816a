// Fleet: this instance's self-registration in etcd and the fleet it sees (`fleet` in the config,
// issue 36). A Registrar keeps one key, PREFIX + id, under a lease it keeps alive (grant, put,
// keep-alive every third of the TTL; a lost lease is granted again), whose value carries the
// instance's placement fingerprint per pool. A Watcher reads and watches PREFIX: every live key
// is one instance, so the fleet knows N (what a fleet-wide load bound needs) and each pool's
// majority fingerprint; an instance whose fingerprint differs from the majority is flagged.
//
// On Kubernetes (`fleet: {kubernetes: ...}`) Kubernetes itself registers the instance: the
// fleet is the ready endpoints of the instance's own Service, watched by the same source as
// Kubernetes discovery, each named by targetRef.name. EndpointSlices carry no fingerprints, so
// such a fleet knows N and its members but only its own fingerprint: majority() is unknown and
// no instance is flagged (disagreement is left to the Prometheus alert on
// rondel_pool_placement_fingerprint, conf/prometheus) -- unless it shares hot keys: then each
// member reads the others' records (fingerprints and counts) from their admin APIs every epoch
// (poll_peers), and majority() is known again. A fixed fleet (`peers`) is its list and does
// the same.
//
// All of these are discovery sources (errors, back-off, `SOURCE: reason` logs) that delete
// themselves once stopped. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/fleet_hot.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

class ApiCall;
class Discovery;
class DiscoverySource;
class FleetRegistrar;
class FleetWatcher;

// One instance's hot-key counts of one pool for one epoch (fleet_hot.h), as its key carries
// them.
struct FleetHotRecord {
  uint64_t epoch = 0;
  core::HotCounts counts;
  bool operator==(const FleetHotRecord&) const = default;
};

// One instance as its key says: its id and its fingerprint (16 hex digits) per pool (on
// Kubernetes: none, except this instance's own), and its hot-key counts per pool (etcd fleets
// that share hot keys; fleet_hot.h).
struct FleetMember {
  std::string id;
  std::string read_id;  // the "id" its record gave (a record read from a member's admin API)
  std::map<std::string, std::string> fingerprints;
  std::map<std::string, FleetHotRecord> hot;
};

class Fleet {
 public:
  // Starts registering and watching at once. `cfg` enabled.
  Fleet(Discovery& discovery, const config::FleetConfig& cfg);
  ~Fleet();  // stop()s
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // The settings it runs with (a reload that changes them makes a new Fleet).
  const config::FleetConfig& config() const noexcept { return cfg_; }
  const std::string& id() const noexcept { return id_; }
  // Whether a reload keeps the running Fleet (same settings) or makes a new one.
  static bool same_settings(const config::FleetConfig& a, const config::FleetConfig& b);
  // This instance's fingerprint per pool of `snap`, the published snapshot: the key is written
  // again when they changed.
  void set_placement(const proxy::Snapshot& snap);
  // This instance's hot-key counts per pool for the epoch: written into its key with the
  // fingerprints (etcd), or served at /api/fleet/record for the other members (Kubernetes).
  // Pools without counts are left out.
  void set_hot(std::map<std::string, FleetHotRecord> hot);
  // This instance's record as its etcd key holds it (/api/fleet/record): {"id", "fingerprints":
  // {POOL: HEX}, "hot": {POOL: {"epoch", "total", "keys": [["HASH16", COUNT], ...]}}}.
  std::string record() const;
  // Kubernetes with share_hot_keys: whether the members' records are read from their admin
  // APIs (peer_port known).
  bool polls_peers() const noexcept;
  // Reads every other member's record from http://ENDPOINT-IP:peer_port/api/fleet/record (one
  // call per member at a time, each bounded by `timeout_ms`) into members()[id].hot; a member
  // that does not answer with a record contributes no counts until it does. FleetHot calls it
  // a quarter epoch after publishing.
  void poll_peers(uv_loop_t* loop, uint64_t timeout_ms);
  void stop() noexcept;
  // Where each member's admin API is, by id, this instance's own included: the `peers` list,
  // or on Kubernetes each ready endpoint's IP and peer_port (port 0 when peer_port is unknown).
  // Empty for etcd and static fleets. FleetLoad reads the members' counts there.
  const std::map<std::string, config::Address>& peer_addresses() const noexcept {
    return peer_addrs_;
  }

  // The live instances by id (this one included once its key is read back, or on Kubernetes
  // once its endpoint is ready); N is their count.
  const std::map<std::string, FleetMember>& members() const noexcept;
  // etcd: the key is written and its lease alive; Kubernetes: this instance's id is among the
  // ready endpoints.
  bool registered() const noexcept;
  bool watching() const noexcept;  // the prefix (the Service's EndpointSlices) read and watched
  // Whether the members' fingerprints are known (etcd; Kubernetes and `peers` reading each
  // other's records) or only this instance's (Kubernetes without share_hot_keys).
  bool fingerprints_shared() const noexcept;
  // The fingerprint more than half of the instances that have `pool` agree on ("" when none,
  // and always without fingerprints_shared()).
  std::string majority(const std::string& pool) const;
  // This instance has `pool` and a majority exists that differs from its fingerprint.
  bool disagrees(const std::string& pool) const;
  // The /api/fleet document: {"id", "source": "etcd" | "kubernetes", "instances": N,
  // "registered", "watching", "fingerprints_shared", "members": [{"id", "fingerprints":
  // {...}}], "pools": [{"pool", "fingerprint", "majority", "disagrees"}]}. Without
  // fingerprints_shared(), another member's "fingerprints" is "unknown", "majority" is
  // "unknown" and "disagrees" is null.
  // `extra` may add members to the document before it is closed (FleetHot's "hot").
  std::string json(const std::function<void(util::JsonWriter&)>& extra = {}) const;

 private:
  void k8s_changed();  // the Service's endpoints changed: members_ again

  config::FleetConfig cfg_;
  std::string id_;
  std::map<std::string, std::string> placement_;
  std::map<std::string, FleetHotRecord> hot_;
  FleetRegistrar* registrar_ = nullptr;  // each deletes itself once stopped
  FleetWatcher* watcher_ = nullptr;
  DiscoverySource* k8s_ = nullptr;                // Kubernetes: instead of both
  // Kubernetes: the Service's ready endpoints, by targetRef.name; `peers`: the list. Either way
  // where poll_peers reads each one's record (endpoint IP and peer_port, or the listed address).
  std::map<std::string, FleetMember> listed_;
  std::map<std::string, config::Address> peer_addrs_;
  std::map<std::string, ApiCall*> peer_calls_;      // poll_peers' calls in flight, by member
  static constexpr size_t kMaxPeerRecord = 1 << 20;  // a larger answer is cut (and rejected)
};

}  // namespace rondel::server
