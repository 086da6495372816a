// Pool: builds a snapshot's placement for one pool and runs the bounded-load pick over it.
#include "rondel/proxy/pool.h"

#include <algorithm>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/placement.h"

namespace rondel::proxy {

namespace {

}  // namespace

std::string_view placement_name(core::PlacementVersion v) noexcept {
  return v == core::PlacementVersion::kPrevious ? "previous" : "current";
}

std::string_view route_reason_name(core::RouteReason r) noexcept {
  switch (r) {
    case core::RouteReason::kHome: return "home";
    case core::RouteReason::kReplica: return "replica";
    case core::RouteReason::kSticky: return "sticky";
    case core::RouteReason::kSpill: return "spill";
    case core::RouteReason::kAllFull: return "all_full";
    case core::RouteReason::kNone: return "none";
  }
  return "none";
}

core::Result<std::unique_ptr<Pool>> Pool::build(const config::PoolConfig& cfg,
                                                BackendRegistry& registry,
                                                std::shared_ptr<PoolState> state) {
  auto placement = build_placement(cfg);  // the reload dry-run builds it the same way
  if (!placement) return placement.error();
  std::unique_ptr<Pool> pool(new Pool(std::move(placement->set), std::move(placement->selector)));
  pool->cfg_ = cfg;
  pool->state_ = std::move(state);
  pool->llm_options_.conversation = cfg.llm_prefix.conversation;
  pool->llm_options_.conversation_blocks = cfg.llm_prefix.blocks;
  for (const config::LlmExplicitKey& k : cfg.llm_prefix.explicit_keys) {
    if (k.where == config::LlmExplicitKey::Where::kBody) {
      pool->llm_options_.explicit_fields.push_back(k.name);
    }
  }
  if (cfg.tls.enabled) {
    auto tls = tls::ClientContext::build(cfg.name, cfg.tls);
    if (!tls) return tls.error();
    pool->backend_tls_ = std::move(*tls);
  }
  // Each backend state of this pool keeps the pool's unusable count from its health flags.
  std::shared_ptr<std::atomic<uint32_t>> unusable(pool->state_, &pool->state_->unusable);
  pool->bounded_.balance_factor = cfg.balance_factor;
  pool->bounded_.slack = cfg.capacity_slack;
  pool->bounded_.probe = cfg.probe_order;
  pool->route_.bounded = pool->bounded_;
  pool->route_.hysteresis = cfg.spill_hysteresis;
  pool->route_.replica_choice = cfg.replica_choice;
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const auto& b = cfg.backends[i];
    auto addr = net::to_sockaddr(b.address.host, b.address.port);
    if (!addr) return core::fail("pool " + cfg.name + ": backend " + b.address.to_string() +
                                 ": " + addr.error().message);
    const auto& id = pool->set_[static_cast<core::BackendIndex>(i)].id;
    pool->backends_.push_back(registry.get_or_create(
        cfg.name, id, *addr, net::sockaddr_to_string(reinterpret_cast<sockaddr*>(&*addr)),
        unusable));
    pool->in_flight_ptrs_.push_back(&pool->backends_.back()->in_flight);
    pool->weights_.push_back(b.weight);
    pool->id_tags_.push_back(static_cast<uint32_t>(core::hash64(id)));
    pool->total_weight_ += b.weight;
  }
  for (uint32_t w : pool->weights_) pool->base_weights_.push_back(w * kWeightScale);
  pool->eff_weights_ = std::vector<std::atomic<uint32_t>>(pool->base_weights_.size());
  for (size_t i = 0; i < pool->base_weights_.size(); ++i) {
    pool->eff_weights_[i].store(pool->base_weights_[i], std::memory_order_relaxed);
  }
  pool->excluded_words_ = core::bitset_words(pool->backends_.size());
  pool->pick_words_ = core::pick_scratch_words(pool->selector_);
  if (cfg.previous.present && !cfg.backends.empty()) {
    auto prev = build_previous(cfg, pool->set_);
    if (!prev) return core::fail(prev.error().message);
    pool->previous_ = std::move(*prev);
    if (pool->previous_) {
      pool->pick_words_ =
          std::max(pool->pick_words_, core::pick_scratch_words(pool->previous_->selector));
    }
  }
  pool->build_subsets();
  return pool;
}

