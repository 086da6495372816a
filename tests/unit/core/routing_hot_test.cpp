// Hot-key replica rule and its lookup table (the "Routing quality" issue).
#include <doctest/doctest.h>

#include <cstdint>

#include "rondel/core/hot_replicas.h"

namespace rondel::core {
namespace {

TEST_CASE("replicas_for known answers") {
  HotReplicaOptions o;  // h = 10%, min_count 16
  // N = 4: a key above 2.5% of requests gets 2, above 5% 3, above 7.5% all 4.
  CHECK(replicas_for(25, 1000, 4, o) == 1);    // exactly 2.5%: ceil(1.0)
  CHECK(replicas_for(26, 1000, 4, o) == 2);
  CHECK(replicas_for(50, 1000, 4, o) == 2);
  CHECK(replicas_for(51, 1000, 4, o) == 3);
  CHECK(replicas_for(76, 1000, 4, o) == 4);
  CHECK(replicas_for(900, 1000, 4, o) == 4);   // clamped to N
  CHECK(replicas_for(15, 20, 4, o) == 1);      // below min_count
  CHECK(replicas_for(500, 1000, 1, o) == 1);   // one backend
  CHECK(replicas_for(500, 0, 4, o) == 1);      // empty window
  o.max_replicas = 2;
  CHECK(replicas_for(900, 1000, 4, o) == 2);
  o.hot_share_pct = 0;
  CHECK(replicas_for(900, 1000, 4, o) == 1);   // disabled
  o = HotReplicaOptions{};
  CHECK(replicas_for(UINT64_MAX, UINT64_MAX, 65535, o) == 65535);  // no overflow
}

TEST_CASE("HotReplicas table: set, lookup, overwrite, capacity, clear") {
  HotReplicas t(4);
  CHECK(t.replicas(1) == 1);
  CHECK(t.set(1, 3));
  CHECK(t.set(9, 1));  // R = 1 is not stored
  CHECK(t.size() == 1);
  CHECK(t.set(1, 4));
  CHECK(t.replicas(1) == 4);
  CHECK(t.set(2, 2));
  CHECK(t.set(3, 2));
  CHECK(t.set(4, 2));
  CHECK_FALSE(t.set(5, 2));  // full
  CHECK(t.replicas(5) == 1);
  CHECK(t.replicas(4) == 2);
  t.clear();
  CHECK(t.replicas(1) == 1);
  CHECK(t.size() == 0);
}

}  // namespace
}  // namespace rondel::core
