// POST /api/route?pool=NAME: how an llm_prefix pool keys a request body, and where a request
// with it would go now. The data path's own code: BodyKey reads the body (with the pool's
// max_buffer and the process's buffer_budget), Router::explain picks.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "admin_json.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/body_key.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/router.h"
#include "rondel/server/admin.h"
#include "rondel/server/daemon.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace {

// A body given whole: the admin's request body as a BodySource.
class WholeBody final : public proxy::BodySource {
 public:
  explicit WholeBody(std::string_view b) noexcept : rest_(b) {}
  proxy::BodyView peek() noexcept override { return {rest_, proxy::BodyState::kEnd}; }
  void consume(size_t n) noexcept override { rest_.remove_prefix(n); }
  bool want_more() noexcept override { return false; }
  proxy::BodyFailure failure() const noexcept override { return {}; }

 private:
  std::string_view rest_;
};

constexpr std::string_view kFormNames[] = {"none", "chat", "anthropic", "responses", "prompt"};

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace

int Admin::api_route_body(std::string_view query, std::string_view request_body,
                          std::string& out) {
  std::string_view pool_name;
  const std::string target = "/?" + std::string(query);
  const auto& snap = daemon_.snapshot();
  const proxy::Pool* p = proxy::find_query_param(target, "pool", pool_name)
                             ? snap->find_pool(url_decode(pool_name))
                             : nullptr;
  util::JsonWriter w;
  if (p == nullptr || p->config().hash_key.kind != config::HashKeyKind::kLlmPrefix) {
    w.begin();
    w.field("error", p == nullptr ? "usage: POST /api/route?pool=NAME with the request body"
                                  : "pool " + p->name() + " does not key on bodies "
                                        "(POST needs hash_key: llm_prefix)");
    w.end();
    out = w.str() + "\n";
    return 400;
  }
  WholeBody whole(request_body);
  proxy::BodyKey key;
  key.begin(p->llm_options(), p->config().llm_prefix.max_buffer, proxy::BodyBudget::limit(),
            &whole);
  key.pump();
  const proxy::BodyKeyResult r = key.result();
  const proxy::LlmKeys k = key.scanner_keys();
  key.end();
  w.begin();
  w.field("pool", p->name());
  w.field("source", proxy::kBodyKeySourceNames[static_cast<size_t>(r.source)]);
  w.field("form", kFormNames[static_cast<size_t>(k.form)]);
  w.field("bytes_read", r.offset);
  w.field("anchor_offset", k.anchor_offset);
  w.field("blocks", uint64_t{k.blocks});
  w.field("tenant", k.has_tenant ? hex(k.tenant) : std::string());
  w.field("conversation", k.has_conversation ? hex(k.conversation) : std::string());
  if (proxy::is_fallback(r.source)) {
    w.field("missing_key", "the request routes by missing_key");
    w.end();
    out = w.str() + "\n";
    return 200;
  }
  proxy::RouteKey rk;
  rk.kind = proxy::RouteKey::Kind::kKey;
  rk.hash = r.hash;
  rk.grouped = r.grouped;
  rk.group = r.tenant;
  const proxy::RouteDecision d = proxy::Router::explain(*p, rk);
  auto id_of = [p](core::BackendIndex b) -> std::string_view {
    return b != core::kNoBackend ? std::string_view(p->backend(b).id()) : std::string_view();
  };
  w.field("hash", hex(r.hash));
  w.field("grouped", r.grouped);
  w.field("replicas", uint64_t{d.replicas});
  w.field("owner", id_of(d.owner));
  w.field("home", id_of(d.home));
  w.field("chosen", id_of(d.backend));
  w.field("decision", proxy::route_reason_name(d.reason));
  w.end();
  out = w.str() + "\n";
  return 200;
}

}  // namespace rondel::server
