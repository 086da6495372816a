// SniMap: case-folded exact and one-label wildcard lookups.
#include "rondel/tls/sni_map.h"

namespace rondel::tls {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

void SniMap::add(std::string_view name, uint32_t index) {
  if (name.size() > 2 && name.substr(0, 2) == "*.") {
    wildcard_.emplace(lower(name.substr(2)), index);
  } else if (!name.empty()) {
    exact_.emplace(lower(name), index);
  }
}

uint32_t SniMap::find(std::string_view host) const {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);  // absolute name
  if (host.empty()) return kNone;
  std::string h = lower(host);
  if (auto it = exact_.find(h); it != exact_.end()) return it->second;
  size_t dot = h.find('.');
  if (dot == std::string::npos || dot == 0) return kNone;
  if (auto it = wildcard_.find(h.substr(dot + 1)); it != wildcard_.end()) return it->second;
  return kNone;
}

}  // namespace rondel::tls
