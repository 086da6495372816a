// docs/configuration.md against the schema (src/config/schema.h): every key a section of the
// configuration accepts is documented, as `key`, in that section's part of the reference, so a
// key cannot be added to the reader without its documentation (as metrics_doc_test holds
// docs/metrics.md to the metric table).
#include <doctest/doctest.h>

#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "schema.h"

namespace schema = rondel::config::schema;

namespace {

std::string read_doc() {
  std::ifstream in(std::string(RONDEL_SOURCE_DIR) + "/docs/configuration.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t heading_level(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[n] == '#') ++n;
  return n > 0 && n < line.size() && line[n] == ' ' ? n : 0;
}

// The text of the section whose heading line starts with `heading` ("## `log`"), up to the
// next heading of the same or a higher level; empty when there is none.
std::string section(const std::string& doc, std::string_view heading) {
  std::istringstream in(doc);
  std::string line, out;
  size_t level = 0;
  while (std::getline(in, line)) {
    const size_t l = heading_level(line);
    if (level == 0) {
      if (l > 0 && std::string_view(line).substr(0, heading.size()) == heading) level = l;
      continue;
    }
    if (l > 0 && l <= level) break;
    out += line;
    out += '\n';
  }
  return out;
}

struct Section {
  std::string_view heading;
  std::span<const std::string_view> keys;
};

}  // namespace

TEST_CASE("every schema key is documented in its section of docs/configuration.md") {
  const std::string doc = read_doc();
  REQUIRE(!doc.empty());
  const Section sections[] = {
      {"## Top level", schema::kRootKeys},
      {"## `log`", schema::kLogKeys},
      {"## `config_watch`", schema::kConfigWatchKeys},
      {"## `listeners[]`", schema::kListenerKeys},
      {"### `proxy_protocol`", schema::kProxyProtocolKeys},
      {"### `tls`: TLS termination", schema::kTlsKeys},
      {"### `tls`: TLS termination", schema::kTlsCertificateKeys},
      {"## `pools[]`", schema::kPoolKeys},
      {"### `tls`: TLS to the backends", schema::kBackendTlsKeys},
      {"### Gradual migration", schema::kPreviousKeys},
      {"### Gradual migration", schema::kPreviousBackendKeys},
      {"### `subsets`", schema::kSubsetKeys},
      {"### `subsets`", schema::kSubsetWhenKeys},
      {"### Routing quality", schema::kHotKeysKeys},
      {"### `load_report`", schema::kLoadReportKeys},
      {"### `llm_prefix`", schema::kLlmPrefixKeys},
      {"### `health_check`", schema::kHealthKeys},
      {"### `agent_check`", schema::kAgentCheckKeys},
      {"### `passive_health`", schema::kPassiveKeys},
      {"### `dns`", schema::kDnsKeys},
      {"### `discovery`: etcd and Kubernetes", schema::kDiscoveryKeys},
      {"### `discovery`: etcd and Kubernetes", schema::kEtcdKeys},
      {"### `discovery`: etcd and Kubernetes", schema::kKubernetesKeys},
      {"## `fleet`", schema::kFleetKeys},
      {"### `backends[]`", schema::kBackendKeys},
      {"## `admin`", schema::kAdminKeys},
  };
  for (const Section& s : sections) {
    const std::string text = section(doc, s.heading);
    CAPTURE(s.heading);
    CHECK_MESSAGE(!text.empty(), "no section in docs/configuration.md");
    for (std::string_view key : s.keys) {
      CAPTURE(key);
      CHECK_MESSAGE(text.find("`" + std::string(key) + "`") != std::string::npos,
                    "a schema key the section's reference does not name");
    }
  }
}

TEST_CASE("every scalar row is a key its section accepts") {
  auto accepted = [](std::span<const std::string_view> keys, std::string_view name) {
    for (std::string_view k : keys) {
      if (k == name) return true;
    }
    return false;
  };
  for (const auto& row : schema::kListenerScalars) {
    CAPTURE(row.name);
    CHECK(accepted(schema::kListenerKeys, row.name));
  }
  for (const auto& row : schema::kPoolScalars) {
    CAPTURE(row.name);
    CHECK(accepted(schema::kPoolKeys, row.name));
  }
}
