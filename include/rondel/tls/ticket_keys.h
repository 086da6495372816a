// TicketKeys: the session-ticket keys of one TLS listener, shared by every worker and carried
// across reloads, rotated every `ticket_key_rotation`: a ticket sealed under the current key is
// accepted (and renewed) for one more rotation after a new key takes over, then refused, so a
// stolen key opens at most two rotations of sessions.
//
// Rotation happens when a ticket is issued or opened and the current key is older than the
// period (no timer of its own). Thread-safe (a mutex; taken once per handshake that uses tickets).
#pragma once

#include <cstdint>
#include <mutex>

namespace rondel::tls {

class TicketKeys {
 public:
  static constexpr size_t kNameLen = 16, kKeyLen = 32;
  struct Key {
    unsigned char name[kNameLen];
    unsigned char aes[kKeyLen];
    unsigned char hmac[kKeyLen];
    uint64_t created_ms = 0;
  };
  explicit TicketKeys(uint64_t rotation_ms) : rotation_ms_(rotation_ms) {}
  void set_rotation(uint64_t ms) noexcept;
  // The key to seal a new ticket with (rotating first if due); false if no randomness.
  bool current(uint64_t now_ms, Key& out) noexcept;
  // The key named `name`; `renew` = it is the previous one (the ticket should be re-issued).
  bool find(uint64_t now_ms, const unsigned char* name, Key& out, bool& renew) noexcept;
  uint64_t rotations() const noexcept;

 private:
  bool rotate_if_due(uint64_t now_ms) noexcept;  // under mu_
  mutable std::mutex mu_;
  uint64_t rotation_ms_;
  Key cur_{}, prev_{};
  bool have_cur_ = false, have_prev_ = false;
  uint64_t rotations_ = 0;
};

}  // namespace rondel::tls
