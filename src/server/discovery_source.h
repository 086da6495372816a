// DiscoverySource: the common part of the watched sources of a pool's backends (etcd, Kubernetes
// EndpointSlices): the last good membership, whether the source is up, errors by reason, the
// back-off with jitter, and the rule that a failed source never empties a pool.
//
// A source publishes whole memberships; Discovery turns a changed one into a new snapshot
// exactly as a reload does. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_client.h"
#include "rondel/config/config.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/log.h"

namespace rondel::server {

class Discovery;

// One backend a source reported.
struct SourceBackend {
  std::string id;           // stable: the source's name for it, not its address
  config::Address address;  // an IP literal and port
  uint32_t weight = 1;      // 0: draining (no new keys; requests in flight finish)
  std::vector<std::string> labels;
  bool operator==(const SourceBackend& o) const {
    return id == o.id && address.host == o.address.host && address.port == o.address.port &&
           weight == o.weight && labels == o.labels;
  }
};

// Why a source failed (metric label `reason` of rondel_discovery_errors_total).
enum class SourceError : uint8_t {
  kConnect,  // no connection, a timeout, or the connection broke
  kStatus,   // the server answered with an error status
  kParse,    // an answer that does not parse, or a backend entry that is not valid
  kEmpty,    // an empty membership without allow_empty: the last one is kept
  kCount
};
inline constexpr std::array<std::string_view, static_cast<size_t>(SourceError::kCount)>
    kSourceErrorNames = {"connect", "status", "parse", "empty"};

// A secret's file (a token, a password) without its trailing newline; "" when it cannot be read.
// Read again by each use, so a secret rotated in place is picked up.
std::string read_secret_file(const std::string& path);

class DiscoverySource : public net::HandleCloser {
 public:
  DiscoverySource(Discovery& owner, std::string pool, std::string key,
                  const config::DiscoveryConfig& cfg);
  ~DiscoverySource() override = default;
  DiscoverySource(const DiscoverySource&) = delete;
  DiscoverySource& operator=(const DiscoverySource&) = delete;

  // Begins talking to the source (the first request now).
  virtual void start() noexcept = 0;
  // Cancels every request and timer; the source deletes itself once its handles are closed.
  void stop() noexcept;

  const std::string& pool() const noexcept { return pool_; }
  const std::string& key() const noexcept { return key_; }
  // "etcd:PREFIX" or "kubernetes:NAMESPACE/SERVICE": the SOURCE of `SOURCE: reason`.
  virtual std::string name() const = 0;
  virtual std::string_view kind() const noexcept = 0;  // "etcd", "kubernetes"
  // The first answer or the first failure came.
  bool settled() const noexcept { return settled_; }
  bool up() const noexcept { return up_; }
  const std::vector<SourceBackend>& backends() const noexcept { return backends_; }
  uint64_t errors(size_t reason) const noexcept { return errors_[reason]; }
  bool seen = false;  // Discovery::retain() mark
  // A source no pool uses (the fleet's): `f` runs instead of telling the owner when the
  // membership changed, so no snapshot is rebuilt for it.
  void set_on_change(std::function<void()> f) { on_change_ = std::move(f); }

 protected:
  // A complete membership (any order). Sorted, checked for duplicate ids (the first wins), and
  // kept unless it is empty without allow_empty (then the last one stays, counted as kEmpty).
  // The owner is told when it changed.
  void publish(std::vector<SourceBackend> next);
  // The source answers: marked up (logged when it was down), the back-off reset.
  void mark_up();
  // A failure: counted, logged as `SOURCE: reason`, its membership kept. `down` (a request
  // failed): the source is marked down and the log line is a warning once per streak, then
  // debug; else (one bad entry in a good answer) a warning each time.
  void failed(SourceError why, const std::string& detail, bool down = true);
  // The delay before the next attempt after `failures_` failures in a row: retry doubling up to
  // 1.6 s, times 0.75..1.25 (so at most 2 s).
  uint64_t backoff_ms() noexcept;
  // Runs on_retry() after `ms` (one timer per source).
  void retry_in(uint64_t ms) noexcept;
  virtual void on_retry() noexcept = 0;
  // Starts `req` to `url` (TLS with tls_) as the source's one request (none may be running):
  // status_ is set from the response head, the body goes to on_data (null: into body_), and
  // on_end(error) runs last, after call_ is cleared.
  using OnBytes = std::function<void(std::string_view)>;
  void request(const config::ApiUrl& url, ApiRequest req, OnBytes on_data, OnBytes on_end);
  // Cancels the running request, if any (no handler of it runs any more).
  void cancel_calls() noexcept;
  uv_loop_t* loop() const noexcept;
  void log(proxy::Level level, std::string_view event, const std::string& detail) const;

  Discovery& owner_;
  config::DiscoveryConfig cfg_;
  bool stopping_ = false;
  std::shared_ptr<const tls::ClientContext> tls_;  // https endpoints
  ApiCall* call_ = nullptr;                        // the running request
  uint16_t status_ = 0;                            // its response status (0: none yet)
  std::string body_;                               // its body, when on_data was null

 private:
  void on_all_closed() noexcept override { delete this; }
  static void on_timer(uv_timer_t* t) noexcept;

  std::string pool_;
  std::string key_;
  std::function<void()> on_change_;  // empty: owner_.changed(true)
  std::vector<SourceBackend> backends_;  // sorted by id
  std::array<uint64_t, static_cast<size_t>(SourceError::kCount)> errors_{};
  uint32_t failures_ = 0;  // in a row
  bool settled_ = false;
  bool up_ = false;
  uv_timer_t timer_{};
};

}  // namespace rondel::server

namespace rondel::server {

// One etcd value as a backend (discovery_etcd.cpp): the error says what is wrong with it;
// `left_out` is set for `state: down` (valid, but not a backend now).
core::Result<SourceBackend> parse_etcd_backend(std::string_view text, bool& left_out);
// The backends of one EndpointSlice (its JSON text) for Service port `port`, a name or a number
// (discovery_k8s.cpp).
std::vector<SourceBackend> endpoint_slice_backends(std::string_view slice_json,
                                                   std::string_view port);

// Every setting of `d`, as one string: equal strings, the same source (discovery_sources.cpp).
std::string discovery_settings_key(const config::DiscoveryConfig& d);

// The sources, by kind (discovery_etcd.cpp, discovery_k8s.cpp). Not started.
DiscoverySource* make_etcd_source(Discovery& owner, std::string pool, std::string key,
                                  const config::DiscoveryConfig& cfg);
DiscoverySource* make_k8s_source(Discovery& owner, std::string pool, std::string key,
                                 const config::DiscoveryConfig& cfg);

}  // namespace rondel::server
