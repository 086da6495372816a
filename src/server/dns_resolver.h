// The DNS half of Discovery, internal to discovery.cpp: one c-ares Resolver per name (its
// cache, its DNS hold, its re-resolution timer and c-ares's sockets on uv_poll handles) and the
// helpers that read answers. See rondel/server/discovery.h for the behaviour.
#pragma once

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rondel/core/hash.h"
#include "rondel/net/uv_util.h"
#include "rondel/server/discovery.h"

namespace rondel::server {

namespace dns_detail {

// After a failed query (timeout, server failure) try again sooner than the TTL.
constexpr uint64_t kRetryMs = 2000;

inline std::string nameservers_csv(const config::DnsConfig& d) {
  std::string csv;
  for (const auto& a : d.nameservers) {
    if (!csv.empty()) csv += ',';
    csv += a.to_string();
  }
  return csv;
}

// Identity of a resolver: what it resolves, for which pool, and how (settings that need a new
// c-ares channel). TTL and jitter are updated in place.
inline std::string resolver_key(const config::PoolConfig& pool, const config::BackendConfig& b) {
  std::string k = pool.name;
  k += '\0';
  if (b.lookup == config::NameLookup::kSrv) k += "srv ";
  k += b.address.to_string();
  k += '\0';
  k += nameservers_csv(pool.dns);
  k += '\0';
  k += std::to_string(pool.dns.timeout_ms) + "/" + std::to_string(pool.dns.attempts);
  return k;
}

inline std::string ip_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

// Backend id of a resolved address: "ip:port" ("[ip]:port" for IPv6).
inline std::string backend_id(const std::string& ip, uint16_t port) {
  config::Address a{ip, port, false};
  return a.to_string();
}

// The address a target with several gets: its first IPv4 address in text order, else its first
// IPv6 one (addresses are sorted, so every instance picks the same).
inline std::string pick_address(const std::set<std::string>& ips) {
  for (const auto& ip : ips) {
    if (ip.find(':') == std::string::npos) return ip;
  }
  return ips.empty() ? std::string() : *ips.begin();
}

inline std::set<std::string> addresses_of(const ares_addrinfo* res) {
  std::set<std::string> found;
  if (res == nullptr) return found;
  for (const ares_addrinfo_node* n = res->nodes; n != nullptr; n = n->ai_next) {
    std::string ip = ip_text(n->ai_addr);
    if (!ip.empty()) found.insert(ip);
  }
  return found;
}

// One backend a resolver found: its id, the address to connect to, and (SRV) its weight.
struct Found {
  std::string id;      // A/AAAA: IP:PORT; SRV: TARGET:PORT
  std::string ip;
  uint16_t port = 0;
  uint32_t weight = 0; // SRV only (the record's weight, at least 1); 0: the entry's weight
  bool operator==(const Found&) const = default;
};

}  // namespace dns_detail

using dns_detail::addresses_of;
using dns_detail::backend_id;
using dns_detail::Found;
using dns_detail::kRetryMs;
using dns_detail::nameservers_csv;
using dns_detail::pick_address;


// Watches one c-ares socket for its resolver. Deletes itself when its handle is closed.
struct AresPoll {
  uv_poll_t handle{};
  ares_socket_t fd = ARES_SOCKET_BAD;
  Resolver* owner = nullptr;
  static void on_close(uv_handle_t* h) noexcept { delete static_cast<AresPoll*>(h->data); }
};

class Resolver final : public net::HandleCloser {
 public:
  Resolver(Discovery& owner, std::string key, const config::PoolConfig& pool,
           const config::BackendConfig& b)
      : owner_(owner), key_(std::move(key)), pool_(pool.name), host_(b.address.host),
        port_(b.address.port), lookup_(b.lookup), dns_(pool.dns) {
    uv_timer_init(owner_.loop_, &ttl_timer_);
    uv_timer_init(owner_.loop_, &ares_timer_);
    ttl_timer_.data = this;
    ares_timer_.data = this;
    ares_options opts{};
    int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
    opts.sock_state_cb = &on_sock_state;
    opts.sock_state_cb_data = this;
    opts.timeout = static_cast<int>(std::min<uint64_t>(dns_.timeout_ms, 1u << 30));
    opts.tries = static_cast<int>(dns_.attempts);
    char lookups[] = "b";  // DNS only: configured nameservers mean "ask them", not /etc/hosts
    if (!dns_.nameservers.empty()) {
      opts.lookups = lookups;
      mask |= ARES_OPT_LOOKUPS;
    }
    int rc = ares_init_options(&channel_, &opts, mask);
    if (rc == ARES_SUCCESS && !dns_.nameservers.empty()) {
      rc = ares_set_servers_ports_csv(channel_, nameservers_csv(dns_).c_str());
    }
    if (rc != ARES_SUCCESS) {
      owner_.log_.log(proxy::Level::kError, "dns_init_failed",
                      "pool=" + pool_ + " name=" + host_ + " error=\"" + ares_strerror(rc) + "\"");
      if (channel_ != nullptr) ares_destroy(channel_);
      channel_ = nullptr;
      answered_ = true;  // nothing to wait for
    }
  }

