// Backend-reported load: reading reports from response heads, effective loads for the pick.
#include "rondel/proxy/load_report.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/load_report_parser.h"
#include "rondel/proxy/pool.h"
#include "rondel/util/ascii.h"

namespace rondel::proxy {

void report_from(const config::LoadReportConfig& cfg, const http::ResponseHead& head,
                 uint64_t now_ms, LoadReportState& st, ReportSource source) noexcept {
  const http::Header* field = nullptr;
  for (const http::Header& h : head.headers) {
    if (util::iequals(h.name, cfg.header)) field = &h;
  }
  if (field == nullptr) return;
  const core::ParsedReport r =
      parse_load_report(cfg.format, field->value, cfg.metric, cfg.scale);
  st.counts[static_cast<size_t>(r.status)].fetch_add(1, std::memory_order_relaxed);
  if (r.status != core::ReportStatus::kOk) return;
  uint32_t local = st.local_in_flight();
  if (source == ReportSource::kResponse && local > 0) --local;
  st.reported.store(r.load, std::memory_order_relaxed);
  st.local_at_report.store(local, std::memory_order_relaxed);
  const uint64_t at = now_ms == 0 ? 1 : now_ms;
  st.at_ms.store(at, std::memory_order_relaxed);
  st.arrivals[st.next_arrival.fetch_add(1, std::memory_order_relaxed) % core::kMaxMinReports]
      .store(at, std::memory_order_relaxed);
}

namespace {

// A random word per pick for core::room_admits: this thread's splitmix64 sequence, seeded from
// the thread's address space and the clock so that instances started together differ.
uint64_t pick_coin() noexcept {
  thread_local uint64_t state = core::mix64(
      reinterpret_cast<uintptr_t>(&state),
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  state += 0x9E3779B97F4A7C15ULL;
  return core::mix64(state, 0);
}

// Backend i's report as the pick reads it at `now_ms` (never fresh when the pool reads no
// reports), with this instance's in-flight count now and the members' shared counts.
core::ReportView report_view(const Pool& pool, size_t i, uint64_t now_ms) noexcept {
  const BackendState& b = pool.backend(static_cast<core::BackendIndex>(i));
  core::ReportView v;
  v.peers_fresh = now_ms <= b.peer_fresh_until_ms.load(std::memory_order_acquire);
  if (v.peers_fresh) v.peer_in_flight = b.peer_in_flight.load(std::memory_order_relaxed);
  if (pool.config().load_report.enabled) {
    v.reported = b.report.reported.load(std::memory_order_relaxed);
    const uint32_t need = pool.config().load_report.min_reports;
    if (need <= 1) {
      v.at_ms = b.report.at_ms.load(std::memory_order_relaxed);
    } else {
      std::array<uint64_t, core::kMaxMinReports> at{};
      for (size_t k = 0; k < at.size(); ++k) {
        at[k] = b.report.arrivals[k].load(std::memory_order_relaxed);
      }
      v.at_ms = core::judged_at(at, need);
    }
    v.local_at_report = b.report.local_at_report.load(std::memory_order_relaxed);
  }
  v.local_in_flight = (pool.config().load_by == config::LoadBy::kPromptSize ? b.in_flight_cost
                                                                          : b.in_flight)
                          .load(std::memory_order_relaxed);
  return v;
}

}  // namespace

uint32_t fleet_instances_of(const Pool& pool) noexcept {
  return std::max<uint32_t>(pool.state().fleet_instances.load(std::memory_order_relaxed), 1);
}

bool reads_fleet_loads(const Pool& pool) noexcept {
  return pool.config().load_report.enabled || fleet_instances_of(pool) > 1 ||
         pool.config().load_by == config::LoadBy::kPromptSize;
}

uint32_t effective_load_of(const Pool& pool, size_t i, uint64_t now_ms) noexcept {
  return core::effective_load(report_view(pool, i, now_ms), now_ms,
                              pool.config().load_report.max_age_ms, fleet_instances_of(pool));
}

uint64_t local_limit_of(const Pool& pool, size_t i, uint64_t now_ms, uint32_t cap,
                        uint32_t residue) noexcept {
  if (!reads_fleet_loads(pool)) return cap;
  return core::local_limit(report_view(pool, i, now_ms), now_ms, pool.config().load_report.max_age_ms,
                           cap, fleet_instances_of(pool), residue);
}

void fill_effective_loads(const Pool& pool, uint64_t now_ms, std::vector<uint32_t>& loads,
                          std::vector<uint64_t>& rounded, core::PickInput& in) {
  const size_t n = pool.size();
  if (loads.size() < n) loads.resize(n);
  const config::LoadReportConfig& cfg = pool.config().load_report;
  const uint32_t grain = fleet_instances_of(pool);
  // With N > 1 and random rounding, backends read from a fresh report share their last places
  // by core::room_admits.
  const bool round = cfg.enabled && grain > 1 && cfg.rounding == config::ReportRounding::kRandom;
  if (round) rounded.assign(core::bitset_words(n), 0);  // no allocation once grown
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const core::ReportView v = report_view(pool, i, now_ms);
    loads[i] = core::effective_load(v, now_ms, cfg.max_age_ms, grain);
    // Shared counts are the fleet's own, one for one: never rounded.
    if (round && !v.peers_fresh && core::report_fresh(v.at_ms, now_ms, cfg.max_age_ms)) {
      core::bit_set(rounded, i);
    }
    if (pool.backend(static_cast<core::BackendIndex>(i)).usable()) total += loads[i];
  }
  in.loads = std::span<const uint32_t>(loads.data(), n);
  in.total_in_flight = total;
  if (round) {
    in.rounded = std::span<const uint64_t>(rounded.data(), core::bitset_words(n));
    in.grain = grain;
    in.coin = pick_coin();
  }
}

}  // namespace rondel::proxy
