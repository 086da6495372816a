// The admin API's pieces without a loop: the flat JSON reader of request bodies and state-file
// lines, and AdminStates (settings, weight overrides, the state file round trip).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "flat_json.h"
#include "rondel/server/admin_states.h"

namespace rondel::server {
namespace {

TEST_CASE("FlatJson reads one object of scalars") {
  auto j = FlatJson::parse(R"( {"state": "drain", "weight": 12, "x": null, "y": true,
                                "s": "a\"b\\c\u00e9\ud83d\ude00"} )");
  REQUIRE(j);
  CHECK(j->get("state")->text == "drain");
  CHECK(j->get("weight")->kind == FlatJson::Kind::kNumber);
  CHECK(j->get("x")->kind == FlatJson::Kind::kNull);
  CHECK(j->get("y")->text == "true");
  CHECK(j->get("s")->text == "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(j->get("nope") == nullptr);
  uint64_t w = 0;
  CHECK(flat_json_uint(*j->get("weight"), 65535, w));
  CHECK(w == 12);
  CHECK_FALSE(flat_json_uint(*j->get("weight"), 11, w));
  CHECK(FlatJson::parse("{}"));
}

TEST_CASE("FlatJson rejects what is not one flat object, saying where") {
  const char* bad[] = {"", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x",
                       "{\"a\":{}}", "{\"a\":[1]}", "{\"a\":01}", "{\"a\":\"\\x\"}",
                       "{\"a\":1,\"a\":2}", "{\"a\":\"\\ud800\"}", "{\"a\":tru}",
                       "{\"a\":\"line\nbreak\"}", "{\"a\":-}"};
  for (const char* text : bad) {
    auto j = FlatJson::parse(text);
    CHECK_MESSAGE(!j, text);
    if (!j) CHECK(j.error().message.find(" at ") != std::string::npos);
  }
  CHECK(FlatJson::parse("{\"a\":{}}").error().message == "nested values are not accepted at 5");
  FlatJson::Value v{FlatJson::Kind::kNumber, "1.5"};
  uint64_t w = 0;
  CHECK_FALSE(flat_json_uint(v, 100, w));
  v.text = "-1";
  CHECK_FALSE(flat_json_uint(v, 100, w));
}

TEST_CASE("AdminStates keeps non-default settings and overrides weights") {
  AdminStates s;
  CHECK(s.get("p", "a") == AdminSetting{});
  CHECK(s.set("p", "a", {proxy::AdminState::kDrain, std::nullopt}));
  CHECK_FALSE(s.set("p", "a", {proxy::AdminState::kDrain, std::nullopt}));
  CHECK(s.set("p", "b", {proxy::AdminState::kReady, 7u}));
  CHECK(s.set("q", "a", {proxy::AdminState::kMaint, std::nullopt}));
  CHECK(s.size() == 3);
  CHECK(s.set("q", "a", AdminSetting{}));  // back to default: forgotten
  CHECK(s.size() == 2);

  config::Config cfg;
  config::PoolConfig p;
  p.name = "p";
  for (const char* id : {"a", "b", "c"}) {
    config::BackendConfig b;
    b.id = id;
    b.weight = 2;
    p.backends.push_back(b);
  }
  cfg.pools.push_back(p);
  s.apply_weights(cfg);
  CHECK(cfg.pools[0].backends[0].weight == 2);
  CHECK(cfg.pools[0].backends[1].weight == 7);
  CHECK(cfg.pools[0].backends[2].weight == 2);
}

TEST_CASE("the state file round-trips, skips bad lines and is replaced atomically") {
  char dir[] = "/tmp/rondel-states-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/state";
  AdminStates s;
  std::vector<std::string> warnings;
  CHECK_FALSE(*s.load(path, warnings));  // missing: empty, no error
  s.set("p", "10.0.0.1:80", {proxy::AdminState::kDrain, std::nullopt});
  s.set("p\"x", "b", {proxy::AdminState::kMaint, 0u});
  REQUIRE(s.save(path));
  CHECK(access((path + ".tmp").c_str(), F_OK) != 0);

  AdminStates t;
  REQUIRE(t.load(path, warnings));
  CHECK(warnings.empty());
  CHECK(t.size() == 2);
  CHECK(t.get("p", "10.0.0.1:80") == AdminSetting{proxy::AdminState::kDrain, std::nullopt});
  CHECK(t.get("p\"x", "b") == AdminSetting{proxy::AdminState::kMaint, 0u});

  {
    std::ofstream out(path, std::ios::app);
    out << "not json\n{\"pool\":\"p\",\"backend\":\"c\",\"state\":\"paused\"}\n\n"
        << "{\"pool\":\"p\",\"backend\":\"d\",\"weight\":3}\n";
  }
  warnings.clear();
  REQUIRE(t.load(path, warnings));
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find(path + ":3: ") == 0);
  CHECK(warnings[1] == path + ":4: unknown state \"paused\"");
  CHECK(t.size() == 3);
  CHECK(t.get("p", "d") == AdminSetting{proxy::AdminState::kReady, 3u});

  CHECK_FALSE(t.save(std::string(dir) + "/no/such/dir/state"));
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace rondel::server
