// Discovery: the watched sources' share of add, retain, settled and expand.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "discovery_source.h"
#include "rondel/server/discovery.h"

namespace rondel::server {

std::string discovery_settings_key(const config::DiscoveryConfig& d) {
  std::string k;
  auto add = [&k](const std::string& v) {
    k += '\0';
    k += v;
  };
  add(std::to_string(static_cast<int>(d.kind)));
  for (const auto& e : d.endpoints) add(e.text);
  add(d.prefix);
  add(d.service);
  add(d.namespace_name);
  add(d.port);
  add(d.server.text);
  add(d.token_file);
  add(d.username);
  add(d.password_file);
  add(d.ca);
  add(d.allow_empty ? "1" : "0");
  add(std::to_string(d.timeout_ms) + "/" + std::to_string(d.retry_ms));
  return k;
}

namespace {

// Identity of a source: its pool and every setting; a reload that changes one starts a new
// source (the old one stops once the new configuration is published).
std::string source_key(const config::PoolConfig& pool) {
  return pool.name + discovery_settings_key(pool.discovery);
}

}  // namespace

namespace {

// The CA of `d`'s https endpoints and its token file; "FILE: reason" per problem.
bool check_files(const std::string& what, const config::DiscoveryConfig& d, std::FILE* err) {
  bool ok = true;
  std::vector<config::ApiUrl> urls = d.endpoints;
  if (d.kind == config::DiscoveryKind::kKubernetes && !d.server.host.empty()) urls = {d.server};
  for (const auto& u : urls) {
    if (!u.tls) continue;
    if (auto ctx = api_tls_context(what, u, d.ca); !ctx) {
      std::fprintf(err, "%s: %s\n", what.c_str(), ctx.error().message.c_str());
      ok = false;
    }
    break;  // one context serves every endpoint
  }
  auto readable = [&](const std::string& path, const char* kind) {
    if (path.empty()) return;
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) {
      std::fprintf(err, "%s: %s: cannot read the %s: %s\n", what.c_str(), path.c_str(), kind,
                   std::strerror(errno));
      ok = false;
    } else {
      std::fclose(f);
    }
  };
  readable(d.token_file, "token file");
  readable(d.password_file, "password file");
  return ok;
}

}  // namespace

bool check_discovery_files(const config::Config& cfg, std::FILE* err) {
  bool ok = true;
  for (const auto& pool : cfg.pools) {
    if (pool.discovery.kind != config::DiscoveryKind::kNone) {
      ok &= check_files("pool " + pool.name + " discovery", pool.discovery, err);
    }
  }
  if (cfg.fleet.enabled) ok &= check_files("fleet", cfg.fleet.source, err);
  return ok;
}

DiscoverySource* Discovery::find_source(const config::PoolConfig& pool) const {
  if (pool.discovery.kind == config::DiscoveryKind::kNone) return nullptr;
  const std::string key = source_key(pool);
  for (DiscoverySource* s : sources_) {
    if (s->key() == key) return s;
  }
  return nullptr;
}

void Discovery::add_sources(const config::Config& cfg) {
  for (const auto& pool : cfg.pools) {
    if (pool.discovery.kind == config::DiscoveryKind::kNone || find_source(pool) != nullptr) {
      continue;
    }
    DiscoverySource* s =
        pool.discovery.kind == config::DiscoveryKind::kEtcd
            ? make_etcd_source(*this, pool.name, source_key(pool), pool.discovery)
            : make_k8s_source(*this, pool.name, source_key(pool), pool.discovery);
    sources_.push_back(s);
    s->start();
  }
}

void Discovery::retain_sources(const config::Config& cfg) {
  for (DiscoverySource* s : sources_) s->seen = false;
  for (const auto& pool : cfg.pools) {
    if (DiscoverySource* s = find_source(pool)) s->seen = true;
  }
  for (auto it = sources_.begin(); it != sources_.end();) {
    if ((*it)->seen) {
      ++it;
    } else {
      (*it)->stop();
      it = sources_.erase(it);
    }
  }
}

bool Discovery::sources_settled(const config::Config& cfg) const {
  for (const auto& pool : cfg.pools) {
    if (pool.discovery.kind == config::DiscoveryKind::kNone) continue;
    DiscoverySource* s = find_source(pool);
    if (s == nullptr || !s->settled()) return false;
  }
  return true;
}

void Discovery::expand_sources(const config::PoolConfig& pool,
                               std::vector<config::BackendConfig>& list,
                               std::set<std::string>& ids) const {
  const DiscoverySource* s = find_source(pool);
  if (s == nullptr) return;
  for (const SourceBackend& f : s->backends()) {
    config::BackendConfig e;
    e.address = f.address;
    e.id = f.id;
    e.weight = f.weight;
    e.labels = f.labels;
    e.position = pool.discovery.position;
    if (ids.insert(e.id).second) list.push_back(std::move(e));
  }
}

}  // namespace rondel::server
