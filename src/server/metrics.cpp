// Metrics: the per-worker shards the exchange hook writes, the per-snapshot views the workers
// read, and the merge a scrape or an admin view does. The families themselves are declared in
// metric_families.cpp; docs/metrics.md lists them (a unit test keeps the two in step).
#include "rondel/server/metrics.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <uv.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "metrics_shards.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/router.h"
#include "rondel/server/daemon.h"

namespace rondel::server {

namespace md = metrics_detail;

namespace {

constexpr const char* kOtherPair = "_other";

uint64_t now_ms() noexcept { return uv_hrtime() / 1000000; }

// Counters of the hot-key summary for top-`k`: a few times k, within [64, 65536].
size_t hot_capacity(uint32_t k) noexcept { return std::clamp<size_t>(size_t{k} * 8, 64, 65536); }

}  // namespace

namespace metrics_detail {

core::HotKeys* PoolWorker::hot_for(uint32_t k) noexcept {
  if (k != hot_k) {
    hot.reset();
    hot_k = 0;
    if (k > 0) {
      try {
        hot = std::make_unique<core::HotKeys>(hot_capacity(k), Metrics::kHotKeyWindowMs);
        hot_k = k;
      } catch (...) {
        // Out of memory: hot keys stay off for this worker and pool until the next try.
      }
    }
  }
  return hot.get();
}

BackendSlot* PoolView::backend(const proxy::Pool& from, core::BackendIndex i) const noexcept {
  if (i == core::kNoBackend || i >= from.size()) return nullptr;
  if (&from == pool) return i < backends.size() ? backends[i].get() : nullptr;
  const std::string& id = from.backend(i).id();
  for (const auto& b : backends) {
    if (b->id == id) return b.get();
  }
  return nullptr;
}

const PoolView* View::find(const proxy::Pool* p) const noexcept {
  for (const auto& pv : pools) {
    if (pv.pool == p) return &pv;
  }
  for (const auto& pv : pools) {
    if (pv.slot->name == p->name()) return &pv;
  }
  return nullptr;
}

}  // namespace metrics_detail

struct Metrics::Impl {
  // One worker's context for the exchange hook; only that worker's loop thread touches it.
  struct alignas(64) Shard {
    Impl* impl = nullptr;
    uint32_t id = 0;
    std::shared_ptr<const md::View> view;
    uint64_t version = 0;  // of `view`
  };

  explicit Impl(Daemon& d)
      : daemon(d), workers(std::max<uint32_t>(d.workers(), 1)),
        shards(std::make_unique<Shard[]>(workers)) {
    for (uint32_t w = 0; w < workers; ++w) {
      shards[w].impl = this;
      shards[w].id = w;
    }
  }

  Daemon& daemon;
  const uint32_t workers;
  std::unique_ptr<Shard[]> shards;

  // The view the workers pick up: replaced under view_mu, then `version` moves on. A worker
  // compares versions per exchange (one relaxed-cost load) and locks only when it changed.
  std::mutex view_mu;
  std::shared_ptr<const md::View> published;
  std::atomic<uint64_t> version{0};

  // Daemon loop thread only.
  std::shared_ptr<const proxy::Snapshot> snap;
  std::shared_ptr<const md::View> view;  // of `snap`
  std::map<std::string, std::shared_ptr<md::PoolSlot>, std::less<>> pools;
  std::map<const proxy::Pool*, std::vector<double>> shares;  // of `snap`'s pools, on demand
  const std::vector<double> empty_shares;

