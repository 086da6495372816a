// NodeReader: walks yaml-cpp nodes for the loader, converting scalars and collecting errors.
//
// Internal to src/config/ (the only place that sees yaml-cpp types). Every read_* function
// either stores a converted value and returns true, or records one ConfigError at the most
// useful position (the value, or the key when the value is empty) and returns false, leaving
// `out` untouched, so the caller's default stays and loading continues to find more errors.
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/config/loader.h"

namespace rondel::config {

// One `key: value` entry of a mapping whose key is known and not a duplicate.
struct Field {
  std::string_view key;  // the schema's spelling (points into the static key table)
  YAML::Node key_node;
  YAML::Node value;
};

// A mapping's known fields, in file order. Empty (and !is_map()) when the node was no mapping.
class MapFields {
 public:
  MapFields(Position position, bool is_map) : position_(position), is_map_(is_map) {}
  void add(Field field) { fields_.push_back(std::move(field)); }
  // The entry for `key`, or nullptr when the key is absent (or was rejected).
  const Field* get(std::string_view key) const;
  Position position() const { return position_; }  // of the mapping itself
  bool is_map() const { return is_map_; }

 private:
  Position position_;
  bool is_map_;
  std::vector<Field> fields_;
};

// A name a scalar may take and the value it stands for (enum choices).
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

// The choices of an enum whose values are 0..N-1, from its name table in value order.
template <class E, size_t N>
constexpr std::array<Choice<E>, N> choices_of(const std::string_view (&names)[N]) {
  std::array<Choice<E>, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = Choice<E>{names[i], static_cast<E>(i)};
  return out;
}

class NodeReader {
 public:
  explicit NodeReader(std::string file) : file_(std::move(file)) {}

  void error(Position at, std::string message);
  bool has_errors() const { return !errors_.empty(); }
  // All errors recorded so far in file order (stable for errors at the same position).
  std::vector<ConfigError> take_errors();
  const std::string& file() const { return file_; }

  // 1-based position of a node; {0, 0} when yaml-cpp has none.
  static Position position_of(const YAML::Node& node);
  // The value's position, or the key's when the value is empty (yaml-cpp places an empty
  // value at the next token, often on the next line).
  static Position value_position(const Field& field);

  // Reads a mapping: reports a non-mapping `node` (described as `what`), non-string keys,
  // duplicate keys (at the second, naming the first's line) and keys not in `keys` (with a
  // "did you mean" hint). Returns the accepted fields.
  MapFields map(const YAML::Node& node, std::string_view what, Position fallback,
                std::span<const std::string_view> keys);
  // Reports `missing required key 'KEY'` at the mapping's position when `key` is absent.
  const Field* require(const MapFields& map, std::string_view key);

  // The field's value as a sequence; reports anything else. An empty list is returned as is.
  bool read_sequence(const Field& field);
  bool read_string(const Field& field, std::string& out, bool allow_empty);
  bool read_bool(const Field& field, bool& out);
  bool read_u64(const Field& field, uint64_t& out, uint64_t min, uint64_t max);
  template <class T>
  bool read_unsigned(const Field& field, T& out, uint64_t min, uint64_t max) {
    uint64_t v = 0;
    if (!read_u64(field, v, min, max)) return false;
    out = static_cast<T>(v);
    return true;
  }
  bool read_duration(const Field& field, uint64_t& out, uint64_t min_ms);
  bool read_size(const Field& field, uint64_t& out, uint64_t min_bytes);
  bool read_address(const Field& field, Address& out, bool allow_name, bool allow_port_zero);
  template <class E>
  bool read_choice(const Field& field, std::span<const Choice<E>> choices, E& out) {
    std::string text;
    if (!read_scalar(field, text, choice_list(choices))) return false;
    for (const auto& c : choices) {
      if (c.name == text) {
        out = c.value;
        return true;
      }
    }
    std::vector<std::string_view> names;
    for (const auto& c : choices) names.push_back(c.name);
    report_bad_choice(field, text, names);
    return false;
  }

  // "'KEY' must be EXPECTED, got WHAT" at the value's position.
  void report_type(const Field& field, std::string_view expected);
  // Describes a node for messages: "'text'", "a list", "a mapping", "nothing".
  static std::string describe(const YAML::Node& node);

 private:
  // The field's scalar text; reports a non-scalar value as "'KEY' must be EXPECTED, got ...".
  bool read_scalar(const Field& field, std::string& out, std::string_view expected);
  template <class E>
  static std::string choice_list(std::span<const Choice<E>> choices) {
    std::string s = "one of ";
    for (size_t i = 0; i < choices.size(); ++i) {
      if (i > 0) s += ", ";
      s += choices[i].name;
    }
    return s;
  }
  void report_bad_choice(const Field& field, const std::string& text,
                         std::span<const std::string_view> names);

  std::string file_;
  std::vector<ConfigError> errors_;
};

}  // namespace rondel::config
