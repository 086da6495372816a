// JsonWriter: the one JSON writer of rondel (admin API, explain views, rondel-sim --json); std only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace rondel::util {

// JsonWriter appends "key": value pairs to a string; begin()/end() open and close objects,
// begin_array()/end_array() arrays of objects.
// Strings are escaped: quotes, backslashes and control characters.
class JsonWriter {
 public:
  void begin(std::string_view key = {}) {
    separate();
    if (!key.empty()) append_key(key);
    out_ += '{';
    first_ = true;
  }
  void end() {
    out_ += '}';
    first_ = false;
  }
  // Arrays: begin_array(key) ... end_array(); elements are objects opened with begin().
  void begin_array(std::string_view key) {
    separate();
    append_key(key);
    out_ += '[';
    first_ = true;
  }
  void end_array() {
    out_ += ']';
    first_ = false;
  }
  void field(std::string_view key, double v) {
    separate();
    append_key(key);
    if (!std::isfinite(v)) {
      out_ += "null";
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ += buf;
  }
  void field(std::string_view key, uint64_t v) {
    separate();
    append_key(key);
    out_ += std::to_string(v);
  }
  void field(std::string_view key, uint32_t v) { field(key, static_cast<uint64_t>(v)); }
  void field(std::string_view key, bool v) {
    separate();
    append_key(key);
    out_ += v ? "true" : "false";
  }
  void field(std::string_view key, std::string_view v) {
    separate();
    append_key(key);
    append_string(v);
  }
  void field(std::string_view key, const char* v) { field(key, std::string_view(v)); }

  const std::string& str() const noexcept { return out_; }

 private:
  void separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  void append_key(std::string_view key) {
    append_string(key);
    out_ += ':';
  }
  void append_string(std::string_view s) {
    out_ += '"';
    for (char c : s) {
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out_ += buf;
        continue;
      }
      if (c == '"' || c == '\\') out_ += '\\';
      out_ += c;
    }
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
};

}  // namespace rondel::util
