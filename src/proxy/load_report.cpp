// Backend-reported load: reading reports from response heads, effective loads for the pick.
#include "rondel/proxy/load_report.h"

#include <string_view>

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
  st.at_ms.store(now_ms == 0 ? 1 : now_ms, std::memory_order_relaxed);
}

uint32_t effective_load_of(const Pool& pool, size_t i, uint64_t now_ms) noexcept {
  const BackendState& b = pool.backend(static_cast<core::BackendIndex>(i));
  core::ReportView v;
  v.reported = b.report.reported.load(std::memory_order_relaxed);
  v.at_ms = b.report.at_ms.load(std::memory_order_relaxed);
  v.local_at_report = b.report.local_at_report.load(std::memory_order_relaxed);
  v.local_in_flight = b.in_flight.load(std::memory_order_relaxed);
  return core::effective_load(v, now_ms, pool.config().load_report.max_age_ms);
}

uint64_t local_limit_of(const Pool& pool, size_t i, uint64_t now_ms, uint32_t cap) noexcept {
  if (!pool.config().load_report.enabled) return cap;
  const BackendState& b = pool.backend(static_cast<core::BackendIndex>(i));
  core::ReportView v;
  v.reported = b.report.reported.load(std::memory_order_relaxed);
  v.at_ms = b.report.at_ms.load(std::memory_order_relaxed);
  v.local_at_report = b.report.local_at_report.load(std::memory_order_relaxed);
  return core::local_limit(v, now_ms, pool.config().load_report.max_age_ms, cap);
}

void fill_effective_loads(const Pool& pool, uint64_t now_ms, std::vector<uint32_t>& loads,
                          core::PickInput& in) {
  const size_t n = pool.size();
  if (loads.size() < n) loads.resize(n);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    loads[i] = effective_load_of(pool, i, now_ms);
    if (pool.backend(static_cast<core::BackendIndex>(i)).usable()) total += loads[i];
  }
  in.loads = std::span<const uint32_t>(loads.data(), n);
  in.total_in_flight = total;
}

}  // namespace rondel::proxy
