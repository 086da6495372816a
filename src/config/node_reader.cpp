// NodeReader: typed reads of yaml-cpp nodes with positioned error messages.

#include "node_reader.h"

#include <algorithm>
#include <limits>
#include <map>

#include "scalars.h"

namespace rondel::config {
namespace {

constexpr size_t kMaxQuotedLength = 60;  // longer scalars are cut in messages

std::string quote_cut(std::string_view text) {
  std::string s = "'";
  if (text.size() > kMaxQuotedLength) {
    s.append(text.substr(0, kMaxQuotedLength));
    s += "...";
  } else {
    s.append(text);
  }
  s += '\'';
  return s;
}

}  // namespace

const Field* MapFields::get(std::string_view key) const {
  for (const Field& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

void NodeReader::error(Position at, std::string message) {
  errors_.push_back(ConfigError{file_, at.line, at.column, std::move(message)});
}

std::vector<ConfigError> NodeReader::take_errors() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  return std::move(errors_);
}

Position NodeReader::position_of(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return Position{};
  return Position{mark.line + 1, mark.column + 1};
}

Position NodeReader::value_position(const Field& field) {
  if (!field.value.IsDefined() || field.value.IsNull()) return position_of(field.key_node);
  const Position p = position_of(field.value);
  return p.line > 0 ? p : position_of(field.key_node);
}

std::string NodeReader::describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return quote_cut(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

MapFields NodeReader::map(const YAML::Node& node, std::string_view what, Position fallback,
                          std::span<const std::string_view> keys) {
  Position here = position_of(node);
  if (here.line == 0 || node.IsNull()) here = fallback;
  if (!node.IsMap()) {
    error(here, std::string(what) + " must be a mapping, got " + describe(node));
    return MapFields(here, false);
  }
  MapFields fields(here, true);
  std::map<std::string, int, std::less<>> first_line;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // Copies (cheap handles): `it->` yields a proxy temporary that a reference would outlive.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    const Position key_pos = position_of(key);
    if (!key.IsScalar()) {
      error(key_pos, "a mapping key must be a plain name, got " + describe(key));
      continue;
    }
    const std::string& name = key.Scalar();
    if (auto [seen, inserted] = first_line.emplace(name, key_pos.line); !inserted) {
      error(key_pos, "duplicate key " + quote_cut(name) + " (first at line " +
                         std::to_string(seen->second) + ")");
      continue;
    }
    const auto known = std::find(keys.begin(), keys.end(), name);
    if (known == keys.end()) {
      std::string message = "unknown key " + quote_cut(name);
      if (name == "<<") {
        message += " (YAML merge keys are not supported)";
      } else if (std::string_view hint = closest_match(name, keys); !hint.empty()) {
        message += " (did you mean " + quote_cut(hint) + "?)";
      }
      error(key_pos, std::move(message));
      continue;
    }
    fields.add(Field{*known, key, value});
  }
  return fields;
}

const Field* NodeReader::require(const MapFields& map, std::string_view key) {
  const Field* f = map.get(key);
  if (f == nullptr && map.is_map()) {
    error(map.position(), "missing required key " + quote_cut(key));
  }
  return f;
}

void NodeReader::report_type(const Field& field, std::string_view expected) {
  error(value_position(field),
        quote_cut(field.key) + " must be " + std::string(expected) + ", got " + describe(field.value));
}

void NodeReader::report_bad_choice(const Field& field, const std::string& text,
                                   std::span<const std::string_view> names) {
  std::string message = quote_cut(field.key) + " must be one of ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) message += ", ";
    message += names[i];
  }
  message += "; got " + quote_cut(text);
  if (std::string_view hint = closest_match(text, names); !hint.empty()) {
    message += " (did you mean " + quote_cut(hint) + "?)";
  }
  error(value_position(field), std::move(message));
}

bool NodeReader::read_scalar(const Field& field, std::string& out, std::string_view expected) {
  if (!field.value.IsScalar()) {
    report_type(field, expected);
    return false;
  }
  out = field.value.Scalar();
  return true;
}

bool NodeReader::read_sequence(const Field& field) {
  if (!field.value.IsSequence()) {
    report_type(field, "a list");
    return false;
  }
  return true;
}

bool NodeReader::read_string(const Field& field, std::string& out, bool allow_empty) {
  std::string text;
  // An empty value (`name:`) reads as the empty string.
  if (!field.value.IsNull() && !read_scalar(field, text, "a string")) return false;
  if (text.empty() && !allow_empty) {
    error(value_position(field), quote_cut(field.key) + " must not be empty");
    return false;
  }
  out = std::move(text);
  return true;
}

bool NodeReader::read_bool(const Field& field, bool& out) {
  constexpr std::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes",
                                        "YES",  "on",   "On",   "ON"};
  constexpr std::string_view kFalse[] = {"false", "False", "FALSE", "no", "No",
                                         "NO",    "off",   "Off",   "OFF"};
  std::string text;
  if (read_scalar(field, text, "true or false")) {
    if (std::find(std::begin(kTrue), std::end(kTrue), text) != std::end(kTrue)) {
      out = true;
      return true;
    }
    if (std::find(std::begin(kFalse), std::end(kFalse), text) != std::end(kFalse)) {
      out = false;
      return true;
    }
    report_type(field, "true or false");
  }
  return false;
}

