// Feeds an HTTP parser the way a session does: bytes arrive in pieces (cut at the given
// offsets), unconsumed bytes are fed again with the next piece, and after kHead/kBody the parser
// is fed again even when nothing is left. Records a Trace and checks the feed() contract.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "rondel/http/parser.h"

namespace rondel::fuzz {

// What a parser reported for one input, in order: comparable across different split points.
struct Trace {
  std::string events;  // one letter per event: H head, B body, E end, X error
  std::string heads;   // a rendering of every head seen
  std::string body;    // body bytes of every message, concatenated
  uint16_t error_status = 0;
  std::string error_reason;
  size_t consumed = 0;  // input bytes consumed up to the last event
  bool operator==(const Trace&) const = default;
};

std::string render(const http::RequestHead& h);
std::string render(const http::ResponseHead& h);

// Checks the head's framing against its own header list (the invariants a forwarder relies on).
void check_head(const http::RequestHead& h);
void check_head(const http::ResponseHead& h, bool request_was_head);

// Builds sorted cut offsets in (0, size) from a seed: none, one, or many (every byte).
inline std::vector<size_t> make_cuts(uint32_t seed, size_t size) {
  std::vector<size_t> cuts;
  if (size < 2) return cuts;
  switch (seed % 4) {
    case 0:
      break;
    case 1:
      cuts.push_back(1 + (seed >> 2) % (size - 1));
      break;
    case 2:
      for (size_t i = 1; i < size; ++i) cuts.push_back(i);
      break;
    default: {
      uint32_t x = seed | 1;
      for (size_t at = 0;;) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        at += 1 + x % 16;
        if (at >= size) break;
        cuts.push_back(at);
      }
    }
  }
  return cuts;
}

// Drives `parser` over wire. Hooks: on_head(parser) -> void; begin_next(parser, trace) -> bool
// (false stops after a message end); at_eof(parser, trace) runs once the input is exhausted.
template <class Parser, class OnHead, class Next, class AtEof>
Trace drive(Parser& parser, std::string_view wire, const std::vector<size_t>& cuts,
            OnHead on_head, Next begin_next, AtEof at_eof, size_t max_messages = 8) {
  Trace t;
  std::vector<size_t> bounds = cuts;
  bounds.push_back(wire.size());
  size_t off = 0;
  size_t messages = 0;
  bool in_message = false;
  uint64_t body_in_message = 0;
  for (size_t avail_end : bounds) {
    for (;;) {
      const size_t avail = avail_end - off;
      http::Step s = parser.feed(avail == 0 ? nullptr : wire.data() + off, avail);
      FUZZ_CHECK(s.consumed <= avail);
      off += s.consumed;
      switch (s.event) {
        case http::Event::kNeedMore:
          FUZZ_CHECK(off == avail_end);  // "all bytes consumed"
          break;
        case http::Event::kHead:
          FUZZ_CHECK(!in_message);
          in_message = true;
          body_in_message = 0;
          t.events += 'H';
          on_head(parser, t);
          continue;
        case http::Event::kBody:
          FUZZ_CHECK(in_message && !s.body.empty());
          // The view lies inside the bytes just fed, right before the new offset.
          FUZZ_CHECK(s.body.data() >= wire.data() && s.body.data() + s.body.size() <= wire.data() + off);
          if (t.events.empty() || t.events.back() != 'B') t.events += 'B';
          t.body.append(s.body);
          body_in_message += s.body.size();
          if (parser.head().framing == http::Framing::kLength) {
            FUZZ_CHECK(body_in_message <= parser.head().content_length);
          }
          continue;
        case http::Event::kMessageEnd:
          FUZZ_CHECK(in_message);
          if (parser.head().framing == http::Framing::kLength) {
            FUZZ_CHECK(body_in_message == parser.head().content_length);
          }
          if (parser.head().framing == http::Framing::kNone) FUZZ_CHECK(body_in_message == 0);
          in_message = false;
          t.events += 'E';
          t.body += '|';
          t.consumed = off;
          if (++messages >= max_messages || !begin_next(parser, t)) return t;
          continue;
        case http::Event::kError:
          t.events += 'X';
          t.error_status = parser.error().status;
          t.error_reason = parser.error().reason;
          FUZZ_CHECK(!t.error_reason.empty());
          // A second feed after an error must keep reporting it without consuming anything.
          {
            http::Step again = parser.feed(wire.data(), wire.size());
            FUZZ_CHECK(again.event == http::Event::kError && again.consumed == 0);
          }
          return t;
      }
      break;  // kNeedMore: wait for the next piece
    }
  }
  at_eof(parser, t);
  return t;
}

}  // namespace rondel::fuzz
