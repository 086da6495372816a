// AdminStates: operators' backend settings, their application to snapshots and the state file.
#include "rondel/server/admin_states.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <boost/json/serialize.hpp>

#include "json_read.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace {

constexpr std::pair<proxy::AdminState, std::string_view> kStateNames[] = {
    {proxy::AdminState::kReady, "ready"},
    {proxy::AdminState::kDrain, "drain"},
    {proxy::AdminState::kMaint, "maint"},
};

std::string errno_text() { return std::strerror(errno); }

// The directory part of `path` ("." for a bare name).
std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Why a placement cannot be built over `p`'s weights, as far as operators' weights can change
// that (core::Selector::build's weight errors); "" when it can.
std::string weights_unfit(const config::PoolConfig& p) {
  size_t weighted = 0;
  for (const auto& b : p.backends) weighted += b.weight > 0 ? 1 : 0;
  if (weighted == 0) return "all backend weights are zero";
  if (p.algorithm == config::Algorithm::kMaglev && weighted > p.maglev_table_size) {
    return "more backends with weight > 0 than the maglev table's " +
           std::to_string(p.maglev_table_size) + " slots";
  }
  return {};
}

// Writes all of `text` to `fd`; false with errno set.
bool write_all(int fd, std::string_view text) noexcept {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string_view admin_state_name(proxy::AdminState s) noexcept {
  for (const auto& [state, name] : kStateNames) {
    if (state == s) return name;
  }
  return "?";
}

bool parse_admin_state(std::string_view name, proxy::AdminState& out) noexcept {
  for (const auto& [state, n] : kStateNames) {
    if (n == name) {
      out = state;
      return true;
    }
  }
  return false;
}

std::string AdminStates::key(std::string_view pool, std::string_view id) {
  std::string k(pool);
  k += '\0';
  k += id;
  return k;
}

AdminSetting AdminStates::get(std::string_view pool, std::string_view id) const {
  auto it = entries_.find(key(pool, id));
  return it != entries_.end() ? it->second.setting : AdminSetting{};
}

bool AdminStates::set(std::string_view pool, std::string_view id, const AdminSetting& s) {
  const std::string k = key(pool, id);
  auto it = entries_.find(k);
  if (s == AdminSetting{}) {
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
  }
  if (it != entries_.end() && it->second.setting == s) return false;
  entries_[k].setting = s;
  return true;
}

std::string AdminStates::where(const Entry& e) const {
  if (e.line == 0 || path_.empty()) return "runtime setting";
  return path_ + ":" + std::to_string(e.line);
}

std::vector<SkippedWeight> AdminStates::apply_weights(config::Config& cfg) const {
  std::vector<SkippedWeight> skipped;
  if (entries_.empty()) return skipped;
  for (auto& p : cfg.pools) {
    // The pool's overrides, by backend id.
    std::vector<std::pair<config::BackendConfig*, const Entry*>> found;
    for (auto& b : p.backends) {
      auto it = entries_.find(key(p.name, b.id));
      if (it != entries_.end() && it->second.setting.weight) found.emplace_back(&b, &it->second);
    }
    if (found.empty()) continue;
    std::sort(found.begin(), found.end(),
              [](const auto& x, const auto& y) { return x.first->id < y.first->id; });
    // A pool that cannot be built as configured (a DNS name gave no address...) fails or
    // serves empty as it would without overrides; the overrides do not hide that.
    const bool fit = weights_unfit(p).empty();
    for (auto& [b, e] : found) {
      const uint32_t configured = b->weight;
      b->weight = *e->setting.weight;
      if (!fit) continue;
      std::string why = weights_unfit(p);
      if (why.empty()) continue;
      b->weight = configured;
      skipped.push_back({p.name, b->id, why,
                         where(*e) + ": weight " + std::to_string(*e->setting.weight) +
                             " of backend \"" + b->id + "\" in pool \"" + p.name +
                             "\" not applied (" + why + " with it); the configured weight " +
                             std::to_string(configured) + " is used"});
    }
  }
  return skipped;
}

std::vector<std::string> AdminStates::apply_states(const proxy::Snapshot& snap) const {
  std::vector<std::string> changed;
  for (const auto& p : snap.pools()) {
    for (size_t i = 0; i < p->size(); ++i) {
      auto& b = p->backend(static_cast<core::BackendIndex>(i));
      const proxy::AdminState s = entries_.empty() ? proxy::AdminState::kReady
                                                   : get(p->name(), b.id()).state;
      if (b.set_admin_state(s)) {
        changed.push_back(p->name() + "/" + b.id() + " " + std::string(admin_state_name(s)));
      }
    }
  }
  return changed;
}

core::Result<bool> AdminStates::load(const std::string& path, std::vector<std::string>& warnings) {
  entries_.clear();
  path_ = path;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return false;  // first start: nothing kept yet
    return core::fail(path + ": " + errno_text());
  }
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto warn = [&](const std::string& why) {
      warnings.push_back(path + ":" + std::to_string(n) + ": " + why);
    };
    auto obj = parse_json_object(line);
    if (!obj) {
      warn(obj.error().message);
      continue;
    }
    const boost::json::string* pool = nullptr;
    const boost::json::string* id = nullptr;
    if (const auto* v = obj->if_contains("pool")) pool = v->if_string();
    if (const auto* v = obj->if_contains("backend")) id = v->if_string();
    if (pool == nullptr || id == nullptr) {
      warn("needs \"pool\" and \"backend\" strings");
      continue;
    }
    AdminSetting s;
    const boost::json::value* state = obj->if_contains("state");
    if (state != nullptr && !json_admin_state(*state, s.state)) {
      warn("unknown state " + boost::json::serialize(*state));
      continue;
    }
    const boost::json::value* weight = obj->if_contains("weight");
    if (weight != nullptr && !json_admin_weight(*weight, s.weight)) {
      warn("weight must be an integer 0..65535");
      continue;
    }
    const std::string k = key(std::string_view(*pool), std::string_view(*id));
    if (s == AdminSetting{}) {
      entries_.erase(k);
    } else {
      entries_[k] = Entry{s, n};  // a later line for the same backend wins
    }
  }
  return true;
}

