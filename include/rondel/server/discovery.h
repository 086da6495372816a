// Discovery: the backends a pool learns besides its literal list. From DNS (below), and from
// watched sources (src/server/discovery_source.h: etcd, Kubernetes EndpointSlices), one per pool
// with a `discovery` section, whose last good membership joins the pool in expand().
//
// DNS discovery: resolves backends given by host name with c-ares on the daemon's libuv loop and
// turns every address a name resolves to into a backend with id ADDRESS:PORT, or (an entry
// `srv: NAME`) every target of the name's lowest-priority SRV records into a backend with id
// TARGET:PORT, the record's port and weight, and the target's address.
//
// One Resolver per (pool, NAME:PORT or SRV NAME, nameservers, query settings). Each re-resolves its name every
// `ttl` ± `jitter` and caches the last answer; an address the answers stop listing (an
// authoritative "no such name / no address", or simply absent) stays for `hold` after the last
// answer that listed it; a timeout or server failure keeps the last set (and retries sooner).
// When a cached set changes, the owner's `on_change` runs from a fresh loop callback (never from
// inside c-ares). c-ares sockets are watched with uv_poll handles created from c-ares's socket
// state callback; c-ares's own timeouts run on a uv_timer. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/proxy/log.h"

namespace rondel::server {

class Resolver;
class DiscoverySource;

// `rondel -c`: reads the files the discovery sources and the fleet of `cfg` would read at start
// (a CA bundle for https endpoints, a token file) and reports each problem to `err` as
// "FILE: reason"; contacts no source. True when all are readable.
bool check_discovery_files(const config::Config& cfg, std::FILE* err);

class Discovery {
 public:
  using OnChange = std::function<void()>;

  Discovery(uv_loop_t* loop, proxy::Logger& log, OnChange on_change);
  ~Discovery();  // stop()s
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  // Starts a resolver (first query now) for every name backend of `cfg` that has none yet, and a
  // source for every pool `discovery` that has none. Existing ones keep their cached answers;
  // none is stopped (see retain()).
  void add(const config::Config& cfg);
  // Stops the resolvers and sources no name backend or pool of `cfg` uses any more.
  void retain(const config::Config& cfg);
  // True when every name backend of `cfg` has a resolver that has completed at least one query,
  // and every source of `cfg` has answered or failed once.
  bool settled(const config::Config& cfg) const;
  // `cfg` with each name backend replaced by one backend per cached address (id and address
  // ADDRESS:PORT, the entry's weight; SRV: id TARGET:PORT, the record's port and weight),
  // skipping ids the pool already has; then the last good membership of the pool's source.
  // Names without a resolver or without addresses contribute nothing.
  config::Config expand(const config::Config& cfg) const;
  // Whether backend `id` of `pool` came from a name (and which resolver holds it).
  bool owns(const std::string& pool, const std::string& id) const;
  // A connection to backend `id` of `pool` failed: drops its address from the cached set at once
  // (on_change follows) and starts a re-resolution. Returns true when an address was dropped.
  bool drop(const std::string& pool, const std::string& id);
  // Stops every resolver (handles finish closing on the loop). Idempotent.
  void stop() noexcept;
  size_t resolvers() const noexcept { return resolvers_.size(); }
  // The running sources (metrics: rondel_discovery_up, rondel_discovery_errors_total).
  const std::vector<DiscoverySource*>& sources() const noexcept { return sources_; }

  uv_loop_t* loop() const noexcept { return loop_; }
  proxy::Logger& log() const noexcept { return log_; }
  // A cached DNS set (`from_source` false) or a source's membership changed: schedules
  // on_change (from a clean stack).
  void changed(bool from_source = false) noexcept;
  // Whether only watched sources (no DNS answer) changed since the last call; clears the marks.
  // The daemon names its log lines after it (discovery_update or dns_update).
  bool take_source_only() noexcept;

 private:
  friend class Resolver;
  friend class DiscoverySource;
  // The sources' part of add, retain, settled and expand (discovery_sources.cpp).
  void add_sources(const config::Config& cfg);
  void retain_sources(const config::Config& cfg);
  bool sources_settled(const config::Config& cfg) const;
  void expand_sources(const config::PoolConfig& pool, std::vector<config::BackendConfig>& list,
                      std::set<std::string>& ids) const;
  DiscoverySource* find_source(const config::PoolConfig& pool) const;
  static void on_notify(uv_timer_t* t) noexcept;
  Resolver* find(const config::PoolConfig& pool, const config::BackendConfig& b) const;

  uv_loop_t* loop_;
  proxy::Logger& log_;
  OnChange on_change_;
  std::vector<Resolver*> resolvers_;  // each deletes itself once stopped and closed
  std::vector<DiscoverySource*> sources_;  // likewise
  uv_timer_t* notify_ = nullptr;      // 0 ms timer that calls on_change_ from a clean stack
  bool dns_changed_ = false;          // marks since take_source_only()
  bool source_changed_ = false;
  uint64_t seed_ = 0x243f6a8885a308d3ull;
};

}  // namespace rondel::server
