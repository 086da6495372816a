// A pool's health sections: `health_check`, `hot_keys` and `passive_health` (split from
// config_reader.cpp, which calls them; same NodeReader, same FILE:LINE:COL errors).
#include "health_reader.h"

#include <string_view>

#include "reader_util.h"
#include "scalars.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

void read_health(NodeReader& r, const Field& f, HealthCheckConfig& h) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kHealthKeys);
  if (auto* g = m.get("enabled")) r.read_bool(*g, h.enabled);
  std::string text;
  if (auto* g = m.get("method"); g && r.read_string(*g, text, false)) {
    if (is_token(text)) {
      h.method = text;
    } else {
      r.error(NodeReader::value_position(*g),
               "'method' must be an HTTP method such as GET or HEAD, got " + quote(text));
    }
  }
  if (auto* g = m.get("path"); g && r.read_string(*g, text, false)) {
    if (text.front() == '/' && !has_space_or_control(text)) {
      h.path = text;
    } else {
      r.error(NodeReader::value_position(*g),
               "'path' must start with '/' and contain no spaces, got " + quote(text));
    }
  }
  if (auto* g = m.get("expect_status")) read_status_range(r, *g, h);
  if (auto* g = m.get("interval")) r.read_duration(*g, h.interval_ms, 1);
  if (auto* g = m.get("timeout")) r.read_duration(*g, h.timeout_ms, 1);
  if (auto* g = m.get("rise")) r.read_unsigned(*g, h.rise, 1, kU32Max);
  if (auto* g = m.get("fall")) r.read_unsigned(*g, h.fall, 1, kU32Max);
}

bool read_agent_check(NodeReader& r, const Field& f, AgentCheckOverride& o) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kAgentCheckKeys);
  o.present = true;
  bool b = false;
  uint64_t v = 0;
  if (auto* g = m.get("enabled"); g && r.read_bool(*g, b)) o.enabled = b;
  if (auto* g = m.get("port"); g && r.read_u64(*g, v, 1, 65535)) o.port = static_cast<uint16_t>(v);
  if (auto* g = m.get("interval"); g && r.read_duration(*g, v, 1)) o.interval_ms = v;
  if (auto* g = m.get("timeout"); g && r.read_duration(*g, v, 1)) o.timeout_ms = v;
  std::string text;
  if (auto* g = m.get("send"); g && r.read_string(*g, text, true)) {
    if (text.size() <= kMaxAgentSend) {
      o.send = std::move(text);
    } else {
      r.error(NodeReader::value_position(*g), "'send' is " + std::to_string(text.size()) +
                                                  " bytes; at most " +
                                                  std::to_string(kMaxAgentSend));
    }
  }
  return m.get("port") != nullptr;
}

void read_pool_agent_check(NodeReader& r, const Field& f, AgentCheckConfig& a) {
  AgentCheckOverride o;
  const bool named_port = read_agent_check(r, f, o);
  a = resolve_agent_check(AgentCheckConfig{.enabled = true}, o);
  if (a.enabled && !named_port && f.value.IsMap()) {
    r.error(NodeReader::value_position(f), "'agent_check' needs a 'port' (the agent's TCP port)");
  }
}

void read_status_range(NodeReader& r, const Field& f, HealthCheckConfig& h) {
  constexpr string_view kExpected = "a status code or range such as 200 or 200-399";
  if (!f.value.IsScalar()) {
    r.report_type(f, kExpected);
    return;
  }
  const std::string& text = f.value.Scalar();
  const size_t dash = text.find('-');
  uint64_t lo = 0;
  uint64_t hi = 0;
  const bool parsed = dash == std::string::npos
                          ? parse_unsigned(text, lo) && (hi = lo, true)
                          : parse_unsigned(string_view(text).substr(0, dash), lo) &&
                                parse_unsigned(string_view(text).substr(dash + 1), hi);
  if (!parsed) {
    r.report_type(f, kExpected);
    return;
  }
  if (lo < 100 || hi > 599 || lo > hi) {
    r.error(NodeReader::value_position(f),
             "'expect_status' must name codes from 100 to 599, lowest first, got " + quote(text));
    return;
  }
  h.expect_status_min = static_cast<uint16_t>(lo);
  h.expect_status_max = static_cast<uint16_t>(hi);
}

void read_hot_keys(NodeReader& r, const Field& f, HotKeysConfig& h) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kHotKeysKeys);
  if (auto* g = m.get("share")) r.read_unsigned(*g, h.share, 0, kMaxHotShare);
  if (auto* g = m.get("max_replicas")) r.read_unsigned(*g, h.max_replicas, 0, kMaxReplicas);
  if (auto* g = m.get("window")) r.read_duration(*g, h.window_ms, kMinHotWindowMs);
  if (auto* g = m.get("capacity")) r.read_unsigned(*g, h.capacity, 1, kMaxHotCapacity);
  if (auto* g = m.get("min_count")) r.read_unsigned(*g, h.min_count, 1, kU32Max);
}

void read_passive(NodeReader& r, const Field& f, PassiveHealthConfig& p) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kPassiveKeys);
  if (auto* g = m.get("consecutive_failures")) {
    r.read_unsigned(*g, p.consecutive_failures, 0, kU32Max);
  }
  if (auto* g = m.get("ejection_time")) r.read_duration(*g, p.ejection_ms, 1);
  if (auto* g = m.get("max_ejected_percent")) r.read_unsigned(*g, p.max_ejected_percent, 0, 100);
}

}  // namespace rondel::config
