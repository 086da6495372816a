// A strict reader of one flat JSON object ({"name": value, ...} whose values are strings,
// numbers, true, false or null), for the admin API's request bodies and the state file's lines.
// Internal to src/server.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rondel/core/result.h"

namespace rondel::server {

struct FlatJson {
  enum class Kind : unsigned char { kString, kNumber, kBool, kNull };
  struct Value {
    Kind kind = Kind::kNull;
    std::string text;  // kString: the decoded string; kNumber: the literal; kBool: true/false
  };
  std::vector<std::pair<std::string, Value>> fields;  // in document order, names unique

  // The field named `name`, or null.
  const Value* get(std::string_view name) const noexcept;

  // Parses `text` (RFC 8259 grammar restricted to one object of scalars; surrounding
  // whitespace allowed). Errors name what was wrong and the byte offset: "expected ':' at 7".
  // Never throws; O(size).
  static core::Result<FlatJson> parse(std::string_view text);
};

// A non-negative integer literal of at most `max` (e.g. a weight), or false.
bool flat_json_uint(const FlatJson::Value& v, uint64_t max, uint64_t& out) noexcept;

}  // namespace rondel::server
