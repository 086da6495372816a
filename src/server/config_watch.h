// ConfigWatch: reloads the configuration when its file changes (a debounced inotify watch).
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>

#include "rondel/proxy/log.h"

namespace rondel::server {

// Watches the directory that holds the configuration file, not the file: an editor's rename
// over it and a Kubernetes ConfigMap update (the `..data` symlink swapped for one to a new
// directory) replace the file's inode, which a watch on the file itself would lose. Every event
// in the directory (re)starts a debounce timer; when it fires, the file's bytes are compared with
// the last ones seen, and `on_change` (the daemon's reload, exactly as for SIGHUP) runs only
// when they differ. A file that stays broken is therefore reloaded (and refused) once, not on
// every later event. Loop thread only; not on the request path.
class ConfigWatch {
 public:
  using OnChange = std::function<void()>;
  ConfigWatch(uv_loop_t* loop, std::string path, proxy::Logger& log, OnChange on_change);
  ~ConfigWatch();  // stop()
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // Starts watching (or keeps watching, with the new debounce) when `enabled`; stops otherwise.
  // The bytes now in the file are the baseline: only a later difference reloads. Logs
  // config_watch_started / config_watch_stopped, or config_watch_failed when the directory
  // cannot be watched (the daemon serves on; SIGHUP still reloads).
  void configure(bool enabled, uint64_t debounce_ms);
  // Closes the handles (the loop frees them on its next turn). Idempotent.
  void stop() noexcept;
  bool watching() const noexcept { return event_ != nullptr; }

 private:
  // XXH3 of the file's bytes; 0 with `readable` false when it cannot be read.
  uint64_t digest(bool& readable) const;
  static void on_event(uv_fs_event_t* h, const char* name, int events, int status) noexcept;
  static void on_debounce(uv_timer_t* t) noexcept;

  uv_loop_t* loop_;
  std::string path_;
  std::string dir_;
  proxy::Logger& log_;
  OnChange on_change_;
  uv_fs_event_t* event_ = nullptr;  // heap: freed by its close callback
  uv_timer_t* timer_ = nullptr;
  uint64_t debounce_ms_ = 0;
  uint64_t last_digest_ = 0;
};

}  // namespace rondel::server
