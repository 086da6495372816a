// AdminStates: operators' backend settings, their application to snapshots and the state file.
#include "rondel/server/admin_states.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "flat_json.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace {

constexpr std::pair<proxy::AdminState, std::string_view> kStateNames[] = {
    {proxy::AdminState::kReady, "ready"},
    {proxy::AdminState::kDrain, "drain"},
    {proxy::AdminState::kMaint, "maint"},
};

std::string errno_text() { return std::strerror(errno); }

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
  return it != entries_.end() ? it->second : AdminSetting{};
}

bool AdminStates::set(std::string_view pool, std::string_view id, const AdminSetting& s) {
  const std::string k = key(pool, id);
  auto it = entries_.find(k);
  if (s == AdminSetting{}) {
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
  }
  if (it != entries_.end() && it->second == s) return false;
  entries_[k] = s;
  return true;
}

void AdminStates::apply_weights(config::Config& cfg) const {
  if (entries_.empty()) return;
  for (auto& p : cfg.pools) {
    for (auto& b : p.backends) {
      auto it = entries_.find(key(p.name, b.id));
      if (it != entries_.end() && it->second.weight) b.weight = *it->second.weight;
    }
  }
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
    auto obj = FlatJson::parse(line);
    if (!obj) {
      warn(obj.error().message);
      continue;
    }
    const FlatJson::Value* pool = obj->get("pool");
    const FlatJson::Value* id = obj->get("backend");
    const FlatJson::Value* state = obj->get("state");
    const FlatJson::Value* weight = obj->get("weight");
    AdminSetting s;
    if (pool == nullptr || id == nullptr || pool->kind != FlatJson::Kind::kString ||
        id->kind != FlatJson::Kind::kString) {
      warn("needs \"pool\" and \"backend\" strings");
      continue;
    }
    if (state != nullptr && !parse_admin_state(state->text, s.state)) {
      warn("unknown state \"" + state->text + "\"");
      continue;
    }
    uint64_t w = 0;
    if (weight != nullptr && weight->kind != FlatJson::Kind::kNull) {
      if (!flat_json_uint(*weight, kMaxAdminWeight, w)) {
        warn("weight must be an integer 0..65535");
        continue;
      }
      s.weight = static_cast<uint32_t>(w);
    }
    set(pool->text, id->text, s);
  }
  return true;
}

core::Result<bool> AdminStates::save(const std::string& path) const {
  std::string text;
  for (const auto& [k, s] : entries_) {
    const size_t nul = k.find('\0');
    util::JsonWriter w;
    w.begin();
    w.field("pool", std::string_view(k).substr(0, nul));
    w.field("backend", std::string_view(k).substr(nul + 1));
    w.field("state", admin_state_name(s.state));
    if (s.weight) w.field("weight", uint64_t{*s.weight});
    w.end();
    text += w.str();
    text += '\n';
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return core::fail(tmp + ": " + errno_text());
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      return core::fail(tmp + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return core::fail(tmp + ": " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return core::fail(path + ": " + why);
  }
  return true;
}

}  // namespace rondel::server