  void record(Shard& sh, const proxy::ExchangeRecord& rec) noexcept;
  void rebuild();
  void keep_backends(md::PoolSlot& slot, const md::PoolView& pv);
  const md::PoolView* find(std::string_view pool) const noexcept;
  const std::vector<double>& shares_of(const proxy::Pool& p);
  md::PoolRow merge(const md::PoolView& pv);
  std::vector<core::HotKeys::Entry> merged_hot(const md::PoolView& pv);
  std::vector<md::PairCount> merged_pairs(const md::PoolView& pv);
};

void Metrics::Impl::record(Shard& sh, const proxy::ExchangeRecord& rec) noexcept {
  if (version.load(std::memory_order_acquire) != sh.version) {
    std::lock_guard<std::mutex> lock(view_mu);
    sh.view = published;  // once per snapshot change; may release the previous view
    sh.version = version.load(std::memory_order_relaxed);
  }
  if (!sh.view) return;
  const md::PoolView* pv = sh.view->find(rec.pool);
  if (pv == nullptr) return;
  md::PoolWorker& pw = pv->slot->workers[sh.id];
  pw.client_bytes_in.add(rec.bytes_in);
  pw.client_bytes_out.add(rec.bytes_out);
  if (rec.body_key > 0 && rec.body_key <= proxy::kBodyKeySources) {
    pw.body_keys[rec.body_key - 1].add(1);
    if (!proxy::is_fallback(static_cast<proxy::BodyKeySource>(rec.body_key - 1))) {
      pw.key_offsets.observe(md::kOffsetBounds, rec.key_offset);
    }
    pw.key_decisions.observe(md::kDecisionBoundsUs, rec.decision_us);
  }
  if (rec.backend == core::kNoBackend || rec.backend >= rec.pool->size()) return;
  pw.hops.observe(md::kHopBounds, rec.hops);
  md::BackendSlot* bs = pv->backend(*rec.pool, rec.backend);
  if (bs == nullptr) return;
  bs->duration[sh.id].observe(md::kDurationBoundsUs, rec.duration_us);
  if (!proxy::is_spill(rec.owner, rec.backend)) return;  // the one definition (router.h)
  if (md::BackendSlot* os = pv->backend(*rec.pool, rec.owner)) {
    md::PairTable* t = pw.pairs.load(std::memory_order_relaxed);
    if (t == nullptr) {  // this worker's first spill in this pool: the one allocation
      t = new (std::nothrow) md::PairTable();
      pw.pairs.store(t, std::memory_order_release);
    }
    if (t != nullptr) t->add(md::PairTable::key(os->serial, bs->serial));
  }
  if (pv->hot_k == 0) return;
  std::lock_guard<std::mutex> lock(pw.hot_mu);
  if (core::HotKeys* h = pw.hot_for(pv->hot_k)) {
    h->advance(now_ms());
    h->observe(core::hash64(rec.key), rec.key, 1);
  }
}

// Builds the view of `snap`: slots for new pools and backends, and forgets the series of pools
// and backends that left the configuration (they would otherwise be exported forever).
void Metrics::Impl::rebuild() {
  auto next = std::make_shared<md::View>();
  shares.clear();
  if (snap) {
    uint32_t k = snap->config().admin.hot_keys;
    for (const auto& p : snap->pools()) {
      md::PoolView pv;
      pv.pool = p.get();
      pv.hot_k = k;
      auto& slot = pools[p->name()];
      if (!slot) slot = std::make_shared<md::PoolSlot>(p->name(), workers);
      pv.slot = slot;
      for (size_t i = 0; i < p->size(); ++i) {
        const std::string& id = p->backend(static_cast<core::BackendIndex>(i)).id();
        auto& bs = slot->backends[id];
        if (!bs) bs = std::make_shared<md::BackendSlot>(id, slot->next_serial++, workers);
        pv.backends.push_back(bs);
      }
      keep_backends(*slot, pv);
      next->pools.push_back(std::move(pv));
    }
  }
  for (auto it = pools.begin(); it != pools.end();) {
    if (snap && snap->find_pool(it->first) != nullptr) ++it;
    else it = pools.erase(it);
  }
  view = next;
  std::lock_guard<std::mutex> lock(view_mu);
  published = std::move(next);
  version.fetch_add(1, std::memory_order_release);
}

// Drops the slots (and exported pairs) of `slot`'s backends that `pv` no longer has.
void Metrics::Impl::keep_backends(md::PoolSlot& slot, const md::PoolView& pv) {
  std::unordered_set<uint32_t> kept;
  for (const auto& b : pv.backends) kept.insert(b->serial);
  for (auto it = slot.backends.begin(); it != slot.backends.end();) {
    if (kept.count(it->second->serial) != 0) ++it;
    else it = slot.backends.erase(it);
  }
  for (auto it = slot.exported_pairs.begin(); it != slot.exported_pairs.end();) {
    bool live = kept.count(md::PairTable::owner_of(*it)) != 0 &&
                kept.count(md::PairTable::backend_of(*it)) != 0;
    it = live ? std::next(it) : slot.exported_pairs.erase(it);
  }
}

const md::PoolView* Metrics::Impl::find(std::string_view pool) const noexcept {
  if (!view) return nullptr;
  for (const auto& pv : view->pools) {
    if (pv.slot->name == pool) return &pv;
  }
  return nullptr;
}

const std::vector<double>& Metrics::Impl::shares_of(const proxy::Pool& p) {
  auto it = shares.find(&p);
  if (it == shares.end()) it = shares.emplace(&p, p.selector().key_shares()).first;
  return it->second;
}

md::PoolRow Metrics::Impl::merge(const md::PoolView& pv) {
  md::PoolRow row;
  row.pool = pv.pool;
  row.shares = &shares_of(*pv.pool);
  row.durations.resize(pv.backends.size());
  for (uint32_t w = 0; w < workers; ++w) {
    const md::PoolWorker& pw = pv.slot->workers[w];
    row.client_bytes_in += pw.client_bytes_in.get();
    row.client_bytes_out += pw.client_bytes_out.get();
    row.hops.add(pw.hops);
    for (size_t k = 0; k < proxy::kBodyKeySources; ++k) row.body_keys[k] += pw.body_keys[k].get();
    row.key_offsets.add(pw.key_offsets);
    row.key_decisions.add(pw.key_decisions);
    for (size_t i = 0; i < pv.backends.size(); ++i) {
      row.durations[i].add(pv.backends[i]->duration[w]);
    }
  }
  row.hot = merged_hot(pv);
  row.pairs = merged_pairs(pv);
  return row;
}

std::vector<core::HotKeys::Entry> Metrics::Impl::merged_hot(const md::PoolView& pv) {
  if (pv.hot_k == 0) return {};
  const size_t cap = hot_capacity(pv.hot_k);
  std::vector<std::vector<core::HotKeys::Entry>> parts(workers);
  for (uint32_t w = 0; w < workers; ++w) {
    md::PoolWorker& pw = pv.slot->workers[w];
    std::lock_guard<std::mutex> lock(pw.hot_mu);
    if (core::HotKeys* h = pw.hot_for(pv.hot_k)) {
      h->advance(now_ms());
      parts[w] = h->top(cap);
    }
  }
  return md::merge_top(parts, cap, pv.hot_k);
}

std::vector<md::PairCount> Metrics::Impl::merged_pairs(const md::PoolView& pv) {
  std::map<uint64_t, uint64_t> counts;
  uint64_t other = 0;
  for (uint32_t w = 0; w < workers; ++w) {
    const md::PairTable* t = pv.slot->workers[w].pairs.load(std::memory_order_acquire);
    if (t == nullptr) continue;
    t->for_each([&counts](uint64_t key, uint64_t c) { counts[key] += c; });
    other += t->overflow();
  }
  std::unordered_map<uint32_t, std::string_view> ids;
  for (const auto& b : pv.backends) ids.emplace(b->serial, b->id);
  return md::name_pairs(counts, other, ids, pv.slot->exported_pairs);
}

namespace metrics_detail {

// Space-Saving summaries merge by adding counts and errors; a key missing from a full list may
// still have had up to that list's smallest count there, which goes into both its count and its
// error (so count stays an upper bound and count - error a lower bound).
std::vector<core::HotKeys::Entry> merge_top(
    const std::vector<std::vector<core::HotKeys::Entry>>& parts, size_t capacity, size_t k) {
  std::unordered_map<uint64_t, core::HotKeys::Entry> all;
  for (const auto& part : parts) {
    for (const auto& e : part) {
      auto [it, fresh] = all.try_emplace(e.hash, e);
      if (!fresh) {
        it->second.count += e.count;
        it->second.error += e.error;
      }
    }
  }
  for (const auto& part : parts) {
    if (part.empty() || part.size() < capacity) continue;
    std::unordered_set<uint64_t> present;
    for (const auto& e : part) present.insert(e.hash);
    uint64_t floor = part.back().count;
    for (auto& [hash, e] : all) {
      if (present.count(hash) != 0) continue;
      e.count += floor;
      e.error += floor;
    }
  }
  std::vector<core::HotKeys::Entry> out;
  out.reserve(all.size());
  for (auto& [hash, e] : all) out.push_back(std::move(e));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.error != b.error) return a.error < b.error;
    return a.hash < b.hash;
  });
  if (out.size() > k) out.resize(k);
  return out;
}

