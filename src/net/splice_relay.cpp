// SpliceRelay and SplicePoller: readiness from an epoll set of the worker's own around splice_step.
#include "rondel/net/splice_relay.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace rondel::net {

// ---------------------------------------------------------------------------------------------
// SplicePoller

SplicePoller::~SplicePoller() {
  if (ep_ >= 0) ::close(ep_);  // close() was not called (a loop that never ran): nothing polls
}

int SplicePoller::open() noexcept {
  if (open_) return 0;
  if (closed_) return -ECANCELED;
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep_ < 0) return -errno;
  int rc = uv_poll_init(loop_, &poll_, ep_);
  if (rc == 0) {
    poll_.data = this;
    rc = uv_poll_start(&poll_, UV_READABLE, &on_ready);
    if (rc != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&poll_), nullptr);
      closed_ = true;  // the handle is closing: never initialised again
    }
  }
  if (rc != 0) {
    ::close(ep_);
    ep_ = -1;
    return rc;
  }
  // It keeps the loop alive only while a relay waits on it (set() refs and unrefs it).
  uv_unref(reinterpret_cast<uv_handle_t*>(&poll_));
  open_ = true;
  return 0;
}

void SplicePoller::close() noexcept {
  if (closed_) return;
  closed_ = true;
  if (!open_) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_), nullptr);  // stops watching ep_ at once
  ::close(ep_);
  ep_ = -1;
}

int SplicePoller::set(int fd, uint32_t& current, uint32_t events, SpliceRelay* r) noexcept {
  if (events == current) return 0;
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = r;
  int op = events == 0 ? EPOLL_CTL_DEL : current == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (::epoll_ctl(ep_, op, fd, &ev) != 0) return -errno;
  auto* h = reinterpret_cast<uv_handle_t*>(&poll_);
  if (op == EPOLL_CTL_ADD && watched_++ == 0) uv_ref(h);
  if (op == EPOLL_CTL_DEL && --watched_ == 0) uv_unref(h);
  current = events;
  return 0;
}

void SplicePoller::retire(SpliceRelay* r) noexcept {
  if (!dispatching_) {
    delete r;
    return;
  }
  r->next_retired_ = retired_;
  retired_ = r;
}

void SplicePoller::on_ready(uv_poll_t* h, int status, int) noexcept {
  auto* self = static_cast<SplicePoller*>(h->data);
  if (status < 0) return;  // an epoll fd reports no error (libuv would have stopped the poll)
  epoll_event evs[kBatch];
  int n = ::epoll_wait(self->ep_, evs, kBatch, 0);
  self->dispatching_ = true;
  for (int i = 0; i < n; ++i) {
    auto* r = static_cast<SpliceRelay*>(evs[i].data.ptr);
    // A relay ended earlier in this pass is still allocated (retired) and ignores the event.
    // Any event steps it, errors and hang-ups included: the splice itself then reports them.
    if (!r->closing()) r->step();
  }
  self->dispatching_ = false;
  while (self->retired_ != nullptr) {
    SpliceRelay* r = self->retired_;
    self->retired_ = r->next_retired_;
    delete r;
  }
}

// ---------------------------------------------------------------------------------------------
// SpliceRelay

SpliceRelay* SpliceRelay::start(SplicePoller& poller, PipePool& pool, int from, int to,
                                uint64_t bytes, SpliceEvents* events, int* err,
                                std::string_view prefix) noexcept {
  int rc = poller.open();
  if (rc != 0) {
    *err = rc;
    return nullptr;
  }
  auto* r = new (std::nothrow) SpliceRelay(poller, pool, events, bytes);
  if (r == nullptr) {
    *err = -ENOMEM;
    return nullptr;
  }
  r->set_prefix(prefix);
  r->from_ = from;
  r->to_ = to;
  r->pipe_ = pool.take(err);
  rc = r->pipe_ == nullptr ? *err : poller.set(from, r->src_events_, EPOLLIN, r);
  if (rc != 0) {
    *err = rc;
    delete r;  // gives the pipe back; nothing was registered
    return nullptr;
  }
  return r;
}

SpliceRelay::~SpliceRelay() { pool_.give(pipe_); }

void SpliceRelay::cancel() noexcept {
  events_ = nullptr;
  shut();
}

void SpliceRelay::extend(uint64_t bytes, std::string_view prefix) noexcept {
  remaining_ += bytes;
  set_prefix(prefix);
}

