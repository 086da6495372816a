// Small helpers shared by the admin views (admin.cpp, admin_views.cpp): enum names, query-value
// decoding, and the JSON primitives of the one writer (rondel::util::JsonWriter) for code that
// appends to its own string. Internal to src/server.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/config/config.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/util/json_writer.h"

namespace rondel::server::admin_detail {

inline std::string_view algorithm_name(config::Algorithm a) noexcept {
  switch (a) {
    case config::Algorithm::kRing: return "ring";
    case config::Algorithm::kRendezvous: return "rendezvous";
    case config::Algorithm::kMaglev: return "maglev";
    case config::Algorithm::kSkeletonRendezvous: return "skeleton_rendezvous";
  }
  return "?";
}

inline std::string_view health_name(proxy::Health h) noexcept {
  switch (h) {
    case proxy::Health::kUp: return "up";
    case proxy::Health::kDown: return "down";
    case proxy::Health::kEjected: return "ejected";
  }
  return "?";
}

// The backend's "agent" object (agent_check): its state summary, weight percentage, the last
// answer line, whether the last check got a known answer, why it had none, and the checks by
// result. `enabled`: the backend's resolved agent_check is on. Daemon loop only (the strings).
inline void agent_object(util::JsonWriter& j, const proxy::BackendState& b, bool enabled) {
  const proxy::AgentState& a = b.agent;
  j.begin("agent");
  j.field("enabled", enabled);
  j.field("state", proxy::kAgentSummaryNames[static_cast<size_t>(a.summary())]);
  j.field("weight_percent", uint64_t{a.weight_percent.load(std::memory_order_relaxed)});
  j.field("last", a.last);
  j.field("ok", a.last_ok.load(std::memory_order_relaxed));
  j.field("error", a.error);
  for (size_t r = 0; r < proxy::kAgentResults; ++r) {
    j.field(std::string("checks_") + std::string(proxy::kAgentResultNames[r]),
            a.checks[r].load(std::memory_order_relaxed));
  }
  j.end();
}

// Decodes %XX and '+' (a space: application/x-www-form-urlencoded) in a query value; an
// invalid escape is kept as is.
std::string url_decode(std::string_view s);
// Decodes %XX in a path segment; '+' stays '+' (RFC 3986: it means a space only in a
// form-encoded query, never in a path).
std::string path_decode(std::string_view s);

inline void json_string(std::string& out, std::string_view s) {
  util::JsonWriter::append_string(out, s);
}
inline void json_num(std::string& out, double v) { util::JsonWriter::append_double(out, v); }
inline void json_uint(std::string& out, uint64_t v) { util::JsonWriter::append_integer(out, v); }

}  // namespace rondel::server::admin_detail