std::vector<PairCount> name_pairs(const std::map<uint64_t, uint64_t>& counts, uint64_t other,
                                  const std::unordered_map<uint32_t, std::string_view>& ids,
                                  std::set<uint64_t>& exported) {
  std::vector<PairCount> out;
  for (const auto& [key, c] : counts) {
    auto owner = ids.find(PairTable::owner_of(key));
    auto backend = ids.find(PairTable::backend_of(key));
    if (owner == ids.end() || backend == ids.end()) continue;  // a backend that left
    if (exported.count(key) == 0 && exported.size() >= PairTable::kMaxPairs) {
      other += c;
      continue;
    }
    exported.insert(key);
    out.push_back({std::string(owner->second), std::string(backend->second), c});
  }
  if (other > 0) out.push_back({kOtherPair, kOtherPair, other});
  return out;
}

}  // namespace metrics_detail

Metrics::Metrics(Daemon& daemon) : impl_(std::make_unique<Impl>(daemon)) {}

Metrics::~Metrics() = default;

void* Metrics::exchange_context(uint32_t worker_id) noexcept {
  return worker_id < impl_->workers ? &impl_->shards[worker_id] : nullptr;
}

void Metrics::on_exchange(void* ctx, const proxy::ExchangeRecord& rec) noexcept {
  if (ctx == nullptr || rec.pool == nullptr) return;
  auto& sh = *static_cast<Impl::Shard*>(ctx);
  sh.impl->record(sh, rec);
}

