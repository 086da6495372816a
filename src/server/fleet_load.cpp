// FleetLoad: the members' in-flight counts over UDP, and their sums handed to the picks.
#include "fleet_load.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <utility>

#include "discovery_json.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/pool.h"

namespace rondel::server {

namespace json = boost::json;
using djson::at;

namespace {

// A member's datagram (load_json's text) into `out`: false when it is not one, or is another
// instance's (`id` differs: an address reused by another instance must not lend it its counts).
bool read_load(const std::string& id, std::string_view text,
               std::map<std::string, std::map<std::string, uint32_t>>& out) {
  const json::value v = djson::parse(text);
  if (djson::str(at(v, "id")) != id) return false;
  const json::value* pools = at(v, "pools");
  if (pools == nullptr || !pools->is_object()) return false;
  for (const auto& [pool, backends] : pools->get_object()) {
    const json::object* o = backends.if_object();
    if (o == nullptr) return false;
    auto& counts = out[std::string(pool)];
    for (const auto& [backend, count] : *o) {
      const bool whole = count.is_uint64() || (count.is_int64() && count.get_int64() >= 0);
      if (!whole || count.to_number<uint64_t>() > UINT32_MAX) return false;
      counts[std::string(backend)] = static_cast<uint32_t>(count.to_number<uint64_t>());
    }
  }
  return true;
}

uint32_t count_of(const proxy::Pool& p, const proxy::BackendState& b) noexcept {
  return (p.config().load_by == config::LoadBy::kPromptSize ? b.in_flight_cost : b.in_flight)
      .load(std::memory_order_relaxed);
}

// The hex HMAC-SHA256 of `text` keyed by `key` (64 characters).
std::string mac_hex(const std::string& key, std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), md.data(), &len);
  std::string hex(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) std::snprintf(&hex[2 * i], 3, "%02x", md[i]);
  return hex;
}

constexpr size_t kMacHex = 64;

// Whether `a` is the address `b` (family, IP and port); an IPv4-mapped IPv6 sender (a socket
// bound to [::]) is compared as the IPv4 address it carries.
bool same_address(const sockaddr* a, const sockaddr_storage& b) noexcept {
  sockaddr_in mapped{};
  if (a->sa_family == AF_INET6 && b.ss_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
    if (!IN6_IS_ADDR_V4MAPPED(&x->sin6_addr)) return false;
    mapped.sin_family = AF_INET;
    mapped.sin_port = x->sin6_port;
    std::memcpy(&mapped.sin_addr, &x->sin6_addr.s6_addr[12], 4);
    a = reinterpret_cast<const sockaddr*>(&mapped);
  }
  if (a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port &&
           std::equal(std::begin(x->sin6_addr.s6_addr), std::end(x->sin6_addr.s6_addr),
                      std::begin(y->sin6_addr.s6_addr));
  }
  return false;
}

}  // namespace

FleetLoad::FleetLoad(uv_loop_t* loop, Fleet& fleet, uint64_t interval_ms,
                     const config::Address& bind, const std::string& key, proxy::Logger& log,
                     std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot)
    : loop_(loop),
      fleet_(fleet),
      interval_ms_(std::max<uint64_t>(interval_ms, 1)),
      key_(key),
      log_(log),
      snapshot_(std::move(snapshot)),
      timer_(new uv_timer_t) {
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  uv_timer_start(timer_, &on_timer, interval_ms_, interval_ms_);
  auto sa = net::to_sockaddr(bind.host, bind.port);
  udp_ = new uv_udp_t;
  uv_udp_init(loop_, udp_);
  udp_->data = this;
  int rc = sa ? uv_udp_bind(udp_, reinterpret_cast<const sockaddr*>(&*sa), 0) : UV_EINVAL;
  if (rc == 0) rc = uv_udp_recv_start(udp_, &on_alloc, &on_recv);
  if (rc != 0) {
    log_.log(proxy::Level::kError, "fleet_share_load_failed",
             "addr=" + bind.to_string() + " error=" + uv_strerror(rc));
    uv_close(reinterpret_cast<uv_handle_t*>(std::exchange(udp_, nullptr)),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_udp_t*>(h); });
  }
}

