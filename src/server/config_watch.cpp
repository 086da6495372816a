// ConfigWatch: a uv_fs_event on the configuration file's directory and a debounce timer.
#include "config_watch.h"

#include <fstream>
#include <iterator>

#include "rondel/core/hash.h"

namespace rondel::server {

namespace {

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

template <class H>
void close_and_free(H*& h) noexcept {
  if (h == nullptr) return;
  h->data = nullptr;  // a callback already queued sees no owner
  uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* p) { delete reinterpret_cast<H*>(p); });
  h = nullptr;
}

}  // namespace

ConfigWatch::ConfigWatch(uv_loop_t* loop, std::string path, proxy::Logger& log, OnChange on_change)
    : loop_(loop), path_(std::move(path)), dir_(directory_of(path_)), log_(log),
      on_change_(std::move(on_change)) {}

ConfigWatch::~ConfigWatch() { stop(); }

uint64_t ConfigWatch::digest(bool& readable) const {
  std::ifstream in(path_, std::ios::binary);  // follows symlinks: the bytes a reload would read
  readable = static_cast<bool>(in);
  if (!readable) return 0;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return core::hash64(bytes);
}

void ConfigWatch::configure(bool enabled, uint64_t debounce_ms) {
  if (!enabled) {
    if (watching()) log_.log(proxy::Level::kInfo, "config_watch_stopped", "dir=" + dir_);
    stop();
    return;
  }
  debounce_ms_ = debounce_ms > 0 ? debounce_ms : 1;
  bool readable = false;
  last_digest_ = digest(readable);
  if (watching()) return;
  event_ = new uv_fs_event_t();
  int rc = uv_fs_event_init(loop_, event_);
  if (rc == 0) {
    event_->data = this;
    rc = uv_fs_event_start(event_, &on_event, dir_.c_str(), 0);
  }
  if (rc != 0) {
    log_.log(proxy::Level::kError, "config_watch_failed",
             "dir=" + dir_ + " error=\"" + uv_strerror(rc) + "\"");
    close_and_free(event_);
    return;
  }
  timer_ = new uv_timer_t();
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  log_.log(proxy::Level::kInfo, "config_watch_started",
           "dir=" + dir_ + " debounce_ms=" + std::to_string(debounce_ms_));
}

void ConfigWatch::stop() noexcept {
  if (event_ != nullptr) uv_fs_event_stop(event_);
  if (timer_ != nullptr) uv_timer_stop(timer_);
  close_and_free(event_);
  close_and_free(timer_);
}

void ConfigWatch::on_event(uv_fs_event_t* h, const char*, int, int status) noexcept {
  auto* w = static_cast<ConfigWatch*>(h->data);
  if (w == nullptr || w->timer_ == nullptr) return;
  if (status < 0) {
    w->log_.log(proxy::Level::kWarn, "config_watch_error",
                std::string("error=\"") + uv_strerror(status) + "\"");
    return;
  }
  // Restarted by every event: the reload runs once the directory has been quiet this long.
  uv_timer_start(w->timer_, &on_debounce, w->debounce_ms_, 0);
}

void ConfigWatch::on_debounce(uv_timer_t* t) noexcept {
  auto* w = static_cast<ConfigWatch*>(t->data);
  if (w == nullptr) return;
  try {
    bool readable = false;
    uint64_t d = w->digest(readable);
    // Between a swap's steps the file may be briefly absent: wait for the next event.
    if (!readable || d == w->last_digest_) return;
    w->last_digest_ = d;
    w->log_.log(proxy::Level::kInfo, "config_changed", "config=" + w->path_);
    w->on_change_();
  } catch (...) {  // std::bad_alloc reading the file: the running configuration stays
    w->log_.log(proxy::Level::kError, "config_watch_error", "error=\"out of memory\"");
  }
}

}  // namespace rondel::server
