// JSON reading for the admin API's request bodies and the state file's lines, on Boost.JSON's
// DOM: one object per text, and the two typed fields of a backend setting. The one JSON writer
// stays rondel::util::JsonWriter. Internal to src/server.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

#include "rondel/core/result.h"
#include "rondel/proxy/backend_state.h"

namespace rondel::server {

// Parses `text` as one JSON object (RFC 8259, strict: no comments, no trailing commas, valid
// UTF-8; whitespace around it allowed, nothing else after it). Errors give Boost.JSON's reason
// and the byte offset where the parser stopped ("syntax error at byte 7"), or "expected one
// JSON object, got an array". A repeated name keeps its last value (Boost.JSON's rule). Uses
// the error_code overloads: never throws but for std::bad_alloc. O(size); nesting depth at most
// Boost.JSON's default of 32.
core::Result<boost::json::object> parse_json_object(std::string_view text);

// A "state" field: "ready", "drain" or "maint"; false for anything else.
bool json_admin_state(const boost::json::value& v, proxy::AdminState& out) noexcept;

// A "weight" field: an integer 0..kMaxAdminWeight (admin_states.h), or null for "no override"
// (out reset); false for anything else (a fraction, an exponent form such as 1e2, a sign, a
// string).
bool json_admin_weight(const boost::json::value& v, std::optional<uint32_t>& out) noexcept;

}  // namespace rondel::server
