#include "rondel/http/message.h"

#include <chrono>

#include "header_rules.h"

namespace rondel::http {

namespace {

// The fixed hop-by-hop fields, told apart by length first: at most two compares per name.
bool is_fixed_hop_by_hop(std::string_view name) noexcept {
  switch (name.size()) {
    case 2: return iequals(name, "TE");
    case 7: return iequals(name, "Trailer") || iequals(name, "Upgrade");
    case 10: return iequals(name, "Connection") || iequals(name, "Keep-Alive");
    case 16: return iequals(name, "Proxy-Connection");
    case 17: return iequals(name, "Transfer-Encoding");
    default: return false;
  }
}

// Up to this many Connection tokens (beyond the fixed names) are looked for by comparing each
// with every field: at most kDirectTokens x fields compares, cheaper than building a table.
constexpr size_t kDirectTokens = 4;

bool is_connection(std::string_view name) noexcept {
  return name.size() == 10 && iequals(name, "Connection");
}

bool is_host(std::string_view name) noexcept {
  return name.size() == 4 && iequals(name, "Host");
}

// A seed fixed for the life of the process and not known in advance (the address of a static
// under ASLR, and the time the first head was marked).
uint64_t hash_seed() noexcept {
  static const uint64_t seed = [] {
    static const char anchor = 0;
    const auto now =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return reinterpret_cast<uintptr_t>(&anchor) ^ (now * 0x9e3779b97f4a7c15u);
  }();
  return seed;
}

// Seeded FNV-1a over the bytes with bit 0x20 set, so names that iequals() calls equal hash
// equally, then the MurmurHash3 finaliser so every bit of the state reaches the slot index.
uint64_t name_hash(std::string_view name, uint64_t seed) noexcept {
  uint64_t h = seed ^ 0xcbf29ce484222325u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c) | 0x20u;
    h *= 0x100000001b3u;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53u;
  h ^= h >> 33;
  return h;
}

// Calls fn(token) for each token of every Connection field that is not itself a fixed
// hop-by-hop name (those fields are marked anyway).
template <class Fn>
void for_each_named_token(std::span<const Header> headers, Fn&& fn) {
  for (const Header& h : headers) {
    if (!is_connection(h.name)) continue;
    rules::for_each_list_token(h.value, [&](std::string_view token) {
      if (!is_fixed_hop_by_hop(token)) fn(token);
    });
  }
}

}  // namespace

void HopByHopMarker::mark(std::span<Header> headers) {
  for (Header& h : headers) h.hop_by_hop = is_fixed_hop_by_hop(h.name);
  size_t tokens = 0;
  for_each_named_token(headers, [&](std::string_view) { ++tokens; });
  if (tokens == 0) return;
  if (tokens <= kDirectTokens) {
    for_each_named_token(headers, [&](std::string_view token) {
      for (Header& h : headers) {
        if (!h.hop_by_hop && iequals(h.name, token) && !is_host(h.name)) h.hop_by_hop = true;
      }
    });
    return;
  }
  build_table(headers);
  for_each_named_token(headers, [&](std::string_view token) { mark_named(headers, token); });
}

// One slot per distinct name (Host and the fixed names left out), fields of the same name
// chained through next_same_, so that marking a name walks its fields once whatever the number
// of tokens naming it.
void HopByHopMarker::build_table(std::span<const Header> headers) {
  size_t size = 16;
  while (size < 2 * headers.size()) size *= 2;
  slots_.assign(size, 0);
  slot_mask_ = size - 1;
  hashes_.resize(headers.size());
  next_same_.assign(headers.size(), 0);
  const uint64_t seed = hash_seed();
  for (size_t i = headers.size(); i-- > 0;) {  // backwards: each new field becomes the chain head
    const Header& h = headers[i];
    if (h.hop_by_hop || is_host(h.name)) continue;
    const uint64_t hash = hashes_[i] = name_hash(h.name, seed);
    for (uint64_t s = hash & slot_mask_;; s = (s + 1) & slot_mask_) {
      const uint32_t entry = slots_[s];
      if (entry == 0) {
        slots_[s] = static_cast<uint32_t>(i + 1);
        break;
      }
      const size_t j = entry - 1;
      if (hashes_[j] == hash && iequals(headers[j].name, h.name)) {
        next_same_[i] = entry;
        slots_[s] = static_cast<uint32_t>(i + 1);
        break;
      }
    }
  }
}

void HopByHopMarker::mark_named(std::span<Header> headers, std::string_view token) noexcept {
  const uint64_t hash = name_hash(token, hash_seed());
  for (uint64_t s = hash & slot_mask_;; s = (s + 1) & slot_mask_) {
    const uint32_t entry = slots_[s];
    if (entry == 0) return;  // no field of that name
    size_t j = entry - 1;
    if (hashes_[j] != hash || !iequals(headers[j].name, token)) continue;
    if (headers[j].hop_by_hop) return;  // named before: its fields are marked
    for (;;) {
      headers[j].hop_by_hop = true;
      if (next_same_[j] == 0) return;
      j = next_same_[j] - 1;
    }
  }
}

}  // namespace rondel::http
