// A pool as one configuration snapshot sees it: its backends, its placement and its policy.
//
// Immutable after build except for the live BackendState objects it points to and the effective
// weights, which refresh_weights() recomputes on the daemon tick (slow start) while workers pick:
// they are atomics, and a pick during a ramp reads a private copy of them. The pick reads the
// in-flight counts through `in_flight_ptrs` and never allocates (scratch is the caller's).
//
// A pool whose host names resolved to no address has no backend (size() == 0): every pick
// answers kNoBackend (the client gets 503). set() and selector() then describe one placeholder
// entry that is no backend; index them only below size().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/group_homes.h"
#include "rondel/core/backend_set.h"
#include "rondel/core/bounded.h"
#include "rondel/core/hot_keys.h"
#include "rondel/core/hot_replicas.h"
#include "rondel/core/migration.h"
#include "rondel/core/result.h"
#include "rondel/core/route_policy.h"
#include "rondel/core/selector.h"
#include "rondel/core/subset.h"
#include "rondel/http/message.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/llm_key.h"
#include "rondel/tls/client_context.h"

namespace rondel::proxy {

// Names of core::RouteReason values, as in metrics labels and the explain API.
inline constexpr size_t kRouteReasons = 6;  // kHome .. kNone
std::string_view route_reason_name(core::RouteReason r) noexcept;

// Pool-wide live state shared across snapshots by pool name.
struct PoolState {
  // Routing decisions: the first pick of each keyed request, by core::RouteReason.
  std::array<std::atomic<uint64_t>, kRouteReasons> routed{};
  // The last decision per key for the explain API: a direct-mapped table (slot = low hash bits)
  // of entries that name the backend by its id, not its index, so that they stay true across
  // reloads (encoding: Router::record_decision / Router::last_decision), written relaxed.
  static constexpr size_t kRecentDecisions = 4096;
  std::array<std::atomic<uint64_t>, kRecentDecisions> recent{};
  // Set once by Snapshot::build when the state is created: index of the per-worker routing
  // state (Router) of this pool.
  uint32_t slot = 0;
  // Hot keys published by the most recent replica-table rebuild of any worker (each worker
  // detects on its own traffic; the last rebuild wins). Guarded by hot_mu, which only the
  // rebuild (every window/4 per worker) and the admin/metrics readers take, never a pick.
  mutable std::mutex hot_mu;
  std::vector<core::HotKeyReplicas> hot;  // keys with R > 1, hottest first
  uint64_t hot_window_total = 0;    // requests over the window the counts cover
  // llm_prefix tenant_homes: balanced: the homes of the last rebuild, ascending by group hash
  // (placement hashes; core/group_homes.h). For /api/route and the metrics. Under hot_mu.
  std::vector<core::GroupHome> homes;
  // Each worker's detector counts at its last rebuild (index: worker id), which the daemon sums
  // into this instance's share of the fleet's counts (server/fleet_hot.h). Under hot_mu.
  std::vector<core::HotCounts> worker_counts;
  // The table the fleet agreed on for the current epoch (fleet hot-key sharing): while set,
  // every worker routes hot keys by it instead of by its own detector's table. Replaced by the
  // daemon's loop (under hot_mu), which then bumps fleet_hot_version so that workers copy the
  // pointer on their next pick (never a lock on the pick path otherwise); nullptr = none.
  std::shared_ptr<const core::HotReplicas> fleet_hot;
  std::atomic<uint64_t> fleet_hot_version{0};
  std::atomic<uint64_t> total_in_flight{0};
  std::atomic<uint64_t> total_in_flight_cost{0};  // load_by: prompt_size (BackendState)
  // The fleet this instance is one of (config `fleet`, docs/routing.md "Fleets"): N, the
  // instances sharing these backends (1 = alone or unknown), and the hot-key detectors sharing
  // the pool's traffic (N times the workers). Written by the daemon's loop only
  // (Daemon::refresh_pools, on its tick); read relaxed by every pick (core::effective_load's
  // `instances`) and replica-table rebuild (EligibleCounter::scale).
  std::atomic<uint32_t> fleet_instances{1};
  std::atomic<uint32_t> detectors{1};
  // Backends of this pool with a health flag set (down or ejected), kept by BackendState as
  // its flags change: never below the true count, briefly above it while a flag changes.
  std::atomic<uint32_t> unusable{0};
  // Snapshot builds (reloads, DNS updates) that left this pool with no backend because its host
  // names resolved to no address; each answers every request with 503 until one resolves.
  std::atomic<uint64_t> empty_builds{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> spilled{0};    // requests not served by their natural owner
  std::atomic<uint64_t> all_full{0};   // picks that found every eligible backend full
  std::atomic<uint64_t> no_backend{0}; // requests answered 503: no eligible backend
  // First picks of walked requests by the placement that placed them (core::PlacementVersion:
  // current, previous), for watching a gradual migration.
  std::array<std::atomic<uint64_t>, 2> placement_routed{};

  // Subsets (config `subsets`, docs/routing.md "Subsets"): counters per subset name, so they
  // survive reloads that keep the name. Appended only by Pool::build (under subsets_mu, which
  // the metrics and admin readers take too, never a pick: a Pool holds pointers to its own).
  struct SubsetCounters {
    explicit SubsetCounters(std::string n) : name(std::move(n)) {}
    const std::string name;
    std::atomic<uint64_t> requests{0};     // first picks restricted to the subset
    std::atomic<uint64_t> unavailable{0};  // answered 503: no member of the subset eligible
  };
  mutable std::mutex subsets_mu;
  std::vector<std::unique_ptr<SubsetCounters>> subsets;
  // The counters of subset `name`, created on first use. Takes subsets_mu; allocates once per name.
  SubsetCounters& subset_counters(const std::string& name);
};

// Names of core::PlacementVersion values ("current", "previous"), as in metrics and the API.
std::string_view placement_name(core::PlacementVersion v) noexcept;

class Pool {
 public:
  static core::Result<std::unique_ptr<Pool>> build(const config::PoolConfig& cfg,
                                                   BackendRegistry& registry,
                                                   std::shared_ptr<PoolState> state);