void SpliceRelay::set_prefix(std::string_view prefix) noexcept {
  size_t n = std::min(prefix.size(), kMaxPrefix);
  if (n > 0) std::memcpy(prefix_, prefix.data(), n);
  prefix_len_ = static_cast<uint8_t>(n);
  prefix_off_ = 0;
}

void SpliceRelay::step() noexcept {
  uint64_t moved = 0;  // this wake-up's bytes, against kSpliceStepBudget
  for (;;) {
    if (!send_prefix()) return;
    if (ending_) {
      end(SpliceStop::kDone, 0);
      return;
    }
    SpliceStep st = splice_step(from_, *pipe_, to_, remaining_);
    remaining_ -= st.out;
    moved += st.out;
    if ((st.in > 0 || st.out > 0) && events_ != nullptr) {
      events_->on_splice_progress(st.in, st.out);
      if (closing()) return;  // cancelled from the callback
    }
    switch (st.stop) {
      case SpliceStop::kDone:
        if (!next_segment(moved)) return;
        continue;
      case SpliceStop::kSourceEof:
      case SpliceStop::kSourceError:
      case SpliceStop::kSinkError:
        end(st.stop, st.error);
        return;
      case SpliceStop::kSourceDry:
      case SpliceStop::kBudgetUsed:  // level-triggered: a readable source fires again at once
        wait_source();
        return;
      case SpliceStop::kSinkFull:  // backpressure: read nothing more until the sink drains
        wait_sink();
        return;
    }
  }
}

bool SpliceRelay::next_segment(uint64_t moved) noexcept {
  SpliceNext next = events_ != nullptr ? events_->on_splice_segment_done() : SpliceNext::kEnd;
  if (closing()) return false;  // cancelled from the callback
  switch (next) {
    case SpliceNext::kEnd:
      ending_ = true;
      return true;
    case SpliceNext::kWait:
      wait_source();
      return false;
    case SpliceNext::kContinue:
      if (moved < kSpliceStepBudget) return true;
      wait_source();  // yield to the loop; a readable source fires again at once
      return false;
  }
  return false;
}

bool SpliceRelay::send_prefix() noexcept {
  while (prefix_off_ < prefix_len_) {
    int more = remaining_ > 0 ? MSG_MORE : 0;  // the data follows: one segment for both
    ssize_t n = ::send(to_, prefix_ + prefix_off_, prefix_len_ - prefix_off_,
                       MSG_NOSIGNAL | MSG_DONTWAIT | more);
    if (n >= 0) {
      prefix_off_ = static_cast<uint8_t>(prefix_off_ + n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_sink();
    } else {
      end(SpliceStop::kSinkError, -errno);
    }
    return false;
  }
  return true;
}

void SpliceRelay::wait_source() noexcept {
  watch(true);
  if (!closing() && events_ != nullptr) events_->on_splice_wait(SpliceWait::kSource);
}

void SpliceRelay::wait_sink() noexcept {
  watch(false);
  if (!closing() && events_ != nullptr) events_->on_splice_wait(SpliceWait::kSink);
}

void SpliceRelay::watch(bool source) noexcept {
  if (closing()) return;
  // The side no longer waited on leaves the set first, so one fd is in it at a time.
  int rc = poller_.set(source ? to_ : from_, source ? dst_events_ : src_events_, 0, this);
  if (rc == 0) {
    rc = source ? poller_.set(from_, src_events_, EPOLLIN, this)
                : poller_.set(to_, dst_events_, EPOLLOUT, this);
  }
  if (rc != 0) end(source ? SpliceStop::kSourceError : SpliceStop::kSinkError, rc);
}

void SpliceRelay::end(SpliceStop stop, int error) noexcept {
  if (closing()) return;
  SpliceEvents* ev = events_;
  events_ = nullptr;
  shut();
  if (ev != nullptr) ev->on_splice_end(stop, error);
}

void SpliceRelay::shut() noexcept {
  if (closing()) return;
  closing_ = true;
  // Both sockets are still open (the owner cancels before it closes either), so these remove
  // this relay's registrations and never a later socket's of the same fd number.
  poller_.set(from_, src_events_, 0, this);
  poller_.set(to_, dst_events_, 0, this);
  poller_.retire(this);
}

}  // namespace rondel::net
