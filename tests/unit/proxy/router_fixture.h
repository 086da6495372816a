// Test helpers for the Router and hash-key tests: pools built from plain configs (no sockets, no
// loop) and request heads built from strings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/http/message.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/pool.h"

namespace rondel::proxy::test {

// A pool config with backends `ids` (weights `weights`, default 1) on 127.0.0.1:9001...
inline config::PoolConfig pool_config(const std::vector<std::string>& ids,
                                      const std::vector<uint32_t>& weights = {}) {
  config::PoolConfig cfg;
  cfg.name = "p";
  for (size_t i = 0; i < ids.size(); ++i) {
    config::BackendConfig b;
    b.address.host = "127.0.0.1";
    b.address.port = static_cast<uint16_t>(9001 + i);
    b.id = ids[i];
    b.weight = i < weights.size() ? weights[i] : 1;
    cfg.backends.push_back(b);
  }
  return cfg;
}

// Builds pools the way Snapshot::build does (one registry and one PoolState across builds).
struct PoolMaker {
  BackendRegistry registry;
  std::shared_ptr<PoolState> state = std::make_shared<PoolState>();
  uint64_t generation = 0;

  std::unique_ptr<Pool> build(const config::PoolConfig& cfg) {
    auto pool = Pool::build(cfg, registry, state);
    if (!pool) return nullptr;
    (*pool)->set_generation(++generation);
    return std::move(*pool);
  }
};

// Sets backend `i`'s in-flight count to `n`, keeping the pool total in step.
inline void set_in_flight(const Pool& pool, core::BackendIndex i, uint32_t n) {
  auto& b = pool.backend(i).in_flight;
  const uint32_t old = b.exchange(n);
  pool.state().total_in_flight.fetch_add(uint64_t{n} - old);
}

// A request head with `target` and at most one header.
struct Request {
  explicit Request(std::string target_, std::string name = {}, std::string value = {})
      : target(std::move(target_)), header_name(std::move(name)), header_value(std::move(value)) {
    head.method = "GET";
    head.target = target;
    if (!header_name.empty()) {
      header[0].name = header_name;
      header[0].value = header_value;
      head.headers = std::span<const http::Header>(header, 1);
    }
  }
  Request(const Request&) = delete;
  std::string target, header_name, header_value;
  http::Header header[1];
  http::RequestHead head;
};

}  // namespace rondel::proxy::test
