// TimeoutQueue: every client timeout of one event loop on a single libuv timer.
//
// A keep-alive connection spends most of its life idle, waiting for its next request under the
// idle timeout. With a uv_timer_t per connection (152 bytes) the timer was the largest part of an
// idle connection after the socket handle. Here a connection embeds a 24-byte Timeout node
// instead, and the loop keeps one timer for all of them.
//
// Timeouts are grouped in lanes by duration. Every timeout of a lane was set at "loop now +
// the lane's duration", and loop time never goes back, so appending keeps a lane sorted by due
// time: setting, moving and clearing a timeout are O(1) list operations, and the next expiry
// is the earliest head over the lanes (there are only as many lanes as distinct timeout values
// in the configuration: idle, header, body, linger). nginx keeps its timers in a red-black tree
// and HAProxy in an ebtree; fixed per-listener durations make plain FIFO lists enough here.
//
// The uv timer is re-armed only when a timeout becomes due earlier than the time it is armed
// for, which does not happen in steady state (a new timeout lands at the tail of its lane).
// Loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "rondel/util/intrusive_list.h"

namespace rondel::net {

class TimeoutQueue;

struct TimeoutTag {};

// An intrusive node: embed one per timeout owner (as a base or member). Not copyable. Linked in
// its lane (util::IntrusiveList) while pending.
class Timeout : public util::ListNode<TimeoutTag> {
 public:
  bool pending() const noexcept { return linked(); }
  uint64_t due_ms() const noexcept { return due_; }

 private:
  friend class TimeoutQueue;
  uint64_t due_ = 0;  // loop time (ms)
};

class TimeoutQueue {
 public:
  // Called for each timeout that expires; the node is already unqueued (the callback may set it
  // again or destroy its owner).
  using Callback = void (*)(Timeout* t) noexcept;

  TimeoutQueue(uv_loop_t* loop, Callback cb) noexcept : loop_(loop), cb_(cb) {}
  ~TimeoutQueue();
  TimeoutQueue(const TimeoutQueue&) = delete;
  TimeoutQueue& operator=(const TimeoutQueue&) = delete;

  // (Re)sets `t` to expire `ms` from the loop's now; 0 clears it. False only if memory for a new
  // lane or the timer could not be had (the timeout is then not set).
  bool set(Timeout& t, uint64_t ms) noexcept;
  void clear(Timeout& t) noexcept { t.util::ListNode<TimeoutTag>::unlink(); }
  // Closes the timer handle; run the loop afterwards for its close callback. Later set() calls
  // queue nothing. Call once the loop's connections are closed (shutdown).
  void close() noexcept;
  size_t lanes() const noexcept { return lanes_.size(); }

 private:
  struct Lane {
    uint64_t ms = 0;
    util::IntrusiveList<Timeout, TimeoutTag> list;  // in due order (appended: time only grows)
  };
  static void on_timer(uv_timer_t* t) noexcept;
  void expire() noexcept;
  void arm(uint64_t due) noexcept;
  Lane* lane(uint64_t ms) noexcept;

  uv_loop_t* loop_;
  Callback cb_;
  uv_timer_t* timer_ = nullptr;  // created at the first set(); freed by its close callback
  bool closed_ = false;
  uint64_t armed_at_ = 0;  // loop time the timer is armed for; 0 = not armed
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace rondel::net