  const config::PoolConfig& config() const noexcept { return cfg_; }
  const std::string& name() const noexcept { return cfg_.name; }
  const core::Selector& selector() const noexcept { return selector_; }
  const core::BackendSet& set() const noexcept { return set_; }
  size_t size() const noexcept { return backends_.size(); }
  BackendState& backend(core::BackendIndex i) const noexcept { return *backends_[i]; }
  const std::shared_ptr<BackendState>& backend_ptr(core::BackendIndex i) const noexcept {
    return backends_[i];
  }
  PoolState& state() const noexcept { return *state_; }
  // TLS to the backends (the pool's `tls` section), nullptr for plain connections.
  const std::shared_ptr<const tls::ClientContext>& backend_tls() const noexcept {
    return backend_tls_;
  }
  // The configured host name of backend `i` ("" for an address literal): its TLS server name.
  std::string_view backend_host_name(core::BackendIndex i) const noexcept {
    return i < cfg_.backends.size() ? std::string_view(cfg_.backends[i].host_name)
                                    : std::string_view();
  }
  const core::BoundedOptions& bounded() const noexcept { return bounded_; }
  const core::RouteOptions& route_options() const noexcept { return route_; }
  // Generation of the snapshot this pool belongs to (set by Snapshot::build).
  uint64_t generation() const noexcept { return generation_; }
  void set_generation(uint64_t g) noexcept { generation_ = g; }

  // Words of scratch a pick needs: excluded bitset (excluded_words()) + route_pick scratch.
  size_t scratch_words() const noexcept { return excluded_words_ + pick_words_; }
  size_t excluded_words() const noexcept { return excluded_words_; }

  // Fills `in` for a pick over this pool's live state: in-flight counters, effective weights,
  // W over the usable backends, and as exclusion set `excluded` (excluded_words() words of the
  // caller's scratch) = `tried` plus every unusable backend (in.excluded is left empty when no
  // bit is set). No allocation. Loop thread of the caller.
  void pick_input(core::PickInput& in, std::span<const uint64_t> tried,
                  std::span<uint64_t> excluded) const noexcept;
  // A stable 32-bit tag of backend i's id (for records that must survive reloads).
  uint32_t id_tag(core::BackendIndex i) const noexcept { return id_tags_[i]; }
  // Usable backends of positive effective weight (the N of the hot-key replica rule).
  size_t eligible_count() const noexcept;
  // Least-loaded usable backend not in `tried` (for requests without a hash key), by load over
  // effective weight. The load is `loads[i]` when `loads` is given (the effective loads of
  // load_report, proxy/load_report.h: fill_effective_loads), else the backend's in-flight count.
  core::BackendIndex least_loaded(std::span<const uint64_t> tried,
                                  std::span<const uint32_t> loads = {}) const noexcept;

  // Effective weights are configured weights times kWeightScale, so that slow start can give a
  // backend a fraction of even weight 1. Capacity depends only on w_i / W, so scaling every
  // weight alike changes nothing.
  static constexpr uint32_t kWeightScale = 1024;
  // A ramping backend starts at this per-mille of its weight.
  static constexpr uint32_t kSlowStartFloorPermille = 100;

  // Recomputes the effective weights for slow start (a backend whose ramp_start_ms is set gets
  // max(10%, elapsed / slow_start) of its weight; the ramp ends, and ramp_start_ms is cleared,
  // once slow_start has passed) and the agent's weight percentage (agent_check: that share of
  // the weight, at least 1 unless 0%). Placement is not touched: only capacity changes. Returns true
  // while some backend is still ramping. O(backends), integer math. One thread only, the one
  // that owns ramp_start_ms (the daemon's loop, on its tick); workers pick meanwhile: each
  // weight is an atomic store, and `ramping_` (release) tells the picks to copy them.
  bool refresh_weights(uint64_t now_ms) noexcept;
  // Effective weight of backend i (scaled by kWeightScale). Any thread (a relaxed load).
  uint32_t effective_weight(core::BackendIndex i) const noexcept {
    return eff_weights_[i].load(std::memory_order_relaxed);
  }
  // A 64-bit digest of the effective placement: the algorithm and its size parameters (points
  // per weight and the points budget for ring, the table size for maglev), and per backend, in
  // id order, its id, its weight and whether it is usable now. Independent of the order of the
  // configuration and of DNS answers, so instances that route every key alike show the same
  // value. O(backends); allocates (admin views and metrics only, never a pick). Any thread.
  uint64_t placement_fingerprint() const;