  const std::string& key() const noexcept { return key_; }
  const std::string& pool() const noexcept { return pool_; }
  uint16_t port() const noexcept { return port_; }
  bool answered() const noexcept { return answered_; }
  const std::vector<Found>& found() const noexcept { return found_; }
  bool seen = false;  // retain() mark

  void update_settings(const config::DnsConfig& d) noexcept {
    dns_.ttl_ms = d.ttl_ms;
    dns_.jitter_percent = d.jitter_percent;
    dns_.hold_ms = d.hold_ms;
  }

  void query() noexcept {
    if (closing() || querying_ || channel_ == nullptr) return;
    querying_ = true;
    uv_timer_stop(&ttl_timer_);
    if (lookup_ == config::NameLookup::kSrv) {
      ares_query(channel_, host_.c_str(), C_IN, T_SRV, &on_srv, this);
    } else {
      resolve(host_, &on_answer, this);
    }
    arm_ares_timer();
  }

  bool holds(const std::string& id) const {
    return std::any_of(found_.begin(), found_.end(), [&](const Found& f) { return f.id == id; });
  }

  bool drop(const std::string& id) {
    auto it = std::find_if(found_.begin(), found_.end(), [&](const Found& f) { return f.id == id; });
    if (it == found_.end()) return false;
    // Kept out of the answers until the next regular re-resolution (one TTL less the jitter):
    // the name may still list it (a stale record, a backend that died), and taking it straight
    // back would only fail again. Dropped at once: the DNS hold is for answers, not failures.
    excluded_.emplace_back(id, uv_now(owner_.loop_) + dns_.ttl_ms * (100 - dns_.jitter_percent) / 100);
    found_.erase(it);
    last_seen_.erase(id);
    owner_.log_.log(proxy::Level::kWarn, "dns_address_dropped",
                    "pool=" + pool_ + " name=" + host_ + " backend=" + id +
                        " reason=connect_failed left=" + std::to_string(found_.size()));
    owner_.changed();
    query();
    return true;
  }

  void stop() noexcept {
    if (closing()) return;
    stopping_ = true;
    if (channel_ != nullptr) {
      // Runs pending callbacks with ARES_EDESTRUCTION and closes every socket (each through
      // on_sock_state(fd, 0, 0), which closes its poll handle before the socket is closed).
      ares_destroy(channel_);
      channel_ = nullptr;
    }
    uv_timer_stop(&ttl_timer_);
    uv_timer_stop(&ares_timer_);
    close_handle(reinterpret_cast<uv_handle_t*>(&ttl_timer_));
    close_handle(reinterpret_cast<uv_handle_t*>(&ares_timer_));
  }

 private:
  void on_all_closed() noexcept override { delete this; }

