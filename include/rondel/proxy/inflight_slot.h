// InFlightSlot: one request's place in a backend's and its pool's in-flight counts.
//
// The slot is the only code in rondel that brings those counts down: take() or take_below()
// raises both, and release() (or the destructor) lowers both, exactly once, whatever way the
// attempt ends. It is move-only, so a slot cannot be released twice by two owners (compare
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
  InFlightSlot(InFlightSlot&& o) noexcept : backend_(o.backend_), pool_(o.pool_) {
    o.backend_ = nullptr;
    o.pool_ = nullptr;
  }
  InFlightSlot& operator=(InFlightSlot&& o) noexcept {
    if (this != &o) {
      release();
      backend_ = o.backend_;
      pool_ = o.pool_;
      o.backend_ = nullptr;
      o.pool_ = nullptr;
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
    backend_ = nullptr;
    pool_ = nullptr;
  }

 private:
  InFlightSlot(std::atomic<uint32_t>* b, std::atomic<uint64_t>* p) noexcept : backend_(b), pool_(p) {}
  std::atomic<uint32_t>* backend_ = nullptr;
  std::atomic<uint64_t>* pool_ = nullptr;
};

}  // namespace rondel::proxy
