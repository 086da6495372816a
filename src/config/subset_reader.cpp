// Backend labels and a pool's subset selectors (split from config_reader.cpp, which calls them;
// same NodeReader, same FILE:LINE:COL errors).
#include "subset_reader.h"

#include <algorithm>
#include <string_view>

#include "reader_util.h"
#include "scalars.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// One list entry of a field as a field of its own (for the scalar readers' messages).
Field entry_field(const Field& list, const YAML::Node& entry) {
  return Field{list.key, list.key_node, entry};
}

// The string entries of a list field, each a label; errors at the offending entry.
bool read_label_list(NodeReader& r, const Field& f, std::vector<std::string>& out) {
  if (!r.read_sequence(f)) return false;
  bool ok = true;
  for (const YAML::Node& entry : f.value) {
    const Field one = entry_field(f, entry);
    std::string label;
    if (!r.read_string(one, label, false)) {
      ok = false;
      continue;
    }
    if (!is_plain_name(label)) {
      r.error(NodeReader::value_position(one),
              "a label may contain only letters, digits, '_', '-' and '.', got " + quote(label));
      ok = false;
    } else if (!contains(out, label)) {
      out.push_back(std::move(label));
    }
  }
  return ok;
}

// `when`: exactly one of listener, header (with value), path_prefix.
bool read_when(NodeReader& r, const Field& f, SubsetRule& rule,
               std::span<const ListenerConfig> listeners) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kSubsetWhenKeys);
  if (!m.is_map()) return false;
  const Field* listener = m.get("listener");
  const Field* header = m.get("header");
  const Field* prefix = m.get("path_prefix");
  const Field* value = m.get("value");
  const int given = (listener != nullptr) + (header != nullptr) + (prefix != nullptr);
  if (given != 1) {
    r.error(NodeReader::value_position(f),
            "'when' needs exactly one of 'listener', 'header' (with 'value') or 'path_prefix'");
    return false;
  }
  if (value != nullptr && header == nullptr) {
    r.error(NodeReader::position_of(value->key_node), "'value' goes with 'header' only");
    return false;
  }
  if (listener != nullptr) {
    rule.match = SubsetMatch::kListener;
    if (!r.read_string(*listener, rule.what, false)) return false;
    const bool known = std::any_of(listeners.begin(), listeners.end(),
                                   [&](const ListenerConfig& l) { return l.name == rule.what; });
    if (!known) {
      r.error(NodeReader::value_position(*listener), "unknown listener " + quote(rule.what));
      return false;
    }
    return true;
  }
  if (header != nullptr) {
    rule.match = SubsetMatch::kHeader;
    if (!r.read_string(*header, rule.what, false)) return false;
    if (!is_token(rule.what)) {
      r.error(NodeReader::value_position(*header), "'header' must be a header name, got " +
                                                       quote(rule.what));
      return false;
    }
    if (value == nullptr) {
      r.error(NodeReader::value_position(f), "'header' needs a 'value' to compare with");
      return false;
    }
    return r.read_string(*value, rule.value, true);
  }
  rule.match = SubsetMatch::kPathPrefix;
  if (!r.read_string(*prefix, rule.what, false)) return false;
  if (rule.what.front() != '/' || has_space_or_control(rule.what)) {
    r.error(NodeReader::value_position(*prefix),
            "'path_prefix' must start with '/' and contain no spaces, got " + quote(rule.what));
    return false;
  }
  return true;
}

// `require`: a non-empty list of labels, each carried by at least one backend of the pool.
bool read_require(NodeReader& r, const Field& f, SubsetRule& rule, const PoolConfig& p,
                  const std::vector<std::string>& known) {
  if (!read_label_list(r, f, rule.require)) return false;
  if (rule.require.empty()) {
    r.error(NodeReader::value_position(f), "'require' must name at least one label");
    return false;
  }
  bool ok = true;
  for (const YAML::Node& entry : f.value) {
    const std::string text = entry.Scalar();
    // A pool with a discovery source learns its backends' labels (zones) at run time.
    if (!contains(known, text) && p.discovery.kind == DiscoveryKind::kNone) {
      r.error(NodeReader::value_position(entry_field(f, entry)),
              "unknown label " + quote(text) + ": no backend of pool " + quote(p.name) +
                  " carries it");
      ok = false;
    }
  }
  return ok;
}

}  // namespace

bool read_labels(NodeReader& r, const Field& f, std::vector<std::string>& out,
                 std::vector<std::string>& pool_labels) {
  const bool ok = read_label_list(r, f, out);  // keeps the valid ones: no cascade of errors
  if (!f.value.IsSequence()) return false;
  for (const YAML::Node& entry : f.value) {
    const std::string text = entry.IsScalar() ? entry.Scalar() : std::string();
    if (!contains(out, text) || contains(pool_labels, text)) continue;
    if (pool_labels.size() == kMaxLabels) {
      r.error(NodeReader::value_position(entry_field(f, entry)),
              "label " + quote(text) + " would be the pool's " + std::to_string(kMaxLabels + 1) +
                  "th distinct label; a pool's backends carry at most " +
                  std::to_string(kMaxLabels));
      return false;
    }
    pool_labels.push_back(text);
  }
  return ok;
}

void read_subsets(NodeReader& r, const Field& f, PoolConfig& p,
                  std::span<const ListenerConfig> listeners,
                  const std::vector<std::string>& known_labels) {
  std::vector<SubsetRule> rules;
  size_t entries = 0;
  for_each_entry(r, f, [&](const YAML::Node& node, Position fallback) {
    const size_t index = entries++;
    MapFields m = r.map(node, "each entry of 'subsets'", fallback, kSubsetKeys);
    if (!m.is_map()) return;
    SubsetRule rule;
    rule.position = m.position();
    rule.name = std::to_string(index);
    bool ok = true;
    if (auto* g = m.get("name"); g && r.read_string(*g, rule.name, false)) {
      if (!is_plain_name(rule.name)) {
        r.error(NodeReader::value_position(*g),
                "'name' may contain only letters, digits, '_', '-' and '.', got " +
                    quote(rule.name));
        ok = false;
      } else if (std::any_of(rules.begin(), rules.end(),
                             [&](const SubsetRule& o) { return o.name == rule.name; })) {
        r.error(NodeReader::value_position(*g), "duplicate subset name " + quote(rule.name));
        ok = false;
      }
    }
    const Field* when = r.require(m, "when");
    ok &= when != nullptr && read_when(r, *when, rule, listeners);
    const Field* require = r.require(m, "require");
    ok &= require != nullptr && read_require(r, *require, rule, p, known_labels);
    if (ok) rules.push_back(std::move(rule));
  });
  if (entries > kMaxSubsetRules) {
    r.error(NodeReader::position_of(f.key_node),
            "'subsets' has " + std::to_string(entries) + " entries; a pool holds at most " +
                std::to_string(kMaxSubsetRules));
    return;
  }
  p.subsets = std::move(rules);
}

}  // namespace rondel::config
