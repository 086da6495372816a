// Tests of backend `labels` and pool `subsets`: what a valid file gives, and every error at its
// FILE:LINE:COL (unknown label or listener, more than 64 labels, empty require, a bad `when`).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

std::vector<std::string> subset_errors_of(std::string_view yaml) {
  std::vector<std::string> out;
  for (const ConfigError& e : load_string(yaml, "s.yaml").errors) out.push_back(e.to_string());
  return out;
}

std::string subset_joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& line : lines) s += line + "\n";
  return s;
}

TEST_CASE("labels and subsets: read in file order, names default to the rule's index") {
  constexpr std::string_view kOk = R"(listeners:
  - {name: web, bind: 127.0.0.1:0, pool: p}
  - {name: secure, bind: 127.0.0.1:0, pool: p}
pools:
  - name: p
    backends:
      - {address: 127.0.0.1:9001, labels: [pci, ssd]}
      - {address: 127.0.0.1:9002, labels: [ssd, ssd]}
      - {address: cache.example:80, labels: [pci]}
    subsets:
      - {name: secure, when: {listener: secure}, require: [pci]}
      - {when: {header: X-Tier, value: fast}, require: [ssd]}
      - {when: {path_prefix: /cards/}, require: [pci, ssd]}
)";
  const LoadResult r = load_string(kOk, "ok.yaml");
  INFO(subset_joined(subset_errors_of(kOk)));
  REQUIRE(r.ok());
  const PoolConfig& p = r.config.pools.at(0);
  CHECK(p.backends.at(0).labels == std::vector<std::string>{"pci", "ssd"});
  CHECK(p.backends.at(1).labels == std::vector<std::string>{"ssd"});  // duplicates once
  CHECK(p.backends.at(2).labels == std::vector<std::string>{"pci"});  // a DNS entry's
  REQUIRE(p.subsets.size() == 3);
  CHECK(p.subsets[0].name == "secure");
  CHECK(p.subsets[0].match == SubsetMatch::kListener);
  CHECK(p.subsets[0].what == "secure");
  CHECK(p.subsets[1].name == "1");
  CHECK(p.subsets[1].match == SubsetMatch::kHeader);
  CHECK(p.subsets[1].what == "X-Tier");
  CHECK(p.subsets[1].value == "fast");
  CHECK(p.subsets[2].match == SubsetMatch::kPathPrefix);
  CHECK(p.subsets[2].require == std::vector<std::string>{"pci", "ssd"});
}

TEST_CASE("subsets: every error at FILE:LINE:COL") {
  constexpr std::string_view kBad = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - name: p
    backends:
      - {address: 127.0.0.1:9001, labels: [pci, "a b"]}
      - {address: 127.0.0.1:9002, labels: [ssd]}
    subsets:
      - {when: {listener: nope}, require: [pci]}
      - {when: {header: X-Tier}, require: [ssd]}
      - {when: {path_prefix: /c/}, require: []}
      - {when: {path_prefix: /x/}, require: [gpu]}
      - {when: {path_prefix: /x/, listener: web}, require: [ssd]}
      - {require: [ssd]}
      - {when: {path_prefix: x}, require: [ssd]}
)";
  const std::vector<std::string> errs = subset_errors_of(kBad);
  INFO(subset_joined(errs));
  const std::vector<std::string> want = {
      "s.yaml:5:49: a label may contain only letters, digits, '_', '-' and '.', got 'a b'",
      "s.yaml:8:27: unknown listener 'nope'",
      "s.yaml:9:16: 'header' needs a 'value' to compare with",
      "s.yaml:10:45: 'require' must name at least one label",
      "s.yaml:11:46: unknown label 'gpu': no backend of pool 'p' carries it",
      "s.yaml:12:16: 'when' needs exactly one of 'listener', 'header' (with 'value') or "
      "'path_prefix'",
      "s.yaml:13:9: missing required key 'when'",
      "s.yaml:14:30: 'path_prefix' must start with '/' and contain no spaces, got 'x'",
  };
  CHECK(errs == want);
}

TEST_CASE("labels: the 65th distinct label of a pool is an error at its position") {
  std::string labels;
  for (int i = 0; i < 64; ++i) labels += (i ? ", l" : "l") + std::to_string(i);
  const std::string yaml = "listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]\n"
                           "pools:\n  - name: p\n    backends:\n"
                           "      - {address: 127.0.0.1:9001, labels: [" + labels + "]}\n"
                           "      - {address: 127.0.0.1:9002, labels: [l3, extra]}\n";
  const std::vector<std::string> errs = subset_errors_of(yaml);
  INFO(subset_joined(errs));
  REQUIRE(errs.size() == 1);
  CHECK(errs[0] == "s.yaml:6:48: label 'extra' would be the pool's 65th distinct label; a pool's "
                   "backends carry at most 64");
}

}  // namespace
}  // namespace rondel::config

namespace rondel::config {
namespace {

TEST_CASE("subsets: labels are per pool; another pool's label is unknown here") {
  constexpr std::string_view kBad = R"(listeners: [{name: web, bind: 127.0.0.1:0, pool: p}]
pools:
  - {name: p, backends: [{address: 127.0.0.1:9001, labels: [pci]}]}
  - name: q
    backends: [{address: 127.0.0.1:9002}]
    subsets: [{when: {listener: web}, require: [pci]}]
)";
  const std::vector<std::string> errs = subset_errors_of(kBad);
  INFO(subset_joined(errs));
  REQUIRE(errs.size() == 1);
  CHECK(errs[0] == "s.yaml:6:49: unknown label 'pci': no backend of pool 'q' carries it");
}

}  // namespace
}  // namespace rondel::config
