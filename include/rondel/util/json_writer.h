// JsonWriter: the one JSON writer of rondel (admin API, explain views, rondel-sim); std only.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace rondel::util {

// JsonWriter appends JSON to a string it owns: objects (begin/end), arrays
// (begin_array/end_array), "key": value members (field) and array elements (value). Commas are
// placed by the writer; the caller only keeps begin/end pairs balanced. Strings and keys are
// escaped per RFC 8259 (quote, backslash and every control character); they are written as
// bytes, so the caller passes UTF-8. Doubles print with 6 significant digits ("%.6g"), a
// non-finite double prints as null. Integers print exactly. Not thread-safe; allocates only as
// the output grows (reuse a writer with clear() to keep its capacity).
//
// Inside an object, pass a key to begin()/begin_array()/null_field(); inside an array or at the
// top level, call them without one (an empty key means "no key").
class JsonWriter {
 public:
  void begin(std::string_view key = {}) { open(key, '{'); }
  void end() { close('}'); }
  void begin_array(std::string_view key = {}) { open(key, '['); }
  void end_array() { close(']'); }

  // "key": v inside an object.
  template <class T>
  void field(std::string_view key, const T& v) {
    separate();
    append_key(key);
    put(v);
  }
  void null_field(std::string_view key) {
    separate();
    append_key(key);
    out_ += "null";
  }
  // One element of an array (or a bare top-level value).
  template <class T>
  void value(const T& v) {
    separate();
    put(v);
  }
  void null_value() {
    separate();
    out_ += "null";
  }
  // Appends a newline (e.g. after the top-level value of an HTTP body).
  void newline() { out_ += '\n'; }

  const std::string& str() const noexcept { return out_; }
  std::string take() noexcept {
    first_ = true;
    return std::move(out_);
  }
  void clear() noexcept {
    out_.clear();
    first_ = true;
  }

  // The primitives, for code that builds JSON into its own string.
  static void append_string(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (char c : s) {
      auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (u < 0x20) {
            out += "\\u00";
            out += kHex[u >> 4];
            out += kHex[u & 0xF];
          } else {
            out += c;
          }
      }
    }
    out += '"';
  }
  static void append_double(std::string& out, double v) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out += buf;
  }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  static void append_integer(std::string& out, T v) {
    out += std::to_string(v);
  }

 private:
  void put(bool v) { out_ += v ? "true" : "false"; }
  void put(double v) { append_double(out_, v); }
  void put(float v) { append_double(out_, v); }
  void put(std::string_view v) { append_string(out_, v); }
  void put(const std::string& v) { append_string(out_, v); }
  void put(const char* v) { append_string(out_, v); }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void put(T v) {
    append_integer(out_, v);
  }

  void open(std::string_view key, char bracket) {
    separate();
    if (!key.empty()) append_key(key);
    out_ += bracket;
    first_ = true;
  }
  void close(char bracket) {
    out_ += bracket;
    first_ = false;
  }
  void separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  void append_key(std::string_view key) {
    append_string(out_, key);
    out_ += ':';
  }

  std::string out_;
  bool first_ = true;
};

}  // namespace rondel::util
