// Parsers of backend load reports (ORCA endpoint-load-metrics, a plain number header); the ORCA
// JSON form through Boost.JSON's SAX parser with a handler that keeps the accepted subset.
#include "rondel/proxy/load_report_parser.h"

#include <array>
#include <boost/json/basic_parser_impl.hpp>
#include <charconv>
#include <cmath>
#include <system_error>

#include "rondel/util/ascii.h"

namespace rondel::proxy {

namespace {

using core::ParsedReport;
using core::ReportStatus;
using util::trim_ows;

constexpr size_t kMaxJsonMembers = 64;

bool is_name_char(char c) noexcept {
  return util::is_alnum(c) || c == '_' || c == '.' || c == '-';
}

bool valid_name(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

// A number token: its status (kOk, kMalformed, kNotFinite) and value.
struct Number {
  ReportStatus status = ReportStatus::kMalformed;
  double value = 0;
};

size_t skip_digits(std::string_view s, size_t i) noexcept {
  while (i < s.size() && util::is_digit(s[i])) ++i;
  return i;
}

// Whether `s` is exactly a JSON number: -?digits[.digits][(e|E)[+-]digits].
bool json_number_syntax(std::string_view s) noexcept {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  size_t j = skip_digits(s, i);
  if (j == i) return false;
  i = j;
  if (i < s.size() && s[i] == '.') {
    j = skip_digits(s, i + 1);
    if (j == i + 1) return false;
    i = j;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    j = skip_digits(s, i);
    if (j == i) return false;
    i = j;
  }
  return i == s.size();
}

// Whether `word` (a sign allowed) spells nan, inf or infinity, in any case.
bool non_finite_word(std::string_view word) noexcept {
  if (!word.empty() && (word.front() == '-' || word.front() == '+')) word.remove_prefix(1);
  return util::iequals(word, "nan") || util::iequals(word, "inf") ||
         util::iequals(word, "infinity");
}

Number parse_number(std::string_view s) noexcept {
  Number n;
  if (non_finite_word(s)) {
    n.status = ReportStatus::kNotFinite;
    return n;
  }
  if (!json_number_syntax(s)) return n;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n.value);
  if (ec == std::errc::result_out_of_range || !std::isfinite(n.value)) {
    n.status = ReportStatus::kNotFinite;
  } else if (ec == std::errc{} && ptr == s.data() + s.size()) {
    n.status = ReportStatus::kOk;
  }
  return n;
}

// The report of a found number: sign, scale, cap.
ParsedReport finish(const Number& n, uint32_t scale) noexcept {
  ParsedReport r;
  r.status = n.status;
  if (n.status != ReportStatus::kOk) return r;
  if (n.value < 0) {
    r.status = ReportStatus::kNegative;
    return r;
  }
  const double v = n.value * scale;
  if (!(v <= core::kMaxReportedLoad)) {
    r.status = ReportStatus::kTooLarge;
    return r;
  }
  r.load = static_cast<uint32_t>(std::lround(v));
  return r;
}

// The text forms: items `name<sep>value` separated by commas.
ParsedReport parse_text(std::string_view s, char sep, std::string_view metric,
                        uint32_t scale) noexcept {
  Number found;
  bool have = false;
  while (true) {
    const size_t comma = s.find(',');
    const std::string_view item = trim_ows(s.substr(0, comma));
    const size_t at = item.find(sep);
    if (at == std::string_view::npos) return {};
    const std::string_view name = trim_ows(item.substr(0, at));
    const Number n = parse_number(trim_ows(item.substr(at + 1)));
    if (!valid_name(name) || n.status == ReportStatus::kMalformed) return {};
    if (name == metric) {
      found = n;
      have = true;
    }
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  if (!have) return ParsedReport{ReportStatus::kMissing, 0};
  return finish(found, scale);
}

// Boost.JSON's SAX handler for the subset (see parse_orca): a callback returning false stops the
// parse with an error, which the caller reads as kMalformed. Keys are copied into `names_` (a
// key may arrive in parts), so nothing allocates.
class OrcaJsonHandler {
 public:
  static constexpr size_t max_object_size = kMaxJsonMembers;
  static constexpr size_t max_array_size = 0;
  static constexpr size_t max_key_size = core::kMaxReportBytes;
  static constexpr size_t max_string_size = 0;

  explicit OrcaJsonHandler(std::string_view metric) noexcept : metric_(metric) {}

  bool have() const noexcept { return have_; }
  const Number& found() const noexcept { return found_; }

  bool on_document_begin(boost::json::error_code&) noexcept { return true; }
  bool on_document_end(boost::json::error_code&) noexcept { return true; }
  bool on_object_begin(boost::json::error_code&) noexcept {
    if (depth_ == 1 && key_ != kNoKey && members_[key_].parent == kNoKey) {
      parent_ = key_;  // the value of a top-level key: one level of objects
    } else if (depth_ != 0) {
      return false;
    }
    ++depth_;
    return true;
  }
  bool on_object_end(size_t, boost::json::error_code&) noexcept {
    parent_ = kNoKey;
    --depth_;
    return true;
  }
  bool on_key_part(boost::json::string_view s, size_t, boost::json::error_code&) noexcept {
    return append(s);
  }
  bool on_key(boost::json::string_view s, size_t, boost::json::error_code&) noexcept {
    if (!append(s) || count_ == kMaxJsonMembers) return false;
    members_[count_] = Member{parent_, key_start_, used_ - key_start_};
    key_start_ = used_;
    const std::string_view key = name(count_);
    if (!valid_name(key)) return false;
    for (size_t k = 0; k < count_; ++k) {
      if (members_[k].parent == parent_ && name(k) == key) return false;  // duplicate
    }
    key_ = count_++;
    return true;
  }
  bool on_int64(int64_t, boost::json::string_view s, boost::json::error_code&) noexcept {
    return number(s);
  }
  bool on_uint64(uint64_t, boost::json::string_view s, boost::json::error_code&) noexcept {
    return number(s);
  }
  bool on_double(double, boost::json::string_view s, boost::json::error_code&) noexcept {
    return number(s);
  }
  // Refused: arrays, strings as values, true/false/null, comments (off in the options).
  bool on_array_begin(boost::json::error_code&) noexcept { return false; }
  bool on_array_end(size_t, boost::json::error_code&) noexcept { return false; }
  bool on_string_part(boost::json::string_view, size_t, boost::json::error_code&) noexcept {
    return false;
  }
  bool on_string(boost::json::string_view, size_t, boost::json::error_code&) noexcept {
    return false;
  }
  bool on_number_part(boost::json::string_view, boost::json::error_code&) noexcept {
    return false;  // the whole text is given at once: a number never arrives in parts
  }
  bool on_bool(bool, boost::json::error_code&) noexcept { return false; }
  bool on_null(boost::json::error_code&) noexcept { return false; }
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) noexcept {
    return false;
  }
  bool on_comment(boost::json::string_view, boost::json::error_code&) noexcept { return false; }

 private:
  static constexpr size_t kNoKey = kMaxJsonMembers;
  struct Member {
    size_t parent;  // index of the key holding this member's object, kNoKey at the top level
    size_t at, size;
  };

  std::string_view name(size_t k) const noexcept {
    return {names_.data() + members_[k].at, members_[k].size};
  }
  bool append(std::string_view s) noexcept {
    if (s.size() > names_.size() - used_) return false;
    s.copy(names_.data() + used_, s.size());
    used_ += s.size();
    return true;
  }
  // A number value of key_ (the parser calls this only right after on_key).
  bool number(std::string_view text) noexcept {
    if (depth_ == 0) return false;  // a bare number, not an object
    const Number n = parse_number(text);
    if (n.status == ReportStatus::kMalformed) return false;
    if (matches(key_)) {
      found_ = n;
      have_ = true;
    }
    return true;
  }
  bool matches(size_t k) const noexcept {
    const size_t p = members_[k].parent;
    if (p == kNoKey) return name(k) == metric_;
    const std::string_view parent = name(p), key = name(k);
    return metric_.size() == parent.size() + 1 + key.size() && metric_.starts_with(parent) &&
           metric_[parent.size()] == '.' && metric_.ends_with(key);
  }

  std::string_view metric_;
  std::array<char, core::kMaxReportBytes> names_;
  size_t used_ = 0, key_start_ = 0;
  std::array<Member, kMaxJsonMembers> members_;
  size_t count_ = 0;
  size_t key_ = kNoKey;     // the member whose value comes next
  size_t parent_ = kNoKey;  // the member whose object the parser is in
  int depth_ = 0;
  Number found_;
  bool have_ = false;
};

// Boost.JSON 1.81 reads no nan or inf: `out` becomes `s` with each value-position word that
// spells one (a sign allowed) written as the number 1e999 (with the minus kept), which
// parse_number reads as not finite, as before. Strings are copied as they are (no escapes are
// possible: the caller refused backslashes). Growth is at most 5/3 (a 3-letter word and the
// separator before it become at most 6 characters; a word at the very start, 5 for 3), so twice the
// input always fits.
std::string_view spell_non_finite(std::string_view s,
                                  std::array<char, 2 * core::kMaxReportBytes>& out) noexcept {
  size_t o = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"') in_string = !in_string;
    if (in_string || !(is_name_char(c) || c == '+')) {
      out[o++] = c;
      ++i;
      continue;
    }
    size_t j = i;  // a value token: the characters the old reader took for one
    while (j < s.size() && (is_name_char(s[j]) || s[j] == '+')) ++j;
    std::string_view word = s.substr(i, j - i);
    if (non_finite_word(word)) word = word.front() == '-' ? "-1e999" : "1e999";
    o += word.copy(out.data() + o, word.size());
    i = j;
  }
  return {out.data(), o};
}

// What one parse of the text by Boost.JSON found: whether it is in the subset, and the metric.
struct JsonRead {
  bool ok = false;
  bool have = false;
  Number found;
};

JsonRead read_json(std::string_view s, std::string_view metric) noexcept {
  boost::json::basic_parser<OrcaJsonHandler> p(boost::json::parse_options{}, metric);
  boost::json::error_code ec;
  // write_some stops at the end of the object: text after it is an error too.
  const bool ok = p.write_some(false, s.data(), s.size(), ec) == s.size() && !ec;
  return JsonRead{ok, p.handler().have(), p.handler().found()};
}

ParsedReport parse_json(std::string_view s, std::string_view metric, uint32_t scale) noexcept {
  if (s.find('\\') != std::string_view::npos) return {};
  JsonRead r = read_json(s, metric);
  if (!r.ok) {
    // The common report has no nan or inf: the text is spelled anew only when it failed.
    std::array<char, 2 * core::kMaxReportBytes> buffer;
    const std::string_view spelled = spell_non_finite(s, buffer);
    if (spelled == s) return {};
    r = read_json(spelled, metric);
    if (!r.ok) return {};
  }
  if (!r.have) return ParsedReport{ReportStatus::kMissing, 0};
  return finish(r.found, scale);
}

// Strips `word` and at least one space; false when `s` does not start so.
bool strip_prefix(std::string_view& s, std::string_view word) noexcept {
  if (s.size() <= word.size() || s.substr(0, word.size()) != word ||
      (s[word.size()] != ' ' && s[word.size()] != '\t')) {
    return false;
  }
  s = trim_ows(s.substr(word.size()));
  return true;
}

}  // namespace

ParsedReport parse_orca(std::string_view value, std::string_view metric, uint32_t scale) noexcept {
  if (value.size() > core::kMaxReportBytes) return {};
  std::string_view s = trim_ows(value);
  if (s.empty()) return {};
  if (strip_prefix(s, "JSON")) return parse_json(s, metric, scale);
  if (strip_prefix(s, "TEXT")) return parse_text(s, '=', metric, scale);
  if (s.starts_with("BIN")) return {};  // base64 protobuf: not read
  return parse_text(s, ':', metric, scale);
}

ParsedReport parse_plain_load(std::string_view value, uint32_t scale) noexcept {
  if (value.size() > core::kMaxReportBytes) return {};
  const std::string_view s = trim_ows(value);
  if (s.empty()) return {};
  return finish(parse_number(s), scale);
}

}  // namespace rondel::proxy
