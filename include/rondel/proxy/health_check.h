// Active health checks: a small HTTP/1.1 client that probes every backend of each pool that
// enables `health_check`, and sets a backend's HealthFlag::kFailedActiveCheck after `fall`
// failures in a row and clears it after `rise` successes in a row (the checker is that flag's
// only owner). Every result is counted in BackendCounters::health_checks_ok / _failed.
//
// One probe per live BackendState; its consecutive results are stored in the BackendState, so
// they survive a reload that keeps the backend id. Each check is one fresh connection
// (`Connection: close`) made by BackendSocket, the connector backend connections use (TLS under
// the pool's `tls` included): connect, send METHOD PATH, read the response head with
// http::ResponseParser, compare the status with the expected range. A connect error, a reset, a
// malformed head, or no head within `timeout` is a failure. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/probe_roster.h"

namespace rondel::proxy {

class Snapshot;
class HealthProbe;
class HealthAttempt;

class HealthChecker {
 public:
  // Called after a check set or cleared a backend's active-check flag (loop thread). `pool` is
  // the pool's name.
  using OnChange = std::function<void(const std::string& pool, BackendState& backend)>;

  HealthChecker(uv_loop_t* loop, Logger& log, OnChange on_change);
  ~HealthChecker();  // stops every probe (their handles finish closing on the loop)
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Makes the set of probes match `snap`: starts probes for new backends of pools with checks
  // enabled, updates the settings of kept ones, stops the others. A backend left with the
  // active-check flag by checks that are no longer configured has it cleared. O(backends) plus one allocation per new
  // probe; call after each publish.
  void sync(const Snapshot& snap, uint64_t now_ms);
  // Stops every probe; in-progress checks are aborted. Idempotent.
  void stop() noexcept;
  size_t probes() const noexcept { return probes_.size(); }

 private:
  friend class HealthProbe;
  friend class HealthAttempt;
  void report(HealthProbe& probe, bool ok, std::string_view why) noexcept;

  uv_loop_t* loop_;
  Logger& log_;
  OnChange on_change_;
  ProbeRoster<HealthProbe> probes_{0x9e3779b97f4a7c15ull};
};

}  // namespace rondel::proxy
