// Snapshot: builds all pools of one configuration.
#include "rondel/proxy/snapshot.h"

#include <algorithm>

namespace rondel::proxy {

core::Result<std::shared_ptr<const Snapshot>> Snapshot::build(
    config::Config cfg, BackendRegistry& registry,
    std::vector<std::pair<std::string, std::shared_ptr<PoolState>>>& pool_states,
    ListenerStates& listener_states, uint64_t generation) {
  std::shared_ptr<Snapshot> snap(new Snapshot());
  snap->cfg_ = std::move(cfg);
  snap->generation_ = generation;
  for (const auto& pc : snap->cfg_.pools) {
    std::shared_ptr<PoolState> state;
    for (auto& [name, s] : pool_states) {
      if (name == pc.name) state = s;
    }
    if (!state) {
      state = std::make_shared<PoolState>();
      state->slot = static_cast<uint32_t>(pool_states.size());  // pool_states only grows
      pool_states.emplace_back(pc.name, state);
    }
    auto pool = Pool::build(pc, registry, state);
    if (!pool) return pool.error();
    (*pool)->set_generation(generation);
    snap->max_scratch_words_ = std::max(snap->max_scratch_words_, (*pool)->scratch_words());
    snap->pools_.push_back(std::move(*pool));
  }
  for (const auto& lc : snap->cfg_.listeners) {
    if (snap->find_pool(lc.pool) == nullptr) {
      return core::fail("listener " + lc.name + ": no pool named " + lc.pool);
    }
    std::shared_ptr<ListenerState> state;
    for (auto& [name, s] : listener_states) {
      if (name == lc.name) state = s;
    }
    if (!state) {
      state = std::make_shared<ListenerState>(lc.name);
      listener_states.emplace_back(lc.name, state);
    }
    std::shared_ptr<const tls::ServerContext> tls_ctx;
    if (lc.tls.enabled) {
      if (!state->ticket_keys) {
        state->ticket_keys = std::make_shared<tls::TicketKeys>(lc.tls.ticket_key_rotation_ms);
      }
      auto built = tls::ServerContext::build(lc.name, lc.tls, state->ticket_keys);
      if (!built) return built.error();
      tls_ctx = std::move(*built);
    }
    snap->tls_.push_back(std::move(tls_ctx));
    snap->listener_states_.push_back(std::move(state));
  }
  return std::shared_ptr<const Snapshot>(std::move(snap));
}

const Pool* Snapshot::find_pool(std::string_view name) const noexcept {
  for (const auto& p : pools_) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

ListenerRoute Snapshot::route(std::string_view listener) const noexcept {
  for (size_t i = 0; i < cfg_.listeners.size(); ++i) {
    const auto& l = cfg_.listeners[i];
    if (l.name == listener) return {&l, find_pool(l.pool), listener_states_[i], tls_[i]};
  }
  return {};
}

}  // namespace rondel::proxy
