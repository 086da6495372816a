// FleetHot: publishing this instance's hot-key counts each epoch and the table the fleet agrees on.
#include "fleet_hot.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <utility>

#include "rondel/core/hash.h"
#include "rondel/proxy/pool.h"

namespace rondel::server {

namespace {

constexpr uint64_t kQuarterMs = FleetHot::kEpochMs / 4;

uint64_t wall_ms() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool shares(const proxy::Pool& p) noexcept { return p.config().hot_keys.share > 0; }

// The pools of `snap` whose hot keys the fleet shares.
std::vector<const proxy::Pool*> shared_pools(const proxy::Snapshot& snap) {
  std::vector<const proxy::Pool*> out;
  for (const auto& p : snap.pools()) {
    if (shares(*p)) out.push_back(p.get());
  }
  return out;
}

core::HotReplicaOptions replica_options(const proxy::Pool& p) noexcept {
  core::HotReplicaOptions o;
  o.hot_share_pct = p.config().hot_keys.share;
  o.max_replicas = p.config().hot_keys.max_replicas;
  o.min_count = p.config().hot_keys.min_count;
  return o;
}

// Hands `table` to the pool's workers (nullptr: back to their own detectors).
void hand_over(proxy::PoolState& ps, std::shared_ptr<const core::HotReplicas> table) {
  std::lock_guard<std::mutex> lock(ps.hot_mu);
  if (ps.fleet_hot == table) return;
  ps.fleet_hot = std::move(table);
  ps.fleet_hot_version.fetch_add(1, std::memory_order_release);
}

}  // namespace

FleetHot::FleetHot(uv_loop_t* loop, Fleet& fleet,
                   std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot)
    : loop_(loop),
      fleet_(fleet),
      snapshot_(std::move(snapshot)),
      timer_(new uv_timer_t),
      poll_timer_(new uv_timer_t),
      poll_jitter_ms_(core::hash64(fleet.id()) % kPollJitterMs) {
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  uv_timer_init(loop_, poll_timer_);
  poll_timer_->data = this;
  arm();
}

FleetHot::~FleetHot() { stop(); }

void FleetHot::stop() noexcept {
  if (timer_ == nullptr) return;
  uv_timer_stop(timer_);
  uv_timer_stop(poll_timer_);
  for (uv_timer_t* t : {std::exchange(timer_, nullptr), std::exchange(poll_timer_, nullptr)}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  }
  if (auto snap = snapshot_()) {
    for (const auto& p : snap->pools()) hand_over(p->state(), nullptr);
  }
  tables_.clear();
}

// Fires at the next quarter-epoch boundary of wall-clock time (+1 ms, so that the division
// below lands in the new quarter).
void FleetHot::arm() noexcept {
  const uint64_t now = wall_ms();
  uv_timer_start(timer_, &on_timer, kQuarterMs - now % kQuarterMs + 1, 0);
}

// Quarter 0 publishes, quarter 1 reads the peers' records (Kubernetes and `peers`; each call
// bounded by what is left of the quarter before the agreement), quarter 2 agrees.
void FleetHot::on_timer(uv_timer_t* t) noexcept {
  auto* self = static_cast<FleetHot*>(t->data);
  const uint64_t quarter = wall_ms() / kQuarterMs;
  switch (quarter % 4) {
    case 0:
      self->publish(quarter / 4);
      break;
    case 1:
      // Each member polls at its own offset into the quarter, so that the members' requests
      // do not all reach each admin listener (max_connections) in the same millisecond.
      if (self->fleet_.polls_peers()) {
        uv_timer_start(self->poll_timer_, &on_poll_timer, self->poll_jitter_ms_, 0);
      }
      break;
    case 2:
      self->agree(quarter / 4);
      break;
    default:
      break;
  }
  self->arm();
}

void FleetHot::on_poll_timer(uv_timer_t* t) noexcept {
  auto* self = static_cast<FleetHot*>(t->data);
  self->fleet_.poll_peers(self->loop_, kQuarterMs - 25 - self->poll_jitter_ms_);
}

void FleetHot::publish(uint64_t epoch) {
  auto snap = snapshot_();
  if (!snap) return;
  std::map<std::string, FleetHotRecord> records;
  for (const proxy::Pool* p : shared_pools(*snap)) {
    std::vector<core::HotCounts> parts;
    {
      std::lock_guard<std::mutex> lock(p->state().hot_mu);
      parts = p->state().worker_counts;
    }
    core::HotCounts sum = core::merge_hot_counts(parts, p->config().hot_keys.capacity);
    if (sum.total == 0) continue;
    records[p->name()] = {epoch, std::move(sum)};
  }
  fleet_.set_hot(std::move(records));
}

void FleetHot::agree(uint64_t epoch) {
  auto snap = snapshot_();
  if (!snap) return;
  std::map<std::string, PoolTable> next;
  for (const proxy::Pool* p : shared_pools(*snap)) {
    std::vector<core::HotCounts> parts;
    for (const auto& [id, m] : fleet_.members()) {
      auto it = m.hot.find(p->name());
      if (it != m.hot.end() && it->second.epoch == epoch) parts.push_back(it->second.counts);
    }
    PoolTable& t = next[p->name()];
    t.epoch = epoch;
    t.contributors = parts.size();
    if (parts.empty()) {
      hand_over(p->state(), nullptr);  // no record of this epoch seen: each worker alone
      continue;
    }
    const core::HotCounts merged = core::merge_hot_counts(parts, p->config().hot_keys.capacity);
    t.total = merged.total;
    auto table = std::make_shared<core::HotReplicas>(p->config().hot_keys.capacity);
    t.hot = core::build_fleet_table(merged, p->eligible_count(), replica_options(*p), *table);
    t.table = table;
    hand_over(p->state(), std::move(table));
  }
  tables_ = std::move(next);
}

void FleetHot::write_json(util::JsonWriter& w) const {
  w.begin("hot");
  w.field("epoch_ms", kEpochMs);
  w.begin("pools");
  for (const auto& [pool, t] : tables_) {
    w.begin(pool);
    w.field("epoch", t.epoch);
    w.field("contributors", static_cast<uint64_t>(t.contributors));
    w.field("total", t.total);
    w.field("shared", t.table != nullptr);
    w.begin_array("keys");
    for (const core::HotCount& k : t.hot) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016" PRIx64, k.hash);
      w.begin();
      w.field("hash", std::string_view(hex));
      w.field("count", k.count);
      w.field("replicas", uint64_t{t.table->replicas(k.hash)});
      w.end();
    }
    w.end_array();
    w.end();
  }
  w.end();
  w.end();
}

}  // namespace rondel::server
