// docs/metrics.md's reference tables list exactly the families of the collection table, in the
// same order, with the same type and label names: the doc rows are compared with rows rendered
// from Metrics::families(), so docs and code cannot drift.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rondel/server/metrics.h"

namespace {

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(' ');
  size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "| `name` | type | `a`, `b` |" as the doc writes a family (the meaning column is free text).
std::string render(const rondel::server::Metrics::FamilyInfo& f) {
  std::string labels;
  for (auto l : f.labels) {
    if (!labels.empty()) labels += ", ";
    labels += "`" + std::string(l) + "`";
  }
  return "`" + std::string(f.name) + "` | " + std::string(f.type) + " | " + labels;
}

// The first three cells of every table row of the doc that names a rondel_ family.
std::vector<std::string> doc_rows() {
  std::ifstream in(std::string(RONDEL_SOURCE_DIR) + "/docs/metrics.md");
  REQUIRE(in.good());
  std::vector<std::string> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `rondel_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
    REQUIRE(cells.size() >= 3);
    rows.push_back(cells[0] + " | " + cells[1] + " | " + cells[2]);
  }
  return rows;
}

}  // namespace

TEST_CASE("docs/metrics.md lists exactly the families the table serves, in order") {
  std::vector<std::string> expected;
  for (const auto& f : rondel::server::Metrics::families()) expected.push_back(render(f));
  std::vector<std::string> documented = doc_rows();
  CHECK(expected.size() > 40);
  for (size_t i = 0; i < std::max(expected.size(), documented.size()); ++i) {
    std::string want = i < expected.size() ? expected[i] : "(none)";
    std::string have = i < documented.size() ? documented[i] : "(none)";
    INFO("row ", i, " of the doc's family tables");
    CHECK(have == want);
  }
}

TEST_CASE("every family has a help text and a known type") {
  for (const auto& f : rondel::server::Metrics::families()) {
    INFO(std::string(f.name));
    CHECK(!f.help.empty());
    CHECK((f.type == "counter" || f.type == "gauge" || f.type == "histogram"));
    if (f.type == "counter") CHECK(f.name.ends_with("_total"));
  }
}