FleetLoad::~FleetLoad() { stop(); }

void FleetLoad::stop() noexcept {
  if (timer_ == nullptr) return;
  uv_timer_stop(timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(std::exchange(timer_, nullptr)),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  if (udp_ != nullptr) {
    uv_udp_recv_stop(udp_);
    uv_close(reinterpret_cast<uv_handle_t*>(std::exchange(udp_, nullptr)),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_udp_t*>(h); });
  }
  samples_.clear();
  if (auto snap = snapshot_()) {
    for (const auto& p : snap->pools()) {
      for (size_t i = 0; i < p->size(); ++i) {
        p->backend(static_cast<core::BackendIndex>(i))
            .peer_fresh_until_ms.store(0, std::memory_order_relaxed);
      }
    }
  }
}

void FleetLoad::on_timer(uv_timer_t* t) noexcept {
  auto* self = static_cast<FleetLoad*>(t->data);
  self->send();
  self->apply();  // members that left or went silent, and a snapshot published since
}

void FleetLoad::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  auto* self = static_cast<FleetLoad*>(h->data);
  self->buf_.resize(65536);
  *buf = uv_buf_init(self->buf_.data(), static_cast<unsigned>(self->buf_.size()));
}

void FleetLoad::on_recv(uv_udp_t* h, ssize_t n, const uv_buf_t* buf, const sockaddr* from,
                        unsigned flags) noexcept {
  if (n <= 0 || from == nullptr || (flags & UV_UDP_PARTIAL) != 0) return;
  static_cast<FleetLoad*>(h->data)->receive(std::string_view(buf->base, static_cast<size_t>(n)),
                                            from);
}

void FleetLoad::send() {
  if (udp_ == nullptr) return;
  auto snap = snapshot_();
  if (!snap) return;
  std::string text = load_json(fleet_.id(), *snap);
  if (!key_.empty()) text = mac_hex(key_, text) + '\n' + text;
  if (text.size() > kMaxDatagram) {
    if (!logged_too_large_) {
      log_.log(proxy::Level::kWarn, "fleet_share_load_too_large",
               "bytes=" + std::to_string(text.size()) + " max=" + std::to_string(kMaxDatagram));
      logged_too_large_ = true;
    }
    return;
  }
  uv_buf_t b = uv_buf_init(const_cast<char*>(text.data()), static_cast<unsigned>(text.size()));
  for (const auto& [id, addr] : fleet_.peer_addresses()) {
    if (id == fleet_.id() || addr.port == 0) continue;
    auto sa = net::to_sockaddr(addr.host, addr.port);
    // A full socket buffer drops this one: the next interval sends again.
    const int rc = sa ? uv_udp_try_send(udp_, &b, 1, reinterpret_cast<const sockaddr*>(&*sa))
                      : UV_EINVAL;
    if (rc < 0 && rc != UV_EAGAIN && !logged_send_error_) {
      log_.log(proxy::Level::kWarn, "fleet_share_load_send_failed",
               "member=" + id + " addr=" + addr.to_string() + " error=" + uv_strerror(rc));
      logged_send_error_ = true;
    }
  }
}

void FleetLoad::receive(std::string_view text, const sockaddr* from) {
  if (!key_.empty()) {
    // "MAC\n" then the counts; the MAC must be the token's over exactly those bytes.
    if (text.size() <= kMacHex || text[kMacHex] != '\n') {
      ++rejected_;
      return;
    }
    const std::string want = mac_hex(key_, text.substr(kMacHex + 1));
    if (CRYPTO_memcmp(want.data(), text.data(), kMacHex) != 0) {
      ++rejected_;
      return;
    }
    text.remove_prefix(kMacHex + 1);
  }
  // The sender must be a listed member, at its listed address, carrying its own id (two
  // members listed at one address: the one whose id it carries).
  for (const auto& [id, addr] : fleet_.peer_addresses()) {
    if (id == fleet_.id()) continue;
    auto sa = net::to_sockaddr(addr.host, addr.port);
    if (!sa || !same_address(from, *sa)) continue;
    Sample s;
    if (!read_load(id, text, s.pools)) continue;
    uv_update_time(loop_);
    s.at_ms = uv_now(loop_);
    samples_[id] = std::move(s);
    if (apply_cost_ <= kApplyPerDatagram) apply();
    return;
  }
  ++rejected_;
}

