// SpliceRelay: uv_poll_t readiness on dup'd fds around splice_step.
#include "rondel/net/splice_relay.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace rondel::net {

SpliceRelay* SpliceRelay::start(uv_loop_t* loop, PipePool& pool, int from, int to, uint64_t bytes,
                                SpliceEvents* events, int* err, std::string_view prefix) noexcept {
  auto* r = new (std::nothrow) SpliceRelay(pool, events, bytes);
  if (r == nullptr) {
    *err = -ENOMEM;
    return nullptr;
  }
  r->set_prefix(prefix);
  r->pipe_ = pool.take(err);
  r->from_ = r->pipe_ != nullptr ? ::fcntl(from, F_DUPFD_CLOEXEC, 0) : -1;
  r->to_ = r->from_ >= 0 ? ::fcntl(to, F_DUPFD_CLOEXEC, 0) : -1;
  if (r->to_ < 0) {
    if (r->pipe_ != nullptr) *err = -errno;
    pool.give(r->pipe_);
    if (r->from_ >= 0) ::close(r->from_);
    delete r;
    return nullptr;
  }
  int rc = uv_poll_init_socket(loop, &r->src_, r->from_);
  if (rc == 0) {
    r->src_open_ = true;
    r->src_.data = static_cast<HandleCloser*>(r);
    rc = uv_poll_init_socket(loop, &r->dst_, r->to_);
  }
  if (rc == 0) {
    r->dst_open_ = true;
    r->dst_.data = static_cast<HandleCloser*>(r);
    rc = uv_poll_start(&r->src_, UV_READABLE, &on_poll);
  }
  if (rc != 0) {
    *err = rc;
    r->events_ = nullptr;
    r->shut();  // frees it once the handles (if any) closed
    return nullptr;
  }
  return r;
}

void SpliceRelay::cancel() noexcept {
  events_ = nullptr;
  shut();
}

void SpliceRelay::on_poll(uv_poll_t* h, int status, int) noexcept {
  auto* r = static_cast<SpliceRelay*>(static_cast<HandleCloser*>(h->data));
  if (r->closing()) return;
  if (status < 0) {
    r->end(h == &r->src_ ? SpliceStop::kSourceError : SpliceStop::kSinkError, status);
    return;
  }
  r->step();
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
  watch(&dst_, 0);
  watch(&src_, UV_READABLE);
  if (!closing() && events_ != nullptr) events_->on_splice_wait(SpliceWait::kSource);
}

void SpliceRelay::wait_sink() noexcept {
  watch(&src_, 0);
  watch(&dst_, UV_WRITABLE);
  if (!closing() && events_ != nullptr) events_->on_splice_wait(SpliceWait::kSink);
}

void SpliceRelay::watch(uv_poll_t* p, int events) noexcept {
  if (closing()) return;
  int rc = events == 0 ? uv_poll_stop(p) : uv_poll_start(p, events, &on_poll);
  if (rc != 0) end(p == &src_ ? SpliceStop::kSourceError : SpliceStop::kSinkError, rc);
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
  if (src_open_) close_handle(reinterpret_cast<uv_handle_t*>(&src_));
  if (dst_open_) close_handle(reinterpret_cast<uv_handle_t*>(&dst_));
  if (!src_open_ && !dst_open_) on_all_closed();
}

void SpliceRelay::on_all_closed() noexcept {
  if (from_ >= 0) ::close(from_);
  if (to_ >= 0) ::close(to_);
  pool_.give(pipe_);
  delete this;
}

}  // namespace rondel::net
