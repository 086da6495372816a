// TicketKeys: two keys (current and previous) with lazy rotation.
#include "rondel/tls/ticket_keys.h"

#include <openssl/rand.h>

#include <cstring>

namespace rondel::tls {

namespace {

bool fresh(TicketKeys::Key& k, uint64_t now_ms) noexcept {
  if (RAND_bytes(k.name, sizeof k.name) != 1 || RAND_bytes(k.aes, sizeof k.aes) != 1 ||
      RAND_bytes(k.hmac, sizeof k.hmac) != 1) {
    return false;
  }
  k.created_ms = now_ms;
  return true;
}

}  // namespace

void TicketKeys::set_rotation(uint64_t ms) noexcept {
  std::lock_guard lock(mu_);
  rotation_ms_ = ms;
}

bool TicketKeys::rotate_if_due(uint64_t now_ms) noexcept {
  if (have_cur_ && now_ms - cur_.created_ms < rotation_ms_) return true;
  Key next{};
  if (!fresh(next, now_ms)) return have_cur_;
  if (have_cur_ && now_ms - cur_.created_ms < 2 * rotation_ms_) {
    prev_ = cur_;  // still opens the tickets it sealed during its period
    have_prev_ = true;
  } else {
    have_prev_ = false;  // idle for two periods: nothing sealed earlier is accepted
  }
  cur_ = next;
  if (have_cur_) ++rotations_;
  have_cur_ = true;
  return true;
}

bool TicketKeys::current(uint64_t now_ms, Key& out) noexcept {
  std::lock_guard lock(mu_);
  if (!rotate_if_due(now_ms)) return false;
  out = cur_;
  return true;
}

bool TicketKeys::find(uint64_t now_ms, const unsigned char* name, Key& out, bool& renew) noexcept {
  std::lock_guard lock(mu_);
  rotate_if_due(now_ms);
  if (have_cur_ && std::memcmp(name, cur_.name, kNameLen) == 0) {
    out = cur_;
    renew = false;
    return true;
  }
  if (have_prev_ && now_ms - prev_.created_ms < 2 * rotation_ms_ &&
      std::memcmp(name, prev_.name, kNameLen) == 0) {
    out = prev_;
    renew = true;
    return true;
  }
  return false;
}

uint64_t TicketKeys::rotations() const noexcept {
  std::lock_guard lock(mu_);
  return rotations_;
}

}  // namespace rondel::tls
