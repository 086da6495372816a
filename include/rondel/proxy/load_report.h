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

// One backend's last report. Written by whichever worker reads a response head (report_from)
// and by the pick (note_started); read by every pick. The three fields are stored without a
// lock: a pick that reads a report half-written sees the new value with the old start count or
// the reverse, an error of the requests started in that instant, which the next report corrects.
struct LoadReportState {
  std::atomic<uint32_t> reported{0};  // load of the last accepted report
  std::atomic<uint64_t> at_ms{0};     // loop time it arrived (0 = never)
  std::atomic<uint32_t> started{0};   // requests started on the backend since then (all workers)
  // Reports seen, by core::ReportStatus (accepted and ignored by reason).
  std::array<std::atomic<uint64_t>, core::kReportStatuses> counts{};
};

// Reads the report of `head` (the last field named cfg.header, case-insensitive) into `st`:
// counts it by status, and when accepted stores the load, resets the start count and stamps
// it with `now_ms`. A head without the field counts nothing. O(fields); no allocation.
void report_from(const config::LoadReportConfig& cfg, const http::ResponseHead& head,
                 uint64_t now_ms, LoadReportState& st) noexcept;

// One more request started on the backend (call once per attempt that took a slot there).
inline void note_started(LoadReportState& st) noexcept {
  st.started.fetch_add(1, std::memory_order_relaxed);
}

// The effective load of backend i of `pool` now (core::effective_load over its report state,
// max_age from the pool's config, the local in-flight count as fallback).
uint32_t effective_load_of(const Pool& pool, size_t i, uint64_t now_ms) noexcept;

// Replaces `in`'s load view by the effective loads of `pool`'s backends at `now_ms` and sets
// total_in_flight to their sum over usable backends (the same backends W sums over). `loads`
// is the caller's buffer, grown to pool.size() when smaller (allocates only then). O(backends).
void fill_effective_loads(const Pool& pool, uint64_t now_ms, std::vector<uint32_t>& loads,
                          core::PickInput& in);

}  // namespace rondel::proxy