  // Whether the pool is empty because its names resolved to nothing (see the file comment).
  bool empty() const noexcept { return backends_.empty(); }

  // Gradual migration (config `previous`, `migrate_percent`; core/migration.h). Without a
  // previous placement every key is kCurrent and the three below describe the current one.
  bool has_previous() const noexcept { return previous_ != nullptr; }
  // Which placement the key of `hash` uses. O(1).
  core::PlacementVersion placement_of(uint64_t hash) const noexcept;
  // The selector of placement `v`: indices are this pool's backend indices in both.
  const core::Selector& selector(core::PlacementVersion v) const noexcept;
  // The hash placement `v` places `hash` by: the hash itself, or mix64(hash, seed) when that
  // placement has a seed.
  uint64_t placement_hash(core::PlacementVersion v, uint64_t hash) const noexcept;
  // Turns a pick_input() result for the previous placement: its weights (configured previous
  // weights; slow start does not apply to them) and their sum over usable backends as W; the
  // exclusion set and in-flight counts stay. O(backends) only while some backend is unusable.
  void previous_input(core::PickInput& in) const noexcept;

  // Subsets: one per rule of config().subsets, built with the pool (membership bitsets over this
  // pool's backend indices: the backends of positive weight carrying every required label).
  static constexpr uint8_t kNoSubset = UINT8_MAX;
  size_t subset_count() const noexcept { return subsets_.size(); }
  const core::Subset& subset(uint8_t i) const noexcept { return subsets_[i].subset; }
  PoolState::SubsetCounters& subset_counters(uint8_t i) const noexcept {
    return *subsets_[i].counters;
  }
  // The first rule whose `when` matches a request that came in on `listener` (its name) with
  // `head`, or kNoSubset (the whole pool). No allocation; O(rules + header fields).
  uint8_t select_subset(std::string_view listener, const http::RequestHead& head) const noexcept;
  // Backend i's labels as a mask over the pool's labels (bit j = labels()[j]).
  core::LabelMask labels_of(core::BackendIndex i) const noexcept { return labels_[i]; }
  const std::vector<std::string>& labels() const noexcept { return label_names_; }
  // hash_key: llm_prefix: the body scanner's options, built once from `llm_prefix`.
  const LlmKeyOptions& llm_options() const noexcept { return llm_options_; }

 private:
  Pool(core::BackendSet set, core::Selector selector)
      : set_(std::move(set)), selector_(std::move(selector)) {}
  config::PoolConfig cfg_;
  LlmKeyOptions llm_options_;
  core::BackendSet set_;
  core::Selector selector_;

  core::BoundedOptions bounded_;
  core::RouteOptions route_;
  uint64_t generation_ = 0;
  std::vector<std::shared_ptr<BackendState>> backends_;
  std::vector<const std::atomic<uint32_t>*> in_flight_ptrs_;
  std::vector<uint32_t> weights_;                // as configured
  std::vector<uint32_t> id_tags_;                // low 32 bits of hash64(id), per backend
  uint64_t total_weight_ = 0;
  std::vector<uint32_t> base_weights_;           // configured * kWeightScale, immutable
  // Written only by refresh_weights(); read by every worker. Equal to base_weights_ while
  // ramping_ is false, so a pick then reads base_weights_ and its total directly.
  std::vector<std::atomic<uint32_t>> eff_weights_;
  std::atomic<bool> ramping_{false};
  std::shared_ptr<PoolState> state_;
  std::shared_ptr<const tls::ClientContext> backend_tls_;
  size_t excluded_words_ = 0;
  size_t pick_words_ = 0;
  // The placement keys migrate from: built over this pool's backend indices (backend i has the
  // previous weight of its id, 0 when `previous` does not name it).
  struct Previous {
    Previous(core::BackendSet s, core::Selector sel)
        : set(std::move(s)), selector(std::move(sel)) {}
    core::BackendSet set;
    core::Selector selector;
    std::vector<uint32_t> weights;  // previous weight * kWeightScale, by backend index
    uint64_t total_weight = 0;
  };
  std::unique_ptr<Previous> previous_;
  struct BuiltSubset {
    core::Subset subset;
    PoolState::SubsetCounters* counters = nullptr;  // owned by state_
  };
  std::vector<BuiltSubset> subsets_;         // parallel to cfg_.subsets
  std::vector<core::LabelMask> labels_;      // per backend
  std::vector<std::string> label_names_;     // bit j of a mask = label_names_[j]
  void build_subsets();
  static core::Result<std::unique_ptr<Previous>> build_previous(const config::PoolConfig& cfg,
                                                                const core::BackendSet& set);
};

}  // namespace rondel::proxy