bool NodeReader::read_u64(const Field& field, uint64_t& out, uint64_t min, uint64_t max) {
  std::string text;
  if (!read_scalar(field, text, "an integer")) return false;
  uint64_t v = 0;
  const Position at = value_position(field);
  const std::string key = quote_cut(field.key);
  if (!text.empty() && text[0] == '-' && parse_unsigned(std::string_view(text).substr(1), v)) {
    error(at, key + " must not be negative, got " + text);
    return false;
  }
  if (!parse_unsigned(text, v)) {
    bool all_digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
    if (all_digits) {
      error(at, key + " must be at most " + std::to_string(max) + ", got " + text);
    } else {
      report_type(field, "an integer");
    }
    return false;
  }
  if (v < min || v > max) {
    // Limits at the top of a type's range are not worth printing as "between 1 and 4294967295".
    const bool open_ended = max >= std::numeric_limits<uint32_t>::max();
    std::string range;
    if (min == 0 || (open_ended && v > max)) {
      range = "at most " + std::to_string(max);
    } else if (open_ended) {
      range = "at least " + std::to_string(min);
    } else {
      range = "between " + std::to_string(min) + " and " + std::to_string(max);
    }
    error(at, key + " must be " + range + ", got " + text);
    return false;
  }
  out = v;
  return true;
}

bool NodeReader::read_duration(const Field& field, uint64_t& out, uint64_t min_ms) {
  constexpr std::string_view kExpected = "a duration such as 500ms, 2s, 1m or 1h";
  std::string text;
  if (!read_scalar(field, text, kExpected)) return false;
  uint64_t v = 0;
  if (const ParseStatus st = parse_duration(text, v); st != ParseStatus::kOk) {
    if (st == ParseStatus::kOverflow) {
      error(value_position(field), quote_cut(field.key) + " is too large, got " + text);
    } else {
      report_type(field, kExpected);
    }
    return false;
  }
  if (v < min_ms) {
    error(value_position(field),
          quote_cut(field.key) + " must be at least " + std::to_string(min_ms) + "ms, got " + text);
    return false;
  }
  out = v;
  return true;
}

bool NodeReader::read_size(const Field& field, uint64_t& out, uint64_t min_bytes) {
  constexpr std::string_view kExpected = "a size such as 512, 64KiB, 16MiB, 1GiB or 10KB";
  std::string text;
  if (!read_scalar(field, text, kExpected)) return false;
  uint64_t v = 0;
  if (const ParseStatus st = parse_size(text, v); st != ParseStatus::kOk) {
    if (st == ParseStatus::kOverflow) {
      error(value_position(field), quote_cut(field.key) + " is too large, got " + text);
    } else {
      report_type(field, kExpected);
    }
    return false;
  }
  if (v < min_bytes) {
    error(value_position(field), quote_cut(field.key) + " must be at least " +
                                     std::to_string(min_bytes) +
                                     (min_bytes == 1 ? " byte" : " bytes") + ", got " + text);
    return false;
  }
  out = v;
  return true;
}

bool NodeReader::read_address(const Field& field, Address& out, bool allow_name,
                              bool allow_port_zero) {
  constexpr std::string_view kExpected = "an address HOST:PORT";
  std::string text;
  if (!read_scalar(field, text, kExpected)) return false;
  Address a;
  const char* problem = address_problem(text, allow_name, a);
  if (!allow_port_zero && (problem == kPortOutOfRange || (problem == nullptr && a.port == 0))) {
    problem = "the port must be a number between 1 and 65535";
  } else if (allow_port_zero && problem == kPortOutOfRange) {
    problem = "the port must be a number between 0 (any free port) and 65535";
  }
  if (problem != nullptr) {
    error(value_position(field),
          "bad address " + quote_cut(text) + " for " + quote_cut(field.key) + ": " + problem);
    return false;
  }
  out = std::move(a);
  return true;
}

}  // namespace rondel::config
