// Discovery: the resolvers (dns_resolver.h) and the watched sources of every pool, and the
// expansion of a configuration into the backends they found.
#include "rondel/server/discovery.h"

#include <ares.h>

#include <set>

#include "discovery_source.h"
#include "dns_resolver.h"

namespace rondel::server {

using dns_detail::resolver_key;

Discovery::Discovery(uv_loop_t* loop, proxy::Logger& log, OnChange on_change)
    : loop_(loop), log_(log), on_change_(std::move(on_change)) {
  ares_library_init(ARES_LIB_INIT_ALL);
  notify_ = new uv_timer_t();
  uv_timer_init(loop_, notify_);
  notify_->data = this;
}

Discovery::~Discovery() {
  stop();
  ares_library_cleanup();
}

void Discovery::stop() noexcept {
  for (Resolver* r : resolvers_) r->stop();
  resolvers_.clear();
  for (DiscoverySource* s : sources_) s->stop();
  sources_.clear();
  if (notify_ != nullptr) {
    uv_timer_stop(notify_);
    uv_close(reinterpret_cast<uv_handle_t*>(notify_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    notify_ = nullptr;
  }
}

Resolver* Discovery::find(const config::PoolConfig& pool, const config::BackendConfig& b) const {
  std::string key = resolver_key(pool, b);
  for (Resolver* r : resolvers_) {
    if (r->key() == key) return r;
  }
  return nullptr;
}

void Discovery::add(const config::Config& cfg) {
  if (notify_ == nullptr) return;  // stopped
  for (const auto& pool : cfg.pools) {
    for (const auto& b : pool.backends) {
      if (!b.address.is_name) continue;
      if (Resolver* r = find(pool, b)) {
        r->update_settings(pool.dns);
        continue;
      }
      auto* r = new Resolver(*this, resolver_key(pool, b), pool, b);
      resolvers_.push_back(r);
      r->query();
    }
  }
  add_sources(cfg);
}

void Discovery::retain(const config::Config& cfg) {
  for (Resolver* r : resolvers_) r->seen = false;
  for (const auto& pool : cfg.pools) {
    for (const auto& b : pool.backends) {
      if (!b.address.is_name) continue;
      if (Resolver* r = find(pool, b)) r->seen = true;
    }
  }
  for (auto it = resolvers_.begin(); it != resolvers_.end();) {
    if ((*it)->seen) {
      ++it;
    } else {
      (*it)->stop();
      it = resolvers_.erase(it);
    }
  }
  retain_sources(cfg);
}

bool Discovery::settled(const config::Config& cfg) const {
  for (const auto& pool : cfg.pools) {
    for (const auto& b : pool.backends) {
      if (!b.address.is_name) continue;
      Resolver* r = find(pool, b);
      if (r == nullptr || !r->answered()) return false;
    }
  }
  return sources_settled(cfg);
}

config::Config Discovery::expand(const config::Config& cfg) const {
  config::Config out = cfg;
  for (size_t pi = 0; pi < cfg.pools.size(); ++pi) {
    const config::PoolConfig& pool = cfg.pools[pi];
    bool any_name = false;
    for (const auto& b : pool.backends) any_name |= b.address.is_name;
    if (!any_name && pool.discovery.kind == config::DiscoveryKind::kNone) continue;
    std::vector<config::BackendConfig> list;
    std::set<std::string> ids;
    // Literal backends first, so a resolved address equal to a listed one is the listed one.
    for (const auto& b : pool.backends) {
      if (b.address.is_name) continue;
      ids.insert(b.id);
      list.push_back(b);
    }
    for (const auto& b : pool.backends) {
      if (!b.address.is_name) continue;
      Resolver* r = find(pool, b);
      if (r == nullptr) continue;
      for (const Found& f : r->found()) {
        config::BackendConfig e;
        e.address = config::Address{f.ip, f.port, false};
        e.id = f.id;
        e.host_name = b.host_name;  // TLS to the backend: SNI and the verified name
        e.weight = f.weight > 0 ? f.weight : b.weight;
        e.position = b.position;
        e.labels = b.labels;  // the entry's labels apply to every address it resolves to
        e.agent = b.agent;    // and its agent_check
        if (ids.insert(e.id).second) list.push_back(std::move(e));
      }
    }
    expand_sources(pool, list, ids);
    out.pools[pi].backends = std::move(list);
  }
  return out;
}

bool Discovery::owns(const std::string& pool, const std::string& id) const {
  for (Resolver* r : resolvers_) {
    if (r->pool() == pool && r->holds(id)) return true;
  }
  return false;
}

bool Discovery::drop(const std::string& pool, const std::string& id) {
  bool dropped = false;
  for (Resolver* r : resolvers_) {
    if (r->pool() == pool) dropped |= r->drop(id);
  }
  return dropped;
}

bool Discovery::take_source_only() noexcept {
  const bool only = source_changed_ && !dns_changed_;
  source_changed_ = dns_changed_ = false;
  return only;
}

void Discovery::changed(bool from_source) noexcept {
  (from_source ? source_changed_ : dns_changed_) = true;
  if (notify_ != nullptr && !uv_is_active(reinterpret_cast<uv_handle_t*>(notify_))) {
    uv_timer_start(notify_, &on_notify, 0, 0);
  }
}

void Discovery::on_notify(uv_timer_t* t) noexcept {
  auto* d = static_cast<Discovery*>(t->data);
  if (d->on_change_) d->on_change_();
}

}  // namespace rondel::server
