// `agent_check` (HAProxy's agent-check): a pool's section, a backend's own over it key by key,
// and each bad value's FILE:LINE:COL error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

std::string agent_pool(const std::string& pool_section, const std::string& backend_section = "") {
  return "listeners:\n  - { name: web, bind: 127.0.0.1:8080, pool: caches }\npools:\n"
         "  - name: caches\n" +
         pool_section +
         "    backends:\n      - address: 127.0.0.1:9001\n" + backend_section +
         "      - address: 127.0.0.1:9002\n";
}

std::vector<std::string> agent_errors(const std::string& yaml) {
  const LoadResult r = load_string(yaml, "ac.yaml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.to_string());
  return out;
}

AgentCheckConfig agent_of(const Config& c, size_t backend) {
  const PoolConfig& p = c.pools.at(0);
  return resolve_agent_check(p.agent_check, p.backends.at(backend).agent);
}

TEST_CASE("agent_check is off by default") {
  const LoadResult r = load_string(agent_pool(""), "ac.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(agent_of(r.config, 0).enabled);
  CHECK_FALSE(agent_of(r.config, 1).enabled);
}

TEST_CASE("a pool's agent_check applies to every backend; a backend's keys override it") {
  LoadResult r = load_string(
      agent_pool("    agent_check: { port: 9999, interval: 500ms, timeout: 200ms, send: \"hi\\n\" }\n",
                "        agent_check: { port: 10000, send: \"\" }\n"),
      "ac.yaml");
  REQUIRE(r.ok());
  const AgentCheckConfig a = agent_of(r.config, 0);
  CHECK(a.enabled);
  CHECK(a.port == 10000);
  CHECK(a.interval_ms == 500);
  CHECK(a.timeout_ms == 200);
  CHECK(a.send.empty());
  const AgentCheckConfig b = agent_of(r.config, 1);
  CHECK(b.enabled);
  CHECK(b.port == 9999);
  CHECK(b.send == "hi\n");
  CHECK(b.timeout_ms == 200);

  // Defaults; a backend turned off.
  r = load_string(agent_pool("    agent_check: { port: 9999 }\n",
                            "        agent_check: { enabled: false }\n"),
                  "ac.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(agent_of(r.config, 0).enabled);
  CHECK(agent_of(r.config, 1).interval_ms == 2000);
  CHECK(agent_of(r.config, 1).timeout_ms == 1000);

  // Only one backend has an agent: the pool has no section.
  r = load_string(agent_pool("", "        agent_check: { port: 7000 }\n"), "ac.yaml");
  REQUIRE(r.ok());
  CHECK(agent_of(r.config, 0).enabled);
  CHECK(agent_of(r.config, 0).port == 7000);
  CHECK_FALSE(agent_of(r.config, 1).enabled);

  // A pool section turned off.
  r = load_string(agent_pool("    agent_check: { enabled: false }\n"), "ac.yaml");
  REQUIRE(r.ok());
  CHECK_FALSE(agent_of(r.config, 1).enabled);
}

TEST_CASE("agent_check errors") {
  CHECK(agent_errors(agent_pool("    agent_check: { interval: 1s }\n")) ==
        std::vector<std::string>{
            "ac.yaml:5:18: 'agent_check' needs a 'port' (the agent's TCP port)"});
  CHECK(agent_errors(agent_pool("    agent_check: { port: 0 }\n")).at(0).rfind("ac.yaml:5:26: ", 0) ==
        0);
  CHECK(agent_errors(agent_pool("    agent_check: { port: 70000 }\n")).size() == 1);
  CHECK(agent_errors(agent_pool("    agent_check: { port: 1, interval: soon }\n")).at(0).rfind(
            "ac.yaml:5:39: ", 0) == 0);
  CHECK(agent_errors(agent_pool("    agent_check: { port: 1, agent_port: 2 }\n")).at(0).rfind(
            "ac.yaml:5:29: unknown key 'agent_port'", 0) == 0);
  CHECK(agent_errors(agent_pool("    agent_check: { port: 1, send: \"" + std::string(1025, 'x') +
                            "\" }\n")) ==
        std::vector<std::string>{"ac.yaml:5:35: 'send' is 1025 bytes; at most 1024"});
  CHECK(agent_errors(agent_pool("", "        agent_check: { enabled: true }\n")) ==
        std::vector<std::string>{
            "ac.yaml:7:22: 'agent_check' needs a 'port': the pool's 'agent_check' sets none"});
  CHECK(agent_errors(agent_pool("    agent_check: [9999]\n")).at(0).find("must be a mapping") !=
        std::string::npos);
}

}  // namespace
}  // namespace rondel::config
