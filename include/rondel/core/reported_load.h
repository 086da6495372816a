// Backend-reported load, the model: how a report is written and why it was accepted or ignored,
// its bounds, and the effective load the bounded-load pick compares while a report is fresh.
// Pure: no I/O, no clock, no allocation. The header parsers are proxy/load_report_parser.h;
// docs/algorithms.md ("Reported load") defines the bound that uses it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
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
  uint64_t at_ms = 0;            // when it arrived (monotonic ms); 0 = never. With
                                 // load_report.min_reports > 1: judged_at, when the oldest of
                                 // the newest min_reports reports arrived
  uint32_t local_at_report = 0;  // this instance's in-flight count of the backend then, the
                                 // requests the report counts (the one it answers excluded)
  uint32_t local_in_flight = 0;  // this instance's in-flight count of the backend now
  // The fleet's other members' own in-flight counts of the backend, summed as they last shared
  // them (fleet.share_load), and whether every member's share is fresh. While it is, the
  // estimate is this instance's exact count plus theirs: no report, no scaling by N.
  uint32_t peer_in_flight = 0;
  bool peers_fresh = false;
};

// Whether a report that arrived at `at_ms` (0 = never) is still used at `now_ms`. A report from
// the future (at_ms > now_ms, another thread's clock) is fresh.
constexpr bool report_fresh(uint64_t at_ms, uint64_t now_ms, uint64_t max_age_ms) noexcept {
  return at_ms != 0 && (now_ms <= at_ms || now_ms - at_ms <= max_age_ms);
}

// Most reports a backend's freshness can be judged on (load_report.min_reports).
inline constexpr uint32_t kMaxMinReports = 8;

// When the `min_reports`-th newest of `arrivals` (arrival times, 0 = an empty slot, at most
// kMaxMinReports of them) came: the time report_fresh judges a backend's report from when the
// bound wants `min_reports` reports within max_age before it trusts them over its own counts
// (docs/algorithms.md, "Sparse reports"). 0 (never fresh) when fewer arrived; min_reports 0 or
// 1: the newest.
constexpr uint64_t judged_at(std::span<const uint64_t> arrivals, uint32_t min_reports) noexcept {
  std::array<uint64_t, kMaxMinReports> t{};
  const size_t n = std::min(arrivals.size(), t.size());
  std::copy_n(arrivals.begin(), n, t.begin());
  const size_t k = min_reports <= 1 ? 1 : min_reports;
  if (k > n) return 0;
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   t.begin() + static_cast<std::ptrdiff_t>(n), std::greater<>());
  return t[k - 1];
}

// Largest fleet the estimates scale by (a larger N is read as this): keeps N * count within
// 64 bits for any 32-bit count.
inline constexpr uint32_t kMaxFleetScale = 1u << 16;

// N as the estimates read it: 0 is 1, at most kMaxFleetScale.
constexpr int64_t fleet_scale(uint32_t instances) noexcept {
  return instances == 0 ? 1 : instances > kMaxFleetScale ? kMaxFleetScale : instances;
}

// The load the bound compares for one backend, on the fleet's scale: `instances` (N >= 1, 0 is
// read as 1, above kMaxFleetScale as kMaxFleetScale) rondel instances share the backends, and each is assumed to send it as much as this
// one does (the symmetric-spraying estimate: N times what this instance sees).
//  * Fresh report (report_fresh): the report moved by N times this instance's own change since:
//    reported + N * (local_in_flight - local_at_report), so each request this instance started
//    since stands for one per instance, and each that completed likewise. At least 0.
//  * Stale or absent report: N * local_in_flight, this instance's own count scaled to the fleet.
// With N = 1 these are the report moved by this instance's change, and the local count.
// At most UINT32_MAX. The estimate is wrong when the instances' shares are uneven: see
// docs/algorithms.md ("Fleet scale").
//  * Before either: while the members' shared counts are fresh (r.peers_fresh), this instance's
//    count plus theirs, local_in_flight + peer_in_flight, whatever the report and N
//    (docs/routing.md, "Fleets: shared counts").
constexpr uint32_t effective_load(const ReportView& r, uint64_t now_ms, uint64_t max_age_ms,
                                  uint32_t instances = 1) noexcept {
  if (r.peers_fresh) {
    const uint64_t sum = uint64_t{r.local_in_flight} + r.peer_in_flight;
    return sum > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(sum);
  }
  const int64_t n = fleet_scale(instances);
  const int64_t e = report_fresh(r.at_ms, now_ms, max_age_ms)
                        ? int64_t{r.reported} +
                              n * (int64_t{r.local_in_flight} - int64_t{r.local_at_report})
                        : n * int64_t{r.local_in_flight};
  if (e <= 0) return 0;
  return e > int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(e);
}

// The in-flight count this instance may hold on the backend while its effective load leaves
// more room below `cap` than `residue` (the pick's rounding of a fresh report's last places,
// core::room_residue; 0: plainly below the cap): for every local count L (r.local_in_flight
// ignored), with e = effective_load(r with local_in_flight = L, now_ms, max_age_ms, N),
//   room_admits(e, cap, residue)  <=>  L < local_limit.
// It turns the bound the pick compared against the effective load into a bound on the local
// counter alone, which one compare-and-swap can check and raise (proxy::InFlightSlot::
// take_below), so two workers picking from one snapshot cannot both take a place the rounding
// gave only one of. Fresh report: local_at_report + ceil((cap - reported - residue) / N), at
// least 0 (0 when cap <= residue); stale or absent: ceil(cap / N) (cap itself for N = 1; a
// stale backend is never rounded, so `residue` is ignored there). Fresh shared counts:
// cap - peer_in_flight, at least 0 (never rounded either).
// 64 bits: the limit can pass UINT32_MAX (a report far below this instance's count then).
constexpr uint64_t local_limit(const ReportView& r, uint64_t now_ms, uint64_t max_age_ms,
                               uint32_t cap, uint32_t instances = 1,
                               uint32_t residue = 0) noexcept {
  if (r.peers_fresh) return cap > r.peer_in_flight ? cap - r.peer_in_flight : 0;
  const int64_t n = fleet_scale(instances);
  // ceil(a / n) for any sign of a, n > 0.
  const auto ceil_div = [n](int64_t a) { return a >= 0 ? (a + n - 1) / n : -((-a) / n); };
  if (!report_fresh(r.at_ms, now_ms, max_age_ms)) return static_cast<uint64_t>(ceil_div(cap));
  if (cap <= residue) return 0;  // the room is at most cap (e >= 0): never above the residue
  const int64_t l = int64_t{r.local_at_report} +
                    ceil_div(int64_t{cap} - int64_t{r.reported} - int64_t{residue});
  return l <= 0 ? 0 : static_cast<uint64_t>(l);
}

}  // namespace rondel::core