void Metrics::set_snapshot(std::shared_ptr<const proxy::Snapshot> snap) {
  impl_->snap = std::move(snap);
  impl_->rebuild();
}

std::string Metrics::serialize() {
  md::Scrape s{impl_->daemon, impl_->snap.get(), {}};
  if (impl_->snap && impl_->view) {
    for (const auto& pv : impl_->view->pools) s.pools.push_back(impl_->merge(pv));
  }
  std::vector<prometheus::MetricFamily> families;
  md::collect_families(s, families);
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<core::HotKeys::Entry> Metrics::hot_keys(std::string_view pool) {
  const md::PoolView* pv = impl_->find(pool);
  return pv != nullptr ? impl_->merged_hot(*pv) : std::vector<core::HotKeys::Entry>{};
}

const std::vector<double>& Metrics::key_shares(const proxy::Pool& pool) {
  const md::PoolView* pv = impl_->find(pool.name());
  if (pv == nullptr || pv->pool != &pool) return impl_->empty_shares;
  return impl_->shares_of(pool);
}

std::vector<Metrics::SpillPair> Metrics::spill_pairs(std::string_view pool) {
  const md::PoolView* pv = impl_->find(pool);
  return pv != nullptr ? impl_->merged_pairs(*pv) : std::vector<SpillPair>{};
}

}  // namespace rondel::server
