// Fakes of an Exchange's client side for the proxy unit tests: a body source, a response sink
// and an owner driven by the test, and a request head (exchange_test.cpp,
// exchange_backend_link_test.cpp).
#pragma once

#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/proxy/exchange.h"

namespace rondel::proxy::test {

namespace http = rondel::http;

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// A body source the test feeds by hand.
struct FakeBody final : BodySource {
  std::deque<std::string> pieces;
  bool ended = false;
  int want_more_calls = 0;
  int peeks_while_waiting = 0;  // peek() calls after a want_more() that returned false
  bool waiting = false;

  BodyView peek() noexcept override {
    if (waiting) ++peeks_while_waiting;
    if (next < pieces.size()) return {pieces[next], BodyState::kMore};
    return {{}, ended ? BodyState::kEnd : BodyState::kMore};
  }
  void consume(size_t n) noexcept override {
    REQUIRE(next < pieces.size());
    REQUIRE(n == pieces[next].size());  // the exchange queues whole pieces
    ++next;  // consumed bytes stay valid (a deque does not move its elements on push_back)
  }
  bool want_more() noexcept override {
    ++want_more_calls;
    waiting = true;
    return false;
  }
  BodyFailure failure() const noexcept override { return {}; }
  size_t next = 0;  // pieces before it were consumed
};

struct FakeSink final : ResponseSink {
  uint16_t head_status = 0, local_status = 0;
  std::string body;
  bool ended = false;
  Interim sink_interim(const http::ResponseHead&) noexcept override { return Interim::kSkipped; }
  void sink_head(const http::ResponseHead& h) noexcept override { head_status = h.status; }
  bool sink_body(std::string_view b) noexcept override {
    body += b;
    return true;
  }
  void sink_end() noexcept override { ended = true; }
  void sink_local(uint16_t status) noexcept override { local_status = status; }
  bool sink_flush() noexcept override { return true; }
  bool sink_busy() const noexcept override { return false; }
};

struct FakeOwner final : ExchangeOwner {
  int done = 0;
  Outcome outcome = Outcome::kOk;
  ExchangeState last;  // a copy of the final state's plain fields
  void on_exchange_done(Exchange& ex, Outcome o) noexcept override {
    ++done;
    outcome = o;
    last.status = ex.state().status;
    last.attempts = ex.state().attempts;
    last.stale_retried = ex.state().stale_retried;
    last.response = ex.state().response;
  }
  ClientSide client_side() noexcept override { return {}; }
};

// A request head with its header fields (kept alive by the struct).
struct Head {
  explicit Head(std::string_view method, size_t content_length = 0) {
    headers.push_back({"Host", "t"});
    if (content_length > 0) {
      length = std::to_string(content_length);
      headers.push_back({"Content-Length", length});
    }
    head.method = method;
    head.target = "/obj/1";
    head.host = "t";
    head.headers = headers;
    head.idempotent = method == "GET";
    head.framing = content_length > 0 ? http::Framing::kLength : http::Framing::kNone;
    head.content_length = content_length;
  }
  std::string length;
  std::vector<http::Header> headers;
  http::RequestHead head;
};


}  // namespace rondel::proxy::test
