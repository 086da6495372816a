// FleetLoad: the members of a fleet share their in-flight counts (`fleet: {peers | kubernetes,
// share_load: INTERVAL}`, issue 37). Every interval this instance sends every other member one
// UDP datagram of its own in-flight counts per pool and backend (load_json, the document
// /api/fleet/load serves too), from a UDP socket bound to its admin listener's address, to
// each member's admin address (the `peers` list, or endpoint IP and peer_port). A datagram is
// taken only from a listed member's address whose id it carries. On each one it writes into
// every backend of the served snapshot the sum of the other members' last counts and until when
// every one of them is fresh (BackendState::peer_in_flight, peer_fresh_until_ms); a member's
// counts are fresh for kFreshIntervals intervals after they arrived. While every member's are,
// the bound compares this instance's count plus theirs, one for one (core::effective_load):
// the fleet bounds by its own counts, at most a few intervals old, instead of a backend's last
// report or N times what this instance sees (docs/routing.md, "Fleets: shared counts").
//
// UDP, not the admin API's HTTP: the interval must be a small part of the backends' service
// time (5 ms for 100 ms backends), and an HTTP call per member per interval costs a TCP
// connection each (a 20 ms poll of 2 members took 3% of a core per member, mostly the kernel's
// handshakes, and left thousands of TIME_WAIT sockets). A lost datagram costs one interval.
//
// With admin.token_file set, each datagram is "HMAC-SHA256(token, counts) in hex\n" followed by
// the counts, and a datagram whose MAC does not verify is rejected: only a holder of the admin
// token, who may change the backends' states anyway, can move the fleet's bound. Without it
// the admin API is read-only and the datagrams are checked by address and id only, which a
// host able to forge source addresses on the members' network can defeat (docs/configuration.md).
//
// A member that sends nothing (stopped, partitioned) stops being fresh, and every backend falls
// back to the report or N x local until it sends again: losing a peer costs the shared counts,
// never routing. A pool some fresh member's counts lack (a rolling reload that renames or adds
// it) falls back the same way until every member has it. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "fleet.h"
#include "rondel/config/config.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

class FleetLoad {
 public:
  // A member's counts count this many intervals after they arrived: a datagram lost or late
  // does not drop the fleet to the fallback.
  static constexpr uint64_t kFreshIntervals = 4;
  // Larger counts (pools of thousands of backends) are not sent: one datagram each, no
  // fragments to reassemble (logged once).
  static constexpr size_t kMaxDatagram = 60000;

  // Binds the UDP socket at `bind` (the admin listener's address) and starts at once; a bind
  // that fails is logged and leaves the fleet on its fallback. `snapshot` returns the snapshot
  // being served; `fleet` and `log` must outlive this.
  // `key`: the admin token datagrams are signed and verified with ("" = none), read at every
  // send and receive (a reload that changes it applies at once); it must outlive this.
  FleetLoad(uv_loop_t* loop, Fleet& fleet, uint64_t interval_ms, const config::Address& bind,
            const std::string& key, proxy::Logger& log,
            std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot);
  ~FleetLoad();  // stop()s
  FleetLoad(const FleetLoad&) = delete;
  FleetLoad& operator=(const FleetLoad&) = delete;
  // Stops sending and receiving (the handles finish closing on the loop) and marks every
  // backend's shared counts stale. Idempotent.
  void stop() noexcept;

  // This instance's own counts, what it sends and what /api/fleet/load serves: {"id": ID,
  // "pools": {POOL: {BACKEND_ID: COUNT}}}, COUNT the backend's in-flight requests (their cost
  // with `load_by: prompt_size`, what the pool's bound compares).
  static std::string load_json(const std::string& id, const proxy::Snapshot& snap);
  // "load": {"interval_ms", "fresh": every member's counts fresh, "members": {ID: {"answered":
  // bool, "age_ms": since its last datagram or null}}, "rejected": datagrams not taken} for
  // /api/fleet.
  void write_json(util::JsonWriter& w) const;

 private:
  struct Sample {
    uint64_t at_ms = 0;  // loop time it arrived
    std::map<std::string, std::map<std::string, uint32_t>> pools;  // pool -> backend id -> count
  };
  static void on_timer(uv_timer_t* t) noexcept;
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_recv(uv_udp_t* h, ssize_t n, const uv_buf_t* buf, const sockaddr* from,
                      unsigned flags) noexcept;
  void send();
  void receive(std::string_view text, const sockaddr* from);
  // Writes the sums and their freshness into the served snapshot's backends. O(pools x
  // backends x members): run on every datagram while that is at most kApplyPerDatagram, else
  // on the timer only (freshness then moves once an interval).
  void apply();
  static constexpr size_t kApplyPerDatagram = 4096;
  uint64_t fresh_ms() const noexcept { return kFreshIntervals * interval_ms_; }

  uv_loop_t* loop_;
  Fleet& fleet_;
  uint64_t interval_ms_;
  const std::string& key_;
  proxy::Logger& log_;
  std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot_;
  uv_timer_t* timer_ = nullptr;  // heap: freed by its close callback
  uv_udp_t* udp_ = nullptr;      // the same; null when the bind failed
  std::string buf_;              // the receive buffer
  std::map<std::string, Sample> samples_;  // by member id
  uint64_t rejected_ = 0;        // datagrams from no listed member, or not its counts
  bool logged_too_large_ = false;
  bool logged_send_error_ = false;
  size_t apply_cost_ = 0;  // pools x backends x members at the last apply()
};

}  // namespace rondel::server
