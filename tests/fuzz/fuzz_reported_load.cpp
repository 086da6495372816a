// Fuzz target: the load report parsers (proxy/load_report_parser.h) over arbitrary header values.
//
// Input: 1 byte choosing the metric name and the scale, then the field value. Invariants: every
// parse returns a known status; an accepted load is at most kMaxReportedLoad, an ignored one is
// 0; a value longer than kMaxReportBytes is malformed; the same value parses the same twice
// (no hidden state); and appending ", junk" with a bad item to an ORCA text value never turns
// an ignored value into an accepted one.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "rondel/proxy/load_report_parser.h"

using namespace rondel;

namespace {

constexpr std::string_view kMetrics[] = {"named_metrics.in_flight", "cpu_utilization", "a",
                                         "utilization.gpu"};
constexpr uint32_t kScales[] = {1, 100, 1000000, 7};

void check(const core::ParsedReport& r) {
  FUZZ_CHECK(static_cast<size_t>(r.status) < core::kReportStatuses);
  if (r.status == core::ReportStatus::kOk) {
    FUZZ_CHECK(r.load <= core::kMaxReportedLoad);
  } else {
    FUZZ_CHECK(r.load == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view metric = kMetrics[data[0] & 3];
  const uint32_t scale = kScales[(data[0] >> 2) & 3];
  const std::string_view value(reinterpret_cast<const char*>(data + 1), size - 1);
  const core::ParsedReport orca = proxy::parse_orca(value, metric, scale);
  const core::ParsedReport plain = proxy::parse_plain_load(value, scale);
  check(orca);
  check(plain);
  const core::ParsedReport again = proxy::parse_orca(value, metric, scale);
  FUZZ_CHECK(again.status == orca.status && again.load == orca.load);
  if (value.size() > core::kMaxReportBytes) {
    FUZZ_CHECK(orca.status == core::ReportStatus::kMalformed);
    FUZZ_CHECK(plain.status == core::ReportStatus::kMalformed);
  }
  if (!value.starts_with("JSON") && orca.status != core::ReportStatus::kOk) {
    const std::string longer = std::string(value) + ", ~bad~";
    FUZZ_CHECK(proxy::parse_orca(longer, metric, scale).status != core::ReportStatus::kOk);
  }
  return 0;
}
