// Backend load reports: the status names (the parsers are proxy/load_report_parser.cpp).
#include "rondel/core/reported_load.h"

namespace rondel::core {

namespace {

constexpr std::string_view kStatusNames[kReportStatuses] = {
    "ok", "missing", "malformed", "not_finite", "negative", "too_large"};

}  // namespace

std::string_view report_status_name(ReportStatus s) noexcept {
  const auto i = static_cast<size_t>(s);
  return i < kReportStatuses ? kStatusNames[i] : "unknown";
}

}  // namespace rondel::core
