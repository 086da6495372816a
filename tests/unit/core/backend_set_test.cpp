// BackendSet validation errors, lookup by id and id order.
#include "rondel/core/backend_set.h"

#include <doctest/doctest.h>

#include <string>

#include "core_test_util.h"

namespace rondel::core {
namespace {

TEST_CASE("BackendSet rejects empty sets, empty ids, duplicates and too many backends") {
  auto empty = BackendSet::create({});
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().message == "no backends");

  auto empty_id = BackendSet::create({{"a:1", 1}, {"", 1}});
  REQUIRE_FALSE(empty_id.has_value());
  CHECK(empty_id.error().message == "backend #1 has an empty id");

  auto dup = BackendSet::create({{"a:1", 1}, {"b:1", 2}, {"a:1", 3}});
  REQUIRE_FALSE(dup.has_value());
  CHECK(dup.error().message == "duplicate backend id 'a:1'");

  auto too_many = BackendSet::create(test::specs(kMaxBackends + 1));
  REQUIRE_FALSE(too_many.has_value());
  CHECK(too_many.error().message.find("more than 65535 backends") == 0);

  auto max_ok = BackendSet::create(test::specs(kMaxBackends));
  REQUIRE(max_ok.has_value());
  CHECK(max_ok->size() == kMaxBackends);
}

TEST_CASE("BackendSet keeps input order, finds ids and ranks them bytewise") {
  const BackendSet set = test::make_set({{"b", 2}, {"a", 0}, {"\xff", 1}, {"c", 5}});
  CHECK(set.size() == 4);
  CHECK(set[0].id == "b");
  CHECK(set[1].weight == 0);
  CHECK(set.total_weight() == 8);
  CHECK(set.eligible_count() == 3);
  CHECK(set.id_hash(3) == hash64("c"));
  CHECK(set.find("c") == std::optional<BackendIndex>(3));
  CHECK(set.find("a") == std::optional<BackendIndex>(1));
  CHECK_FALSE(set.find("d").has_value());
  CHECK_FALSE(set.find("").has_value());
  // Bytes compare as unsigned: "\xff" sorts after "c" on every platform.
  CHECK(set.id_rank(1) == 0);
  CHECK(set.id_rank(0) == 1);
  CHECK(set.id_rank(3) == 2);
  CHECK(set.id_rank(2) == 3);
}

TEST_CASE("A set whose weights are all zero is valid, but no selector can be built from it") {
  const BackendSet set = test::make_set({{"a", 0}, {"b", 0}});
  for (Algorithm a : test::kAllAlgorithms) {
    SelectorOptions o;
    o.algorithm = a;
    auto r = Selector::build(set, o);
    CAPTURE(test::name(a));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "all backend weights are zero");
  }
}

}  // namespace
}  // namespace rondel::core
