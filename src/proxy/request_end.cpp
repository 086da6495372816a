#include "rondel/proxy/request_end.h"

#include <uv.h>

#include "rondel/proxy/exchange.h"
#include "rondel/proxy/pool.h"
#include "rondel/tls/tls_transport.h"

namespace rondel::proxy {

void record_request_end(Worker& w, const ExchangeState& st, const http::RequestHead* head,
                        const ClientSide& c, Outcome outcome, bool with_metrics) noexcept {
  const uint64_t duration_us = (uv_hrtime() - st.start_ns) / 1000;
  if (with_metrics && st.pool != nullptr && w.on_exchange != nullptr) {
    ExchangeRecord rec;
    rec.pool = st.pool;
    rec.backend = st.backend;
    rec.owner = st.owner;
    rec.status = st.status;
    rec.hops = st.hops;
    rec.duration_us = duration_us;
    rec.bytes_in = c.bytes_in;
    rec.bytes_out = c.bytes_out;
    rec.key = st.key;
    rec.hash = st.hash;
    rec.keyed = st.keyed;
    rec.reason = st.reason;
    rec.body_key = st.body_key;
    rec.key_offset = st.key_offset;
    rec.decision_us = st.decision_ns / 1000;
    w.on_exchange(w.on_exchange_ctx, rec);
  }
  LogSink& sink = w.access_log();
  if (!sink.enabled()) return;
  AccessRecord r;
  if (head != nullptr) {
    r.method = head->method;
    r.target = head->target;
  }
  r.client = c.client;
  r.status = st.status;
  r.bytes_in = c.bytes_in;
  r.bytes_out = c.bytes_out;
  if (st.pool != nullptr) r.pool = st.pool->name();
  else if (c.listener_pool != nullptr) r.pool = c.listener_pool->name();
  if (st.backend != core::kNoBackend) r.backend = st.pool->backend(st.backend).id();
  if (st.owner != core::kNoBackend && st.keyed) r.owner = st.pool->backend(st.owner).id();
  r.hops = st.hops;
  r.attempts = st.attempts;
  r.duration_us = duration_us;
  r.outcome = outcome_name(outcome);
  r.worker = w.id();
  r.proto = c.proto;
  r.stream = c.stream;
  if (c.tls != nullptr) {
    tls::TlsTransport::LogFields t = c.tls->log_fields();
    r.tls_version = t.version;
    r.sni = t.sni;
    r.tls_resumed = t.resumed;
  }
  std::string& l = w.log_line();
  format_access(r, sink.format(), l);
  sink.write(l);
}

}  // namespace rondel::proxy
