// Snapshot: one immutable, validated configuration with its built pools, shared by the requests
// that started under it. A reload builds a new Snapshot and publishes it; the old one lives on
// until its last request ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/result.h"
#include "rondel/net/proxy_protocol.h"
#include "rondel/proxy/pool.h"
#include "rondel/tls/server_context.h"
#include "rondel/tls/ticket_keys.h"

namespace rondel::proxy {

// Live state of a listener shared by every worker and carried across reloads by name: the
// client connections it holds open, so max_connections is one limit whatever `workers` is, and
// the counters of its PROXY protocol header stage.
struct ListenerState {
  explicit ListenerState(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<uint32_t> open{0};
  net::ProxyProtocolCounters proxy_protocol;
  // TLS listeners: the session-ticket keys, kept across reloads so tickets stay valid.
  std::shared_ptr<tls::TicketKeys> ticket_keys;
};

struct ListenerRoute {
  const config::ListenerConfig* config = nullptr;
  const Pool* pool = nullptr;
  std::shared_ptr<ListenerState> state;  // null when the listener is gone
  std::shared_ptr<const tls::ServerContext> tls;  // null: a plain listener
};

using ListenerStates = std::vector<std::pair<std::string, std::shared_ptr<ListenerState>>>;

class Snapshot {
 public:
  // Builds every pool of `cfg` and loads every TLS listener's certificates (a bad certificate
  // fails the build with "FILE: reason"). Backend state is found (or created) in `registry` and pool-wide
  // state in `pool_states` (by pool name), so a reload carries in-flight counts and health over.
  static core::Result<std::shared_ptr<const Snapshot>> build(
      config::Config cfg, BackendRegistry& registry,
      std::vector<std::pair<std::string, std::shared_ptr<PoolState>>>& pool_states,
      ListenerStates& listener_states, uint64_t generation);

  const config::Config& config() const noexcept { return cfg_; }
  uint64_t generation() const noexcept { return generation_; }
  const std::vector<std::unique_ptr<Pool>>& pools() const noexcept { return pools_; }
  const Pool* find_pool(std::string_view name) const noexcept;
  // The listener named `name` and its pool; config == nullptr when the listener is gone.
  ListenerRoute route(std::string_view listener) const noexcept;
  // The TLS context of each listener (null for plain ones), parallel to config().listeners.
  const std::vector<std::shared_ptr<const tls::ServerContext>>& tls_contexts() const noexcept {
    return tls_;
  }
  // Words of scratch any pool of this snapshot needs for a pick.
  size_t max_scratch_words() const noexcept { return max_scratch_words_; }

 private:
  Snapshot() = default;
  config::Config cfg_;
  uint64_t generation_ = 0;
  std::vector<std::unique_ptr<Pool>> pools_;
  std::vector<std::shared_ptr<ListenerState>> listener_states_;  // as cfg_.listeners
  std::vector<std::shared_ptr<const tls::ServerContext>> tls_;   // as cfg_.listeners
  size_t max_scratch_words_ = 0;
};

}  // namespace rondel::proxy
