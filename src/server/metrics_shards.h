// The pieces of Metrics shared by metrics.cpp (exchange hook, snapshot views, merge) and
// metric_families.cpp (the family table): per-worker shards that only their worker's loop thread
// writes, the per-snapshot view the workers read, and the merged rows a scrape reads.
//
// Internal to src/server. Threads: a shard has one writer (its worker's loop thread) and is read
// by the daemon's loop thread at scrape time; slots and views are built on the daemon's loop
// thread and shared with the workers through shared_ptr (never modified once published, except
// the shards' counters).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <prometheus/metric_family.h>

#include "rondel/core/hot_keys.h"
#include "rondel/proxy/body_key.h"
#include "rondel/proxy/pool.h"
#include "rondel/server/metrics.h"

namespace rondel::server::metrics_detail {

// A counter with one writer and any number of readers: the writer adds with a plain load and
// store (no locked read-modify-write), readers load relaxed.
class Tally {
 public:
  void add(uint64_t n) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Histogram bucket upper bounds (inclusive) in the observed unit: microseconds for durations,
// backends for hops. docs/metrics.md gives them in seconds and hops.
inline constexpr std::array<uint64_t, 16> kDurationBoundsUs = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000, 10000000, 30000000, 60000000};
inline constexpr std::array<uint64_t, 9> kHopBounds = {0, 1, 2, 3, 4, 6, 8, 16, 32};
// Body keys (llm_prefix): body bytes read until the key was known, and the time from the head
// to the decision in microseconds.
inline constexpr std::array<uint64_t, 10> kOffsetBounds = {
    256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
inline constexpr std::array<uint64_t, 12> kDecisionBoundsUs = {
    10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000, 250000};
inline constexpr double kDurationUnit = 1e-6;  // seconds per observed unit
inline constexpr double kHopUnit = 1;

// One worker's share of one histogram series (one cache line per 8 buckets; no false sharing
// between workers: each shard is aligned).
template <size_t N>
struct alignas(64) HistogramShard {
  std::array<Tally, N + 1> buckets;  // not cumulative; [N] counts values above the last bound
  Tally sum;
  // Writer only. O(N) compares, no allocation.
  void observe(const std::array<uint64_t, N>& bounds, uint64_t v) noexcept {
    size_t i = 0;
    while (i < N && v > bounds[i]) ++i;
    buckets[i].add(1);
    sum.add(v);
  }
};

// The sum of a series' shards at scrape time.
template <size_t N>
struct HistogramSum {
  std::array<uint64_t, N + 1> buckets{};
  uint64_t sum = 0;
  void add(const HistogramShard<N>& s) noexcept {
    for (size_t i = 0; i <= N; ++i) buckets[i] += s.buckets[i].get();
    sum += s.sum.get();
  }
};

// One worker's spilled requests of one pool by (owner, backend) pair: open addressing over the
// pair's stable backend serials, fixed capacity, one writer. The writer fills a count before it
// publishes the slot's key (release), so a reader that sees a key (acquire) reads its count.
class PairTable {
 public:
  static constexpr size_t kMaxPairs = 1024;  // pairs per worker and pool; more go to overflow
  static constexpr size_t kSlots = 2048;     // power of two, twice kMaxPairs
  static uint64_t key(uint32_t owner_serial, uint32_t backend_serial) noexcept {
    return (uint64_t{owner_serial} + 1) << 32 | (uint64_t{backend_serial} + 1);  // never 0
  }
  static uint32_t owner_of(uint64_t key) noexcept { return static_cast<uint32_t>(key >> 32) - 1; }
  static uint32_t backend_of(uint64_t key) noexcept { return static_cast<uint32_t>(key) - 1; }

  // Writer only; O(1) expected, no allocation.
  void add(uint64_t key) noexcept {
    size_t i = (key * 0x9E3779B97F4A7C15ull) >> 53;  // top 11 bits: kSlots = 2^11
    for (;; i = (i + 1) & (kSlots - 1)) {
      uint64_t k = keys_[i].load(std::memory_order_relaxed);
      if (k == key) {
        counts_[i].add(1);
        return;
      }
      if (k != 0) continue;
      if (used_ >= kMaxPairs) {
        overflow_.add(1);
        return;
      }
      counts_[i].add(1);
      keys_[i].store(key, std::memory_order_release);
      ++used_;
      return;
    }
  }
  // Reader: calls f(key, count) for every pair seen so far.
  template <class F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < kSlots; ++i) {
      uint64_t k = keys_[i].load(std::memory_order_acquire);
      if (k != 0) f(k, counts_[i].get());
    }
  }
  uint64_t overflow() const noexcept { return overflow_.get(); }

 private:
  std::array<std::atomic<uint64_t>, kSlots> keys_{};
  std::array<Tally, kSlots> counts_{};
  size_t used_ = 0;  // writer only
  Tally overflow_;
};

// Per (pool, backend id): lives across reloads while the backend stays in its pool.
struct BackendSlot {
  BackendSlot(std::string backend_id, uint32_t serial_no, uint32_t workers)
      : id(std::move(backend_id)),
        serial(serial_no),
        duration(std::make_unique<HistogramShard<kDurationBoundsUs.size()>[]>(workers)) {}
  const std::string id;
  const uint32_t serial;  // unique within the pool, never reused: names the backend in pairs
  std::unique_ptr<HistogramShard<kDurationBoundsUs.size()>[]> duration;  // one per worker
};

