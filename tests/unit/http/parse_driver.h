// Test helper: drives a parser the way a session does and copies what it reports.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rondel/http/parser.h"

namespace rondel::http::test {

struct Parsed {
  bool head_seen = false;
  bool ended = false;
  bool failed = false;
  uint16_t status = 0;           // error status
  std::string reason;            // error reason
  size_t consumed = 0;           // bytes consumed up to kMessageEnd / kError / end of input
  std::string method;
  std::string target;
  std::string host;
  std::vector<std::pair<std::string, std::string>> headers;
  Framing framing = Framing::kNone;
  uint64_t content_length = 0;
  bool keep_alive = false;
  bool expect_continue = false;
  bool is_head = false;
  bool idempotent = false;
  int version_minor = -1;
  uint16_t resp_status = 0;
  std::string resp_reason;
  std::string body;
  int body_events = 0;
};

inline void copy_head(const RequestHead& h, Parsed& out) {
  out.method = h.method;
  out.target = h.target;
  out.host = h.host;
  for (const Header& f : h.headers) out.headers.emplace_back(f.name, f.value);
  out.framing = h.framing;
  out.content_length = h.content_length;
  out.keep_alive = h.keep_alive;
  out.expect_continue = h.expect_continue;
  out.is_head = h.is_head;
  out.idempotent = h.idempotent;
  out.version_minor = h.version_minor;
}

inline void copy_head(const ResponseHead& h, Parsed& out) {
  out.resp_status = h.status;
  out.resp_reason = h.reason;
  for (const Header& f : h.headers) out.headers.emplace_back(f.name, f.value);
  out.framing = h.framing;
  out.content_length = h.content_length;
  out.keep_alive = h.keep_alive;
  out.version_minor = h.version_minor;
}

// Feeds wire to the parser in pieces cut at `cuts` (sorted offsets), stopping at the first
// kMessageEnd or kError. After kHead/kBody it feeds the rest, even when nothing is left.
template <class Parser>
Parsed drive(Parser& parser, std::string_view wire, const std::vector<size_t>& cuts = {}) {
  Parsed out;
  std::vector<size_t> bounds = cuts;
  bounds.push_back(wire.size());
  size_t start = 0;
  for (size_t bound : bounds) {
    if (bound < start) continue;
    size_t off = start;
    for (;;) {
      Step s = parser.feed(wire.data() + off, bound - off);
      off += s.consumed;
      if (s.event == Event::kNeedMore) break;
      if (s.event == Event::kHead) {
        out.head_seen = true;
        copy_head(parser.head(), out);
      } else if (s.event == Event::kBody) {
        out.body.append(s.body);
        ++out.body_events;
      } else if (s.event == Event::kMessageEnd) {
        out.ended = true;
        out.consumed = off;
        return out;
      } else {
        out.failed = true;
        out.status = parser.error().status;
        out.reason = parser.error().reason;
        out.consumed = off;
        return out;
      }
    }
    start = bound;
  }
  out.consumed = wire.size();
  return out;
}

inline Parsed parse_request(std::string_view wire, const Limits& limits = {},
                            const std::vector<size_t>& cuts = {}) {
  RequestParser parser(limits);
  return drive(parser, wire, cuts);
}

}  // namespace rondel::http::test
