// DiscoverySource: last good membership, errors by reason, back-off with jitter.
#include "discovery_source.h"

#include <fstream>
#include <sstream>

#include <algorithm>
#include <utility>

#include "rondel/core/hash.h"
#include "rondel/server/discovery.h"

namespace rondel::server {

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace {

// The longest pause between attempts before jitter: a source that comes back is caught up
// within about 2 s (1.6 s x 1.25).
constexpr uint64_t kMaxBackoffMs = 1600;

}  // namespace

DiscoverySource::DiscoverySource(Discovery& owner, std::string pool, std::string key,
                                 const config::DiscoveryConfig& cfg)
    : owner_(owner), cfg_(cfg), pool_(std::move(pool)), key_(std::move(key)) {
  uv_timer_init(owner_.loop(), &timer_);
  timer_.data = this;
}

uv_loop_t* DiscoverySource::loop() const noexcept { return owner_.loop(); }

void DiscoverySource::log(proxy::Level level, std::string_view event,
                          const std::string& detail) const {
  if (owner_.log().enabled(level)) owner_.log().log(level, event, detail);
}

void DiscoverySource::stop() noexcept {
  if (closing()) return;
  stopping_ = true;
  cancel_calls();
  uv_timer_stop(&timer_);
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
}

void DiscoverySource::publish(std::vector<SourceBackend> next) {
  std::stable_sort(next.begin(), next.end(),
                   [](const SourceBackend& a, const SourceBackend& b) { return a.id < b.id; });
  next.erase(std::unique(next.begin(), next.end(),
                         [](const SourceBackend& a, const SourceBackend& b) { return a.id == b.id; }),
             next.end());
  const bool first = !settled_;
  settled_ = true;
  mark_up();
  if (next.empty() && !cfg_.allow_empty && !backends_.empty()) {
    ++errors_[static_cast<size_t>(SourceError::kEmpty)];
    log(proxy::Level::kWarn, "discovery_empty",
        "pool=" + pool_ + " error=\"" + name() +
            ": the answer lists no backend (allow_empty is off)\" keeping=" +
            std::to_string(backends_.size()));
    return;
  }
  if (next == backends_ && !first) return;
  std::string list;
  for (const auto& b : next) {
    list += list.empty() ? "" : ",";
    list += b.id + "=" + b.address.to_string() + "/w" + std::to_string(b.weight);
  }
  log(proxy::Level::kInfo, "discovery_members",
      "pool=" + pool_ + " source=" + name() + " backends=" + std::to_string(next.size()) + " [" +
          list + "]");
  if (next != backends_) {
    backends_ = std::move(next);
    if (on_change_) on_change_();
    else owner_.changed(true);
  }
}

void DiscoverySource::mark_up() {
  failures_ = 0;
  if (up_) return;
  up_ = true;
  log(proxy::Level::kInfo, "discovery_up", "pool=" + pool_ + " source=" + name());
}

void DiscoverySource::failed(SourceError why, const std::string& detail, bool down) {
  ++errors_[static_cast<size_t>(why)];
  bool warn = true;
  if (down) {
    settled_ = true;
    warn = up_ || failures_ == 0;
    up_ = false;
    ++failures_;
  }
  log(warn ? proxy::Level::kWarn : proxy::Level::kDebug, "discovery_failed",
      "pool=" + pool_ + " reason=" + std::string(kSourceErrorNames[static_cast<size_t>(why)]) +
          " error=\"" + name() + ": " + detail + "\" keeping=" + std::to_string(backends_.size()));
}

void DiscoverySource::request(const config::ApiUrl& url, ApiRequest req, OnBytes on_data,
                              OnBytes on_end) {
  req.timeout_ms = cfg_.timeout_ms;
  status_ = 0;
  body_.clear();
  ApiHandlers h;
  h.on_head = [this](uint16_t status) {
    status_ = status;
    // A watch that opens is a source that answers again, before any event comes.
    if (status == 200 && settled_) mark_up();
  };
  h.on_data = on_data ? std::move(on_data) : [this](std::string_view b) { body_.append(b); };
  h.on_end = [this, on_end = std::move(on_end)](std::string_view error) {
    call_ = nullptr;
    on_end(error);
  };
  call_ = ApiCall::start(loop(), url, tls_, std::move(req), std::move(h));
}

void DiscoverySource::cancel_calls() noexcept {
  if (call_ != nullptr) std::exchange(call_, nullptr)->cancel();
}

uint64_t DiscoverySource::backoff_ms() noexcept {
  uint64_t ms = std::max<uint64_t>(cfg_.retry_ms, 1);
  for (uint32_t i = 1; i < failures_ && ms < kMaxBackoffMs; ++i) ms *= 2;
  ms = std::min(ms, std::max(kMaxBackoffMs, cfg_.retry_ms));
  owner_.seed_ = core::mix64(owner_.seed_, uv_hrtime());
  return ms * (75 + owner_.seed_ % 51) / 100;  // 0.75 .. 1.25
}

void DiscoverySource::retry_in(uint64_t ms) noexcept {
  if (stopping_) return;
  uv_timer_start(&timer_, &on_timer, std::max<uint64_t>(ms, 1), 0);
}

void DiscoverySource::on_timer(uv_timer_t* t) noexcept {
  auto* s = static_cast<DiscoverySource*>(t->data);
  if (!s->stopping_) s->on_retry();
}

}  // namespace rondel::server