// One worker's per-pool state.
struct alignas(64) PoolWorker {
  PoolWorker() = default;
  PoolWorker(const PoolWorker&) = delete;
  PoolWorker& operator=(const PoolWorker&) = delete;
  ~PoolWorker() { delete pairs.load(std::memory_order_relaxed); }

  Tally client_bytes_in, client_bytes_out;
  HistogramShard<kHopBounds.size()> hops;
  // Body keys (llm_prefix pools): requests by key source, anchor offsets, decision times.
  std::array<Tally, proxy::kBodyKeySources> body_keys;
  HistogramShard<kOffsetBounds.size()> key_offsets;
  HistogramShard<kDecisionBoundsUs.size()> key_decisions;
  // Created by the writer at its first spill (once), read by scrapes.
  std::atomic<PairTable*> pairs{nullptr};
  // The hot-key summary of this worker's spilled keys. core::HotKeys is not thread-safe, so it
  // is the one lock of the exchange path: taken by this worker only for a spilled request while
  // hot keys are on, and by a scrape for the time of one top(): never contended between workers.
  std::mutex hot_mu;
  uint32_t hot_k = 0;                  // under hot_mu: the K `hot` was sized for
  std::unique_ptr<core::HotKeys> hot;  // under hot_mu; null when hot keys are off

  // Under hot_mu: the summary for top-`k` (recreated, empty, when k changed), or null for k = 0.
  core::HotKeys* hot_for(uint32_t k) noexcept;
};

// Per pool name: lives across reloads while the pool exists.
struct PoolSlot {
  PoolSlot(std::string pool_name, uint32_t worker_count)
      : name(std::move(pool_name)), workers(std::make_unique<PoolWorker[]>(worker_count)) {}
  const std::string name;
  std::unique_ptr<PoolWorker[]> workers;  // one per worker
  // Daemon loop thread only (under Metrics::Impl::mu):
  std::map<std::string, std::shared_ptr<BackendSlot>, std::less<>> backends;  // by backend id
  uint32_t next_serial = 0;
  // Pairs exported under their own labels (at most PairTable::kMaxPairs; the others are summed
  // under owner=backend="_other"). Only grows while the pair's backends stay, so a pair never
  // moves between series.
  std::set<uint64_t> exported_pairs;
};

// What the exchange hook needs of one pool of a snapshot.
struct PoolView {
  const proxy::Pool* pool = nullptr;
  std::shared_ptr<PoolSlot> slot;
  std::vector<std::shared_ptr<BackendSlot>> backends;  // by backend index
  uint32_t hot_k = 0;                                  // admin.hot_keys of the snapshot
  // The slot of backend `i` of `from` (this view's pool, or the same pool in an older
  // snapshot: then found by id, O(backends)); null when gone.
  BackendSlot* backend(const proxy::Pool& from, core::BackendIndex i) const noexcept;
};

// Built once per published snapshot (daemon loop thread), then read-only.
struct View {
  std::vector<PoolView> pools;
  // The view of `p` (by pointer; by name for a pool of an older snapshot); null when gone.
  const PoolView* find(const proxy::Pool* p) const noexcept;
};

// The spill pairs of one pool merged over the workers, named.
using PairCount = Metrics::SpillPair;

// One pool's values merged over the workers at scrape time.
struct PoolRow {
  const proxy::Pool* pool = nullptr;
  const std::vector<double>* shares = nullptr;  // key share by backend index
  uint64_t client_bytes_in = 0, client_bytes_out = 0;
  HistogramSum<kHopBounds.size()> hops;
  std::array<uint64_t, proxy::kBodyKeySources> body_keys{};
  HistogramSum<kOffsetBounds.size()> key_offsets;
  HistogramSum<kDecisionBoundsUs.size()> key_decisions;
  std::vector<HistogramSum<kDurationBoundsUs.size()>> durations;  // by backend index
  std::vector<core::HotKeys::Entry> hot;                          // merged top-K, largest first
  std::vector<PairCount> pairs;
};

// Everything one scrape reads.
struct Scrape {
  Daemon& daemon;
  const proxy::Snapshot* snap = nullptr;
  std::vector<PoolRow> pools;
};

// The top-`k` of per-worker top lists of Space-Saving summaries with `capacity` counters each
// (a list of `capacity` entries is from a full summary), largest first. metrics.cpp.
std::vector<core::HotKeys::Entry> merge_top(
    const std::vector<std::vector<core::HotKeys::Entry>>& parts, size_t capacity, size_t k);

// Names the merged pair `counts` (PairTable keys) with backend `ids` (by serial), skipping pairs
// of backends no longer known. A pair gets its own entry when `exported` has it or still has
// room (then it is added); the others, and `other`, are summed under owner=backend="_other".
std::vector<PairCount> name_pairs(const std::map<uint64_t, uint64_t>& counts, uint64_t other,
                                  const std::unordered_map<uint32_t, std::string_view>& ids,
                                  std::set<uint64_t>& exported);

// Appends the samples of every family of the table (metric_families.cpp) to `out`.
void collect_families(const Scrape& s, std::vector<prometheus::MetricFamily>& out);

}  // namespace rondel::server::metrics_detail
