// parse_json_object and the typed fields of a backend setting, on Boost.JSON.
#include "json_read.h"

#include <boost/json/parser.hpp>

#include <string>

#include "rondel/server/admin_states.h"

namespace rondel::server {

namespace {

std::string_view json_kind_name(boost::json::kind k) noexcept {
  switch (k) {
    case boost::json::kind::array: return "an array";
    case boost::json::kind::string: return "a string";
    case boost::json::kind::null: return "null";
    case boost::json::kind::bool_: return "a boolean";
    case boost::json::kind::object: return "an object";
    default: return "a number";
  }
}

}  // namespace

core::Result<boost::json::object> parse_json_object(std::string_view text) {
  boost::json::parser p;
  boost::json::error_code ec;
  const size_t at = p.write(text.data(), text.size(), ec);
  if (ec) return core::fail(ec.message() + " at byte " + std::to_string(at));
  boost::json::value v = p.release();
  if (boost::json::object* obj = v.if_object()) return std::move(*obj);
  return core::fail("expected one JSON object, got " + std::string(json_kind_name(v.kind())));
}

bool json_admin_state(const boost::json::value& v, proxy::AdminState& out) noexcept {
  const boost::json::string* s = v.if_string();
  return s != nullptr && parse_admin_state(std::string_view(*s), out);
}

bool json_admin_weight(const boost::json::value& v, std::optional<uint32_t>& out) noexcept {
  if (v.is_null()) {
    out.reset();
    return true;
  }
  // The parser gives a non-negative integer literal that fits as int64 (uint64 beyond); a
  // fraction or an exponent form is a double and is refused.
  const int64_t* n = v.if_int64();
  if (n == nullptr || *n < 0 || static_cast<uint64_t>(*n) > kMaxAdminWeight) return false;
  out = static_cast<uint32_t>(*n);
  return true;
}

}  // namespace rondel::server
