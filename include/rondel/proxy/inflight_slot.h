// InFlightSlot: one request's place in a backend's and its pool's in-flight counts, and, for a
// pool that balances by prompt size (`load_by: prompt_size`), in their in-flight costs too.
//
// The slot is the only code in rondel that brings those counts down: take(), take_below() or
// take_cost_below() raises them, and release() (or the destructor) lowers the same ones by the
// same amounts, exactly once, whatever way the attempt ends. It is move-only, so a slot cannot be released twice by two owners (compare
// HAProxy's sess_change_server() and nginx's single peer `free` callback). Any thread; the
// counters are relaxed atomics read by the bounded-load pick.
#pragma once

#include <atomic>
#include <cstdint>

namespace rondel::proxy {

class InFlightSlot {
 public:
  InFlightSlot() noexcept = default;
  // Counts one more request in flight on `backend` and in `pool`'s total. Both counters must
  // outlive the slot (the exchange holds the snapshot that owns them). O(1), no allocation.
  static InFlightSlot take(std::atomic<uint32_t>& backend, std::atomic<uint64_t>& pool) noexcept {
    backend.fetch_add(1, std::memory_order_relaxed);
    pool.fetch_add(1, std::memory_order_relaxed);
    return InFlightSlot(&backend, &pool);
  }
  // As take(), but only while `backend` holds fewer than `limit` requests: the check and the
  // increment are one compare-and-swap, so two workers that picked the same backend with one
  // place left cannot both take it. An empty slot (held() false) when it is full.
  static InFlightSlot take_below(std::atomic<uint32_t>& backend, std::atomic<uint64_t>& pool,
                                 uint64_t limit) noexcept {
    uint32_t n = backend.load(std::memory_order_relaxed);
    do {
      if (n >= limit) return InFlightSlot();
    } while (!backend.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    pool.fetch_add(1, std::memory_order_relaxed);
    return InFlightSlot(&backend, &pool);
  }
  // Costs (prompt size in KiB; load_by: prompt_size): as take_below() on the cost counter
  // `backend_cost` with `cost` (>= 1) instead of 1 (the compare-and-swap admits the request
  // while the backend's cost is below `limit`), then counts one request in `backend` and `pool`
  // and adds `cost` to `pool_cost`. All four must outlive the slot. Empty when full.
  static InFlightSlot take_cost_below(std::atomic<uint32_t>& backend, std::atomic<uint64_t>& pool,
                                      std::atomic<uint32_t>& backend_cost,
                                      std::atomic<uint64_t>& pool_cost, uint32_t cost,
                                      uint64_t limit) noexcept {
    uint32_t n = backend_cost.load(std::memory_order_relaxed);
    do {
      if (n >= limit) return InFlightSlot();
    } while (!backend_cost.compare_exchange_weak(n, n + cost, std::memory_order_relaxed));
    pool_cost.fetch_add(cost, std::memory_order_relaxed);
    InFlightSlot s = take(backend, pool);
    s.backend_cost_ = &backend_cost;
    s.pool_cost_ = &pool_cost;
    s.cost_ = cost;
    return s;
  }
  // As take_cost_below() without the limit (an all-full pick, a forced retry).
  static InFlightSlot take_cost(std::atomic<uint32_t>& backend, std::atomic<uint64_t>& pool,
                                std::atomic<uint32_t>& backend_cost,
                                std::atomic<uint64_t>& pool_cost, uint32_t cost) noexcept {
    return take_cost_below(backend, pool, backend_cost, pool_cost, cost, UINT64_MAX);
  }
  InFlightSlot(InFlightSlot&& o) noexcept
      : backend_(o.backend_), pool_(o.pool_), backend_cost_(o.backend_cost_),
        pool_cost_(o.pool_cost_), cost_(o.cost_) {
    o.forget();
  }
  InFlightSlot& operator=(InFlightSlot&& o) noexcept {
    if (this != &o) {
      release();
      backend_ = o.backend_;
      pool_ = o.pool_;
      backend_cost_ = o.backend_cost_;
      pool_cost_ = o.pool_cost_;
      cost_ = o.cost_;
      o.forget();
    }
    return *this;
  }
  InFlightSlot(const InFlightSlot&) = delete;
  InFlightSlot& operator=(const InFlightSlot&) = delete;
  ~InFlightSlot() { release(); }

  // True while the slot holds its counts.
  bool held() const noexcept { return backend_ != nullptr; }
  // Gives the counts back; a released (or empty) slot does nothing.
  void release() noexcept {
    if (backend_ == nullptr) return;
    backend_->fetch_sub(1, std::memory_order_relaxed);
    pool_->fetch_sub(1, std::memory_order_relaxed);
    if (backend_cost_ != nullptr) {
      backend_cost_->fetch_sub(cost_, std::memory_order_relaxed);
      pool_cost_->fetch_sub(cost_, std::memory_order_relaxed);
    }
    forget();
  }
  // The cost this slot holds (0: a slot without costs).
  uint32_t cost() const noexcept { return backend_cost_ != nullptr ? cost_ : 0; }

 private:
  InFlightSlot(std::atomic<uint32_t>* b, std::atomic<uint64_t>* p) noexcept : backend_(b), pool_(p) {}
  void forget() noexcept {
    backend_ = nullptr;
    pool_ = nullptr;
    backend_cost_ = nullptr;
    pool_cost_ = nullptr;
    cost_ = 0;
  }
  std::atomic<uint32_t>* backend_ = nullptr;
  std::atomic<uint64_t>* pool_ = nullptr;
  std::atomic<uint32_t>* backend_cost_ = nullptr;  // null: no cost held
  std::atomic<uint64_t>* pool_cost_ = nullptr;
  uint32_t cost_ = 0;
};

}  // namespace rondel::proxy
