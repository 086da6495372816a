// The admin API's pieces without a loop: the JSON reading of request bodies and state-file
// lines (Boost.JSON), AdminStates (settings, weight overrides that fit, the state file round
// trip and its temporary file), and the admin section's warnings.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "admin_json.h"
#include "json_read.h"
#include "rondel/server/admin_checks.h"
#include "rondel/server/admin_states.h"

namespace rondel::server {
namespace {

TEST_CASE("parse_json_object reads one object; the setting fields are typed") {
  auto j = parse_json_object(R"( {"state": "drain", "weight": 12, "x": null, "y": true,
                                  "s": "a\"b\\c\u00e9\ud83d\ude00"} )");
  REQUIRE(j);
  CHECK(j->at("s").as_string() == "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80");
  proxy::AdminState st{};
  CHECK(json_admin_state(j->at("state"), st));
  CHECK(st == proxy::AdminState::kDrain);
  CHECK_FALSE(json_admin_state(j->at("weight"), st));
  std::optional<uint32_t> w;
  CHECK(json_admin_weight(j->at("weight"), w));
  CHECK(w == 12u);
  CHECK(json_admin_weight(j->at("x"), w));  // null: back to the configured weight
  CHECK_FALSE(w.has_value());
  for (const char* bad : {"-1", "1.5", "1e2", "65536", "99999999999999999999", "\"3\"", "true"}) {
    auto v = parse_json_object(std::string("{\"w\":") + bad + "}");
    REQUIRE_MESSAGE(v, bad);
    CHECK_FALSE_MESSAGE(json_admin_weight(v->at("w"), w), bad);
  }
  CHECK(parse_json_object("{}"));
}

TEST_CASE("parse_json_object rejects what is not one object, saying what and where") {
  const char* bad[] = {"", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x",
                       "{\"a\":01}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":tru}",
                       "{\"a\":\"line\nbreak\"}", "{\"a\":-}", "{\"a\":\"\xff\"}"};
  for (const char* text : bad) {
    auto j = parse_json_object(text);
    CHECK_MESSAGE(!j, text);
    if (!j) CHECK_MESSAGE(j.error().message.find(" at byte ") != std::string::npos, text);
  }
  CHECK(parse_json_object("{\"a\":1} x").error().message == "extra data at byte 8");
  CHECK(parse_json_object("[1]").error().message == "expected one JSON object, got an array");
  CHECK(parse_json_object("7").error().message == "expected one JSON object, got a number");
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

namespace {

config::PoolConfig pool_of(const char* name, std::initializer_list<const char*> ids) {
  config::PoolConfig p;
  p.name = name;
  for (const char* id : ids) {
    config::BackendConfig b;
    b.id = id;
    b.weight = 1;
    p.backends.push_back(b);
  }
  return p;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh directory under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/rondel-states-XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

// Issue 32, item 4: weight 0 kept on z of q = {z, y}; the configuration then drops y. The
// override must not make the pool unbuildable: it is left out, and the message says where it is.
TEST_CASE("a weight override that would leave a pool with every weight 0 is skipped, by line") {
  TempDir dir;
  const std::string path = dir.path + "/state";
  {
    std::ofstream out(path);
    out << "{\"pool\":\"q\",\"backend\":\"y\",\"state\":\"drain\"}\n"
        << "{\"pool\":\"q\",\"backend\":\"z\",\"state\":\"ready\",\"weight\":0}\n";
  }
  AdminStates s;
  std::vector<std::string> warnings;
  REQUIRE(s.load(path, warnings));
  CHECK(warnings.empty());

  config::Config both;
  both.pools.push_back(pool_of("q", {"z", "y"}));
  CHECK(s.apply_weights(both).empty());  // y still carries the pool
  CHECK(both.pools[0].backends[0].weight == 0);

  config::Config only_z;
  only_z.pools.push_back(pool_of("q", {"z"}));
  const auto skipped = s.apply_weights(only_z);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].pool == "q");
  CHECK(skipped[0].id == "z");
  CHECK(skipped[0].reason == "all backend weights are zero");
  CHECK(skipped[0].message ==
        path + ":2: weight 0 of backend \"z\" in pool \"q\" not applied (all backend weights are "
               "zero with it); the configured weight 1 is used");
  CHECK(only_z.pools[0].backends[0].weight == 1);

