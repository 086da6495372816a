// ExchangeState and its rules: the state of one request and its response as the proxy sees them,
// whatever the client protocol (the request and response states, the current attempt on a
// backend and its in-flight slot), and the pure decisions taken on it (retry, stale connection,
// which backend counts the end). The Exchange class (exchange.h) drives it.
#pragma once

#include <cstdint>
#include <string_view>

#include "rondel/core/backend_set.h"
#include "rondel/http/message.h"
#include "rondel/proxy/inflight_slot.h"

namespace rondel::proxy {

class BackendLink;
class Pool;

// The request side of an exchange: how much of the client's request was read and forwarded.
enum class RequestState : uint8_t {
  kForwarding,  // head parsed: the body (if any) is read from the client and queued for the backend
  kDone,        // the whole request was read and queued (the backend may not have taken it all)
};

// The response side of an exchange, as the client sees it. Only kWaiting allows a retry; only
// kWaiting and kInterim allow rondel to answer with its own status instead.
enum class ResponseState : uint8_t {
  kWaiting,    // nothing sent to the client yet, no final response head from the backend
  kInterim,    // a 1xx went to the client, no final head yet
  kStreaming,  // the backend's final head went to the client; the body is being forwarded
  kComplete,   // the backend's response is whole (perhaps not yet flushed to the client)
  kLocal,      // rondel's own status (4xx, 5xx) went to the client instead of a backend's
};

// How one attempt on a backend ended: picks the backend counter and the passive-health note.
enum class AttemptEnd : uint8_t {
  kServed,         // the exchange ended on this attempt (response forwarded, or client left)
  kConnectFailed,  // no connection: socket error, refused or connect timeout
  kTimedOut,       // no progress within backend_io_timeout or response_header_timeout
  kFailed,         // the connection broke or the response was malformed or truncated
  kStale,          // a reused idle connection the backend had closed: not the backend's fault
};

// What follows a failed attempt.
enum class AfterFailure : uint8_t {
  kGiveUp,       // answer the client: a status while none started, else close the connection
  kSameBackend,  // once, on a fresh connection to the same backend (a stale connection)
  kNextBackend,  // a retry: the route is walked again with the failed backend excluded
};

// One request and its response: the state of an Exchange, reset by value (`st = ExchangeState{}`)
// when the exchange starts, so nothing of the previous request (its pool, backend, flags)
// survives. The decisions below are pure functions of it (unit-tested).
struct ExchangeState {
  const Pool* pool = nullptr;
  InFlightSlot slot;          // the current attempt's place in the in-flight counts
  uint32_t cost = 1;          // what the request counts for under `load_by: prompt_size`
  BackendLink* conn = nullptr;
  core::BackendIndex backend = core::kNoBackend;
  core::BackendIndex owner = core::kNoBackend;
  uint64_t hash = 0;
  std::string_view key;       // the hash key (a view into the request head); empty if none
  // A key of a group (llm_prefix: a tenant's conversation; RouteKey::grouped).
  bool grouped = false;
  uint64_t group = 0;
  std::string_view group_key;
  // A body key (llm_prefix): 1 + its BodyKeySource, 0 for none; the body bytes read and the time
  // taken (from start_ns) when it was decided.
  uint8_t body_key = 0;
  uint64_t key_offset = 0;
  uint64_t decision_ns = 0;
  uint64_t start_ns = 0;
  uint32_t attempts = 0;
  uint16_t hops = 0;          // backends passed over (full or excluded), all attempts
  uint16_t status = 0;
  uint8_t reason = 0;         // core::RouteReason of the last keyed pick
  uint8_t subset = UINT8_MAX; // Pool::select_subset of the request (UINT8_MAX: the whole pool)
  RequestState request = RequestState::kForwarding;
  ResponseState response = ResponseState::kWaiting;
  bool keyed = false;         // the request had its hash key
  bool req_bytes_sent = false;  // the backend socket accepted some request byte (this attempt)
  bool body_pushed = false;   // some request body byte was queued for the backend
  bool resp_bytes_seen = false;  // some response byte arrived from the backend (this attempt)
  bool in_interim = false;    // the response parser is inside a 1xx message
  bool stale_retried = false;   // the one retry after a reused connection went stale was used
  bool backend_reusable = true; // the backend connection may go back to the idle pool

  bool req_done() const noexcept { return request == RequestState::kDone; }
  // The backend's final response head arrived (and went to the client).
  bool resp_head_seen() const noexcept {
    return response == ResponseState::kStreaming || response == ResponseState::kComplete;
  }
  // A final response (the backend's or rondel's own) started towards the client.
  bool resp_started() const noexcept {
    return response != ResponseState::kWaiting && response != ResponseState::kInterim;
  }
  bool resp_complete() const noexcept { return response == ResponseState::kComplete; }
};

// Whether the request can be sent again: no response byte went to the client, and either the
// backend took no request byte and no body byte was consumed (the head is rewritten from the
// parsed one), or the request is bodiless, idempotent and whole (RFC 9110 9.2.2).
inline bool request_resendable(const ExchangeState& ex, const http::RequestHead& head) noexcept {
  if (ex.response != ResponseState::kWaiting) return false;
  if (!ex.req_bytes_sent && !ex.body_pushed) return true;
  return head.idempotent && head.framing == http::Framing::kNone && ex.req_done();
}

// The failure `end` seen on a connection that was `reused` from the idle pool: a broken reused
// connection before any response byte, request still re-sendable, is the keep-alive race (the
// backend closed it as it went idle; RFC 9112 9.3.1), reported as kStale once per exchange.
inline AttemptEnd classify_failure(const ExchangeState& ex, const http::RequestHead& head,
                                   AttemptEnd end, bool reused) noexcept {
  if (end == AttemptEnd::kFailed && reused && !ex.resp_bytes_seen && !ex.stale_retried &&
      request_resendable(ex, head)) {
    return AttemptEnd::kStale;
  }
  return end;
}

// What follows a failed attempt that ended as `end`, with `retries` allowed for the pool. A
// stale-connection retry is not counted against `retries`.
inline AfterFailure after_failure(const ExchangeState& ex, const http::RequestHead& head,
                                  AttemptEnd end, uint32_t retries) noexcept {
  if (end == AttemptEnd::kStale) return AfterFailure::kSameBackend;
  uint32_t used = ex.attempts - (ex.stale_retried ? 1 : 0);
  if (request_resendable(ex, head) && used <= retries) return AfterFailure::kNextBackend;
  return AfterFailure::kGiveUp;
}

// Whether the end of the exchange counts as one of its backend's responses: it ended on a live
// attempt, or with that backend's response head. An answer rondel made after the backend failed
// (502, 503, 504) is not (the failure itself was counted when the attempt ended).
inline bool counts_on_backend(const ExchangeState& ex) noexcept {
  return ex.slot.held() || ex.resp_head_seen();
}

}  // namespace rondel::proxy
