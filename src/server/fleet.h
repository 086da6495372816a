// Fleet: this instance's self-registration in etcd and the fleet it sees (`fleet` in the config,
// issue 36). A Registrar keeps one key, PREFIX + id, under a lease it keeps alive (grant, put,
// keep-alive every third of the TTL; a lost lease is granted again), whose value carries the
// instance's placement fingerprint per pool. A Watcher reads and watches PREFIX: every live key
// is one instance, so the fleet knows N (what a fleet-wide load bound needs) and each pool's
// majority fingerprint; an instance whose fingerprint differs from the majority is flagged.
//
// Both halves are discovery sources (errors, back-off, `SOURCE: reason` logs) that delete
// themselves once stopped. Loop thread only; never throws.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/proxy/snapshot.h"

namespace rondel::server {

class Discovery;
class FleetRegistrar;
class FleetWatcher;

// One instance as its key says: its id and its fingerprint (16 hex digits) per pool.
struct FleetMember {
  std::string id;
  std::map<std::string, std::string> fingerprints;
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
  void stop() noexcept;

  // The live instances by id (this one included once its key is read back); N is their count.
  const std::map<std::string, FleetMember>& members() const noexcept;
  bool registered() const noexcept;  // the key is written and its lease alive
  bool watching() const noexcept;    // the prefix is read and watched
  // The fingerprint more than half of the instances that have `pool` agree on ("" when none).
  std::string majority(const std::string& pool) const;
  // This instance has `pool` and a majority exists that differs from its fingerprint.
  bool disagrees(const std::string& pool) const;
  // The /api/fleet document: {"id", "instances": N, "registered", "watching", "members":
  // [{"id", "fingerprints": {...}}], "pools": [{"pool", "majority", "disagrees"}]}.
  std::string json() const;

 private:
  config::FleetConfig cfg_;
  std::string id_;
  std::map<std::string, std::string> placement_;
  FleetRegistrar* registrar_ = nullptr;  // each deletes itself once stopped
  FleetWatcher* watcher_ = nullptr;
};

}  // namespace rondel::server
