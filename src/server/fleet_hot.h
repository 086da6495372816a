// FleetHot: hot keys a fleet agrees on (`fleet: {etcd | kubernetes, share_hot_keys}`, issue
// 37). Every epoch (kEpochMs of wall-clock time, aligned, so that every instance's epochs begin
// together):
//
//  1. At the epoch's start, this instance sums its workers' detector counts per pool
//     (PoolState::worker_counts, core::merge_hot_counts) and writes them, tagged with the epoch,
//     into its fleet key (Fleet::set_hot); on Kubernetes it serves them at /api/fleet/record.
//  2. A quarter epoch later, on Kubernetes, it reads every other member's record from that
//     member's admin API (Fleet::poll_peers).
//  3. Half an epoch later, when every instance's key has reached every watcher, it sums the
//     counts every member published for that epoch and builds the pool's table from them
//     (core::build_fleet_table), which every worker then routes hot keys by
//     (PoolState::fleet_hot). Every instance sums the same records with the same pure function,
//     so every instance has the same table: agreement no longer depends on sampling.
//
// An epoch whose records this instance does not see (etcd away, no peer answering, this
// instance not yet registered) leaves the pools on their own detectors (fleet_hot cleared), so
// losing etcd or the peers costs agreement, never routing. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fleet.h"
#include "rondel/core/fleet_hot.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

class FleetHot {
 public:
  // Epoch length. Short enough that a key that turns hot is shared within a second; each epoch
  // costs every instance one etcd put of its counts (up to hot_keys.capacity keys per pool).
  static constexpr uint64_t kEpochMs = 500;

  // Starts at once. `snapshot` returns the snapshot being served (never a dangling one); `fleet`
  // must outlive this object.
  FleetHot(uv_loop_t* loop, Fleet& fleet,
           std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot);
  ~FleetHot();  // stop()s
  FleetHot(const FleetHot&) = delete;
  FleetHot& operator=(const FleetHot&) = delete;
  // Stops the timer (its handle finishes closing on the loop) and takes the shared tables away
  // from the pools. Idempotent.
  void stop() noexcept;

  // The last table per pool, for /api/fleet and the metrics.
  struct PoolTable {
    uint64_t epoch = 0;
    size_t contributors = 0;                 // members whose counts of that epoch were summed
    uint64_t total = 0;                      // the fleet's requests the counts are out of
    std::vector<core::HotCount> hot;         // keys with R > 1, heaviest first
    std::shared_ptr<const core::HotReplicas> table;  // nullptr: the pool uses its own
  };
  const std::map<std::string, PoolTable>& tables() const noexcept { return tables_; }
  // {"epoch_ms", "pools": {POOL: {"epoch", "contributors", "total", "keys": [{"hash",
  // "count", "replicas"}]}}} for /api/fleet's "hot".
  void write_json(util::JsonWriter& w) const;

 private:
  static void on_timer(uv_timer_t* t) noexcept;
  static void on_poll_timer(uv_timer_t* t) noexcept;
  // The peers are polled this far into the second quarter at most (a per-member offset).
  static constexpr uint64_t kPollJitterMs = 40;
  void arm() noexcept;
  void publish(uint64_t epoch);
  void agree(uint64_t epoch);

  uv_loop_t* loop_;
  Fleet& fleet_;
  std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot_;
  uv_timer_t* timer_ = nullptr;  // heap: freed by its close callback
  uv_timer_t* poll_timer_ = nullptr;  // the same; the polls' offset into the quarter
  uint64_t poll_jitter_ms_;           // this member's offset: hash of its id, below kPollJitterMs
  std::map<std::string, PoolTable> tables_;
};

}  // namespace rondel::server
