// TimeoutQueue: lanes of equal-duration timeouts on one libuv timer (see the header).
#include "rondel/net/timeout_queue.h"

#include <new>

namespace rondel::net {

TimeoutQueue::~TimeoutQueue() {
  // Owners normally outlive nothing here (they are closed first); the lanes unlink any left.
  if (timer_ != nullptr && !closed_) close();
}

TimeoutQueue::Lane* TimeoutQueue::lane(uint64_t ms) noexcept {
  for (auto& l : lanes_) {
    if (l->ms == ms) return l.get();
  }
  // A new duration (first use, or a reload with other timeouts). Lanes are kept: there are
  // only as many as distinct timeout values ever configured.
  auto l = std::unique_ptr<Lane>(new (std::nothrow) Lane);
  if (l == nullptr) return nullptr;
  l->ms = ms;
  try {
    lanes_.push_back(std::move(l));
  } catch (...) {
    return nullptr;
  }
  return lanes_.back().get();
}

bool TimeoutQueue::set(Timeout& t, uint64_t ms) noexcept {
  clear(t);
  if (ms == 0 || closed_) return true;  // after close() nothing fires any more
  if (timer_ == nullptr) {
    timer_ = new (std::nothrow) uv_timer_t;
    if (timer_ == nullptr) return false;
    uv_timer_init(loop_, timer_);
    timer_->data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(timer_));  // the connections keep the loop alive
  }
  Lane* l = lane(ms);
  if (l == nullptr) return false;
  t.due_ = uv_now(loop_) + ms;
  // Append: the lane stays sorted because loop time does not go back.
  l->list.push_back(t);
  arm(t.due_);
  return true;
}

void TimeoutQueue::arm(uint64_t due) noexcept {
  if (closed_ || timer_ == nullptr || (armed_at_ != 0 && armed_at_ <= due)) return;
  uint64_t now = uv_now(loop_);
  armed_at_ = due;
  uv_timer_start(timer_, &on_timer, due > now ? due - now : 0, 0);
}

void TimeoutQueue::on_timer(uv_timer_t* h) noexcept {
  auto* q = static_cast<TimeoutQueue*>(h->data);
  q->armed_at_ = 0;
  q->expire();
}

void TimeoutQueue::expire() noexcept {
  const uint64_t now = uv_now(loop_);
  // Everything due fires in due order across the lanes (a timer that woke late finds several
  // lanes due: the earliest head goes first, so a 10 ms timeout never fires after a 40 ms one).
  // The lanes are re-scanned after each callback: it may add a lane (a new duration) or set
  // timeouts in any lane, always due after `now`, so the loop ends.
  for (;;) {
    Timeout* first = nullptr;
    for (auto& l : lanes_) {
      Timeout* t = l->list.front();
      if (t != nullptr && t->due_ <= now && (first == nullptr || t->due_ < first->due_)) first = t;
    }
    if (first == nullptr) break;
    clear(*first);
    cb_(first);
  }
  uint64_t next = 0;
  for (auto& l : lanes_) {
    const Timeout* t = l->list.front();
    if (t != nullptr && (next == 0 || t->due_ < next)) next = t->due_;
  }
  if (next != 0) arm(next);
}

void TimeoutQueue::close() noexcept {
  closed_ = true;
  if (timer_ == nullptr) return;
  uv_timer_t* t = timer_;
  timer_ = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(t),
           [](uv_handle_t* h) noexcept { delete reinterpret_cast<uv_timer_t*>(h); });
}

}  // namespace rondel::net
