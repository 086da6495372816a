// SniMap: exact names before wildcards, one label per wildcard, case folding, first one wins.
#include <doctest/doctest.h>

#include "rondel/tls/sni_map.h"

using rondel::tls::SniMap;

TEST_CASE("exact names, wildcards of one label, and the default") {
  SniMap m;
  m.add("a.test", 0);
  m.add("*.example.test", 1);
  m.add("example.test", 1);
  m.add("api.example.test", 2);
  CHECK(m.find("a.test") == 0);
  CHECK(m.find("A.TEST") == 0);
  CHECK(m.find("a.test.") == 0);  // an absolute name
  CHECK(m.find("www.example.test") == 1);
  CHECK(m.find("example.test") == 1);
  CHECK(m.find("api.example.test") == 2);  // the exact name beats the wildcard
  CHECK(m.find("a.b.example.test") == SniMap::kNone);  // a wildcard covers one label
  CHECK(m.find(".example.test") == SniMap::kNone);
  CHECK(m.find("unknown.test") == SniMap::kNone);
  CHECK(m.find("") == SniMap::kNone);
}

TEST_CASE("the first certificate naming a name keeps it") {
  SniMap m;
  m.add("Shared.Test", 0);
  m.add("shared.test", 1);
  m.add("*.w.test", 0);
  m.add("*.W.TEST", 1);
  CHECK(m.find("shared.test") == 0);
  CHECK(m.find("x.w.test") == 0);
}
