// Unit tests of the Exchange state machine's decisions, no sockets: when a failed attempt is
// retried (on the same backend after a stale keep-alive connection, or on the next backend),
// and which backend an exchange's end counts on.
#include <doctest/doctest.h>

#include <atomic>

#include "rondel/proxy/exchange_rules.h"

using namespace rondel::proxy;
using rondel::http::Framing;
using rondel::http::RequestHead;

namespace {

RequestHead get_head() {
  RequestHead h;
  h.method = "GET";
  h.idempotent = true;
  h.framing = Framing::kNone;
  return h;
}

RequestHead post_head() {
  RequestHead h;
  h.method = "POST";
  h.idempotent = false;
  h.framing = Framing::kLength;
  h.content_length = 10;
  return h;
}

// An exchange whose first attempt just failed after its request was sent whole.
ExchangeState sent_get() {
  ExchangeState ex;
  ex.attempts = 1;
  ex.request = RequestState::kDone;
  ex.req_bytes_sent = true;
  return ex;
}

}  // namespace

TEST_CASE("a reused connection that breaks before any response byte is stale: same backend, once") {
  ExchangeState ex = sent_get();
  RequestHead head = get_head();
  AttemptEnd end = classify_failure(ex, head, AttemptEnd::kFailed, /*reused=*/true);
  CHECK(end == AttemptEnd::kStale);
  CHECK(after_failure(ex, head, end, /*retries=*/0) == AfterFailure::kSameBackend);
  // Only once per exchange.
  ex.stale_retried = true;
  ex.attempts = 2;
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kFailed);
  // The stale retry does not use the retry budget: one retry is still left with retries: 1.
  CHECK(after_failure(ex, head, AttemptEnd::kFailed, 1) == AfterFailure::kNextBackend);
  CHECK(after_failure(ex, head, AttemptEnd::kFailed, 0) == AfterFailure::kGiveUp);
}

TEST_CASE("not stale: a fresh connection, a response byte seen, a timeout, a connect failure") {
  RequestHead head = get_head();
  ExchangeState ex = sent_get();
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, /*reused=*/false) == AttemptEnd::kFailed);
  CHECK(classify_failure(ex, head, AttemptEnd::kTimedOut, true) == AttemptEnd::kTimedOut);
  CHECK(classify_failure(ex, head, AttemptEnd::kConnectFailed, true) ==
        AttemptEnd::kConnectFailed);
  ex.resp_bytes_seen = true;
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kFailed);
}

TEST_CASE("a POST is stale-retried only while the backend took none of it") {
  RequestHead head = post_head();
  ExchangeState ex;
  ex.attempts = 1;
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kStale);
  ex.req_bytes_sent = true;  // the socket took a byte: it may have been processed
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kFailed);
  CHECK(after_failure(ex, head, AttemptEnd::kFailed, 5) == AfterFailure::kGiveUp);
  ex.req_bytes_sent = false;
  ex.body_pushed = true;  // body bytes were consumed from the client: they cannot be sent again
  CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kFailed);
  CHECK(after_failure(ex, head, AttemptEnd::kFailed, 5) == AfterFailure::kGiveUp);
}

TEST_CASE("retries: budget, and never once the client saw part of a response") {
  RequestHead head = get_head();
  ExchangeState ex = sent_get();
  CHECK(after_failure(ex, head, AttemptEnd::kConnectFailed, 2) == AfterFailure::kNextBackend);
  ex.attempts = 3;
  CHECK(after_failure(ex, head, AttemptEnd::kConnectFailed, 2) == AfterFailure::kGiveUp);
  ex.attempts = 1;
  for (ResponseState r : {ResponseState::kInterim, ResponseState::kStreaming,
                          ResponseState::kComplete, ResponseState::kLocal}) {
    ex.response = r;
    CHECK(after_failure(ex, head, AttemptEnd::kFailed, 2) == AfterFailure::kGiveUp);
    CHECK(classify_failure(ex, head, AttemptEnd::kFailed, true) == AttemptEnd::kFailed);
  }
}

TEST_CASE("response states: what the client has seen") {
  ExchangeState ex;
  CHECK_FALSE(ex.resp_started());
  CHECK_FALSE(ex.resp_head_seen());
  ex.response = ResponseState::kInterim;  // a 1xx went out: a final status can still follow
  CHECK_FALSE(ex.resp_started());
  ex.response = ResponseState::kStreaming;
  CHECK(ex.resp_started());
  CHECK(ex.resp_head_seen());
  CHECK_FALSE(ex.resp_complete());
  ex.response = ResponseState::kComplete;
  CHECK(ex.resp_complete());
  ex.response = ResponseState::kLocal;  // rondel's own answer: not a backend head
  CHECK(ex.resp_started());
  CHECK_FALSE(ex.resp_head_seen());
}

TEST_CASE("an exchange's end counts on its backend only for a live attempt or its response") {
  std::atomic<uint32_t> backend{0};
  std::atomic<uint64_t> pool{0};
  ExchangeState ex;
  ex.slot = InFlightSlot::take(backend, pool);
  CHECK(counts_on_backend(ex));  // e.g. the client left mid-exchange
  ex.slot.release();             // the attempt failed (its failure counted then)
  CHECK_FALSE(counts_on_backend(ex));  // rondel's 502/503/504 is not the backend's response
  ex.response = ResponseState::kStreaming;  // it failed after its head went out
  CHECK(counts_on_backend(ex));
}