  // Two zero overrides over two backends (y's set at run time, in no file line yet): the first
  // by id applies, the second is skipped, whatever the order of the configuration's list.
  s.set("q", "y", {proxy::AdminState::kReady, 0u});
  for (auto ids : {std::initializer_list<const char*>{"z", "y"}, {"y", "z"}}) {
    config::Config cfg;
    cfg.pools.push_back(pool_of("q", ids));
    const auto k = s.apply_weights(cfg);
    REQUIRE(k.size() == 1);
    CHECK(k[0].id == "z");
    CHECK(k[0].message.find(path + ":2: weight 0 of backend \"z\"") == 0);
  }
}

TEST_CASE("maglev: an override that gives the table more weighted backends than slots is skipped") {
  AdminStates s;
  config::Config cfg;
  cfg.pools.push_back(pool_of("m", {"a", "b", "c"}));
  cfg.pools[0].algorithm = config::Algorithm::kMaglev;
  cfg.pools[0].maglev_table_size = 2;
  cfg.pools[0].backends[2].weight = 0;
  s.set("m", "c", {proxy::AdminState::kReady, 5u});
  const auto k = s.apply_weights(cfg);
  REQUIRE(k.size() == 1);
  CHECK(k[0].reason == "more backends with weight > 0 than the maglev table's 2 slots");
  CHECK(k[0].message.find("runtime setting: weight 5 of backend \"c\"") == 0);
  CHECK(cfg.pools[0].backends[2].weight == 0);
}

// Issue 32, item 3: a symlink planted at the old fixed temporary name (state + ".tmp") made
// the save overwrite its target.
TEST_CASE("saving the state file never follows a symlink planted next to it") {
  TempDir dir;
  const std::string path = dir.path + "/state";
  const std::string victim = dir.path + "/victim";
  {
    std::ofstream out(victim);
    out << "precious\n";
  }
  REQUIRE(symlink(victim.c_str(), (path + ".tmp").c_str()) == 0);
  AdminStates s;
  s.set("p", "a", {proxy::AdminState::kDrain, std::nullopt});
  REQUIRE(s.save(path));
  CHECK(read_all(victim) == "precious\n");
  CHECK(read_all(path) == "{\"pool\":\"p\",\"backend\":\"a\",\"state\":\"drain\"}\n");
  struct stat st{};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  // Nothing is left behind but the file, the victim and the planted link.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
  CHECK(files == 3);
}

TEST_CASE("the state file's directory: others able to write to it is warned about") {
  TempDir dir;
  const std::string path = dir.path + "/state";
  REQUIRE(chmod(dir.path.c_str(), 0700) == 0);
  CHECK(state_dir_warning(path).empty());
  REQUIRE(chmod(dir.path.c_str(), 0770) == 0);
  CHECK(state_dir_warning(path).find("is writable by its group (mode 0770)") != std::string::npos);
  REQUIRE(chmod(dir.path.c_str(), 01777) == 0);  // sticky, as /tmp: still a warning
  CHECK(state_dir_warning(path).find("is writable by every user (mode 1777)") != std::string::npos);
  CHECK(state_dir_warning(dir.path + "/none/state").find("cannot be used") != std::string::npos);
}

TEST_CASE("admin warnings: beyond loopback, and nothing when the admin endpoint is off") {
  CHECK(is_loopback("127.0.0.1"));
  CHECK(is_loopback("127.3.2.1"));
  CHECK(is_loopback("::1"));
  CHECK(is_loopback("::ffff:127.0.0.1"));
  CHECK_FALSE(is_loopback("0.0.0.0"));
  CHECK_FALSE(is_loopback("::"));
  CHECK_FALSE(is_loopback("10.1.2.3"));
  config::AdminConfig a;
  a.enabled = true;
  a.bind.host = "0.0.0.0";
  a.bind.port = 9901;
  auto w = admin_setup_warnings(a);
  REQUIRE(w.size() == 1);
  CHECK(w[0].event == "admin_not_loopback");
  CHECK(w[0].text.find("listens on 0.0.0.0:9901, beyond loopback") != std::string::npos);
  a.bind.host = "127.0.0.1";
  CHECK(admin_setup_warnings(a).empty());
  a.enabled = false;
  a.bind.host = "0.0.0.0";
  CHECK(admin_setup_warnings(a).empty());
}

// Issue 32, item 9: '+' is a space only in a form-encoded query.
TEST_CASE("a path segment keeps '+'; a query value decodes it as a space") {
  CHECK(admin_detail::path_decode("c+1") == "c+1");
  CHECK(admin_detail::path_decode("c%2B1%20x") == "c+1 x");
  CHECK(admin_detail::url_decode("c+1") == "c 1");
  CHECK(admin_detail::url_decode("%zz+") == "%zz ");
}

}  // namespace
}  // namespace rondel::server
