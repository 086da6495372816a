// HeadScanner's word-at-a-time fast path against the byte-at-a-time scanner it replaced: the same
// verdict, at the same offset, with the same status, for every input, limit and split. The edge
// cases are pinned one by one: a special byte at every position of a skipped run, a limit
// reached at every byte, input cut at every offset.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "head_scanner.h"

using rondel::http::HeadScanner;
using rondel::http::ScanResult;

namespace {

// The scanner before the fast path, kept as the oracle.
class ReferenceScanner {
 public:
  void start_head(size_t max_first_line, size_t max_bytes, bool request_line) {
    *this = ReferenceScanner{};
    request_line_ = request_line;
    max_first_line_ = max_first_line;
    max_bytes_ = max_bytes;
  }
  void start_trailers(size_t max_bytes) {
    *this = ReferenceScanner{};
    in_first_line_ = false;
    max_first_line_ = max_bytes;
    max_bytes_ = max_bytes;
  }
  size_t bytes() const { return bytes_; }

  ScanResult scan(const char* data, size_t len) {
    ScanResult r;
    auto fail = [&](size_t i, uint16_t status, std::string_view reason) {
      r.used = i;
      r.failed = true;
      r.status = status;
      r.reason = reason;
      return r;
    };
    for (size_t i = 0; i < len; ++i) {
      auto c = static_cast<unsigned char>(data[i]);
      if (++bytes_ > max_bytes_) return fail(i, 431, "header_too_large");
      if (cr_pending_) {
        if (c != '\n') return fail(i, 400, "bare_cr");
        if (in_first_line_ && request_line_ && prev_space_) return fail(i, 400, "bad_request_line");
        cr_pending_ = false;
        if (line_len_ == 0 && !in_first_line_) {
          r.used = i + 1;
          r.complete = true;
          return r;
        }
        if (line_len_ != 0) in_first_line_ = false;
        line_len_ = 0;
        at_line_start_ = true;
        continue;
      }
      if (c == '\r') {
        cr_pending_ = true;
        continue;
      }
      if (c == '\n') return fail(i, 400, "bare_lf");
      if ((c < 0x20 && c != '\t') || c == 0x7f) return fail(i, 400, "invalid_header");
      if (at_line_start_ && !in_first_line_ && (c == ' ' || c == '\t')) {
        return fail(i, 400, "obs_fold");
      }
      if (in_first_line_ && request_line_) {
        const bool space = c == ' ';
        if (c == '\t' || (space && (prev_space_ || line_len_ == 0))) {
          return fail(i, 400, "bad_request_line");
        }
        prev_space_ = space;
      }
      at_line_start_ = false;
      ++line_len_;
      if (in_first_line_ && line_len_ > max_first_line_) return fail(i, 414, "uri_too_long");
    }
    r.used = len;
    return r;
  }

 private:
  bool in_first_line_ = true;
  bool at_line_start_ = true;
  bool cr_pending_ = false;
  bool request_line_ = false;
  bool prev_space_ = false;
  size_t line_len_ = 0;
  size_t bytes_ = 0;
  size_t max_first_line_ = 0;
  size_t max_bytes_ = 0;
};

enum class Kind { kRequest, kResponse, kTrailers };

struct Setup {
  Kind kind = Kind::kRequest;
  size_t max_first_line = 8192;
  size_t max_bytes = 32768;
};

// What a scanner concluded about a whole input: where it stopped (offset into the input) and why.
struct Outcome {
  size_t at = 0;
  bool complete = false;
  bool failed = false;
  uint16_t status = 0;
  std::string reason;
  size_t bytes = 0;  // bytes() once done

