// Backend-reported load, the model: how a report is written and why it was accepted or ignored,
// its bounds, and the effective load the bounded-load pick compares while a report is fresh.
// Pure: no I/O, no clock, no allocation. The header parsers are proxy/load_report_parser.h;
// docs/algorithms.md ("Reported load") defines the bound that uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rondel::core {

// How a load header is written.
enum class LoadHeaderFormat : uint8_t {
  kOrca,   // endpoint-load-metrics: `TEXT a=1, b=2`, `a:1, b:2` or `JSON {"a": 1, ...}`
  kPlain,  // the whole field value is one number, e.g. `x-load: 12`
};

// Why a report was accepted or ignored (metrics label `reason`, load_report_reason_name).
enum class ReportStatus : uint8_t {
  kOk,          // a finite value in [0, kMaxReportedLoad] after scaling
  kMissing,     // the header parsed but does not carry the configured metric
  kMalformed,   // the value does not follow the format (syntax, unknown form such as BIN)
  kNotFinite,   // NaN or an infinity (spelled nan, inf, infinity), or a number overflowing
  kNegative,    // below zero
  kTooLarge,    // above kMaxReportedLoad once multiplied by the scale
};
inline constexpr size_t kReportStatuses = 6;
// Label text of a status: ok, missing, malformed, not_finite, negative, too_large.
std::string_view report_status_name(ReportStatus s) noexcept;

// Reported loads above this (after scaling) are absurd and ignored: no backend holds a million
// requests in flight, and the cap keeps every sum over 1,024 backends far below 2^32.
inline constexpr double kMaxReportedLoad = 1'000'000.0;
// Longest field value a parser looks at; a longer one is malformed.
inline constexpr size_t kMaxReportBytes = 4096;

// What a parser made of one field value.
struct ParsedReport {
  ReportStatus status = ReportStatus::kMalformed;
  uint32_t load = 0;  // kOk: round(value * scale), at most kMaxReportedLoad
};

// What the pick knows of one backend's report.
struct ReportView {
  uint32_t reported = 0;         // load the backend reported
  uint64_t at_ms = 0;            // when it arrived (monotonic ms); 0 = never
  uint32_t local_at_report = 0;  // this instance's in-flight count of the backend then, the
                                 // requests the report counts (the one it answers excluded)
  uint32_t local_in_flight = 0;  // this instance's in-flight count of the backend now
};

// The load the bound compares for one backend. While the report is fresh (at_ms != 0 and
// now_ms - at_ms <= max_age_ms) it is the report moved by this instance's own change since:
// reported + local_in_flight - local_at_report, so requests this instance started since raise
// it and those that completed since lower it; at least 0, at most UINT32_MAX. Otherwise it is
// local_in_flight. A report from the future (at_ms > now_ms, another thread's clock) is fresh.
constexpr uint32_t effective_load(const ReportView& r, uint64_t now_ms,
                                  uint64_t max_age_ms) noexcept {
  const bool fresh = r.at_ms != 0 && (now_ms <= r.at_ms || now_ms - r.at_ms <= max_age_ms);
  if (!fresh) return r.local_in_flight;
  const int64_t e = int64_t{r.reported} + int64_t{r.local_in_flight} - int64_t{r.local_at_report};
  if (e <= 0) return 0;
  return e > int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(e);
}

// The in-flight count this instance may hold on the backend while its effective load stays
// below `cap`: for every local count L (r.local_in_flight ignored),
//   effective_load(r with local_in_flight = L, now_ms, max_age_ms) < cap  <=>  L < local_limit.
// It turns a capacity the pick compared against the effective load into a bound on the local
// counter alone, which one compare-and-swap can check and raise (proxy::InFlightSlot::
// take_below). Stale or absent report: cap itself.
// 64 bits: the limit can pass UINT32_MAX (a report far below this instance's count then).
constexpr uint64_t local_limit(const ReportView& r, uint64_t now_ms, uint64_t max_age_ms,
                               uint32_t cap) noexcept {
  const bool fresh = r.at_ms != 0 && (now_ms <= r.at_ms || now_ms - r.at_ms <= max_age_ms);
  if (!fresh || cap == 0) return fresh ? 0 : cap;
  const int64_t l = int64_t{cap} + int64_t{r.local_at_report} - int64_t{r.reported};
  return l <= 0 ? 0 : static_cast<uint64_t>(l);
}

}  // namespace rondel::core
