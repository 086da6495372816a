// admin_setup_warnings and check_admin: what start-up logs and `rondel -c` prints about the
// admin section.
#include "rondel/server/admin_checks.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "rondel/net/uv_util.h"
#include "rondel/server/admin_states.h"

namespace rondel::server {

bool is_loopback(const std::string& host) {
  auto addr = net::to_sockaddr(host, 0);
  if (!addr) return false;
  if (addr->ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&*addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&*addr)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

std::vector<AdminWarning> admin_setup_warnings(const config::AdminConfig& admin) {
  std::vector<AdminWarning> out;
  if (!admin.enabled) return out;
  if (!is_loopback(admin.bind.host)) {
    out.push_back({"admin_not_loopback",
                   "the admin API listens on " + admin.bind.to_string() +
                       ", beyond loopback: its reads (/metrics, /api/pools, /api/route, /ui) "
                       "need no token; bind it to 127.0.0.1 or [::1], or keep its port off "
                       "untrusted networks"});
  }
  if (!admin.state_file.empty()) {
    if (std::string w = state_dir_warning(admin.state_file); !w.empty()) {
      out.push_back({"admin_state_dir_unsafe", std::move(w)});
    }
  }
  return out;
}

std::vector<AdminWarning> check_admin(const config::Config& cfg) {
  std::vector<AdminWarning> out = admin_setup_warnings(cfg.admin);
  if (cfg.admin.state_file.empty()) return out;
  AdminStates states;
  std::vector<std::string> skipped;
  if (auto ok = states.load(cfg.admin.state_file, skipped); !ok) {
    out.push_back({"admin_state_unreadable", ok.error().message});
  }
  for (std::string& s : skipped) out.push_back({"admin_state_skipped", std::move(s)});
  config::Config applied = cfg;
  for (SkippedWeight& k : states.apply_weights(applied)) {
    out.push_back({"admin_state_skipped", std::move(k.message)});
  }
  return out;
}

}  // namespace rondel::server
