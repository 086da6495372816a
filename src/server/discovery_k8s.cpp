// Kubernetes discovery: a pool's backends are the endpoints of a Service's EndpointSlices
// (discovery.k8s.io/v1, label kubernetes.io/service-name=NAME): a list, then a watch from the
// list's resourceVersion with bookmarks; `410 Gone` (as a status or an ERROR event) lists again;
// a watch the server ends is resumed from the last resourceVersion seen; errors back off with
// jitter. An endpoint's id is targetRef.name (else hostname, else its address), so a pod
// replaced under the same name keeps its keys. ready -> up; serving && terminating -> drain
// (weight 0); otherwise gone. zone -> label `zone.ZONE`.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "api_client.h"
#include "discovery_json.h"
#include "discovery_source.h"
#include "rondel/config/loader.h"

namespace rondel::server {

namespace json = boost::json;
using djson::at;
using djson::str;

namespace {

constexpr std::string_view kAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/";
// A watch is asked to end after this long (the API server's own limit is similar); it is then
// resumed from the last resourceVersion without listing again.
constexpr int kWatchSeconds = 300;
// A watch silent well past its own end (bookmarks come about every minute) is a server or a
// network that hangs: it is counted as broken and resumed.
constexpr uint64_t kK8sWatchIdleMs = (kWatchSeconds + 60) * 1000;

// A condition: absent (null) means `absent_means`.
bool flag(const json::value* conditions, std::string_view key, bool absent_means) {
  const json::value* f = conditions != nullptr ? at(*conditions, key) : nullptr;
  return f != nullptr && f->is_bool() ? f->get_bool() : absent_means;
}

std::string_view resource_version(const json::value& obj) {
  const json::value* meta = at(obj, "metadata");
  return meta != nullptr ? str(at(*meta, "resourceVersion")) : std::string_view();
}

bool label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}

}  // namespace

