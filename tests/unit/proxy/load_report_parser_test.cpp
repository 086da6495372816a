// Load report parsers (ORCA text, colon and JSON forms, plain numbers) against well formed and
// many malformed inputs (moved from tests/unit/core with the parsers, assertions unchanged).
#include "rondel/proxy/load_report_parser.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>

namespace rondel::proxy {
namespace {

using core::kMaxReportBytes;
using core::kMaxReportedLoad;
using core::kReportStatuses;
using core::LoadHeaderFormat;
using core::ParsedReport;
using core::ReportStatus;

constexpr std::string_view kInFlight = "named_metrics.in_flight";

ReportStatus orca_status(std::string_view v, std::string_view metric = kInFlight) {
  return parse_orca(v, metric, 1).status;
}

uint32_t orca_load(std::string_view v, std::string_view metric = kInFlight, uint32_t scale = 1) {
  const ParsedReport r = parse_orca(v, metric, scale);
  REQUIRE(r.status == ReportStatus::kOk);
  return r.load;
}

TEST_CASE("ORCA text forms") {
  CHECK(orca_load("TEXT named_metrics.in_flight=12") == 12);
  CHECK(orca_load("TEXT cpu_utilization=0.3, named_metrics.in_flight=7, mem_utilization=0.5") ==
        7);
  CHECK(orca_load("named_metrics.in_flight:5") == 5);
  CHECK(orca_load("  cpu_utilization:0.25 ,named_metrics.in_flight : 9  ") == 9);
  CHECK(orca_load("TEXT cpu_utilization=0.25", "cpu_utilization", 100) == 25);
  CHECK(orca_load("TEXT a=1, a=3", "a") == 3);  // last wins
  CHECK(orca_load("TEXT a=2.5e1", "a") == 25);
  CHECK(orca_load("TEXT a=-0", "a") == 0);
  CHECK(orca_load("TEXT a=0.4", "a") == 0);  // rounded
  CHECK(orca_load("TEXT a=1000000", "a") == 1000000);
}

TEST_CASE("ORCA JSON form") {
  CHECK(orca_load(R"(JSON {"named_metrics": {"in_flight": 4}})") == 4);
  CHECK(orca_load(R"(JSON {"cpu_utilization": 0.5, "named_metrics": {"x": 1, "in_flight": 8}})") ==
        8);
  CHECK(orca_load(R"(JSON {"cpu_utilization":0.5})", "cpu_utilization", 10) == 5);
  CHECK(orca_load(R"(JSON {"utilization": {"gpu": 0.75}})", "utilization.gpu", 100) == 75);
  CHECK(orca_load("JSON {\n \"a\" : 1e2 \n}", "a") == 100);
  CHECK(orca_status(R"(JSON {})") == ReportStatus::kMissing);
  CHECK(orca_status(R"(JSON {"named_metrics": {}})") == ReportStatus::kMissing);
  // A top-level key spelled with the dot names the metric too.
  CHECK(orca_status(R"(JSON {"named_metrics.in_flight": 3})") == ReportStatus::kOk);
}

TEST_CASE("missing metric is counted apart from malformed values") {
  CHECK(orca_status("TEXT cpu_utilization=0.3") == ReportStatus::kMissing);
  CHECK(orca_status("cpu_utilization:0.3") == ReportStatus::kMissing);
  CHECK(orca_status("TEXT named_metrics.in_flight2=3") == ReportStatus::kMissing);
}

TEST_CASE("malformed ORCA values") {
  const char* bad[] = {
      "", " ", "TEXT", "TEXT ", "JSON", "JSON ", "BIN CgsKCWluX2ZsaWdodA==",
      "TEXT named_metrics.in_flight", "TEXT named_metrics.in_flight=", "TEXT =3",
      "TEXT named_metrics.in_flight=3,", "TEXT ,named_metrics.in_flight=3",
      "TEXT named_metrics.in_flight=3,,a=1", "TEXT named_metrics.in_flight=0x10",
      "TEXT named_metrics.in_flight=1.", "TEXT named_metrics.in_flight=.5",
      "TEXT named_metrics.in_flight=+1", "TEXT named_metrics.in_flight=1e",
      "TEXT named_metrics.in_flight=1e+", "TEXT named_metrics.in_flight=01x",
      "TEXT named_metrics.in_flight=3 4", "TEXT named metrics.in_flight=3",
      "TEXT named_metrics.in_flight:3",  // ':' in the TEXT form
      "named_metrics.in_flight=3",       // '=' without the TEXT prefix
      "TEXTnamed_metrics.in_flight=3", "text named_metrics.in_flight=3",
      "TEXT a=1, b=oops, named_metrics.in_flight=3",  // a bad item anywhere
      "TEXT named_metrics.in_flight=\"3\"", "TEXT named_metrics.in_flight=3;q=1",
      "JSON {", "JSON }", "JSON {\"named_metrics\": {\"in_flight\": 4}", "JSON []",
      R"(JSON {"named_metrics": {"in_flight": 4}} x)", R"(JSON {"a": 1,})",
      R"(JSON {"a": 1, "a": 2})", R"(JSON {"a": true})", R"(JSON {"a": null})",
      R"(JSON {"a": "1"})", R"(JSON {"a": [1]})", R"(JSON {a: 1})", R"(JSON {"": 1})",
      R"(JSON {"a\"b": 1})", R"(JSON {"a b": 1})", R"(JSON {"a": {"b": {"c": 1}}})",
      R"(JSON {"named_metrics": {"in_flight": 4, "in_flight": 5}})", R"(JSON {"a" 1})",
      R"(JSON {"a": 01.})", R"(JSON {"a": -})", R"(JSON {"a": 1 2})", "JSON{\"a\": 1}",
  };
  for (const char* v : bad) {
    INFO(v);
    CHECK(orca_status(v) == ReportStatus::kMalformed);
  }
  CHECK(orca_status(std::string(kMaxReportBytes + 1, ' ') + "a:1", "a") ==
        ReportStatus::kMalformed);
}

