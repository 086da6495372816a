// SystemdNotify: the service manager's readiness protocol (sd_notify(3)) for Type=notify units.
#pragma once

#include <string_view>

namespace rondel::server {

// Sends state lines ("READY=1", "RELOADING=1", "STOPPING=1", "STATUS=...") to the socket named
// by $NOTIFY_SOCKET. Without that variable (not started by systemd) every call does nothing.
// Event-loop thread only; a few syscalls per call, never on the request path.
class SystemdNotify {
 public:
  // READY=1 plus STATUS=`status`: start-up is complete, or a reload finished (either outcome).
  static void ready(std::string_view status) noexcept;
  // RELOADING=1 with MONOTONIC_USEC= (systemd >= 253 matches it to `systemctl reload`).
  static void reloading() noexcept;
  // STOPPING=1 plus STATUS=`status`: the drain has begun.
  static void stopping(std::string_view status) noexcept;
};

}  // namespace rondel::server
