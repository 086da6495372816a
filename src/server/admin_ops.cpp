// Runtime operations on the admin listener: GET and PUT /api/pools/{pool}/backends/{id}
// (drain, maint, ready, weight), the bearer-token check, and the backend state view they answer.
#include <cstdint>
#include <string>
#include <string_view>

#include "admin_json.h"
#include "json_read.h"
#include "rondel/http/message.h"
#include "rondel/server/admin.h"
#include "rondel/server/admin_states.h"
#include "rondel/server/daemon.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace {

using admin_detail::health_name;
using admin_detail::path_decode;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kAllow = "Allow: GET, HEAD, PUT\r\n";

// A JSON error body: {"error": "..."}.
void json_error(AdminResponse& res, int status, std::string_view message) {
  util::JsonWriter w;
  w.begin();
  w.field("error", message);
  w.end();
  res.status = status;
  res.content_type = kJson;
  res.body = w.str();
  res.body += '\n';
}

// Equal strings, in time that depends on the length of `secret` only (never on where the
// first difference is).
bool constant_time_equal(std::string_view given, std::string_view secret) noexcept {
  volatile uint8_t diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const uint8_t g = i < given.size() ? static_cast<uint8_t>(given[i]) : 0;
    diff = static_cast<uint8_t>(diff | (g ^ static_cast<uint8_t>(secret[i])));
  }
  return diff == 0;
}

// Splits "/api/pools/{pool}/backends/{id}" into its decoded parts.
bool split_backend_path(std::string_view path, std::string& pool, std::string& id) {
  constexpr std::string_view kPrefix = "/api/pools/";
  constexpr std::string_view kMiddle = "/backends/";
  std::string_view rest = path.substr(kPrefix.size());
  const size_t mid = rest.find(kMiddle);
  if (mid == std::string_view::npos || mid == 0) return false;
  std::string_view id_raw = rest.substr(mid + kMiddle.size());
  if (id_raw.empty() || id_raw.find('/') != std::string_view::npos) return false;
  pool = path_decode(rest.substr(0, mid));
  id = path_decode(id_raw);
  return true;
}

// The index of backend `id` in `p`, or kNoBackend.
core::BackendIndex find_backend(const proxy::Pool& p, std::string_view id) noexcept {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.backend(static_cast<core::BackendIndex>(i)).id() == id) {
      return static_cast<core::BackendIndex>(i);
    }
  }
  return core::kNoBackend;
}

// The body of GET (and of a successful PUT): the backend's operator state and what follows.
void backend_state_view(const proxy::Pool& p, core::BackendIndex i, const AdminSetting& s,
                        AdminResponse& res) {
  const auto& b = p.backend(i);
  util::JsonWriter w;
  w.begin();
  w.field("pool", p.name());
  w.field("id", b.id());
  w.field("address", b.addr_text());
  w.field("state", admin_state_name(b.admin_state()));
  w.field("weight", uint64_t{p.set()[i].weight});
  w.field("weight_override", s.weight.has_value());
  // A stored override left out because the pool could not be built with it (apply_weights).
  w.field("weight_override_skipped", s.weight.has_value() && *s.weight != p.set()[i].weight);
  w.field("health", health_name(b.health()));
  w.field("usable", b.usable());
  w.field("in_flight", uint64_t{b.in_flight.load()});
  w.end();
  res.status = 200;
  res.content_type = kJson;
  res.body = w.str();
  res.body += '\n';
}

}  // namespace

bool Admin::authorize(std::string_view authorization, AdminResponse& res) {
  const std::string& token = daemon_.admin_token();
  if (token.empty()) {
    json_error(res, 403, "the admin listener is read-only: set admin.token_file to allow changes");
    return false;
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size() ||
      !http::iequals(authorization.substr(0, kBearer.size()), kBearer)) {
    json_error(res, 401, "a bearer token is required (Authorization: Bearer TOKEN)");
    res.headers = "WWW-Authenticate: Bearer realm=\"rondel\"\r\n";
    return false;
  }
  if (!constant_time_equal(authorization.substr(kBearer.size()), token)) {
    json_error(res, 403, "wrong token");
    return false;
  }
  return true;
}

void Admin::serve_backend(const AdminRequest& req, std::string_view path, AdminResponse& res) {
  std::string pool_name, id;
  if (!split_backend_path(path, pool_name, id)) {
    json_error(res, 404, "not found: use /api/pools/{pool}/backends/{id}");
    return;
  }
  const bool read = req.method == "GET" || req.method == "HEAD";
  if (!read && req.method != "PUT") {
    json_error(res, 405, "method not allowed: GET, HEAD or PUT");
    res.headers = kAllow;
    return;
  }
  if (!read && !authorize(req.authorization, res)) return;
  const proxy::Pool* p = daemon_.snapshot()->find_pool(pool_name);
  if (p == nullptr) {
    json_error(res, 404, "no pool named \"" + pool_name + "\"");
    return;
  }
  const core::BackendIndex i = find_backend(*p, id);
  if (i == core::kNoBackend) {
    json_error(res, 404, "pool \"" + pool_name + "\" has no backend \"" + id + "\"");
    return;
  }
  if (read) {
    backend_state_view(*p, i, daemon_.admin_states().get(pool_name, id), res);
    return;
  }
  put_backend(req, pool_name, id, res);
}

// PUT: {"state": "ready" | "drain" | "maint", "weight": N}, either or both; "weight": null
// goes back to the configured weight.
void Admin::put_backend(const AdminRequest& req, const std::string& pool, const std::string& id,
                        AdminResponse& res) {
  auto obj = parse_json_object(req.body);
  if (!obj) {
    json_error(res, 400, "bad JSON: " + obj.error().message);
    return;
  }
  AdminSetting s = daemon_.admin_states().get(pool, id);
  for (const auto& [name, v] : *obj) {
    if (name == "state") {
      if (!json_admin_state(v, s.state)) {
        json_error(res, 400, "\"state\" must be \"ready\", \"drain\" or \"maint\"");
        return;
      }
    } else if (name == "weight") {
      if (!json_admin_weight(v, s.weight)) {
        json_error(res, 400, "\"weight\" must be an integer 0..65535 or null");
        return;
      }
    } else {
      json_error(res, 400, "unknown field \"" + std::string(name) +
                               "\" (expected \"state\", \"weight\")");
      return;
    }
  }
  if (obj->empty()) {
    json_error(res, 400, "nothing to change: give \"state\" and/or \"weight\"");
    return;
  }
  const Daemon::AdminResult done = daemon_.set_backend_admin(pool, id, s);
  if (done.outcome == Daemon::AdminOutcome::kRejected) {
    json_error(res, 409, "rejected, nothing changed: " + done.error);
    return;
  }
  if (done.outcome == Daemon::AdminOutcome::kNotSaved) {
    json_error(res, 500, "the state file cannot be written, nothing changed: " + done.error);
    return;
  }
  // A weight change published a new snapshot: look the backend up again.
  const proxy::Pool* p = daemon_.snapshot()->find_pool(pool);
  const core::BackendIndex i = p != nullptr ? find_backend(*p, id) : core::kNoBackend;
  if (i == core::kNoBackend) {
    json_error(res, 500, "the backend is gone");
    return;
  }
  backend_state_view(*p, i, s, res);
}

}  // namespace rondel::server