TEST_CASE("non-finite, negative and absurd values") {
  for (const char* v : {"TEXT a=nan", "TEXT a=NaN", "TEXT a=-inf", "TEXT a=Infinity",
                        "a:+INF", "TEXT a=1e999", R"(JSON {"a": NaN})", R"(JSON {"a": -Infinity})"}) {
    INFO(v);
    CHECK(orca_status(v, "a") == ReportStatus::kNotFinite);
  }
  CHECK(orca_status("TEXT a=-1", "a") == ReportStatus::kNegative);
  CHECK(orca_status("TEXT a=-1e-9", "a") == ReportStatus::kNegative);
  CHECK(orca_status(R"(JSON {"a": -3})", "a") == ReportStatus::kNegative);
  CHECK(orca_status("TEXT a=1000001", "a") == ReportStatus::kTooLarge);
  CHECK(orca_status("TEXT a=1e300", "a") == ReportStatus::kTooLarge);
  CHECK(parse_orca("TEXT a=0.5", "a", 3'000'000).status == ReportStatus::kTooLarge);
  // A NaN in another metric does not spoil the one we read (its syntax is valid).
  CHECK(orca_load("TEXT b=nan, a=2", "a") == 2);
}

TEST_CASE("plain numeric header") {
  CHECK(parse_plain_load("12", 1).load == 12);
  CHECK(parse_plain_load(" 0.5 ", 10).load == 5);
  CHECK(parse_plain_load("", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("12 requests", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("a:1", 1).status == ReportStatus::kMalformed);
  CHECK(parse_plain_load("nan", 1).status == ReportStatus::kNotFinite);
  CHECK(parse_plain_load("-2", 1).status == ReportStatus::kNegative);
  CHECK(parse_plain_load("2e6", 1).status == ReportStatus::kTooLarge);
  CHECK(parse_load_report(LoadHeaderFormat::kPlain, "7", "ignored", 1).load == 7);
}

TEST_CASE("random byte strings never crash and never yield an absurd load") {
  std::mt19937_64 rng(17);
  const std::string alphabet = "TEXTJSON {}\":,.=-+e0123456789nafiINF_\t";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const size_t len = rng() % 48;
    for (size_t i = 0; i < len; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
    if (iter % 3 == 0) s = "TEXT a=" + s;
    if (iter % 3 == 1) s = "JSON {\"a\": " + s;
    for (uint32_t scale : {1u, 1000u}) {
      const ParsedReport r = parse_orca(s, "a", scale);
      CHECK(static_cast<size_t>(r.status) < kReportStatuses);
      if (r.status == ReportStatus::kOk) {
        CHECK(r.load <= kMaxReportedLoad);
      } else {
        CHECK(r.load == 0);
      }
      const ParsedReport p = parse_plain_load(s, scale);
      CHECK(p.load <= kMaxReportedLoad);
    }
  }
}

}  // namespace
}  // namespace rondel::proxy
