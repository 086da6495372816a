// The pool's `load_report` section: defaults, the ORCA/plain choice by header name, and each
// bad value's FILE:LINE:COL error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

std::string pool_with(const std::string& section) {
  return "listeners:\n  - { name: web, bind: 127.0.0.1:8080, pool: caches }\npools:\n"
         "  - name: caches\n    backends:\n      - address: 127.0.0.1:9001\n" +
         section;
}

std::vector<std::string> errors_of(const std::string& yaml) {
  const LoadResult r = load_string(yaml, "lr.yaml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.to_string());
  return out;
}

TEST_CASE("load_report off by default") {
  const LoadResult r = load_string(pool_with(""), "lr.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(r.config.pools.at(0).load_report.enabled);
}

TEST_CASE("load_report ORCA defaults and a plain header") {
  LoadResult r = load_string(pool_with("    load_report: {}\n"), "lr.yaml");
  REQUIRE(r.ok());
  const LoadReportConfig& a = r.config.pools.at(0).load_report;
  CHECK(a.enabled);
  CHECK(a.header == "endpoint-load-metrics");
  CHECK(a.format == core::LoadHeaderFormat::kOrca);
  CHECK(a.metric == "named_metrics.in_flight");
  CHECK(a.max_age_ms == 1000);
  CHECK(a.min_reports == 4);
  CHECK(a.scale == 1);
  CHECK(a.rounding == ReportRounding::kRandom);
  r = load_string(pool_with("    load_report: { header: Endpoint-Load-Metrics, metric: "
                            "cpu_utilization, max_age: 250ms, min_reports: 1, scale: 100, "
                            "rounding: up }\n"),
                  "lr.yaml");
  REQUIRE(r.ok());
  const LoadReportConfig& b = r.config.pools.at(0).load_report;
  CHECK(b.header == "endpoint-load-metrics");
  CHECK(b.format == core::LoadHeaderFormat::kOrca);
  CHECK(b.metric == "cpu_utilization");
  CHECK(b.max_age_ms == 250);
  CHECK(b.min_reports == 1);
  CHECK(b.scale == 100);
  CHECK(b.rounding == ReportRounding::kUp);
  r = load_string(pool_with("    load_report: { header: X-Load }\n"), "lr.yaml");
  REQUIRE(r.ok());
  CHECK(r.config.pools.at(0).load_report.header == "x-load");
  CHECK(r.config.pools.at(0).load_report.format == core::LoadHeaderFormat::kPlain);
}

TEST_CASE("load_report errors") {
  CHECK(errors_of(pool_with("    load_report: { header: \"x load\" }\n")) ==
        std::vector<std::string>{"lr.yaml:7:28: 'header' must be a header name such as "
                                 "endpoint-load-metrics, got 'x load'"});
  CHECK(errors_of(pool_with("    load_report: { metric: \"a b\" }\n")) ==
        std::vector<std::string>{"lr.yaml:7:28: 'metric' must be an ORCA metric name such as "
                                 "named_metrics.in_flight or cpu_utilization, got 'a b'"});
  CHECK(errors_of(pool_with("    load_report: { header: x-load, metric: cpu }\n")) ==
        std::vector<std::string>{"lr.yaml:7:44: 'metric' applies only to header "
                                 "endpoint-load-metrics; header 'x-load' carries one number"});
  CHECK(errors_of(pool_with("    load_report: { scale: 0 }\n")).size() == 1);
  CHECK(errors_of(pool_with("    load_report: { max_age: 0ms }\n")).size() == 1);
  CHECK(errors_of(pool_with("    load_report: { min_reports: 0 }\n")).size() == 1);
  CHECK(errors_of(pool_with("    load_report: { min_reports: 9 }\n")).size() == 1);
  const auto rounding = errors_of(pool_with("    load_report: { rounding: down }\n"));
  REQUIRE(rounding.size() == 1);
  CHECK(rounding[0].find("lr.yaml:7:") == 0);
  CHECK(rounding[0].find("random") != std::string::npos);
  const auto unknown = errors_of(pool_with("    load_report: { max_agee: 1s }\n"));
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].find("unknown key 'max_agee' (did you mean 'max_age'?)") != std::string::npos);
}

}  // namespace
}  // namespace rondel::config
