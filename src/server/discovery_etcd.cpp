// etcd discovery: a pool's backends are the keys under a prefix (etcd v3's JSON gateway): a
// range read, then a watch from the revision read; after a compaction, or when the watch breaks,
// read again. Each key's value is one backend as JSON:
//   {"address": "10.0.0.7:8080", "id": "cache-7", "weight": 2, "labels": ["z1"], "state": "up"}
// (id defaults to the address; weight to 1; state up | drain (weight 0: no new keys) | down
// (left out)).
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "discovery_json.h"
#include "etcd_client.h"
#include "rondel/config/loader.h"

namespace rondel::server {

namespace json = boost::json;
using djson::at;
using djson::str;

// One backend from a key's value: the error says what is wrong ("" when it is left out on
// purpose: state down).
core::Result<SourceBackend> parse_etcd_backend(std::string_view text, bool& left_out) {
  left_out = false;
  const json::value v = djson::parse(text);
  if (!v.is_object()) return core::fail("not a JSON object");
  SourceBackend b;
  std::string_view address = str(at(v, "address"));
  if (!config::parse_address(address, false, b.address) || b.address.port == 0) {
    return core::fail("'address' must be IP:PORT, got '" + std::string(address) + "'");
  }
  b.id = std::string(str(at(v, "id")));
  if (b.id.empty()) b.id = b.address.to_string();
  for (char c : b.id) {
    if (static_cast<unsigned char>(c) <= ' ') return core::fail("'id' has a space or control");
  }
  if (const json::value* w = at(v, "weight")) {
    const int64_t* i = w->if_int64();
    const uint64_t* u = w->if_uint64();
    const int64_t n = i != nullptr ? *i : u != nullptr ? static_cast<int64_t>(*u) : -1;
    if (n < 0 || n > 1000000) return core::fail("'weight' must be an integer 0..1000000");
    b.weight = static_cast<uint32_t>(n);
  }
  if (const json::value* l = at(v, "labels")) {
    const json::array* a = l->if_array();
    if (a == nullptr) return core::fail("'labels' must be a list of strings");
    for (const auto& e : *a) {
      if (!e.is_string()) return core::fail("'labels' must be a list of strings");
      b.labels.emplace_back(e.get_string());
    }
  }
  std::string_view state = str(at(v, "state"));
  if (state == "drain") {
    b.weight = 0;
  } else if (state == "down") {
    left_out = true;
  } else if (!state.empty() && state != "up") {
    return core::fail("'state' must be up, drain or down, got '" + std::string(state) + "'");
  }
  return b;
}

namespace {

class EtcdSource final : public EtcdPrefix {
 public:
  using EtcdPrefix::EtcdPrefix;

  std::string name() const override { return "etcd:" + cfg_.prefix; }
  std::string_view kind() const noexcept override { return "etcd"; }

 private:
  void reset() override { previous_ = std::exchange(keys_, {}); }

  // Replaces the key's backend, or removes it (deleted, or down). A value that is not a backend
  // leaves the key's last good backend in place.
  bool apply(const std::string& key, const std::string* value, std::string& why) override {
    if (value == nullptr) {
      keys_.erase(key);
      return true;
    }
    bool left_out = false;
    auto b = parse_etcd_backend(*value, left_out);
    if (!b) {
      why = b.error().message;
      if (auto it = previous_.find(key); it != previous_.end() && !keys_.contains(key)) {
        keys_[key] = it->second;  // a new range read: keep what the key meant before
      }
      return false;
    }
    if (left_out) {
      keys_.erase(key);
    } else {
      keys_[key] = std::move(*b);
    }
    return true;
  }

  void synced() override {
    std::vector<SourceBackend> list;
    list.reserve(keys_.size());
    for (const auto& [key, b] : keys_) list.push_back(b);
    publish(std::move(list));
  }

  std::map<std::string, SourceBackend> keys_;      // etcd key -> its backend
  std::map<std::string, SourceBackend> previous_;  // keys_ before the last range read
};

}  // namespace

DiscoverySource* make_etcd_source(Discovery& owner, std::string pool, std::string key,
                                  const config::DiscoveryConfig& cfg) {
  return new EtcdSource(owner, std::move(pool), std::move(key), cfg);
}

}  // namespace rondel::server