// The label masks (labels numbered in order of first appearance over the backends) and one
// Subset per rule. The config reader bounds the labels at 64 and checks that every required
// label is carried by some backend; a DNS update may leave one uncarried: that subset is empty.
void Pool::build_subsets() {
  labels_.assign(backends_.size(), 0);
  for (size_t i = 0; i < cfg_.backends.size(); ++i) {
    for (const std::string& l : cfg_.backends[i].labels) {
      auto it = std::find(label_names_.begin(), label_names_.end(), l);
      if (it == label_names_.end()) {
        if (label_names_.size() == core::kMaxLabels) continue;
        it = label_names_.insert(label_names_.end(), l);
      }
      labels_[i] |= core::LabelMask{1} << (it - label_names_.begin());
    }
  }
  for (const config::SubsetRule& rule : cfg_.subsets) {
    core::LabelMask required = 0;
    bool carried = true;
    for (const std::string& l : rule.require) {
      auto it = std::find(label_names_.begin(), label_names_.end(), l);
      if (it == label_names_.end()) carried = false;
      else required |= core::LabelMask{1} << (it - label_names_.begin());
    }
    // A label no backend carries: no labels, one required bit: no member.
    const std::span<const core::LabelMask> masks =
        carried ? std::span<const core::LabelMask>(labels_) : std::span<const core::LabelMask>();
    BuiltSubset b{core::Subset::build(set_, masks, carried ? required : 1),
                  &state_->subset_counters(rule.name)};
    subsets_.push_back(std::move(b));
  }
}

uint8_t Pool::select_subset(std::string_view listener,
                            const http::RequestHead& head) const noexcept {
  for (size_t r = 0; r < cfg_.subsets.size(); ++r) {
    const config::SubsetRule& rule = cfg_.subsets[r];
    bool match = false;
    switch (rule.match) {
      case config::SubsetMatch::kListener:
        match = listener == rule.what;
        break;
      case config::SubsetMatch::kHeader:
        for (const http::Header& h : head.headers) {
          if (http::iequals(h.name, rule.what) && h.value == rule.value) {
            match = true;
            break;
          }
        }
        break;
      case config::SubsetMatch::kPathPrefix:
        match = origin_form(head.target).starts_with(rule.what);
        break;
    }
    if (match) return static_cast<uint8_t>(r);
  }
  return kNoSubset;
}

PoolState::SubsetCounters& PoolState::subset_counters(const std::string& name) {
  std::lock_guard<std::mutex> lock(subsets_mu);
  for (const auto& c : subsets) {
    if (c->name == name) return *c;
  }
  subsets.push_back(std::make_unique<SubsetCounters>(name));
  return *subsets.back();
}

// nullptr when no backend the previous placement names is in the pool with a positive weight
// (a pool discovered by DNS may not hold them yet): every key then uses the current placement.
core::Result<std::unique_ptr<Pool::Previous>> Pool::build_previous(const config::PoolConfig& cfg,
                                                                   const core::BackendSet& set) {
  std::vector<core::BackendSpec> specs;
  specs.reserve(set.size());
  bool any = false;
  for (const core::BackendSpec& b : set.specs()) {
    uint32_t w = 0;
    for (const auto& m : cfg.previous.backends) {
      if (m.id == b.id) w = m.weight;
    }
    any |= w > 0;
    specs.push_back({b.id, w});
  }
  if (!any) return std::unique_ptr<Previous>();
  auto pset = core::BackendSet::create(std::move(specs));
  if (!pset) return core::fail("pool " + cfg.name + ": previous: " + pset.error().message);
  auto sel = core::Selector::build(*pset, selector_options(cfg.previous));
  if (!sel) return core::fail("pool " + cfg.name + ": previous: " + sel.error().message);
  auto prev = std::make_unique<Previous>(std::move(*pset), std::move(*sel));
  for (const core::BackendSpec& b : prev->set.specs()) {
    prev->weights.push_back(b.weight * kWeightScale);
    prev->total_weight += uint64_t{b.weight} * kWeightScale;
  }
  return prev;
}

