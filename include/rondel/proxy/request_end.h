// The end of one client request, written once whatever the protocol: the access-log line and
// the metrics record (Worker::on_exchange), both from the request's one clock
// (ExchangeState::start_ns). Exchange::finish calls it for every exchange; a codec calls it for
// a request it refuses before any exchange runs. A codec adds only its own fields (ClientSide).
// Loop thread only.
#pragma once

#include <cstdint>
#include <string_view>

#include "rondel/http/message.h"
#include "rondel/proxy/exchange_rules.h"
#include "rondel/proxy/worker.h"

namespace rondel::tls {
class TlsTransport;
}

namespace rondel::proxy {

enum class Outcome : uint8_t;

// What the codec knows of a request's client side.
struct ClientSide {
  std::string_view client;                // the client's address as text
  uint64_t bytes_in = 0, bytes_out = 0;   // bytes from and to the client for this request
  std::string_view proto;                 // "h2" on HTTP/2, empty on HTTP/1 (left out)
  uint64_t stream = 0;                    // the HTTP/2 stream id (0: left out)
  const tls::TlsTransport* tls = nullptr; // the TLS fields' source (null: plain)
  const Pool* listener_pool = nullptr;    // named when the request reached no exchange's pool
};

// Writes the request's access-log line (when the access log is on) and, for a request that ran
// on a pool (`with_metrics` and st.pool set), hands the metrics record to Worker::on_exchange.
// `head` is null for a request refused before its head was whole ("-" method and target).
// No allocation once the worker's log line has grown to the longest line.
void record_request_end(Worker& w, const ExchangeState& st, const http::RequestHead* head,
                        const ClientSide& c, Outcome outcome, bool with_metrics) noexcept;

}  // namespace rondel::proxy