namespace {

// The backends of one EndpointSlice for Service port `port` (a name, or a number as text).
std::vector<SourceBackend> slice_backends(const json::value& slice, std::string_view port) {
  std::vector<SourceBackend> out;
  const std::string_view type = str(at(slice, "addressType"));
  if (type != "IPv4" && type != "IPv6") return out;  // FQDN: not an address to connect to
  const bool by_number = port.find_first_not_of("0123456789") == std::string_view::npos;
  int64_t number = -1;
  const json::value* ports = at(slice, "ports");
  if (const json::array* a = ports != nullptr ? ports->if_array() : nullptr) {
    for (const auto& p : *a) {
      const json::value* n = at(p, "port");
      const int64_t* v = n != nullptr ? n->if_int64() : nullptr;
      if (v == nullptr) continue;
      if (by_number ? std::to_string(*v) == port : str(at(p, "name")) == port) number = *v;
    }
  }
  if (number <= 0 || number > 65535) return out;
  const json::value* eps = at(slice, "endpoints");
  const json::array* list = eps != nullptr ? eps->if_array() : nullptr;
  if (list == nullptr) return out;
  for (const auto& ep : *list) {
    const json::value* addrs = at(ep, "addresses");
    const json::array* a = addrs != nullptr ? addrs->if_array() : nullptr;
    if (a == nullptr || a->empty() || !(*a)[0].is_string()) continue;
    const std::string ip((*a)[0].get_string());
    const json::value* cond = at(ep, "conditions");
    const bool ready = flag(cond, "ready", true);
    const bool serving = flag(cond, "serving", ready);
    const bool terminating = flag(cond, "terminating", false);
    if (!ready && !(serving && terminating)) continue;  // not serving: gone
    SourceBackend b;
    const std::string text = type == "IPv6" ? "[" + ip + "]:" + std::to_string(number)
                                            : ip + ":" + std::to_string(number);
    if (!config::parse_address(text, false, b.address)) continue;
    b.weight = ready ? 1 : 0;  // serving and terminating: drain
    const json::value* ref = at(ep, "targetRef");
    b.id = std::string(ref != nullptr ? str(at(*ref, "name")) : std::string_view());
    if (b.id.empty()) b.id = std::string(str(at(ep, "hostname")));
    if (b.id.empty()) b.id = b.address.to_string();
    const std::string_view zone = str(at(ep, "zone"));
    if (!zone.empty() && std::all_of(zone.begin(), zone.end(), label_char)) {
      b.labels.push_back("zone." + std::string(zone));
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

std::vector<SourceBackend> endpoint_slice_backends(std::string_view slice_json,
                                                   std::string_view port) {
  return slice_backends(djson::parse(slice_json), port);
}

namespace {

class K8sSource final : public DiscoverySource {
 public:
  using DiscoverySource::DiscoverySource;

  std::string name() const override {
    return "kubernetes:" + cfg_.namespace_name + "/" + cfg_.service;
  }
  std::string_view kind() const noexcept override { return "kubernetes"; }

  void start() noexcept override {
    server_ = cfg_.server;
    token_file_ = cfg_.token_file;
    std::string ca = cfg_.ca;
    if (server_.host.empty()) {  // in-cluster
      const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
      const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
      if (host == nullptr || port == nullptr) {
        failed(SourceError::kConnect,
               "no 'server' and not in a cluster (KUBERNETES_SERVICE_HOST/_PORT unset)");
        return;
      }
      const std::string h = host;
      auto url = config::parse_api_url("https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) +
                                       ":" + port);
      if (!url) return failed(SourceError::kConnect, "KUBERNETES_SERVICE_HOST/_PORT: " + url.error().message);
      server_ = std::move(*url);
      if (token_file_.empty()) token_file_ = std::string(kAccountDir) + "token";
      if (ca.empty()) ca = std::string(kAccountDir) + "ca.crt";
    }
    auto ctx = api_tls_context(name(), server_, ca);
    if (!ctx) return failed(SourceError::kConnect, ctx.error().message);
    tls_ = std::move(*ctx);
    list();
  }

 private:
  void on_retry() noexcept override { rv_.empty() ? list() : watch(); }

  std::string path() const {
    return "/apis/discovery.k8s.io/v1/namespaces/" + cfg_.namespace_name +
           "/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D" + cfg_.service;
  }

  void get(std::string target, OnBytes on_data, OnBytes on_end, uint64_t idle_ms = 0) {
    ApiRequest req;
    req.path = std::move(target);
    req.idle_ms = idle_ms;
    // Re-read for every request: a projected service-account token is rotated in place.
    if (!token_file_.empty()) {
      const std::string token = read_secret_file(token_file_);
      if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    }
    request(server_, std::move(req), std::move(on_data), std::move(on_end));
  }

  void retry(SourceError why, const std::string& detail) {
    failed(why, server_.text + ": " + detail);
    retry_in(backoff_ms());
  }

  void list() noexcept {
    rv_.clear();
    get(path(), nullptr, [this](std::string_view error) { listed(error); });
  }

  void listed(std::string_view error) {
    if (!error.empty()) return retry(SourceError::kConnect, "list: " + std::string(error));
    if (status_ != 200) {
      return retry(SourceError::kStatus,
                   "list: HTTP " + std::to_string(status_) + " " + body_.substr(0, 200));
    }
    const json::value v = djson::parse(body_);
    const json::array* a = djson::list(at(v, "items"));
    if (a == nullptr) return retry(SourceError::kParse, "list: not an EndpointSliceList");
    slices_.clear();
    for (const auto& slice : *a) {
      const json::value* meta = at(slice, "metadata");
      const std::string_view name = meta != nullptr ? str(at(*meta, "name")) : std::string_view();
      if (!name.empty()) slices_[std::string(name)] = slice_backends(slice, cfg_.port);
    }
    rv_ = std::string(resource_version(v));
    publish_slices();
    watch();
  }

  void publish_slices() {
    std::vector<SourceBackend> all;
    for (const auto& [name, list] : slices_) all.insert(all.end(), list.begin(), list.end());
    publish(std::move(all));
  }

  void watch() noexcept {
    lines_.clear();
    get(path() + "&watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
            std::to_string(kWatchSeconds) + "&resourceVersion=" + rv_,
        [this](std::string_view b) { watch_data(b); },
        [this](std::string_view error) { watch_ended(error); }, kK8sWatchIdleMs);
  }

  void watch_ended(std::string_view error) {
    if (status_ == 410) {  // the resourceVersion is too old: list again, at once
      log(proxy::Level::kInfo, "discovery_relist", "pool=" + pool() + " source=" + name() +
                                                       " reason=gone resource_version=" + rv_);
      return list();
    }
    if (!error.empty()) return retry(SourceError::kConnect, "watch: " + std::string(error));
    if (status_ != 200) {
      return retry(SourceError::kStatus,
                   "watch: HTTP " + std::to_string(status_) + " " + body_.substr(0, 200));
    }
    watch();  // the server ended the watch (its timeout): resume from the last version
  }

  void watch_data(std::string_view b) {
    if (status_ != 200) {
      body_.append(b);
      return;
    }
    lines_.feed(b, [this](std::string_view line) { return watch_event(line); });
  }

  // One watch event; false when the watch is over (the call is cancelled).
  bool watch_event(std::string_view text) {
    const json::value v = djson::parse(text);
    const std::string_view type = str(at(v, "type"));
    const json::value* obj = at(v, "object");
    if (type.empty() || obj == nullptr) {
      cancel_calls();
      retry(SourceError::kParse, "watch: not a watch event: " + std::string(text.substr(0, 200)));
      return false;
    }
    if (type == "ERROR") {
      cancel_calls();
      const json::value* code = at(*obj, "code");
      if (code != nullptr && code->is_int64() && code->get_int64() == 410) {
        log(proxy::Level::kInfo, "discovery_relist", "pool=" + pool() + " source=" + name() +
                                                         " reason=gone resource_version=" + rv_);
        list();
      } else {
        retry(SourceError::kStatus, "watch: " + std::string(str(at(*obj, "message"))));
      }
      return false;
    }
    if (const std::string_view rv = resource_version(*obj); !rv.empty()) rv_ = std::string(rv);
    if (type == "BOOKMARK") return true;
    const json::value* meta = at(*obj, "metadata");
    const std::string name(meta != nullptr ? str(at(*meta, "name")) : std::string_view());
    if (name.empty()) return true;
    if (type == "DELETED") {
      slices_.erase(name);
    } else {  // ADDED, MODIFIED
      slices_[name] = slice_backends(*obj, cfg_.port);
    }
    publish_slices();
    return true;
  }

  config::ApiUrl server_;
  std::string token_file_;
  djson::Lines lines_;
  std::string rv_;  // the last resourceVersion seen ("" before the first list)
  std::map<std::string, std::vector<SourceBackend>> slices_;  // by EndpointSlice name
};

}  // namespace

DiscoverySource* make_k8s_source(Discovery& owner, std::string pool, std::string key,
                                 const config::DiscoveryConfig& cfg) {
  return new K8sSource(owner, std::move(pool), std::move(key), cfg);
}

}  // namespace rondel::server
