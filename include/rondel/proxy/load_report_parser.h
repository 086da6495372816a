// Parsers of the load a backend reports in a response header: the ORCA `endpoint-load-metrics`
// value (TEXT, colon and JSON forms; the JSON form read with Boost.JSON) and a plain number. The
// model they feed (statuses, bounds, the effective load) is core/reported_load.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "rondel/core/reported_load.h"

namespace rondel::proxy {

// Parses an ORCA endpoint-load-metrics value and returns `metric` (e.g. "cpu_utilization",
// "named_metrics.in_flight", "utilization.gpu") times `scale`.
//  * TEXT form: `TEXT name=value, name=value` (Envoy's, the prefix and '=');
//  * colon form: `name:value, name:value` (no prefix);
//  * JSON form: `JSON {...}`: an object whose values are numbers or objects of numbers (one
//    level: named_metrics, utilization, request_cost); "a.b" names key b of object a (or a
//    top-level key spelled "a.b"). Strict subset of JSON: no backslash anywhere (so no escapes
//    in names), no arrays, strings as values, true/false/null, duplicate keys or trailing
//    commas; at most 64 members in all.
// Names are [A-Za-z0-9_.-]+, whitespace around items is optional; a name may repeat in the
// text forms (the last wins). Numbers are JSON numbers (-?digits[.digits][e[+-]digits]; in the
// JSON form without a leading zero, 025, as RFC 8259 says: Boost.JSON refuses it); nan,
// inf and infinity (any case, with a sign) are kNotFinite, in the JSON form too (Boost.JSON 1.81
// has no such option: the reader spells them as an overflowing number first), and so is a
// number outside double's range (in JSON, one whose exponent passes INT_MAX is kMalformed:
// Boost.JSON refuses it). A value whose syntax is wrong anywhere is kMalformed even when
// `metric` itself is well formed. O(size), no allocation: the JSON form
// works in fixed buffers on the stack (8 KiB for the text, 4 KiB for names, 64 members).
core::ParsedReport parse_orca(std::string_view value, std::string_view metric,
                              uint32_t scale) noexcept;

// Parses a plain header value: one number (optional surrounding whitespace) times `scale`.
core::ParsedReport parse_plain_load(std::string_view value, uint32_t scale) noexcept;

// Either parser, by format.
inline core::ParsedReport parse_load_report(core::LoadHeaderFormat f, std::string_view value,
                                            std::string_view metric, uint32_t scale) noexcept {
  return f == core::LoadHeaderFormat::kOrca ? parse_orca(value, metric, scale)
                                            : parse_plain_load(value, scale);
}

}  // namespace rondel::proxy