void FleetLoad::apply() {
  auto snap = snapshot_();
  if (!snap) return;
  // Fresh until the oldest member's counts age out; 0 when a member has sent none.
  uint64_t until = UINT64_MAX;
  const auto& members = fleet_.peer_addresses();
  for (const auto& [id, addr] : members) {
    if (id == fleet_.id()) continue;
    auto it = samples_.find(id);
    until = it == samples_.end() ? 0 : std::min(until, it->second.at_ms + fresh_ms());
  }
  if (until == UINT64_MAX) until = 0;  // no other member: nothing shared
  std::erase_if(samples_, [&](const auto& kv) { return members.count(kv.first) == 0; });
  size_t cost = 0;
  for (const auto& p : snap->pools()) {
    // A pool some member's counts lack (renamed or added by a reload not yet everywhere):
    // its requests there are unknown, so the pool falls back until every member has it.
    bool everyone = true;
    for (const auto& [id, s] : samples_) {
      everyone = everyone && (id == fleet_.id() || s.pools.count(p->name()) != 0);
    }
    const uint64_t pool_until = everyone ? until : 0;
    const std::string& name = p->name();
    for (size_t i = 0; i < p->size(); ++i) {
      proxy::BackendState& b = p->backend(static_cast<core::BackendIndex>(i));
      uint64_t sum = 0;
      const std::string& backend = p->config().backends[i].id;
      for (const auto& [id, s] : samples_) {
        if (id == fleet_.id()) continue;
        auto pool = s.pools.find(name);
        if (pool == s.pools.end()) continue;
        auto c = pool->second.find(backend);
        if (c != pool->second.end()) sum += c->second;  // none: it sends that backend nothing
        ++cost;
      }
      b.peer_in_flight.store(static_cast<uint32_t>(std::min<uint64_t>(sum, UINT32_MAX)),
                             std::memory_order_relaxed);
      // Release: a pick that sees this deadline (acquire) sees the sum stored with it.
      b.peer_fresh_until_ms.store(pool_until, std::memory_order_release);
    }
  }
  apply_cost_ = cost;
}

std::string FleetLoad::load_json(const std::string& id, const proxy::Snapshot& snap) {
  util::JsonWriter w;
  w.begin();
  w.field("id", id);
  w.begin("pools");
  for (const auto& p : snap.pools()) {
    w.begin(p->name());
    for (size_t i = 0; i < p->size(); ++i) {
      w.field(p->config().backends[i].id,
              uint64_t{count_of(*p, p->backend(static_cast<core::BackendIndex>(i)))});
    }
    w.end();
  }
  w.end();
  w.end();
  return w.take();
}

void FleetLoad::write_json(util::JsonWriter& w) const {
  const uint64_t now = uv_now(loop_);
  w.begin("load");
  w.field("interval_ms", interval_ms_);
  bool fresh = true;
  size_t others = 0;
  w.begin("members");
  for (const auto& [id, addr] : fleet_.peer_addresses()) {
    if (id == fleet_.id()) continue;
    ++others;
    auto it = samples_.find(id);
    const bool answered = it != samples_.end();
    fresh = fresh && answered && now <= it->second.at_ms + fresh_ms();
    w.begin(id);
    w.field("answered", answered);
    if (answered) {
      w.field("age_ms", now - std::min(now, it->second.at_ms));
    } else {
      w.null_field("age_ms");
    }
    w.end();
  }
  w.end();
  fresh = fresh && others > 0;
  w.field("fresh", fresh);
  w.field("rejected", rejected_);
  w.end();
}

}  // namespace rondel::server
