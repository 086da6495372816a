// SystemdNotify: sd_notify(3) calls for start-up, reload and shutdown.
#include "systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdio>
#include <ctime>
#include <string>

namespace rondel::server {

namespace {

void send(std::string_view first, std::string_view status) noexcept {
  try {
    std::string msg(first);
    if (!status.empty()) {
      msg += "\nSTATUS=";
      msg += status;
    }
    // unset_environment = 0: a later reload notifies through the same socket.
    sd_notify(0, msg.c_str());
  } catch (...) {  // std::bad_alloc: readiness is advisory, serving goes on
  }
}

}  // namespace

void SystemdNotify::ready(std::string_view status) noexcept { send("READY=1", status); }

void SystemdNotify::reloading() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long usec = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull +
                            static_cast<unsigned long long>(ts.tv_nsec) / 1000ull;
  char first[64];
  int n = std::snprintf(first, sizeof first, "RELOADING=1\nMONOTONIC_USEC=%llu", usec);
  send(std::string_view(first, static_cast<size_t>(n)), "reloading");
}

void SystemdNotify::stopping(std::string_view status) noexcept { send("STOPPING=1", status); }

}  // namespace rondel::server
