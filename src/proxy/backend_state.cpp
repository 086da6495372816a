// BackendState and BackendRegistry: live per-backend state that survives reloads.
#include "rondel/proxy/backend_state.h"

#include "rondel/proxy/backend_conn.h"

namespace rondel::proxy {

BackendState::BackendState(std::string pool, std::string id, const sockaddr_storage& addr,
                           std::string addr_text,
                           std::shared_ptr<std::atomic<uint32_t>> pool_unusable)
    : pool_(std::move(pool)),
      id_(std::move(id)),
      addr_(addr),
      addr_text_(std::move(addr_text)),
      pool_unusable_(std::move(pool_unusable)) {}

BackendState::~BackendState() {
  for (uint32_t w = 0; w < kMaxWorkers; ++w) close_idle(w);
  if (flags_.load(std::memory_order_acquire) != 0) count_unusable(-1);
}

Health BackendState::health() const noexcept {
  const uint8_t f = flags_.load(std::memory_order_acquire);
  constexpr auto kDownBits = static_cast<uint8_t>(HealthFlag::kFailedActiveCheck) |
                             static_cast<uint8_t>(HealthFlag::kAgentDown);
  if ((f & kDownBits) != 0) return Health::kDown;
  if ((f & static_cast<uint8_t>(HealthFlag::kPassiveEjected)) != 0) return Health::kEjected;
  return Health::kUp;
}

void BackendState::count_unusable(int delta) noexcept {
  if (pool_unusable_ == nullptr) return;
  if (delta > 0) pool_unusable_->fetch_add(1, std::memory_order_acq_rel);
  else pool_unusable_->fetch_sub(1, std::memory_order_acq_rel);
}

bool BackendState::set_flag(HealthFlag f) noexcept {
  const auto bit = static_cast<uint8_t>(f);
  count_unusable(+1);  // reserve first: the count is never below the flagged backends
  const uint8_t before = flags_.fetch_or(bit, std::memory_order_acq_rel);
  if (before != 0) count_unusable(-1);  // already counted for another flag (or this one)
  return (before & bit) == 0;
}

FlagChange BackendState::set_flag_within(HealthFlag f, uint32_t limit) noexcept {
  const auto bit = static_cast<uint8_t>(f);
  const uint8_t now = flags_.load(std::memory_order_acquire);
  if ((now & bit) != 0) return FlagChange::kAlreadySet;
  if (now != 0) return set_flag(f) ? FlagChange::kSet : FlagChange::kAlreadySet;
  if (pool_unusable_ != nullptr) {
    uint32_t n = pool_unusable_->load(std::memory_order_acquire);
    do {
      if (n >= limit) return FlagChange::kLimitReached;
    } while (!pool_unusable_->compare_exchange_weak(n, n + 1, std::memory_order_acq_rel,
                                                    std::memory_order_acquire));
  } else if (limit == 0) {
    return FlagChange::kLimitReached;
  }
  const uint8_t before = flags_.fetch_or(bit, std::memory_order_acq_rel);
  if (before != 0) count_unusable(-1);  // flagged meanwhile: it was already counted
  return (before & bit) == 0 ? FlagChange::kSet : FlagChange::kAlreadySet;
}

bool BackendState::clear_flag(HealthFlag f) noexcept {
  const auto bit = static_cast<uint8_t>(f);
  const uint8_t before = flags_.fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
  if ((before & bit) == 0) return false;
  if (before == bit) count_unusable(-1);  // no flag left
  return true;
}

bool BackendState::set_admin_state(AdminState s) noexcept {
  const AdminState before = admin_state_.exchange(s, std::memory_order_acq_rel);
  if (s == AdminState::kReady) clear_flag(HealthFlag::kAdminDown);
  else set_flag(HealthFlag::kAdminDown);
  return before != s;
}

void BackendState::close_idle(uint32_t w) noexcept {
  while (BackendConn* c = pop_idle(w)) c->close();
}

BackendConn* BackendState::pop_idle(uint32_t w) noexcept {
  BackendConn* c = idle_[w].list.front();
  if (c != nullptr) remove_idle(c);
  return c;
}

BackendConn* BackendState::pop_idle_matching(uint32_t w, uint64_t key) noexcept {
  util::IntrusiveList<BackendConn, BackendIdleTag>& l = idle_[w].list;
  for (BackendConn* c = l.front(); c != nullptr; c = l.next(*c)) {
    if (c->reuse_key() == key) {
      remove_idle(c);
      return c;
    }
  }
  return nullptr;
}

void BackendState::push_idle(uint32_t w, BackendConn* c) noexcept {
  IdleList& l = idle_[w];
  l.list.push_front(*c);
  c->idle_worker_ = w;
  ++l.count;
  idle_total_.fetch_add(1, std::memory_order_relaxed);
}

void BackendState::remove_idle(BackendConn* c) noexcept {
  auto& node = static_cast<util::ListNode<BackendIdleTag>&>(*c);
  if (!node.linked()) return;
  node.unlink();
  --idle_[c->idle_worker_].count;
  idle_total_.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<BackendState> BackendRegistry::get_or_create(
    const std::string& pool, const std::string& id, const sockaddr_storage& addr,
    const std::string& addr_text, std::shared_ptr<std::atomic<uint32_t>> pool_unusable) {
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
  auto fresh = std::make_shared<BackendState>(pool, id, addr, addr_text, std::move(pool_unusable));
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