  bool operator==(const Outcome&) const = default;
};

template <class Scanner>
Outcome run(std::string_view in, const Setup& setup, const std::vector<size_t>& cuts) {
  Scanner s;
  if (setup.kind == Kind::kTrailers) {
    s.start_trailers(setup.max_bytes);
  } else {
    s.start_head(setup.max_first_line, setup.max_bytes, setup.kind == Kind::kRequest);
  }
  Outcome out;
  std::vector<size_t> bounds = cuts;
  bounds.push_back(in.size());
  size_t start = 0;
  for (size_t bound : bounds) {
    // Each piece is an exact-size copy, so a read past its end shows under ASan.
    const std::string piece(in.substr(start, bound - start));
    const ScanResult r = s.scan(piece.data(), piece.size());
    out.bytes = s.bytes();
    if (r.complete || r.failed) {
      out.at = start + r.used;
      out.complete = r.complete;
      out.failed = r.failed;
      if (r.failed) {
        out.status = r.status;
        out.reason = r.reason;
      }
      return out;
    }
    REQUIRE(r.used == piece.size());
    start = bound;
  }
  out.at = in.size();
  return out;
}

std::string describe(std::string_view in) {
  std::string out;
  for (char ch : in) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Checks that HeadScanner agrees with the reference on in, fed whole and cut at `cuts`.
void check_agrees(std::string_view in, const Setup& setup, const std::vector<size_t>& cuts = {}) {
  const Outcome expected = run<ReferenceScanner>(in, setup, {});
  const Outcome whole = run<HeadScanner>(in, setup, {});
  INFO("input: " << describe(in));
  INFO("limits: first line " << setup.max_first_line << ", head " << setup.max_bytes);
  CHECK(whole == expected);
  if (!cuts.empty()) {
    CHECK(run<HeadScanner>(in, setup, cuts) == expected);
  }
}

std::vector<size_t> every_offset(size_t size) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < size; ++i) cuts.push_back(i);
  return cuts;
}

// Heads with long runs of ordinary bytes (several words each), SP and HTAB inside values, an
// obs-text byte, and lines of every length modulo 8.
const std::string kRequest =
    "GET /a/rather/long/path/segment?with=query&and=more HTTP/1.1\r\n"
    "Host: example.com:8080\r\n"
    "X-Long: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\r\n"
    "X-Tab: a\tb c \xe9t\xe9\r\n"
    "A: b\r\n"
    "Accept: */*\r\n\r\n";
const std::string kResponse =
    "HTTP/1.1 200 Some Reason  Phrase\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "X-Long: wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\r\n"
    "B:\r\n\r\n";
const std::string kTrailers =
    "T1: tttttttttttttttttttttttttttttttttt\r\n"
    "Trailer-Two: value value\t\r\n\r\n";

const unsigned char kSpecialBytes[] = {0x00, 0x01, '\t', 0x0b, '\r', '\n', ' ', 0x1f,
                                       0x7f, 0x80, 0xff, 'x', ':'};

struct Base {
  Kind kind;
  const std::string* wire;
};
const Base kBases[] = {
    {Kind::kRequest, &kRequest}, {Kind::kResponse, &kResponse}, {Kind::kTrailers, &kTrailers}};

}  // namespace

TEST_CASE("scanner: the heads used here are accepted") {
  for (const Base& b : kBases) {
    const Outcome o = run<HeadScanner>(*b.wire, Setup{b.kind}, {});
    CHECK(o.complete);
    CHECK(o.at == b.wire->size());
  }
}

TEST_CASE("scanner: a special byte replacing, or inserted at, every position") {
  for (const Base& b : kBases) {
    const Setup setup{b.kind};
    const std::string& base = *b.wire;
    for (size_t pos = 0; pos < base.size(); ++pos) {
      for (unsigned char c : kSpecialBytes) {
        std::string replaced = base;
        replaced[pos] = static_cast<char>(c);
        std::string inserted = base;
        inserted.insert(pos, 1, static_cast<char>(c));
        // Byte-at-a-time feeding takes the fast path out of play; one cut right before the
        // special byte makes a run end exactly at a piece boundary.
        check_agrees(replaced, setup, every_offset(replaced.size()));
        check_agrees(replaced, setup, {pos});
        check_agrees(inserted, setup, {pos});
        check_agrees(inserted, setup, {pos + 1});
      }
    }
  }
}

TEST_CASE("scanner: a control byte or bare CR at every position of a long value") {
  // Runs of every length from 0 to 40, so the special byte falls at each offset within a word
  // and the run ends at each offset before the CR.
  for (size_t run_len = 0; run_len <= 40; ++run_len) {
    for (size_t pos = 0; pos <= run_len; ++pos) {
      for (unsigned char c : {'\x01', '\x7f', '\r', '\n', '\0', '\t'}) {
        std::string value(run_len, 'v');
        if (pos < run_len) value[pos] = static_cast<char>(c);
        const std::string wire = "GET / HTTP/1.1\r\nHost: a\r\nX: " + value + "\r\n\r\n";
        check_agrees(wire, Setup{Kind::kRequest});
        const Outcome o = run<HeadScanner>(wire, Setup{Kind::kRequest}, {});
        if (pos < run_len && c != '\t') {
          CHECK(o.failed);
          CHECK(o.at == 28 + pos + (c == '\r' ? 1 : 0));  // a bare CR fails at the next byte
        } else {
          CHECK(o.complete);
        }
      }
    }
  }
}

