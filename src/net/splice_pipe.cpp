// SplicePipe, PipePool and splice_step: pipe2/splice/fcntl calls, no libuv.
#include "rondel/net/splice_pipe.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

namespace rondel::net {

namespace {

// splice(2) with EINTR retried: bytes moved, 0 at the source's EOF, or -errno.
ssize_t splice_once(int from, int to, size_t len, unsigned flags) noexcept {
  for (;;) {
    ssize_t n = ::splice(from, nullptr, to, nullptr, len, flags | SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

bool would_block(ssize_t rc) noexcept { return rc == -EAGAIN || rc == -EWOULDBLOCK; }

}  // namespace

LinePart recv_line_part(int fd, char* buf, size_t cap) noexcept {
  ssize_t n;
  do {
    n = ::recv(fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {LinePart::Kind::kWait, 0};
  if (n <= 0) return {};
  size_t take = static_cast<size_t>(n);
  for (size_t i = 0; i < take; ++i) {
    if (buf[i] == '\n') {
      take = i + 1;  // up to the end of this line: never a byte of what follows it
      break;
    }
  }
  do {
    n = ::recv(fd, buf, take, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  // The peeked bytes are there (one reader): a failure is one the stream's next read sees, and
  // fewer bytes are still a prefix of the line.
  if (n <= 0) return {};
  return {LinePart::Kind::kBytes, static_cast<size_t>(n)};
}

SpliceStep splice_step(int from, SplicePipe& pipe, int to, uint64_t remaining,
                       size_t budget) noexcept {
  SpliceStep step;
  for (;;) {
    if (pipe.held_ > 0) {
      // More of the body to come after these bytes: let TCP coalesce (SPLICE_F_MORE).
      unsigned more = remaining > pipe.held_ ? SPLICE_F_MORE : 0;
      ssize_t n = splice_once(pipe.read_fd(), to, pipe.held_, more);
      if (would_block(n)) {
        step.stop = SpliceStop::kSinkFull;
        return step;
      }
      if (n <= 0) {  // 0 cannot happen with bytes in the pipe; treat it as the sink failing
        step.stop = SpliceStop::kSinkError;
        step.error = n < 0 ? static_cast<int>(n) : -EPIPE;
        return step;
      }
      auto moved = static_cast<size_t>(n);
      pipe.held_ -= moved;
      remaining -= moved;
      step.out += moved;
      if (pipe.held_ > 0) continue;  // a short write: try again, it reports kSinkFull if so
    }
    if (remaining == 0) {
      step.stop = SpliceStop::kDone;
      return step;
    }
    if (step.out >= budget) {
      step.stop = SpliceStop::kBudgetUsed;
      return step;
    }
    // The pipe is empty here: take at most one pipe-full, and never past the body's end.
    size_t want = static_cast<size_t>(std::min<uint64_t>(remaining, pipe.capacity_));
    ssize_t n = splice_once(from, pipe.write_fd(), want, 0);
    if (would_block(n)) {
      step.stop = SpliceStop::kSourceDry;
      return step;
    }
    if (n < 0) {
      step.stop = SpliceStop::kSourceError;
      step.error = static_cast<int>(n);
      return step;
    }
    if (n == 0) {
      step.stop = SpliceStop::kSourceEof;
      return step;
    }
    pipe.held_ += static_cast<size_t>(n);
    step.in += static_cast<size_t>(n);
  }
}

PipePool::~PipePool() {
  while (free_ != nullptr) {
    SplicePipe* p = free_;
    free_ = p->next_;
    destroy(p);
  }
}

SplicePipe* PipePool::take(int* err) noexcept {
  SplicePipe* p = free_;
  if (p != nullptr) {
    free_ = p->next_;
    p->next_ = nullptr;
    --idle_;
    ++outstanding_;
    return p;
  }
  p = new (std::nothrow) SplicePipe;
  if (p == nullptr) {
    *err = -ENOMEM;
    return nullptr;
  }
  if (::pipe2(p->fds_, O_NONBLOCK | O_CLOEXEC) != 0) {
    *err = -errno;
    delete p;
    return nullptr;
  }
  // A larger pipe moves more per splice call; the kernel may refuse (fs.pipe-max-size, or the
  // user's pipe quota): then the default size (64 KiB) serves.
  (void)::fcntl(p->fds_[1], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));
  int size = ::fcntl(p->fds_[1], F_GETPIPE_SZ);
  p->capacity_ = size > 0 ? static_cast<size_t>(size) : 64 * 1024;
  ++outstanding_;
  return p;
}

void PipePool::give(SplicePipe* p) noexcept {
  if (p == nullptr) return;
  --outstanding_;
  if (p->held_ > 0 || idle_ >= kMaxIdle) {
    destroy(p);
    return;
  }
  p->next_ = free_;
  free_ = p;
  ++idle_;
}

void PipePool::destroy(SplicePipe* p) noexcept {
  ::close(p->fds_[0]);
  ::close(p->fds_[1]);
  delete p;
}

}  // namespace rondel::net
