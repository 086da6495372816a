// Reading the JSON documents of discovery sources (Boost.JSON) without exceptions: a field of an
// object, a string field, and a streamed body split into lines (a watch sends one document per
// line).
#pragma once

#include <boost/json.hpp>

#include <string>
#include <string_view>
#include <utility>

#include "json_read.h"

namespace rondel::server::djson {

namespace json = boost::json;

// The field `key` of `v` when `v` is an object that has it, else null.
inline const json::value* at(const json::value& v, std::string_view key) {
  const json::object* o = v.if_object();
  return o != nullptr ? o->if_contains(key) : nullptr;
}

// The string `v` points to; "" when null or not a string.
inline std::string_view str(const json::value* v) {
  const json::string* s = v != nullptr ? v->if_string() : nullptr;
  return s != nullptr ? std::string_view(*s) : std::string_view();
}

// The list `v` points to; null when null or not a list.
inline const json::array* list(const json::value* v) {
  return v != nullptr ? v->if_array() : nullptr;
}

// Parses one document, a JSON object (the admin's strict reader, json_read.h); a null value
// (is_null) when it is not one.
inline json::value parse(std::string_view text) {
  auto o = parse_json_object(text);
  return o ? json::value(std::move(*o)) : json::value();
}

// Splits a streamed body into lines.
class Lines {
 public:
  // Calls each(line) for every complete line of what was fed so far (empty lines skipped); when
  // each returns false, stops and drops what is buffered.
  template <class Each>
  void feed(std::string_view bytes, Each&& each) {
    buf_.append(bytes);
    size_t start = 0;
    for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (nl == start) continue;
      if (!each(std::string_view(buf_).substr(start, nl - start))) {
        buf_.clear();
        return;
      }
    }
    buf_.erase(0, start);
  }
  void clear() noexcept { buf_.clear(); }

 private:
  std::string buf_;
};

}  // namespace rondel::server::djson