TEST_CASE("scanner: the request-line single-space rule inside long runs") {
  const std::string target = "/" + std::string(30, 'p');
  const std::string lines[] = {
      "GET " + target + " HTTP/1.1", "GET  " + target + " HTTP/1.1",
      "GET " + target + "  HTTP/1.1", "GET " + target + " HTTP/1.1 ",
      " GET " + target + " HTTP/1.1", "GET\t" + target + " HTTP/1.1",
      "GET " + target + "\tHTTP/1.1", "GET " + target.substr(0, 9) + " " + target + " HTTP/1.1",
  };
  for (const std::string& line : lines) {
    const std::string wire = line + "\r\nHost: a\r\n\r\n";
    check_agrees(wire, Setup{Kind::kRequest}, every_offset(wire.size()));
    const Outcome o = run<HeadScanner>(wire, Setup{Kind::kRequest}, {});
    CHECK(o.complete == (&line == &lines[0] || &line == &lines[7]));
  }
}

TEST_CASE("scanner: head and first-line limits reached at every byte") {
  for (const Base& b : kBases) {
    const std::string& wire = *b.wire;
    const size_t first_line = wire.find('\r');
    for (size_t max_bytes = 1; max_bytes <= wire.size() + 1; ++max_bytes) {
      check_agrees(wire, Setup{b.kind, 8192, max_bytes}, every_offset(wire.size()));
      const Outcome o = run<HeadScanner>(wire, Setup{b.kind, 8192, max_bytes}, {});
      if (max_bytes < wire.size()) {
        CHECK(o.status == 431);
        CHECK(o.at == max_bytes);  // the first byte beyond the limit
      } else {
        CHECK(o.complete);
      }
    }
    if (b.kind == Kind::kTrailers) continue;
    for (size_t max_line = 1; max_line <= first_line + 1; ++max_line) {
      check_agrees(wire, Setup{b.kind, max_line, 32768}, every_offset(wire.size()));
      // Both limits at once: whichever byte comes first decides.
      for (size_t max_bytes = max_line; max_bytes <= max_line + 2; ++max_bytes) {
        check_agrees(wire, Setup{b.kind, max_line, max_bytes});
      }
      const Outcome o = run<HeadScanner>(wire, Setup{b.kind, max_line, 32768}, {});
      if (max_line < first_line) {
        CHECK(o.status == 414);
        CHECK(o.at == max_line);
      } else {
        CHECK(o.complete);
      }
    }
  }
}

TEST_CASE("scanner: empty lines before the first line, and an empty head") {
  for (const std::string& wire :
       {std::string("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), std::string("\r\n"),
        std::string("\r\n\r\n"), std::string("\r\r\n"), std::string("\n")}) {
    for (Kind kind : {Kind::kRequest, Kind::kResponse, Kind::kTrailers}) {
      check_agrees(wire, Setup{kind}, every_offset(wire.size()));
    }
  }
}

TEST_CASE("property: random heads, limits and splits agree with the reference") {
  const char alphabet[] = {'a', 'Z', '0', ' ', ' ', '\t', ':', '/', '\r', '\n', '\r', '\n',
                           '\x01', '\x7f', '\x80', '\xff', 'x', 'x', 'x', 'x'};
  std::mt19937 rng(20240612);
  for (int round = 0; round < 20000; ++round) {
    const Base& b = kBases[rng() % 3];
    std::string wire = *b.wire;
    const int edits = static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % wire.size();
      const char c = alphabet[rng() % sizeof(alphabet)];
      switch (rng() % 3) {
        case 0: wire[at] = c; break;
        case 1: wire.insert(wire.begin() + static_cast<long>(at), c); break;
        default: wire.erase(at, 1); break;
      }
    }
    Setup setup{b.kind};
    if (rng() % 2 == 0) {
      setup.max_first_line = rng() % 80 + 1;
      setup.max_bytes = rng() % 200 + 1;
    }
    std::vector<size_t> cuts;
    for (size_t at = 0;;) {
      at += rng() % 20 + 1;
      if (at >= wire.size()) break;
      cuts.push_back(at);
    }
    INFO("round " << round);
    check_agrees(wire, setup, cuts);
  }
}
