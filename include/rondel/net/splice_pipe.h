// SplicePipe and PipePool: the kernel pipes through which splice(2) moves a body from one socket
// to another without its bytes entering user space, the per-worker pool they are lent from, and
// splice_step, which moves at most one body's remaining bytes through a pipe without blocking.
//
// Readiness with libuv (1.44, checked against its source, src/unix/core.c and poll.c): a loop
// keeps one io watcher per fd number (loop->watchers[fd]) and one epoll registration per fd, so
// a uv_poll_t on the fd of a live uv_tcp_t is refused (UV_EEXIST) while the stream watches it,
// and silently steals its events when the stream restarts later. The relays therefore watch the
// sockets in an epoll set of their own (SplicePoller, splice_relay.h), which the loop watches as
// one fd: the same socket in two epoll sets, each registration independent. The stream must not
// watch the same direction meanwhile (its read stopped while the relay waits for readable; no
// uv_write pending while it waits for writable), or both wake and the stream would read body
// bytes the splice path expects in the socket.
// splice_step itself never touches libuv; it is plain non-blocking syscalls on the fds.
//
// Loop thread only (one pool per worker). No allocation after the pool has its pipes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rondel::net {

class PipePool;
class SplicePipe;

// Why splice_step returned.
enum class SpliceStop : uint8_t {
  kDone,         // `remaining` reached 0: every byte of the body went to the sink
  kSourceDry,    // the source has nothing more now (EAGAIN, pipe empty): wait until readable
  kSinkFull,     // the sink takes nothing more now (EAGAIN): wait until writable; the pipe may
                 // hold bytes (held())
  kBudgetUsed,   // `budget` bytes went to the sink: yield to the loop, call again (the fds are
                 // level-triggered, so a poll on either fires again at once)
  kSourceEof,    // the source ended before the body did (the pipe was drained to the sink)
  kSourceError,  // splice from the source failed: `error` is -errno (-ECONNRESET, ...)
  kSinkError,    // splice to the sink failed: `error` is -errno (-EPIPE, -ECONNRESET, ...)
};

// What one splice_step did: why it stopped and how many bytes moved on each side.
struct SpliceStep {
  SpliceStop stop = SpliceStop::kDone;
  size_t in = 0;   // bytes taken from the source into the pipe
  size_t out = 0;  // bytes written from the pipe to the sink (subtract them from `remaining`)
  int error = 0;   // -errno for kSourceError / kSinkError, else 0
};

// Bytes one splice_step writes to its sink at most before it yields (kBudgetUsed).
inline constexpr size_t kSpliceStepBudget = 4u << 20;

// Moves body bytes from socket `from` through `pipe` to socket `to` without blocking, until
// `remaining` of them (those already held in the pipe included) reached the sink, or one side
// would block, ended or failed, or `budget` bytes were written. Never takes more than
// `remaining - pipe.held()` bytes from the source, so what follows the body there (the next
// response of a keep-alive connection) stays in the socket. Bytes held in the pipe are written
// first. Cost: two splice(2) calls per pipe-full (up to 1 MiB), no copy to user space.
// Preconditions: both fds non-blocking sockets; pipe.held() <= remaining; SIGPIPE ignored
// (splice has no MSG_NOSIGNAL; rondel's main ignores it).
SpliceStep splice_step(int from, SplicePipe& pipe, int to, uint64_t remaining,
                       size_t budget = kSpliceStepBudget) noexcept;

// What recv_line_part read.
struct LinePart {
  enum class Kind : uint8_t {
    kBytes,  // `n` (> 0) bytes were read into the buffer: a line's end ('\n') is their last or
             // was not among them
    kWait,   // nothing to read now (EAGAIN)
    kEnd,    // EOF or an error: left in the socket for the stream's next read to see
  };
  Kind kind = Kind::kEnd;
  size_t n = 0;
};

// Reads at most `cap` bytes from non-blocking socket `fd` into `buf`, never past the first
// '\n' (MSG_PEEK, then recv of those bytes only), so that the bytes after a chunk-size line
// (chunk data a splice takes from the socket) stay there. Two recv(2) calls.
LinePart recv_line_part(int fd, char* buf, size_t cap) noexcept;

// One pipe (both ends O_NONBLOCK and O_CLOEXEC) and the body bytes it holds: taken from the
// source socket, not yet written to the sink. A pipe that still holds bytes belongs to that one
// body: give() closes it rather than lend it again.
class SplicePipe {
 public:
  int read_fd() const noexcept { return fds_[0]; }
  int write_fd() const noexcept { return fds_[1]; }
  size_t held() const noexcept { return held_; }
  // The pipe's capacity (F_GETPIPE_SZ after asking for PipePool::kPipeBytes).
  size_t capacity() const noexcept { return capacity_; }

 private:
  friend class PipePool;
  friend SpliceStep splice_step(int from, SplicePipe& pipe, int to, uint64_t remaining,
                                size_t budget) noexcept;
  int fds_[2] = {-1, -1};
  size_t held_ = 0;
  size_t capacity_ = 0;
  SplicePipe* next_ = nullptr;  // free-list link
};

// The worker's pipes: lent one per body being spliced, kept for the next one when returned
// empty, so a steady stream of large bodies makes no pipe(2) call.
class PipePool {
 public:
  static constexpr size_t kPipeBytes = 1u << 20;  // asked of F_SETPIPE_SZ (fs.pipe-max-size caps it)
  static constexpr size_t kMaxIdle = 64;          // empty pipes kept; beyond that they are closed

  PipePool() = default;
  PipePool(const PipePool&) = delete;
  PipePool& operator=(const PipePool&) = delete;
  ~PipePool();

  // An empty pipe from the free list, or a new one. nullptr with *err = -errno when none can be
  // made (EMFILE, ENFILE): the caller forwards that body on its copy path instead.
  SplicePipe* take(int* err) noexcept;
  // Takes `p` back: kept when empty and fewer than kMaxIdle are idle, else closed and freed (a
  // pipe holding bytes of a body that was cut off must never lend them to another).
  void give(SplicePipe* p) noexcept;

  size_t idle() const noexcept { return idle_; }
  size_t outstanding() const noexcept { return outstanding_; }

 private:
  static void destroy(SplicePipe* p) noexcept;
  SplicePipe* free_ = nullptr;
  size_t idle_ = 0;
  size_t outstanding_ = 0;
};

}  // namespace rondel::net
