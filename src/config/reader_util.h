// Small helpers shared by the config readers (config_reader.cpp, edge_reader.cpp,
// health_reader.cpp, ...): quoting a key for an error message, the HTTP token, plain-name and
// whitespace checks, and walking the entries of a list field.
#pragma once

#include <string>
#include <string_view>

#include "node_reader.h"
#include "rondel/util/ascii.h"

namespace rondel::config {

inline std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// RFC 9110 section 5.6.2 token characters (header names, methods, cookie names).
inline bool is_token(std::string_view s) {
  constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  if (s.empty()) return false;
  for (char c : s) {
    if (!util::is_alnum(c) && kSpecials.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// A plain name: letters, digits, '_', '-' and '.', at least one. Listener and pool names (in
// logs as key=value and in metric labels), subset labels and ORCA metric names.
inline bool is_plain_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!util::is_alnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

inline bool has_space_or_control(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return true;
  }
  return false;
}

// Reads the entries of a list field, calling `each(node, fallback position)` per entry; an empty
// list is an error at the field.
template <class Each>
void for_each_entry(NodeReader& r, const Field& f, Each each) {
  if (!r.read_sequence(f)) return;
  if (f.value.size() == 0) {
    r.error(NodeReader::value_position(f), quote(f.key) + " must have at least one entry");
    return;
  }
  for (const YAML::Node& entry : f.value) {
    Position fallback = NodeReader::position_of(entry);
    if (entry.IsNull() || fallback.line == 0) fallback = NodeReader::value_position(f);
    each(entry, fallback);
  }
}

}  // namespace rondel::config
