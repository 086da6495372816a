// BackendState and BackendRegistry: live per-backend state that survives reloads.
#include "rondel/proxy/backend_state.h"

#include "rondel/proxy/backend_conn.h"

namespace rondel::proxy {

BackendState::BackendState(std::string pool, std::string id, const sockaddr_storage& addr,
                           std::string addr_text)
    : pool_(std::move(pool)), id_(std::move(id)), addr_(addr), addr_text_(std::move(addr_text)) {}

BackendState::~BackendState() {
  while (BackendConn* c = pop_idle()) c->close();
}

bool BackendState::note_failure(uint32_t threshold) noexcept {
  ++consecutive_failures_;
  return threshold > 0 && consecutive_failures_ >= threshold;
}

BackendConn* BackendState::pop_idle() noexcept {
  BackendConn* c = idle_head_;
  if (c != nullptr) remove_idle(c);
  return c;
}

void BackendState::push_idle(BackendConn* c) noexcept {
  c->idle_prev_ = nullptr;
  c->idle_next_ = idle_head_;
  if (idle_head_ != nullptr) idle_head_->idle_prev_ = c;
  idle_head_ = c;
  c->in_idle_list_ = true;
  ++idle_count_;
}

void BackendState::remove_idle(BackendConn* c) noexcept {
  if (!c->in_idle_list_) return;
  if (c->idle_prev_ != nullptr) c->idle_prev_->idle_next_ = c->idle_next_;
  else idle_head_ = c->idle_next_;
  if (c->idle_next_ != nullptr) c->idle_next_->idle_prev_ = c->idle_prev_;
  c->idle_prev_ = c->idle_next_ = nullptr;
  c->in_idle_list_ = false;
  --idle_count_;
}

std::shared_ptr<BackendState> BackendRegistry::get_or_create(const std::string& pool,
                                                             const std::string& id,
                                                             const sockaddr_storage& addr,
                                                             const std::string& addr_text) {
  std::string key = pool;
  key += '\0';
  key += id;
  auto& slot = states_[key];
  if (auto existing = slot.lock()) {
    // Same id, new address (e.g. DNS changed): a new state, so no connection goes astray.
    if (existing->addr_text() == addr_text) return existing;
  }
  auto fresh = std::make_shared<BackendState>(pool, id, addr, addr_text);
  slot = fresh;
  return fresh;
}

void BackendRegistry::prune() noexcept {
  for (auto it = states_.begin(); it != states_.end();) {
    if (it->second.expired()) it = states_.erase(it);
    else ++it;
  }
}

}  // namespace rondel::proxy
