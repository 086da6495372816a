// etcd discovery: a pool's backends are the keys under a prefix (etcd v3's JSON gateway): a
// range read, then a watch from the revision read; after a compaction, or when the watch breaks,
// read again. Each key's value is one backend as JSON:
//   {"address": "10.0.0.7:8080", "id": "cache-7", "weight": 2, "labels": ["z1"], "state": "up"}
// (id defaults to the address; weight to 1; state up | drain (weight 0: no new keys) | down
// (left out)).
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <string_view>

#include "api_client.h"
#include "discovery_json.h"
#include "discovery_source.h"
#include "rondel/config/loader.h"

namespace rondel::server {

namespace json = boost::json;
using djson::at;
using djson::str;

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kB64[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kB64[(acc << (6 - bits)) & 63];
  while (out.size() % 4 != 0) out += '=';
  return out;
}

// Decodes standard base64 (padding optional); false on any other character.
bool unbase64(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (p == nullptr) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

// The end of the range of keys that start with `prefix` (etcd's "prefix" range_end): the prefix
// with its last byte below 0xff incremented and what follows dropped; "\0" = to the end.
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(prefix.back());
    if (c < 0xff) {
      ++c;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// etcd's int64 fields arrive as JSON strings ("42"); 0 when absent or not a number.
int64_t int_field(const json::value& v, std::string_view key) {
  const json::value* f = at(v, key);
  if (f == nullptr) return 0;
  if (const int64_t* i = f->if_int64()) return *i;
  std::string_view s = str(f);
  int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

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

class EtcdSource final : public DiscoverySource {
 public:
  using DiscoverySource::DiscoverySource;

  std::string name() const override { return "etcd:" + cfg_.prefix; }
  std::string_view kind() const noexcept override { return "etcd"; }

  void start() noexcept override {
    const config::ApiUrl& ep = cfg_.endpoints.front();
    if (ep.tls || std::any_of(cfg_.endpoints.begin(), cfg_.endpoints.end(),
                              [](const config::ApiUrl& u) { return u.tls; })) {
      auto ctx = api_tls_context(name(), ep, cfg_.ca);
      if (!ctx) {
        failed(SourceError::kConnect, ctx.error().message);
        return;  // a CA that cannot be read: nothing to try until a reload fixes it
      }
      tls_ = std::move(*ctx);
    }
    range();
  }

 private:
  void on_retry() noexcept override { range(); }

  const config::ApiUrl& endpoint() const { return cfg_.endpoints[endpoint_ % cfg_.endpoints.size()]; }

  // A failed request: the next endpoint, after the back-off.
  void retry(SourceError why, const std::string& detail) {
    failed(why, endpoint().text + ": " + detail);
    ++endpoint_;
    retry_in(backoff_ms());
  }

  void post(std::string path, std::string body, OnBytes on_data, OnBytes on_end) {
    ApiRequest req;
    req.method = "POST";
    req.path = std::move(path);
    req.body = std::move(body);
    request(endpoint(), std::move(req), std::move(on_data), std::move(on_end));
  }

  void range() noexcept {
    json::object body;
    body["key"] = base64(cfg_.prefix);
    body["range_end"] = base64(prefix_end(cfg_.prefix));
    post("/v3/kv/range", json::serialize(body), nullptr,
         [this](std::string_view error) { ranged(error); });
  }

  void ranged(std::string_view error) {
    if (!error.empty()) return retry(SourceError::kConnect, std::string(error));
    if (status_ != 200) {
      return retry(SourceError::kStatus, "range: HTTP " + std::to_string(status_) + " " +
                                             body_.substr(0, 200));
    }
    const json::value v = djson::parse(body_);
    if (!v.is_object()) return retry(SourceError::kParse, "range: not a JSON object");
    std::map<std::string, SourceBackend> next;
    if (const json::value* kvs = at(v, "kvs")) {
      const json::array* a = kvs->if_array();
      if (a == nullptr) return retry(SourceError::kParse, "range: 'kvs' is not a list");
      for (const auto& kv : *a) apply_put(next, kv);
    }
    keys_ = std::move(next);
    const json::value* header = at(v, "header");
    revision_ = header != nullptr ? int_field(*header, "revision") : 0;
    publish_keys();
    watch();
  }

  // A key's new value (a range entry or a watch PUT): replaces the key's backend, or removes it
  // when the value is not a valid backend (logged, counted) or is down.
  void apply_put(std::map<std::string, SourceBackend>& into, const json::value& kv) {
    std::string key;
    std::string value;
    if (!unbase64(str(at(kv, "key")), key) || !unbase64(str(at(kv, "value")), value)) {
      failed(SourceError::kParse, "a key or value that is not base64", false);
      return;
    }
    bool left_out = false;
    auto b = parse_etcd_backend(value, left_out);
    if (!b) {  // the key keeps its last good backend, if it had one
      failed(SourceError::kParse, "key " + key + ": " + b.error().message, false);
      return;
    }
    if (left_out) {
      into.erase(key);
    } else {
      into[key] = std::move(*b);
    }
  }

  void publish_keys() {
    std::vector<SourceBackend> list;
    list.reserve(keys_.size());
    for (const auto& [key, b] : keys_) list.push_back(b);
    publish(std::move(list));
  }

  void watch() noexcept {
    json::object create;
    create["key"] = base64(cfg_.prefix);
    create["range_end"] = base64(prefix_end(cfg_.prefix));
    create["start_revision"] = std::to_string(revision_ + 1);
    create["progress_notify"] = true;
    json::object body;
    body["create_request"] = std::move(create);
    lines_.clear();
    post("/v3/watch", json::serialize(body), [this](std::string_view b) { watch_data(b); },
         [this](std::string_view error) {
           if (!error.empty()) return retry(SourceError::kConnect, "watch: " + std::string(error));
           if (status_ != 200) {
             return retry(SourceError::kStatus,
                          "watch: HTTP " + std::to_string(status_) + " " + body_.substr(0, 200));
           }
           retry(SourceError::kConnect, "watch: ended by the server");
         });
  }

  // The watch body is one JSON object per line (grpc-gateway's stream).
  void watch_data(std::string_view b) {
    if (status_ != 200) {
      body_.append(b);
      return;
    }
    lines_.feed(b, [this](std::string_view line) { return watch_message(line); });
  }

  // One watch response; false when the watch is over (compacted, cancelled, broken): the call
  // is cancelled and the source reads again.
  bool watch_message(std::string_view text) {
    const json::value v = djson::parse(text);
    const json::value* result = at(v, "result");
    if (result == nullptr) return restart(SourceError::kParse, "watch: " + std::string(text.substr(0, 200)));
    if (int_field(*result, "compact_revision") > 0) {
      log(proxy::Level::kInfo, "discovery_compacted",
          "pool=" + pool() + " source=" + name() + " revision=" + std::to_string(revision_) +
              " compacted=" + std::to_string(int_field(*result, "compact_revision")));
      cancel_calls();
      range();  // read again from the current revision
      return false;
    }
    if (const json::value* c = at(*result, "canceled"); c != nullptr && c->is_bool() && c->get_bool()) {
      return restart(SourceError::kConnect, "watch cancelled by the server");
    }
    const json::value* events = at(*result, "events");
    const json::array* a = events != nullptr ? events->if_array() : nullptr;
    if (a == nullptr) return true;  // created, progress
    for (const auto& e : *a) {
      const json::value* kv = at(e, "kv");
      if (kv == nullptr) continue;
      if (str(at(e, "type")) == "DELETE") {
        std::string key;
        if (unbase64(str(at(*kv, "key")), key)) keys_.erase(key);
      } else {
        apply_put(keys_, *kv);
      }
      revision_ = std::max(revision_, int_field(*kv, "mod_revision"));
    }
    publish_keys();
    return true;
  }

  bool restart(SourceError why, const std::string& detail) {
    cancel_calls();
    retry(why, detail);
    return false;
  }

  size_t endpoint_ = 0;
  djson::Lines lines_;
  int64_t revision_ = 0;
  std::map<std::string, SourceBackend> keys_;  // etcd key -> its backend
};

}  // namespace

DiscoverySource* make_etcd_source(Discovery& owner, std::string pool, std::string key,
                                  const config::DiscoveryConfig& cfg) {
  return new EtcdSource(owner, std::move(pool), std::move(key), cfg);
}

}  // namespace rondel::server