  // Next query in ttl ± jitter (or the retry delay after a failure), or in `at_most_ms` when
  // that is sooner (a held address's hold ends: the query then removes it or renews it).
  void schedule(uint64_t base_ms, uint64_t at_most_ms = UINT64_MAX) noexcept {
    uint64_t j = dns_.jitter_percent;
    uint64_t ms = base_ms;
    if (j > 0) {
      owner_.seed_ = core::mix64(owner_.seed_, uv_hrtime());
      uint64_t pct = 100 - j + owner_.seed_ % (2 * j + 1);  // 100-j .. 100+j
      ms = base_ms * pct / 100;
    }
    ms = std::min(ms, at_most_ms);
    uv_timer_start(&ttl_timer_, &on_ttl, std::max<uint64_t>(ms, 1), 0);
  }

  void arm_ares_timer() noexcept {
    if (channel_ == nullptr || closing()) return;
    timeval tv{};
    if (ares_timeout(channel_, nullptr, &tv) != nullptr) {
      uint64_t ms = static_cast<uint64_t>(tv.tv_sec) * 1000 + static_cast<uint64_t>(tv.tv_usec) / 1000;
      uv_timer_start(&ares_timer_, &on_ares_timer, ms > 0 ? ms : 1, 0);
    } else {
      uv_timer_stop(&ares_timer_);
    }
  }

  void resolve(const std::string& name, ares_addrinfo_callback cb, void* arg) noexcept {
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = ARES_AI_NOSORT;
    ares_getaddrinfo(channel_, name.c_str(), nullptr, &hints, cb, arg);
  }

  static bool is_answer(int status) noexcept {
    // "No such name" and "no records" are answers (the set is empty); the rest are failures.
    return status == ARES_SUCCESS || status == ARES_ENOTFOUND || status == ARES_ENODATA;
  }

  // The end of one resolution round: `next` (any order) becomes the cached set, less the
  // excluded ids, plus the cached ones it lacks that are still within their hold; logged when it
  // changed (and on the first answer), owner notified.
  void settle(std::vector<Found> next, int status) noexcept {
    querying_ = false;
    answered_ = true;
    const uint64_t now = uv_now(owner_.loop_);
    std::erase_if(excluded_, [now](const auto& h) { return h.second <= now; });
    std::erase_if(next, [this](const Found& f) {
      return std::any_of(excluded_.begin(), excluded_.end(),
                         [&](const auto& h) { return h.first == f.id; });
    });
    uint64_t next_expiry = hold(next, now);
    std::sort(next.begin(), next.end(), [](const Found& x, const Found& y) { return x.id < y.id; });
    next.erase(std::unique(next.begin(), next.end(),
                           [](const Found& x, const Found& y) { return x.id == y.id; }),
               next.end());
    if (next != found_ || first_) {
      std::string list;
      for (const auto& f : next) {
        list += list.empty() ? "" : ",";
        if (lookup_ == config::NameLookup::kSrv) {
          list += f.id + "=" + f.ip + "/w" + std::to_string(f.weight);
        } else {
          list += f.ip;
        }
      }
      owner_.log_.log(proxy::Level::kInfo, "dns_resolved",
                      "pool=" + pool_ + " name=" + host_ + " addresses=" +
                          std::to_string(next.size()) + " [" + list + "]" +
                          (status == ARES_SUCCESS ? "" : std::string(" status=") +
                                                            ares_strerror(status)));
      if (next != found_) {
        found_ = std::move(next);
        owner_.changed();
      }
    }
    first_ = false;
    schedule(dns_.ttl_ms, next_expiry - now);
  }

