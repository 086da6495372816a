// Deadline: a libuv timer that is moved by writing a number, not by re-arming the timer.
//
// A connection resets its timeout several times per request (idle, header, I/O, response
// header). Re-arming a uv_timer_t each time costs a heap removal and insertion; a Deadline only
// records the new due time and touches the timer when the new due time is earlier than the one
// the timer is armed for. When the timer fires early (the deadline moved later), fire() re-arms
// it for the rest and reports false. Loop thread only; the timer handle belongs to the owner.
#pragma once

#include <uv.h>

#include <cstdint>

namespace rondel::net {

class Deadline {
 public:
  // `timer` must be initialised and must outlive this object's use; `cb` is its callback.
  void init(uv_timer_t* timer, uv_timer_cb cb) noexcept {
    timer_ = timer;
    cb_ = cb;
  }
  // Due `ms` from the loop's now; 0 clears. O(1) unless the timer must fire earlier than armed.
  void set(uint64_t ms) noexcept {
    if (ms == 0) {
      due_ = 0;  // the armed timer, if any, fires and finds nothing due
      return;
    }
    uint64_t now = uv_now(timer_->loop);
    due_ = now + ms;
    if (armed_at_ == 0 || armed_at_ > due_) {
      armed_at_ = due_;
      uv_timer_start(timer_, cb_, ms, 0);
    }
  }
  void clear() noexcept { due_ = 0; }
  bool pending() const noexcept { return due_ != 0; }
  // Call first thing in the timer callback: true when the deadline has really passed (it is then
  // cleared); false when nothing is due or it moved later (the timer is re-armed for the rest).
  bool fire() noexcept {
    armed_at_ = 0;
    if (due_ == 0) return false;
    uint64_t now = uv_now(timer_->loop);
    if (now < due_) {
      armed_at_ = due_;
      uv_timer_start(timer_, cb_, due_ - now, 0);
      return false;
    }
    due_ = 0;
    return true;
  }
  // Stops the timer itself (before closing it, or to leave no armed timer behind).
  void stop() noexcept {
    due_ = 0;
    armed_at_ = 0;
    if (timer_ != nullptr) uv_timer_stop(timer_);
  }

 private:
  uv_timer_t* timer_ = nullptr;
  uv_timer_cb cb_ = nullptr;
  uint64_t due_ = 0;       // loop time (ms) at which the owner's timeout expires; 0 = none
  uint64_t armed_at_ = 0;  // loop time the uv timer is armed for; 0 = not armed
};

}  // namespace rondel::net
