// Exchange, body-key side (hash_key: llm_prefix): the head's explicit key or fallback, else the
// body read through BodyKey until the key is known; then the route, and the body sent from
// BodyKey (the held bytes first, then the client's source).
#include <uv.h>

#include "rondel/core/hash.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/router.h"

namespace rondel::proxy {

void Exchange::start_body_key() noexcept {
  const config::PoolConfig& pc = st_.pool->config();
  const HeadKey hk = check_head(pc.llm_prefix, head());
  if (!hk.read_body) {
    st_.body_key = static_cast<uint8_t>(1 + static_cast<uint8_t>(hk.source));
    st_.decision_ns = uv_hrtime() - st_.start_ns;
    if (hk.source != BodyKeySource::kExplicit) {
      route_by(head_route_key());  // a fallback: missing_key decides
      return;
    }
    RouteKey rk;
    rk.kind = RouteKey::Kind::kKey;
    rk.hash = core::hash64(hk.value);
    rk.key = hk.value;
    route_by(rk);
    return;
  }
  keying_ = true;
  body_key_.begin(st_.pool->llm_options(), pc.llm_prefix.max_buffer, BodyBudget::limit(),
                  rq_.body);
  pump_key();
}

void Exchange::pump_key() noexcept {
  switch (body_key_.pump()) {
    case BodyKey::Step::kWait:
      return;
    case BodyKey::Step::kFailed: {
      keying_ = false;
      const BodyFailure f = rq_.body->failure();
      worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_body_rejected", f.why);
      fail(Failure::refused(f.status));
      return;
    }
    case BodyKey::Step::kDecided:
      break;
  }
  keying_ = false;
  const BodyKeyResult& r = body_key_.result();
  st_.body_key = static_cast<uint8_t>(1 + static_cast<uint8_t>(r.source));
  st_.key_offset = r.offset;
  st_.decision_ns = uv_hrtime() - st_.start_ns;
  rq_.body = &body_key_;  // the held bytes first, then the client's source
  if (is_fallback(r.source)) {
    route_by(head_route_key());
    return;
  }
  RouteKey rk;
  rk.kind = RouteKey::Kind::kKey;
  rk.hash = r.hash;
  rk.key = body_key_.key_text();
  rk.grouped = r.grouped;
  rk.group = r.tenant;
  rk.group_key = body_key_.tenant_text();
  route_by(rk);
}

void Exchange::request_written() noexcept {
  if (rq_.body == &body_key_) body_key_.end();
}

}  // namespace rondel::proxy