  // The DNS hold (HAProxy's `hold nx` / `hold obsolete`): a cached backend missing from `next`
  // (an NXDOMAIN, an empty answer, or an answer without it) stays in `next` until `hold_ms`
  // after the last answer that listed it, so one glitch cannot empty a pool. Records when each
  // id of `next` was last seen; returns the loop time at which the first held one expires
  // (UINT64_MAX: none held).
  uint64_t hold(std::vector<Found>& next, uint64_t now) {
    for (const Found& f : next) last_seen_[f.id] = Seen{now, false};
    uint64_t expiry = UINT64_MAX;
    for (const Found& f : found_) {
      if (std::any_of(next.begin(), next.end(), [&](const Found& n) { return n.id == f.id; })) {
        continue;
      }
      auto it = last_seen_.find(f.id);
      if (it == last_seen_.end() || it->second.at + dns_.hold_ms <= now) {
        if (it != last_seen_.end()) last_seen_.erase(it);
        continue;  // its hold is over: removed now
      }
      next.push_back(f);
      expiry = std::min(expiry, it->second.at + dns_.hold_ms);
      if (!it->second.missing) {
        it->second.missing = true;
        owner_.log_.log(proxy::Level::kInfo, "dns_address_held",
                        "pool=" + pool_ + " name=" + host_ + " backend=" + f.id +
                            " hold_ms=" + std::to_string(dns_.hold_ms));
      }
    }
    return expiry;
  }

  void fail(int status) noexcept {
    querying_ = false;
    answered_ = true;
    owner_.log_.log(proxy::Level::kWarn, "dns_failed",
                    "pool=" + pool_ + " name=" + host_ + " error=\"" + ares_strerror(status) +
                        "\" keeping=" + std::to_string(found_.size()));
    schedule(std::min<uint64_t>(dns_.ttl_ms, kRetryMs));
  }

  void answer(int status, ares_addrinfo* res) noexcept {
    if (!is_answer(status)) return fail(status);
    std::vector<Found> next;
    for (const auto& ip : addresses_of(res)) next.push_back(Found{backend_id(ip, port_), ip, port_, 0});
    settle(std::move(next), status);
  }

  static void on_answer(void* arg, int status, int, ares_addrinfo* res) noexcept {
    auto* r = static_cast<Resolver*>(arg);
    if (status != ARES_EDESTRUCTION && !r->stopping_) r->answer(status, res);
    if (res != nullptr) ares_freeaddrinfo(res);
  }

  // SRV (RFC 2782): the records of the lowest priority value are the backends (the others are
  // the name's fallbacks, not used); each target is then resolved to its address.
  void srv_answer(int status, const unsigned char* abuf, int alen) noexcept {
    if (!is_answer(status)) return fail(status);
    ares_srv_reply* replies = nullptr;
    if (status == ARES_SUCCESS) {
      int rc = ares_parse_srv_reply(abuf, alen, &replies);
      if (rc != ARES_SUCCESS && rc != ARES_ENODATA) return fail(rc);
    }
    uint16_t best = UINT16_MAX;
    for (ares_srv_reply* s = replies; s != nullptr; s = s->next) best = std::min(best, s->priority);
    srv_next_.clear();
    srv_pending_ = 0;
    std::vector<Target*> targets;
    for (ares_srv_reply* s = replies; s != nullptr; s = s->next) {
      if (s->priority != best || s->port == 0 || s->host == nullptr || s->host[0] == '\0') continue;
      std::string host = s->host;
      if (host.back() == '.') host.pop_back();
      // Weight 0 means "rarely, when others exist" (RFC 2782); as a ring weight 0 would drain it.
      uint32_t weight = std::max<uint32_t>(s->weight, 1);
      targets.push_back(new Target{this, host, s->port, weight});
    }
    if (replies != nullptr) ares_free_data(replies);
    if (targets.empty()) return settle({}, status);
    srv_pending_ = targets.size();
    for (Target* t : targets) resolve(t->host, &on_target, t);
  }

  struct Target {
    Resolver* r;
    std::string host;
    uint16_t port;
    uint32_t weight;
  };

  void target_answer(const Target& t, int status, ares_addrinfo* res) noexcept {
    std::string id = t.host + ":" + std::to_string(t.port);
    std::string ip = pick_address(addresses_of(res));
    if (!is_answer(status)) {
      // A target that did not answer keeps its last address.
      auto it = std::find_if(found_.begin(), found_.end(), [&](const Found& f) { return f.id == id; });
      if (it != found_.end()) ip = it->ip;
    }
    if (!ip.empty()) srv_next_.push_back(Found{id, ip, t.port, t.weight});
    if (--srv_pending_ == 0) settle(std::move(srv_next_), ARES_SUCCESS);
  }

