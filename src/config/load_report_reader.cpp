// A pool's `load_report` section: which response header carries the backend's load.
#include "load_report_reader.h"

#include <string>
#include <string_view>

#include "reader_util.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

namespace {

constexpr std::string_view kOrcaHeader = "endpoint-load-metrics";

}  // namespace

void read_load_report(NodeReader& r, const Field& f, LoadReportConfig& out) {
  out.enabled = true;
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kLoadReportKeys);
  std::string text;
  if (auto* g = m.get("header"); g && r.read_string(*g, text, false)) {
    if (is_token(text)) {
      util::lowercase_in_place(text);
      out.header = text;
    } else {
      r.error(NodeReader::value_position(*g),
              "'header' must be a header name such as endpoint-load-metrics, got " + quote(text));
    }
  }
  out.format = out.header == kOrcaHeader ? core::LoadHeaderFormat::kOrca
                                         : core::LoadHeaderFormat::kPlain;
  if (auto* g = m.get("metric"); g && r.read_string(*g, text, false)) {
    if (!is_plain_name(text)) {
      r.error(NodeReader::value_position(*g),
              "'metric' must be an ORCA metric name such as named_metrics.in_flight or "
              "cpu_utilization, got " + quote(text));
    } else if (out.format != core::LoadHeaderFormat::kOrca) {
      r.error(NodeReader::value_position(*g),
              "'metric' applies only to header endpoint-load-metrics; header " +
                  quote(out.header) + " carries one number");
    } else {
      out.metric = text;
    }
  }
  if (auto* g = m.get("max_age")) r.read_duration(*g, out.max_age_ms, 1);
  if (auto* g = m.get("min_reports")) {
    r.read_unsigned(*g, out.min_reports, 1, core::kMaxMinReports);
  }
  if (auto* g = m.get("scale")) r.read_unsigned(*g, out.scale, 1, kMaxLoadReportScale);
  if (auto* g = m.get("rounding")) {
    r.read_choice<ReportRounding>(*g, kReportRoundings, out.rounding);
  }
}

}  // namespace rondel::config
