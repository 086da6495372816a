// EtcdClient and EtcdPrefix: requests to etcd's JSON gateway, range then watch of a prefix.
#include "etcd_client.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace rondel::server {

namespace json = boost::json;
using djson::at;
using djson::str;

namespace {

// The watch asks for progress notifications, which etcd sends every 10 minutes by default
// (--experimental-watch-progress-notify-interval): a watch silent longer is a hung server or
// network, counted as broken and read again.
constexpr uint64_t kEtcdWatchIdleMs = 11 * 60 * 1000;

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string etcd_base64(std::string_view in) {
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

bool etcd_unbase64(std::string_view in, std::string& out) {
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

// The prefix with its last byte below 0xff incremented and what follows dropped; "\0" = to the
// end.
std::string etcd_prefix_end(std::string prefix) {
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

int64_t etcd_int(const json::value& v, std::string_view key) {
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


void EtcdClient::start() noexcept {
  for (const config::ApiUrl& ep : cfg_.endpoints) {
    if (!ep.tls) continue;
    auto ctx = api_tls_context(name(), ep, cfg_.ca);
    if (!ctx) {
      failed(SourceError::kConnect, ctx.error().message);
      return;
    }
    tls_ = std::move(*ctx);
    break;
  }
  begin();
}

void EtcdClient::retry(SourceError why, const std::string& detail) {
  failed(why, endpoint().text + ": " + detail);
  ++endpoint_;
  retry_in(backoff_ms());
}

void EtcdClient::post(std::string path, std::string body, OnBytes on_data, OnBytes on_end,
                      uint64_t idle_ms) {
  if (!cfg_.username.empty() && auth_token_.empty()) {
    authenticate([this, path = std::move(path), body = std::move(body),
                  on_data = std::move(on_data), on_end = std::move(on_end), idle_ms]() mutable {
      post(std::move(path), std::move(body), std::move(on_data), std::move(on_end), idle_ms);
    });
    return;
  }
  ApiRequest req;
  req.idle_ms = idle_ms;
  req.method = "POST";
  req.path = std::move(path);
  req.body = std::move(body);
  // etcd takes its token as the whole Authorization value (no scheme).
  if (!auth_token_.empty()) {
    req.headers.emplace_back("Authorization", auth_token_);
  } else if (!cfg_.token_file.empty()) {
    req.headers.emplace_back("Authorization", read_secret_file(cfg_.token_file));
  }
  request(endpoint(), std::move(req), std::move(on_data), std::move(on_end));
}

void EtcdClient::authenticate(std::function<void()> then) noexcept {
  const std::string password = read_secret_file(cfg_.password_file);
  if (password.empty()) {
    failed(SourceError::kConnect, cfg_.password_file + ": cannot read the password file");
    retry_in(backoff_ms());
    return;
  }
  json::object body;
  body["name"] = cfg_.username;
  body["password"] = password;
  ApiRequest req;
  req.method = "POST";
  req.path = "/v3/auth/authenticate";
  req.body = json::serialize(body);
  request(endpoint(), std::move(req), nullptr, [this, then = std::move(then)](std::string_view e) {
    json::value v;
    if (!answer("authenticate", e, v)) return;
    const std::string_view token = str(at(v, "token"));
    if (token.empty()) return retry(SourceError::kParse, "authenticate: no token in the answer");
    auth_token_ = token;
    then();
  });
}

bool EtcdClient::answer(std::string_view what, std::string_view error, json::value& out) {
  if (!error.empty()) {
    retry(SourceError::kConnect, std::string(what) + ": " + std::string(error));
    return false;
  }
  if (status_ == 401) token_refused();  // an expired or revoked token: authenticate again
  if (status_ != 200) {
    retry(SourceError::kStatus, std::string(what) + ": HTTP " + std::to_string(status_) + " " +
                                    body_.substr(0, 200));
    return false;
  }
  out = djson::parse(body_);
  if (!out.is_object()) {
    retry(SourceError::kParse, std::string(what) + ": not a JSON object");
    return false;
  }
  return true;
}

void EtcdPrefix::range() noexcept {
  json::object body;
  body["key"] = etcd_base64(cfg_.prefix);
  body["range_end"] = etcd_base64(etcd_prefix_end(cfg_.prefix));
  post("/v3/kv/range", json::serialize(body), nullptr,
       [this](std::string_view error) { ranged(error); });
}

void EtcdPrefix::ranged(std::string_view error) {
  json::value v;
  if (!answer("range", error, v)) return;
  const json::value* kvs = at(v, "kvs");
  const json::array* a = djson::list(kvs);
  if (kvs != nullptr && a == nullptr) return retry(SourceError::kParse, "range: 'kvs' is not a list");
  reset();
  if (a != nullptr) {
    for (const auto& kv : *a) put(kv);
  }
  const json::value* header = at(v, "header");
  revision_ = header != nullptr ? etcd_int(*header, "revision") : 0;
  synced();
  watch();
}

// A key's new value (a range entry or a watch PUT).
void EtcdPrefix::put(const json::value& kv) {
  std::string key;
  std::string value;
  std::string why;
  if (!etcd_unbase64(str(at(kv, "key")), key) || !etcd_unbase64(str(at(kv, "value")), value)) {
    failed(SourceError::kParse, "a key or value that is not base64", false);
  } else if (!apply(key, &value, why)) {
    failed(SourceError::kParse, "key " + key + ": " + why, false);
  }
}

void EtcdPrefix::watch() noexcept {
  json::object create;
  create["key"] = etcd_base64(cfg_.prefix);
  create["range_end"] = etcd_base64(etcd_prefix_end(cfg_.prefix));
  create["start_revision"] = std::to_string(revision_ + 1);
  create["progress_notify"] = true;
  json::object body;
  body["create_request"] = std::move(create);
  lines_.clear();
  post("/v3/watch", json::serialize(body),
       [this](std::string_view b) {
         // The body is one JSON object per line (grpc-gateway's stream); an error's is one.
         if (status_ == 200) {
           lines_.feed(b, [this](std::string_view line) { return watch_message(line); });
         } else {
           body_.append(b);
         }
       },
       [this](std::string_view error) {
         json::value v;
         if (answer("watch", error, v)) retry(SourceError::kConnect, "watch: ended by the server");
       },
       kEtcdWatchIdleMs);
}

// One watch response; false when the watch is over (compacted, cancelled, broken): the call is
// cancelled and the prefix is read again.
bool EtcdPrefix::watch_message(std::string_view text) {
  const json::value v = djson::parse(text);
  const json::value* result = at(v, "result");
  if (result == nullptr) {
    // A stream's error comes as a line: {"error": {"grpc_code": 16, ...}} when the token is no
    // longer valid (Unauthenticated).
    if (const json::value* e = at(v, "error"); e != nullptr && etcd_int(*e, "grpc_code") == 16) {
      token_refused();
      return restart(SourceError::kStatus, "watch: " + std::string(text.substr(0, 200)));
    }
    return restart(SourceError::kParse, "watch: " + std::string(text.substr(0, 200)));
  }
  if (const int64_t compacted = etcd_int(*result, "compact_revision"); compacted > 0) {
    log(proxy::Level::kInfo, "discovery_compacted",
        "pool=" + pool() + " source=" + name() + " revision=" + std::to_string(revision_) +
            " compacted=" + std::to_string(compacted));
    cancel_calls();
    range();  // read again from the current revision
    return false;
  }
  if (const json::value* c = at(*result, "canceled"); c != nullptr && c->is_bool() && c->get_bool()) {
    return restart(SourceError::kConnect, "watch cancelled by the server");
  }
  const json::array* a = djson::list(at(*result, "events"));
  if (a == nullptr) return true;  // created, progress
  for (const auto& e : *a) {
    const json::value* kv = at(e, "kv");
    if (kv == nullptr) continue;
    if (str(at(e, "type")) == "DELETE") {
      std::string key;
      std::string why;
      if (etcd_unbase64(str(at(*kv, "key")), key)) apply(key, nullptr, why);
    } else {
      put(*kv);
    }
    revision_ = std::max(revision_, etcd_int(*kv, "mod_revision"));
  }
  synced();
  return true;
}

bool EtcdPrefix::restart(SourceError why, const std::string& detail) {
  cancel_calls();
  retry(why, detail);
  return false;
}

}  // namespace rondel::server