core::PlacementVersion Pool::placement_of(uint64_t hash) const noexcept {
  if (!previous_) return core::PlacementVersion::kCurrent;
  return core::placement_of(hash, cfg_.migrate_percent);
}

const core::Selector& Pool::selector(core::PlacementVersion v) const noexcept {
  return v == core::PlacementVersion::kPrevious && previous_ ? previous_->selector : selector_;
}

uint64_t Pool::placement_hash(core::PlacementVersion v, uint64_t hash) const noexcept {
  const uint64_t seed =
      v == core::PlacementVersion::kPrevious && previous_ ? cfg_.previous.seed : cfg_.seed;
  return seed == 0 ? hash : core::mix64(hash, seed);
}

void Pool::previous_input(core::PickInput& in) const noexcept {
  if (!previous_) return;
  in.weights = previous_->weights;
  in.total_weight = previous_->total_weight;
  if (state_->unusable.load(std::memory_order_acquire) != 0) {
    uint64_t w_up = 0;
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (backends_[i]->usable()) w_up += previous_->weights[i];
    }
    in.total_weight = w_up;
  }
}

void Pool::pick_input(core::PickInput& in, std::span<const uint64_t> tried,
                      std::span<uint64_t> excluded) const noexcept {
  const size_t n = backends_.size();
  in.in_flight_ptrs = in_flight_ptrs_;
  std::span<const uint32_t> weights = base_weights_;
  uint64_t total = total_weight_ * kWeightScale;
  if (ramping_.load(std::memory_order_acquire)) {
    // Slow start under way: the tick may be storing weights now. Copy them once, so this pick
    // reads one set and W is that set's sum. O(backends), only while some backend ramps.
    thread_local std::vector<uint32_t> copy;
    if (copy.size() < n) copy.resize(n);
    total = 0;
    for (size_t i = 0; i < n; ++i) {
      copy[i] = eff_weights_[i].load(std::memory_order_relaxed);
      total += copy[i];
    }
    weights = std::span<const uint32_t>(copy.data(), n);
  }
  in.weights = weights;
  in.total_in_flight = state_->total_in_flight.load(std::memory_order_relaxed);
  in.total_weight = total;
  bool any_excluded = false;
  for (size_t w = 0; w < excluded_words_; ++w) {
    excluded[w] = w < tried.size() ? tried[w] : 0;
    any_excluded |= excluded[w] != 0;
  }
  // The count is never below the number of flagged backends: 0 means none is (the common case).
  if (state_->unusable.load(std::memory_order_acquire) != 0) {
    // Rare path: some backend is down. W counts only usable backends.
    uint64_t w_up = 0;
    for (size_t i = 0; i < n; ++i) {
      if (backends_[i]->usable()) {
        w_up += weights[i];
      } else {
        core::bit_set(excluded, i);
        any_excluded = true;
      }
    }
    in.total_weight = w_up;
  }
  if (any_excluded) in.excluded = excluded;
}

size_t Pool::eligible_count() const noexcept {
  size_t n = 0;
  for (size_t i = 0; i < backends_.size(); ++i) {
    n += effective_weight(static_cast<core::BackendIndex>(i)) > 0 && backends_[i]->usable() ? 1
                                                                                           : 0;
  }
  return n;
}

core::BackendIndex Pool::least_loaded(std::span<const uint64_t> tried,
                                      std::span<const uint32_t> loads) const noexcept {
  core::BackendIndex best = core::kNoBackend;
  uint64_t best_load = UINT64_MAX;
  for (size_t i = 0; i < backends_.size(); ++i) {
    const uint32_t w = effective_weight(static_cast<core::BackendIndex>(i));
    if (w == 0 || !backends_[i]->usable()) continue;
    if (core::bit_test(tried, i)) continue;
    // Load relative to (effective) weight, in fixed point.
    const uint64_t n = i < loads.size() ? loads[i]
                                        : backends_[i]->in_flight.load(std::memory_order_relaxed);
    uint64_t load = (n << 32) / w;
    if (load < best_load) {
      best_load = load;
      best = static_cast<core::BackendIndex>(i);
    }
  }
  return best;
}

