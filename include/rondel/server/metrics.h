// Metrics: the daemon's Prometheus metrics (names and labels in docs/metrics.md), the hot-key
// top-K of spilled keys and the per-snapshot caches the admin views share.
//
// Cheap on the data path: most values are the proxy's own atomic counters, read only when
// /metrics is scraped. Per exchange, on_exchange() adds to plain integers, observes the duration
// and hop histograms through pointers cached per (pool, backend) for the current snapshot
// generation, and for a spilled request counts the (owner -> backend) pair and feeds the key to
// the hot-key summary. This is the only file pair of rondel that includes prometheus-cpp (kept
// behind the Impl pointer so that callers do not).
//
// Threading: the exchange hook runs on every worker's loop thread, the admin views and
// set_snapshot on the daemon's loop thread; one mutex guards the state (uncontended with one
// worker; with several it is held for the few counter updates of one exchange).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/core/hot_keys.h"
#include "rondel/proxy/worker.h"

namespace rondel::server {

class Daemon;

class Metrics {
 public:
  // Length of one hot-key window: the top-K covers the last one to two windows.
  static constexpr uint64_t kHotKeyWindowMs = 60000;

  // `daemon` and its worker (which must exist already) must outlive the Metrics object. The
  // hot-key K is read from each snapshot's admin.hot_keys (0 = off).
  explicit Metrics(Daemon& daemon);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The Worker::on_exchange hook; `ctx` is the Metrics object. Loop thread; O(1) amortised,
  // plus O(log capacity) for a spilled request (hot-key summary) and one hash of its key.
  static void on_exchange(void* ctx, const proxy::ExchangeRecord& rec) noexcept;

  // The daemon published `snap` (daemon loop thread): per-snapshot caches follow it.
  void set_snapshot(std::shared_ptr<const proxy::Snapshot> snap);

  // The Prometheus text exposition (format 0.0.4) of every metric. Allocates; admin use.
  std::string serialize();

  // The current top-K spilled keys of `pool` (empty when off or unknown), largest first.
  std::vector<core::HotKeys::Entry> hot_keys(std::string_view pool);
  // Share of the key space owned by each backend of `pool` (by backend index) for the current
  // snapshot, computed once per snapshot generation. Empty when the pool is not in the current
  // snapshot. The reference stays valid until the next call of any Metrics function.
  const std::vector<double>& key_shares(const proxy::Pool& pool);
  // Spilled requests seen by on_exchange for `pool`, per (owner, chosen backend) id pair.
  struct SpillPair {
    std::string owner, backend;
    uint64_t count = 0;
  };
  std::vector<SpillPair> spill_pairs(std::string_view pool);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rondel::server
