// SpliceRelay: uv_poll_t readiness on dup'd fds around splice_step.
#include "rondel/net/splice_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace rondel::net {

SpliceRelay* SpliceRelay::start(uv_loop_t* loop, PipePool& pool, int from, int to, uint64_t bytes,
                                SpliceEvents* events, int* err) noexcept {
  auto* r = new (std::nothrow) SpliceRelay(pool, events, bytes);
  if (r == nullptr) {
    *err = -ENOMEM;
    return nullptr;
  }
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

void SpliceRelay::step() noexcept {
  SpliceStep st = splice_step(from_, *pipe_, to_, remaining_);
  remaining_ -= st.out;
  if ((st.in > 0 || st.out > 0) && events_ != nullptr) {
    events_->on_splice_progress(st.in, st.out);
    if (closing()) return;  // cancelled from the callback
  }
  switch (st.stop) {
    case SpliceStop::kDone:
    case SpliceStop::kSourceEof:
    case SpliceStop::kSourceError:
    case SpliceStop::kSinkError:
      end(st.stop, st.error);
      return;
    case SpliceStop::kSourceDry:
    case SpliceStop::kBudgetUsed:  // level-triggered: a readable source fires again at once
      watch(&dst_, 0);
      watch(&src_, UV_READABLE);
      return;
    case SpliceStop::kSinkFull:  // backpressure: read nothing more until the sink drains
      watch(&src_, 0);
      watch(&dst_, UV_WRITABLE);
      return;
  }
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
