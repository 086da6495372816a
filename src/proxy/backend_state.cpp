// BackendState and BackendRegistry: live per-backend state that survives reloads.
#include "rondel/proxy/backend_state.h"

#include "rondel/proxy/backend_conn.h"

namespace rondel::proxy {

BackendState::BackendState(std::string pool, std::string id, const sockaddr_storage& addr,
                           std::string addr_text)
    : pool_(std::move(pool)), id_(std::move(id)), addr_(addr), addr_text_(std::move(addr_text)) {}

BackendState::~BackendState() {
  for (uint32_t w = 0; w < kMaxWorkers; ++w) close_idle(w);
}

void BackendState::close_idle(uint32_t w) noexcept {
  while (BackendConn* c = pop_idle(w)) c->close();
}

bool BackendState::note_failure(uint32_t threshold) noexcept {
  uint32_t n = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  return threshold > 0 && n >= threshold;
}

BackendConn* BackendState::pop_idle(uint32_t w) noexcept {
  BackendConn* c = idle_[w].head;
  if (c != nullptr) remove_idle(c);
  return c;
}

void BackendState::push_idle(uint32_t w, BackendConn* c) noexcept {
  IdleList& l = idle_[w];
  c->idle_prev_ = nullptr;
  c->idle_next_ = l.head;
  if (l.head != nullptr) l.head->idle_prev_ = c;
  l.head = c;
  c->in_idle_list_ = true;
  c->idle_worker_ = w;
  ++l.count;
  idle_total_.fetch_add(1, std::memory_order_relaxed);
}

void BackendState::remove_idle(BackendConn* c) noexcept {
  if (!c->in_idle_list_) return;
  IdleList& l = idle_[c->idle_worker_];
  if (c->idle_prev_ != nullptr) c->idle_prev_->idle_next_ = c->idle_next_;
  else l.head = c->idle_next_;
  if (c->idle_next_ != nullptr) c->idle_next_->idle_prev_ = c->idle_prev_;
  c->idle_prev_ = c->idle_next_ = nullptr;
  c->in_idle_list_ = false;
  --l.count;
  idle_total_.fetch_sub(1, std::memory_order_relaxed);
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
    if (existing->addr_text() == addr_text) {
      existing->retired.store(false, std::memory_order_relaxed);
      return existing;
    }
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
