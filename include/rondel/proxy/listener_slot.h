// ListenerSlot: a client connection's place in its listener's open-connection count
// (ListenerState::open, shared by every worker and bounded by max_connections), and the one
// owner of that count: admit() adds the connection, release() or the slot's end takes it away,
// and a connection that changes codec (TLS with ALPN h2: Http1Session to Http2Session) moves
// its slot. Loop thread of the connection's worker; the count itself is a relaxed atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"

namespace rondel::proxy {

class ListenerSlot {
 public:
  ListenerSlot() = default;
  ListenerSlot(const ListenerSlot&) = delete;
  ListenerSlot& operator=(const ListenerSlot&) = delete;
  ListenerSlot(ListenerSlot&& o) noexcept : state_(std::move(o.state_)) {}
  ListenerSlot& operator=(ListenerSlot&& o) noexcept {
    if (this != &o) {
      release();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ~ListenerSlot() { release(); }

  // Counts the connection on `route`'s listener (route.state and route.config set). False when
  // max_connections were open already: counted as a kMaxConnections rejection in `stats`; the
  // slot is held all the same, until the caller closes the connection.
  bool admit(const ListenerRoute& route, WorkerStats& stats) noexcept {
    release();
    state_ = route.state;
    if (state_->open.fetch_add(1, std::memory_order_relaxed) < route.config->max_connections) {
      return true;
    }
    stats.rejected[static_cast<size_t>(Reject::kMaxConnections)].fetch_add(
        1, std::memory_order_relaxed);
    return false;
  }
  // Counts the connection on `state` (null: no listener) with no limit (a scripted session).
  void hold(std::shared_ptr<ListenerState> state) noexcept {
    release();
    state_ = std::move(state);
    if (state_) state_->open.fetch_add(1, std::memory_order_relaxed);
  }
  // The connection closed: no longer counted.
  void release() noexcept {
    if (!state_) return;
    state_->open.fetch_sub(1, std::memory_order_relaxed);
    state_.reset();
  }
  const std::shared_ptr<ListenerState>& state() const noexcept { return state_; }
  // The listener's name ("" when no slot is held).
  std::string_view name() const noexcept {
    return state_ ? std::string_view(state_->name) : std::string_view();
  }

 private:
  std::shared_ptr<ListenerState> state_;
};

}  // namespace rondel::proxy