uint64_t Pool::placement_fingerprint() const {
  // Fixed-width little-endian fields and length-prefixed ids: no two placements share bytes.
  std::string bytes;
  auto put = [&bytes](uint64_t v) {
    for (int k = 0; k < 8; ++k) bytes += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  auto put_algorithm = [&put](const auto& c) {
    put(static_cast<uint64_t>(c.algorithm));
    if (c.algorithm == config::Algorithm::kRing ||
        c.algorithm == config::Algorithm::kSkeletonRendezvous) {
      put(c.points_per_weight);
      put(c.max_points);
    } else if (c.algorithm == config::Algorithm::kMaglev) {
      put(c.maglev_table_size);
    }
  };
  put_algorithm(cfg_);
  if (!empty()) {
    for (core::BackendIndex i : set_.by_id()) {
      const std::string& id = set_[i].id;
      put(id.size());
      bytes += id;
      put(set_[i].weight);
      put(backends_[i]->usable() ? 1 : 0);
    }
  }
  // The key seed and a migration move keys too; a pool with neither keeps the digest it had
  // before they were counted (the values above only).
  constexpr uint64_t kSeedMark = 0x53454544u, kMigrationMark = 0x4d494752u;  // "SEED", "MIGR"
  if (cfg_.seed != 0) {
    put(kSeedMark);
    put(cfg_.seed);
  }
  if (previous_ && cfg_.migrate_percent < 100) {
    put(kMigrationMark);
    put(cfg_.migrate_percent);
    put_algorithm(cfg_.previous);
    put(cfg_.previous.seed);
    for (const auto& m : cfg_.previous.backends) {
      put(m.id.size());
      bytes += m.id;
      put(m.weight);
    }
  }
  constexpr uint64_t kFingerprintSeed = 0x504c4143454d4e54ull;  // "PLACEMNT"
  return core::hash64(bytes, kFingerprintSeed);
}

bool Pool::refresh_weights(uint64_t now_ms) noexcept {
  const uint64_t ramp_ms = cfg_.slow_start_ms;
  bool ramping = false;
  bool differs = false;
  for (size_t i = 0; i < backends_.size(); ++i) {
    BackendState& b = *backends_[i];
    uint64_t w = base_weights_[i];
    if (b.ramp_start_ms != 0) {
      uint64_t elapsed = now_ms > b.ramp_start_ms ? now_ms - b.ramp_start_ms : 0;
      if (ramp_ms == 0 || elapsed >= ramp_ms) {
        b.ramp_start_ms = 0;
      } else if (b.usable()) {
        uint64_t permille = std::max<uint64_t>(kSlowStartFloorPermille, elapsed * 1000 / ramp_ms);
        w = std::max<uint64_t>(w > 0 ? 1 : 0, w * permille / 1000);
        ramping = true;
      }
    }
    // The agent's weight percentage (agent_check): capacity only, like the ramp.
    if (const uint32_t pct = b.agent.weight_percent.load(std::memory_order_relaxed); pct != 100) {
      w = pct == 0 || w == 0 ? 0 : std::max<uint64_t>(1, w * pct / 100);
    }
    differs |= w != base_weights_[i];
    // Picks copy these only while ramping_ is set; the flag goes up after the stores.
    if (eff_weights_[i].load(std::memory_order_relaxed) != w) {
      eff_weights_[i].store(static_cast<uint32_t>(w), std::memory_order_relaxed);
    }
  }
  // Release: a pick that reads the flag's new value reads weights at least this new. Written
  // only when it changes, so with no ramp the tick writes nothing that workers read.
  if (ramping_.load(std::memory_order_relaxed) != differs) {
    ramping_.store(differs, std::memory_order_release);
  }
  return ramping;
}

}  // namespace rondel::proxy