core::Result<bool> AdminStates::save(const std::string& path) {
  std::string text;
  for (const auto& [k, e] : entries_) {
    const size_t nul = k.find('\0');
    util::JsonWriter w;
    w.begin();
    w.field("pool", std::string_view(k).substr(0, nul));
    w.field("backend", std::string_view(k).substr(nul + 1));
    w.field("state", admin_state_name(e.setting.state));
    if (e.setting.weight) w.field("weight", uint64_t{*e.setting.weight});
    w.end();
    text += w.str();
    text += '\n';
  }
  // O_EXCL under a fresh random name: whatever an attacker plants at a predictable name (a
  // symlink to a file of ours) is never opened.
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return core::fail(tmp + ": " + errno_text());
  auto fail_with = [&](const std::string& name, int err) -> core::Error {
    ::unlink(tmp.c_str());
    return core::fail(name + ": " + std::strerror(err));
  };
  if (!write_all(fd, text) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail_with(tmp, err);
  }
  if (::close(fd) != 0) return fail_with(tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_with(path, errno);
  // The rename is durable once the directory is on disk too.
  const std::string dir = dir_of(path);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  path_ = path;
  size_t n = 0;
  for (auto& [k, e] : entries_) e.line = ++n;
  return true;
}

std::string state_dir_warning(const std::string& state_file) {
  const std::string dir = dir_of(state_file);
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) {
    return "the state file's directory " + dir + " cannot be used (" + errno_text() +
           "): runtime settings will not be kept";
  }
  std::string why;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    why = std::string("is writable by ") +
          ((st.st_mode & S_IWOTH) != 0 ? "every user" : "its group") + " (mode " + mode + ")";
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    why = "belongs to uid " + std::to_string(st.st_uid) + ", neither rondel's user (uid " +
          std::to_string(::geteuid()) + ") nor root";
  }
  if (why.empty()) return {};
  return "the state file's directory " + dir + " " + why +
         ": another user could replace the state file; give it to rondel's user with mode 0755 "
         "or stricter";
}

}  // namespace rondel::server
