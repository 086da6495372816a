// SniMap: case-folded exact and one-label wildcard lookups.
#include "rondel/tls/sni_map.h"

#include "rondel/util/ascii.h"

namespace rondel::tls {

using util::lowercase;

void SniMap::add(std::string_view name, uint32_t index) {
  if (name.size() > 2 && name.substr(0, 2) == "*.") {
    wildcard_.emplace(lowercase(name.substr(2)), index);
  } else if (!name.empty()) {
    exact_.emplace(lowercase(name), index);
  }
}

uint32_t SniMap::find(std::string_view host) const {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);  // absolute name
  if (host.empty()) return kNone;
  std::string h = lowercase(host);
  if (auto it = exact_.find(h); it != exact_.end()) return it->second;
  size_t dot = h.find('.');
  if (dot == std::string::npos || dot == 0) return kNone;
  if (auto it = wildcard_.find(h.substr(dot + 1)); it != wildcard_.end()) return it->second;
  return kNone;
}

}  // namespace rondel::tls
