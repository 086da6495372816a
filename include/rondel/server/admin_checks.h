// The warnings rondel gives about its admin section, the same at start (logged) and in
// `rondel -c` (printed): an admin API listening beyond loopback (its reads need no token), a
// state file in a directory others can write to, and state-file lines that cannot apply.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"

namespace rondel::server {

struct AdminWarning {
  std::string_view event;  // the log line's name: admin_not_loopback, admin_state_dir_unsafe, ...
  std::string text;
};

// Whether `host` (an IP literal) is a loopback address: 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104.
bool is_loopback(const std::string& host);

// Where the admin API listens (admin_not_loopback) and where its state file lives
// (admin_state_dir_unsafe, state_dir_warning). Nothing when the admin endpoint is off.
std::vector<AdminWarning> admin_setup_warnings(const config::AdminConfig& admin);

// For `rondel -c`: admin_setup_warnings, then what a start would skip of admin.state_file
// (admin_state_skipped: lines that do not parse, and weight overrides with which a pool could
// not be built, as AdminStates::apply_weights decides). Backends named by DNS are known only
// once resolved: their overrides are checked at start, not here. Reads the state file; changes
// nothing.
std::vector<AdminWarning> check_admin(const config::Config& cfg);

}  // namespace rondel::server