  static void on_srv(void* arg, int status, int, unsigned char* abuf, int alen) noexcept {
    auto* r = static_cast<Resolver*>(arg);
    if (status != ARES_EDESTRUCTION && !r->stopping_) r->srv_answer(status, abuf, alen);
  }

  static void on_target(void* arg, int status, int, ares_addrinfo* res) noexcept {
    auto* t = static_cast<Target*>(arg);
    if (status != ARES_EDESTRUCTION && !t->r->stopping_) t->r->target_answer(*t, status, res);
    if (res != nullptr) ares_freeaddrinfo(res);
    delete t;
  }

  static void on_ttl(uv_timer_t* t) noexcept { static_cast<Resolver*>(t->data)->query(); }

  static void on_ares_timer(uv_timer_t* t) noexcept {
    auto* r = static_cast<Resolver*>(t->data);
    if (r->channel_ == nullptr) return;
    ares_process_fd(r->channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    r->arm_ares_timer();
  }

  static void on_sock_state(void* data, ares_socket_t fd, int readable, int writable) noexcept {
    auto* r = static_cast<Resolver*>(data);
    auto it = std::find_if(r->polls_.begin(), r->polls_.end(),
                           [fd](AresPoll* p) { return p->fd == fd; });
    if (!readable && !writable) {
      if (it != r->polls_.end()) {
        AresPoll* p = *it;
        r->polls_.erase(it);
        uv_poll_stop(&p->handle);
        uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), &AresPoll::on_close);
      }
      return;
    }
    AresPoll* p = nullptr;
    if (it == r->polls_.end()) {
      p = new AresPoll();
      p->fd = fd;
      if (uv_poll_init_socket(r->owner_.loop_, &p->handle, fd) != 0) {
        delete p;
        return;
      }
      p->handle.data = p;
      r->polls_.push_back(p);
    } else {
      p = *it;
    }
    p->owner = r;
    int events = (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0);
    uv_poll_start(&p->handle, events, &on_poll);
  }

  static void on_poll(uv_poll_t* h, int status, int events) noexcept {
    auto* p = static_cast<AresPoll*>(h->data);
    Resolver* r = p->owner;
    if (r->channel_ == nullptr) return;
    // On a poll error let c-ares read (and see the error) and write.
    ares_socket_t rfd = (status < 0 || (events & UV_READABLE)) ? p->fd : ARES_SOCKET_BAD;
    ares_socket_t wfd = (status < 0 || (events & UV_WRITABLE)) ? p->fd : ARES_SOCKET_BAD;
    ares_process_fd(r->channel_, rfd, wfd);  // may free p through on_sock_state
    r->arm_ares_timer();
  }

  Discovery& owner_;
  std::string key_;
  std::string pool_;
  std::string host_;
  uint16_t port_;
  config::NameLookup lookup_;
  config::DnsConfig dns_;
  ares_channel channel_ = nullptr;
  uv_timer_t ttl_timer_{};
  uv_timer_t ares_timer_{};
  std::vector<AresPoll*> polls_;
  std::vector<Found> found_;  // sorted by id
  // Backends (ids) dropped after a connect failure and the loop time until which answers skip
  // them.
  std::vector<std::pair<std::string, uint64_t>> excluded_;
  // Per cached id: the loop time of the last answer that listed it, and whether it is missing
  // from the answers now (held; logged once per disappearance).
  struct Seen {
    uint64_t at = 0;
    bool missing = false;
  };
  std::map<std::string, Seen> last_seen_;
  std::vector<Found> srv_next_;  // SRV: the targets resolved so far in this round
  size_t srv_pending_ = 0;       // SRV: target lookups still running in this round
  bool querying_ = false;
  bool answered_ = false;
  bool first_ = true;
  bool stopping_ = false;
};

}  // namespace rondel::server
