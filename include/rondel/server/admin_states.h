// AdminStates: the operators' runtime settings per backend (drain / maint and weight overrides
// set through PUT /api/pools/{pool}/backends/{id}), applied to every snapshot build and kept in
// the state file (`admin.state_file`) across restarts. Daemon loop only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/result.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/snapshot.h"

namespace rondel::server {

// Largest weight an operator may set (as a configured weight: the config schema's kMaxWeight).
inline constexpr uint64_t kMaxAdminWeight = 65535;

// "ready", "drain", "maint".
std::string_view admin_state_name(proxy::AdminState s) noexcept;
// The state named `name`, or false when it names none.
bool parse_admin_state(std::string_view name, proxy::AdminState& out) noexcept;

// One backend's setting; the default (ready, no weight override) is not stored.
struct AdminSetting {
  proxy::AdminState state = proxy::AdminState::kReady;
  std::optional<uint32_t> weight;  // replaces the configured weight while set
  bool operator==(const AdminSetting&) const = default;
};

// A weight override that AdminStates::apply_weights left out, because with it the pool's
// placement could not be built.
struct SkippedWeight {
  std::string pool;
  std::string id;
  std::string reason;   // "all backend weights are zero", ...
  std::string message;  // for the log and `rondel -c`: "FILE:LINE: weight 0 of backend ..."
};

class AdminStates {
 public:
  // The setting of (pool, backend id); the default when none is stored.
  AdminSetting get(std::string_view pool, std::string_view id) const;
  // Stores `s` (a default setting removes the entry). Returns true when something changed.
  bool set(std::string_view pool, std::string_view id, const AdminSetting& s);
  size_t size() const noexcept { return entries_.size(); }

  // Replaces the weight of every backend of `cfg` (DNS names already expanded) that has an
  // override, as far as the pool's placement can still be built: an override that would leave
  // a buildable pool with every weight 0, or (maglev) with more weighted backends than table
  // slots, is skipped (the configured weight stays) and returned, naming the state file and
  // line. Overrides are tried in backend id order, so the outcome never depends on the order of
  // the file's lists. A runtime setting therefore never makes a configuration that loads fail
  // to build. Settings for backends `cfg` does not name are kept, for when they come back.
  std::vector<SkippedWeight> apply_weights(config::Config& cfg) const;
  // Sets each backend of `snap` to its stored state (ready when none): the kAdminDown flag
  // follows. Returns the backends whose state changed as "pool/id state" for the log.
  std::vector<std::string> apply_states(const proxy::Snapshot& snap) const;

  // Reads the state file: one JSON object per line,
  // {"pool":"P","backend":"ID","state":"drain","weight":3}. A missing file is an empty state
  // (first start). A line that does not parse is skipped and reported in `warnings` as
  // "FILE:LINE: reason". Replaces what was stored; remembers `path` and each entry's line.
  core::Result<bool> load(const std::string& path, std::vector<std::string>& warnings);
  // Writes every entry to `path` atomically: a new temporary file in the same directory
  // (mkostemp: created exclusively under a random name, so neither an existing file nor a
  // symlink planted there is followed or reused), fsync, rename over `path`, fsync of the
  // directory; a crash leaves the old file or the new one, never a mix. On success the entries'
  // lines are those of the new file.
  core::Result<bool> save(const std::string& path);

 private:
  struct Entry {
    AdminSetting setting;
    size_t line = 0;  // its line in the state file; 0 = not written yet
  };
  // Key: pool '\0' id (neither can hold a NUL).
  static std::string key(std::string_view pool, std::string_view id);
  // "FILE:LINE" of an entry, or "runtime setting" when it is in no file yet.
  std::string where(const Entry& e) const;
  std::map<std::string, Entry> entries_;
  std::string path_;  // the state file last read or written
};

// The warning for the state file's directory when it is unsafe, else "": others than its owner
// can write to it (group or world writable, sticky or not: they could plant the state file
// before rondel writes it), or its owner is neither rondel's user nor root, or it is missing.
std::string state_dir_warning(const std::string& state_file);

}  // namespace rondel::server
