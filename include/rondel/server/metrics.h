// Metrics: the daemon's Prometheus metrics (names and labels in docs/metrics.md), the hot-key
// top-K of spilled keys and the per-snapshot caches the admin views share.
//
// Families are declared once, in a table (src/server/metric_families.cpp) that collection walks
// and families() renders. Most values are the proxy's own atomic counters, read only when
// /metrics is scraped. The few per-exchange series (duration and hop histograms, client bytes,
// spill pairs, hot keys) live in per-worker shards: the exchange hook of worker w writes only
// shard w, with plain single-writer stores and no lock (one per-worker lock guards the hot-key
// summary, taken only for a spilled request while hot keys are on); a scrape merges the shards.
// This is the only file pair of rondel that includes prometheus-cpp (kept behind the Impl
// pointer so that callers do not).
//
// Threading: the exchange hook runs on each worker's loop thread with that worker's context
// (exchange_context); everything else runs on the daemon's loop thread.
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

  // `daemon` and its workers (daemon.workers() of them, ids 0 .. workers-1) must outlive the
  // Metrics object. The hot-key K is read from each snapshot's admin.hot_keys (0 = off).
  explicit Metrics(Daemon& daemon);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The context to pass with on_exchange to worker `worker_id` (< daemon.workers()); valid for
  // the life of this object.
  void* exchange_context(uint32_t worker_id) noexcept;
  // The Worker::on_exchange hook; `ctx` is exchange_context(id) of the worker whose loop thread
  // calls it. No lock and no allocation in steady state: O(buckets) plus, for a spilled
  // request, one pair-table probe and (hot keys on) O(log capacity) for the key. The first
  // exchange after a snapshot change takes a lock once to pick up the new view.
  static void on_exchange(void* ctx, const proxy::ExchangeRecord& rec) noexcept;

  // The daemon published `snap` (daemon loop thread): per-snapshot caches follow it.
  void set_snapshot(std::shared_ptr<const proxy::Snapshot> snap);

  // The Prometheus text exposition (format 0.0.4) of every metric. Allocates; admin use.
  std::string serialize();

  // The current top-K spilled keys of `pool` merged over the workers (empty when off or
  // unknown), largest first.
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

  // One family of the table /metrics serves, as docs/metrics.md lists it.
  struct FamilyInfo {
    std::string_view name;
    std::string_view type;  // counter, gauge or histogram
    std::vector<std::string_view> labels;
    std::string_view help;
  };
  // Every family served, in the order of docs/metrics.md, rendered from the collection table.
  static std::vector<FamilyInfo> families();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rondel::server
