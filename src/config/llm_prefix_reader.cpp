// A pool's `llm_prefix` section: where the conversation anchor sits, the explicit keys, the
// per-request buffer.
#include "llm_prefix_reader.h"

#include <string>
#include <string_view>

#include "reader_util.h"
#include "schema.h"

namespace rondel::config {

using namespace schema;

namespace {

void read_explicit(NodeReader& r, const Field& f, std::vector<LlmExplicitKey>& out) {
  for_each_entry(r, f, [&](const YAML::Node& node, Position fallback) {
    const Position at = fallback;
    const std::string text = node.IsScalar() ? node.Scalar() : std::string();
    const size_t colon = text.find(':');
    const std::string_view where = std::string_view(text).substr(0, colon);
    const std::string_view name =
        colon == std::string::npos ? std::string_view() : std::string_view(text).substr(colon + 1);
    LlmExplicitKey k;
    if (where == "header") {
      k.where = LlmExplicitKey::Where::kHeader;
    } else if (where == "body") {
      k.where = LlmExplicitKey::Where::kBody;
    } else {
      r.error(at, "each entry of 'explicit' must be header:NAME or body:NAME (as in "
                  "header:x-session-id or body:prompt_cache_key), got " + quote(text));
      return;
    }
    if (!is_token(name)) {
      r.error(at, "'explicit' has an invalid " + std::string(where) + " name " + quote(name));
      return;
    }
    k.name = std::string(name);
    if (k.where == LlmExplicitKey::Where::kHeader) util::lowercase_in_place(k.name);
    out.push_back(std::move(k));
  });
}

}  // namespace

void read_llm_prefix(NodeReader& r, const Field& f, LlmPrefixConfig& out) {
  MapFields m = r.map(f.value, quote(f.key), NodeReader::value_position(f), kLlmPrefixKeys);
  if (!m.is_map()) return;
  if (auto* g = m.get("conversation")) r.read_choice<LlmAnchor>(*g, kLlmAnchors, out.conversation);
  if (auto* g = m.get("blocks")) r.read_unsigned(*g, out.blocks, 1, kMaxLlmBlocks);
  if (auto* g = m.get("explicit")) read_explicit(r, *g, out.explicit_keys);
  if (auto* g = m.get("max_buffer")) r.read_size(*g, out.max_buffer, kMinLlmBuffer);
  if (auto* g = m.get("tenant_homes")) r.read_choice<TenantHomes>(*g, kTenantHomes, out.tenant_homes);
}

}  // namespace rondel::config
