// FlatJson: a small strict recursive-descent reader of one object of scalars.
#include "flat_json.h"

#include <cstdint>

namespace rondel::server {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  core::Result<FlatJson> object() {
    FlatJson out;
    skip_ws();
    if (!eat('{')) return error("expected '{'");
    skip_ws();
    if (eat('}')) return finish(std::move(out));
    for (;;) {
      skip_ws();
      std::string name;
      if (peek() != '"') return error("expected a field name");
      if (!string(name)) return error(error_);
      if (out.get(name) != nullptr) return error("duplicate field \"" + name + "\"");
      skip_ws();
      if (!eat(':')) return error("expected ':'");
      skip_ws();
      FlatJson::Value v;
      if (!value(v)) return error(error_);
      out.fields.emplace_back(std::move(name), std::move(v));
      skip_ws();
      if (eat(',')) continue;
      if (eat('}')) return finish(std::move(out));
      return error("expected ',' or '}'");
    }
  }

 private:
  core::Result<FlatJson> finish(FlatJson out) {
    skip_ws();
    if (i_ != s_.size()) return error("unexpected bytes after the object");
    return out;
  }
  core::Error error(const std::string& what) const {
    return core::fail(what + " at " + std::to_string(i_));
  }
  char peek() const noexcept { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) noexcept {
    if (peek() != c || i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  void skip_ws() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(std::string_view word) noexcept {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  bool value(FlatJson::Value& v) {
    const char c = peek();
    if (c == '"') {
      v.kind = FlatJson::Kind::kString;
      return string(v.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = FlatJson::Kind::kNumber;
      return number(v.text);
    }
    if (literal("true") || literal("false")) {
      v.kind = FlatJson::Kind::kBool;
      v.text = c == 't' ? "true" : "false";
      return true;
    }
    if (literal("null")) {
      v.kind = FlatJson::Kind::kNull;
      return true;
    }
    error_ = c == '{' || c == '[' ? "nested values are not accepted" : "expected a value";
    return false;
  }

  bool number(std::string& out) {
    const size_t start = i_;
    eat('-');
    auto digits = [this] {
      size_t n = 0;
      while (peek() >= '0' && peek() <= '9') ++i_, ++n;
      return n;
    };
    if (eat('0')) {
      // a single leading zero
    } else if (digits() == 0) {
      error_ = "expected a digit";
      return false;
    }
    if (eat('.') && digits() == 0) return (error_ = "expected a digit", false);
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (!eat('+')) eat('-');
      if (digits() == 0) return (error_ = "expected a digit", false);
    }
    out.assign(s_.substr(start, i_ - start));
    return true;
  }

  bool string(std::string& out) {
    eat('"');
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return (error_ = "control byte in a string", false);
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': if (!unicode(out)) return false; break;
        default: return (error_ = "bad escape in a string", false);
      }
    }
    error_ = "unterminated string";
    return false;
  }

  bool hex4(uint32_t& cp) noexcept {
    if (i_ + 4 > s_.size()) return false;
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      int d = h >= '0' && h <= '9' ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return false;
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }

  // \uXXXX (with surrogate pairs) as UTF-8.
  bool unicode(std::string& out) {
    uint32_t cp = 0;
    if (!hex4(cp)) return (error_ = "bad \\u escape", false);
    if (cp >= 0xd800 && cp <= 0xdbff) {
      uint32_t lo = 0;
      if (!literal("\\u") || !hex4(lo) || lo < 0xdc00 || lo > 0xdfff) {
        return (error_ = "unpaired surrogate", false);
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return (error_ = "unpaired surrogate", false);
    }
    auto put = [&out](uint32_t b) { out += static_cast<char>(b); };
    if (cp < 0x80) {
      put(cp);
    } else if (cp < 0x800) {
      put(0xc0 | (cp >> 6)), put(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      put(0xe0 | (cp >> 12)), put(0x80 | ((cp >> 6) & 0x3f)), put(0x80 | (cp & 0x3f));
    } else {
      put(0xf0 | (cp >> 18)), put(0x80 | ((cp >> 12) & 0x3f));
      put(0x80 | ((cp >> 6) & 0x3f)), put(0x80 | (cp & 0x3f));
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

const FlatJson::Value* FlatJson::get(std::string_view name) const noexcept {
  for (const auto& [n, v] : fields) {
    if (n == name) return &v;
  }
  return nullptr;
}

core::Result<FlatJson> FlatJson::parse(std::string_view text) { return Reader(text).object(); }

bool flat_json_uint(const FlatJson::Value& v, uint64_t max, uint64_t& out) noexcept {
  if (v.kind != FlatJson::Kind::kNumber || v.text.empty() || v.text.size() > 19) return false;
  uint64_t n = 0;
  for (char c : v.text) {
    if (c < '0' || c > '9') return false;  // no sign, fraction or exponent
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > max) return false;
  out = n;
  return true;
}

}  // namespace rondel::server
