// TicketKeys: a ticket's key opens it for one more rotation after a new key takes over, then
// never again; a key unused for two rotations is replaced together with its predecessor.
#include <doctest/doctest.h>

#include <cstring>

#include "rondel/tls/ticket_keys.h"

using rondel::tls::TicketKeys;

namespace {
bool same(const TicketKeys::Key& a, const TicketKeys::Key& b) {
  return std::memcmp(a.name, b.name, sizeof a.name) == 0 &&
         std::memcmp(a.aes, b.aes, sizeof a.aes) == 0;
}
}  // namespace

TEST_CASE("rotation keeps the previous key for one period") {
  TicketKeys keys(1000);
  TicketKeys::Key k0, k1, found;
  bool renew = true;
  REQUIRE(keys.current(10, k0));
  CHECK(keys.find(500, k0.name, found, renew));
  CHECK(same(found, k0));
  CHECK_FALSE(renew);
  REQUIRE(keys.current(1010, k1));  // due: a new key
  CHECK_FALSE(same(k0, k1));
  CHECK(keys.rotations() == 1);
  CHECK(keys.find(1500, k0.name, found, renew));  // the previous one still opens, and renews
  CHECK(same(found, k0));
  CHECK(renew);
  CHECK_FALSE(keys.find(2020, k0.name, found, renew));  // two periods after k0: gone
  CHECK(keys.find(2020, k1.name, found, renew));  // k1 is now the previous key
  CHECK(renew);
}

TEST_CASE("two idle periods drop both keys") {
  TicketKeys keys(1000);
  TicketKeys::Key k0, k1, found;
  bool renew = false;
  REQUIRE(keys.current(0, k0));
  CHECK_FALSE(keys.find(2500, k0.name, found, renew));
  REQUIRE(keys.current(2500, k1));
  CHECK_FALSE(same(k0, k1));
  CHECK(keys.find(2600, k1.name, found, renew));
  CHECK_FALSE(renew);
}
