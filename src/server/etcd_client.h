// etcd v3 over its JSON gateway, for discovery: EtcdClient (one request at a time to the first
// endpoint that answers, rotating after a failure, TLS with the source's CA) and EtcdPrefix (a
// range read of a key prefix, then a watch from the revision read; after a compaction, or when
// the watch breaks, read again), whose subclasses decide what the values mean (a pool's
// backends, the fleet's instances). Keys and values travel base64-encoded. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "discovery_json.h"
#include "discovery_source.h"

namespace rondel::server {

// Standard base64 (etcd's JSON encoding of bytes), and its decoding (padding optional; false on
// any other character).
std::string etcd_base64(std::string_view in);
bool etcd_unbase64(std::string_view in, std::string& out);
// The end of the range of keys that start with `prefix` (etcd's "prefix" range_end).
std::string etcd_prefix_end(std::string prefix);
// etcd's int64 fields arrive as JSON strings ("42"); 0 when absent or not a number.
int64_t etcd_int(const boost::json::value& v, std::string_view key);

class EtcdClient : public DiscoverySource {
 public:
  using DiscoverySource::DiscoverySource;
  // Builds the TLS context when an endpoint is https, then begin(); a CA that cannot be read
  // fails the source until a reload fixes it.
  void start() noexcept override;

 protected:
  virtual void begin() noexcept = 0;
  const config::ApiUrl& endpoint() const { return cfg_.endpoints[endpoint_ % cfg_.endpoints.size()]; }
  // A failed request: counted and logged with the endpoint; the next endpoint after the back-off.
  void retry(SourceError why, const std::string& detail);
  // POST `body` (JSON) to `path` of the current endpoint; `idle_ms` as ApiRequest's. With
  // credentials the request carries the token: token_file's content, or the token
  // `username`/`password_file` buy from /v3/auth/authenticate first (kept until etcd refuses it).
  void post(std::string path, std::string body, OnBytes on_data, OnBytes on_end,
            uint64_t idle_ms = 0);
  // An answer says the token is not (or no longer) valid: the next request authenticates anew.
  void token_refused() noexcept { auth_token_.clear(); }
  // The response so far as JSON, or the reason it is not a 200 JSON object (error = the call's).
  bool answer(std::string_view what, std::string_view error, boost::json::value& out);

 private:
  void authenticate(std::function<void()> then) noexcept;
  size_t endpoint_ = 0;
  std::string auth_token_;  // from /v3/auth/authenticate (username + password_file)
};

class EtcdPrefix : public EtcdClient {
 public:
  using EtcdClient::EtcdClient;

 protected:
  // A range answer replaces everything: reset(), then apply() per key, then synced().
  virtual void reset() = 0;
  // Key `key` now holds `value` (nullptr: deleted). Return false to count and log the value as
  // unparseable (`why`); the key should then keep its last good meaning.
  virtual bool apply(const std::string& key, const std::string* value, std::string& why) = 0;
  // A range or a batch of watch events was applied.
  virtual void synced() = 0;

 private:
  void begin() noexcept override { range(); }
  void on_retry() noexcept override { range(); }
  void range() noexcept;
  void ranged(std::string_view error);
  void put(const boost::json::value& kv);
  void watch() noexcept;
  bool watch_message(std::string_view text);
  bool restart(SourceError why, const std::string& detail);

  djson::Lines lines_;
  int64_t revision_ = 0;
};

}  // namespace rondel::server
