// Parsers of backend load reports (ORCA endpoint-load-metrics, a plain number header).
#include "rondel/core/reported_load.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace rondel::core {

namespace {

constexpr std::string_view kStatusNames[kReportStatuses] = {
    "ok", "missing", "malformed", "not_finite", "negative", "too_large"};
constexpr size_t kMaxJsonMembers = 64;

bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool valid_name(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// A number token: its status (kOk, kMalformed, kNotFinite) and value.
struct Number {
  ReportStatus status = ReportStatus::kMalformed;
  double value = 0;
};

size_t skip_digits(std::string_view s, size_t i) noexcept {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
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

Number parse_number(std::string_view s) noexcept {
  Number n;
  std::string_view word = s;
  if (!word.empty() && (word.front() == '-' || word.front() == '+')) word.remove_prefix(1);
  if (iequals(word, "nan") || iequals(word, "inf") || iequals(word, "infinity")) {
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
  if (!(v <= kMaxReportedLoad)) {
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
    const std::string_view item = trim(s.substr(0, comma));
    const size_t at = item.find(sep);
    if (at == std::string_view::npos) return {};
    const std::string_view name = trim(item.substr(0, at));
    const Number n = parse_number(trim(item.substr(at + 1)));
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

// A cursor over the JSON subset.
class JsonReader {
 public:
  JsonReader(std::string_view s, std::string_view metric) noexcept : s_(s), metric_(metric) {}

  // Parses the whole text; false when it is not in the subset.
  bool parse() noexcept {
    if (!object({})) return false;
    ws();
    return i_ == s_.size();
  }
  bool have() const noexcept { return have_; }
  const Number& found() const noexcept { return found_; }

 private:
  void ws() noexcept {
    while (i_ < s_.size() && (is_space(s_[i_]) || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) noexcept {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool string(std::string_view& out) noexcept {
    if (!eat('"')) return false;
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (!is_name_char(s_[i_])) return false;  // no escapes, no spaces: names only
      ++i_;
    }
    if (i_ == s_.size()) return false;
    out = s_.substr(start, i_ - start);
    ++i_;
    return !out.empty();
  }
  bool matches(std::string_view parent, std::string_view key) const noexcept {
    if (parent.empty()) return key == metric_;
    return metric_.size() == parent.size() + 1 + key.size() && metric_.starts_with(parent) &&
           metric_[parent.size()] == '.' && metric_.ends_with(key);
  }
  bool duplicate(std::string_view parent, std::string_view key) const noexcept {
    for (size_t k = 0; k < members_; ++k) {
      if (parents_[k] == parent && keys_[k] == key) return true;
    }
    return false;
  }
  bool value(std::string_view parent, std::string_view key) noexcept {
    ws();
    if (i_ < s_.size() && s_[i_] == '{') return parent.empty() && object(key);
    const size_t start = i_;
    while (i_ < s_.size() && (is_name_char(s_[i_]) || s_[i_] == '+')) ++i_;
    const Number n = parse_number(s_.substr(start, i_ - start));
    if (n.status == ReportStatus::kMalformed) return false;
    if (matches(parent, key)) {
      found_ = n;
      have_ = true;
    }
    return true;
  }
  // An object; `parent` is empty at the top level, else the key that holds it.
  bool object(std::string_view parent) noexcept {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      std::string_view key;
      if (!string(key) || !eat(':')) return false;
      if (members_ == kMaxJsonMembers || duplicate(parent, key)) return false;
      parents_[members_] = parent;
      keys_[members_++] = key;
      if (!value(parent, key)) return false;
    } while (eat(','));
    return eat('}');
  }

  std::string_view s_, metric_;
  size_t i_ = 0;
  std::string_view parents_[kMaxJsonMembers];
  std::string_view keys_[kMaxJsonMembers];
  size_t members_ = 0;
  Number found_;
  bool have_ = false;
};

// Strips `word` and at least one space; false when `s` does not start so.
bool strip_prefix(std::string_view& s, std::string_view word) noexcept {
  if (s.size() <= word.size() || s.substr(0, word.size()) != word || !is_space(s[word.size()])) {
    return false;
  }
  s = trim(s.substr(word.size()));
  return true;
}

}  // namespace

std::string_view report_status_name(ReportStatus s) noexcept {
  const auto i = static_cast<size_t>(s);
  return i < kReportStatuses ? kStatusNames[i] : "unknown";
}

ParsedReport parse_orca(std::string_view value, std::string_view metric, uint32_t scale) noexcept {
  if (value.size() > kMaxReportBytes) return {};
  std::string_view s = trim(value);
  if (s.empty()) return {};
  if (strip_prefix(s, "JSON")) {
    JsonReader r(s, metric);
    if (!r.parse()) return {};
    if (!r.have()) return ParsedReport{ReportStatus::kMissing, 0};
    return finish(r.found(), scale);
  }
  if (strip_prefix(s, "TEXT")) return parse_text(s, '=', metric, scale);
  if (s.starts_with("BIN")) return {};  // base64 protobuf: not read
  return parse_text(s, ':', metric, scale);
}

ParsedReport parse_plain_load(std::string_view value, uint32_t scale) noexcept {
  if (value.size() > kMaxReportBytes) return {};
  const std::string_view s = trim(value);
  if (s.empty()) return {};
  return finish(parse_number(s), scale);
}

}  // namespace rondel::core
