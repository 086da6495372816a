// Backend-reported load, the daemon's side: per-backend report state (one owner per field,
// relaxed atomics shared by every worker), reading a report from a response head, and the
// effective loads a pick compares. docs/algorithms.md ("Reported load") defines the bound.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/bounded.h"
#include "rondel/core/reported_load.h"
#include "rondel/http/message.h"

namespace rondel::proxy {

class Pool;

// One backend's last report. Written by whichever worker reads a response head or a health
// check's (report_from); read by every pick. The fields are stored without a lock: a pick that
// reads a report half-written pairs the new value with the old in-flight count or the reverse,
// an error of the requests started or finished in that instant, which the next report corrects.
struct LoadReportState {
  // `local_in_flight` is the backend's in-flight count on this instance (BackendState::
  // in_flight), which must outlive this state; report_from reads it.
  explicit LoadReportState(const std::atomic<uint32_t>& local_in_flight) noexcept
      : local_in_flight_(&local_in_flight) {}
  LoadReportState(const LoadReportState&) = delete;
  LoadReportState& operator=(const LoadReportState&) = delete;

  std::atomic<uint32_t> reported{0};  // load of the last accepted report
  std::atomic<uint64_t> at_ms{0};     // loop time it arrived (0 = never)
  // This instance's in-flight count of the backend when it arrived, the requests the report
  // counts (core::ReportView::local_at_report).
  std::atomic<uint32_t> local_at_report{0};
  // The arrival times of the last core::kMaxMinReports accepted reports (a ring; 0 = none yet),
  // for load_report.min_reports (core::judged_at).
  std::array<std::atomic<uint64_t>, core::kMaxMinReports> arrivals{};
  std::atomic<uint32_t> next_arrival{0};
  // Reports seen, by core::ReportStatus (accepted and ignored by reason).
  std::array<std::atomic<uint64_t>, core::kReportStatuses> counts{};

  uint32_t local_in_flight() const noexcept {
    return local_in_flight_->load(std::memory_order_relaxed);
  }

 private:
  const std::atomic<uint32_t>* local_in_flight_;
};

// Where a report was read, which decides whether this instance has a request in flight that
// the report leaves out.
enum class ReportSource : uint8_t {
  // The head of a response to one of this instance's requests, whose slot is still held: the
  // backend reports the requests it holds with that one excluded (as rondel-test-backend
  // --report-load does), so it is left out of local_at_report too.
  kResponse,
  kHealthCheck,  // a health check's response: it holds no in-flight slot
};

// Reads the report of `head` (the last field named cfg.header, case-insensitive) into `st`:
// counts it by status, and when accepted stores the load, this instance's in-flight count of
// the backend (less the answered request for kResponse) and the time `now_ms`. A head without
// the field counts nothing. O(fields); no allocation.
void report_from(const config::LoadReportConfig& cfg, const http::ResponseHead& head,
                 uint64_t now_ms, LoadReportState& st,
                 ReportSource source = ReportSource::kResponse) noexcept;

// N, the instances of the fleet sharing `pool`'s backends (PoolState::fleet_instances, at
// least 1).
uint32_t fleet_instances_of(const Pool& pool) noexcept;
// Whether a pick over `pool` compares effective loads (fill_effective_loads) instead of the
// bare in-flight counters: with load_report on, when the fleet has more than one instance
// (each count then stands for N), or with `load_by: prompt_size` (the in-flight costs).
bool reads_fleet_loads(const Pool& pool) noexcept;

// The effective load of backend i of `pool` now, on the fleet's scale (core::effective_load
// over its report state when load_report is on, its local in-flight count, or cost with
// `load_by: prompt_size`, max_age from the pool's config, N = fleet_instances_of).
uint32_t effective_load_of(const Pool& pool, size_t i, uint64_t now_ms) noexcept;

// The in-flight count this instance may hold on backend i while its effective load leaves more
// than `residue` places below `cap` (core::local_limit with the pick's rounding residue; cap
// itself when reads_fleet_loads is false).
uint64_t local_limit_of(const Pool& pool, size_t i, uint64_t now_ms, uint32_t cap,
                        uint32_t residue = 0) noexcept;

// Replaces `in`'s load view by the effective loads of `pool`'s backends at `now_ms` and sets
// total_in_flight to their sum over usable backends (the same backends W sums over). With N > 1
// and `rounding: random`, also marks in `rounded` the backends read from a fresh report and
// gives the pick its grain (N) and a coin (core::room_admits). `loads` and `rounded` are the
// caller's buffers, grown when smaller (allocates only then). O(backends).
void fill_effective_loads(const Pool& pool, uint64_t now_ms, std::vector<uint32_t>& loads,
                          std::vector<uint64_t>& rounded, core::PickInput& in);

}  // namespace rondel::proxy
