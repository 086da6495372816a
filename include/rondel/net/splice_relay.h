// SpliceRelay: moves the rest of one body from a source socket to a sink socket through a pooled
// pipe (splice_step), driven by the loop's readiness, so that the body's bytes never enter user
// space; what an exchange hands a Content-Length body, or a chunked body's chunk data, to.
//
// Segments: a relay moves `bytes`, then asks its owner for the next segment
// (on_splice_segment_done): a chunked body's owner parses the next chunk-size line from the
// source itself (a few bytes, MSG_PEEK then recv up to the line's end) and extends the relay by
// that chunk's data, with the client's framing of it (a short prefix the relay writes to the sink
// before the data). So one relay and one pipe serve a whole chunked body.
//
// Readiness: the worker's SplicePoller, one epoll set of its own watched by one uv_poll_t on the
// loop, in which a relay registers the two connections' own fds (a socket can sit in several
// epoll sets at once, so no dup(2) is needed and the libuv streams' own watchers are untouched).
// A relay registers one fd at a time, the one it waits on, and removes it when it stops waiting,
// so a body that never stalls costs two epoll_ctl calls. While a relay runs, the source's stream
// must not read and the sink's stream must not write (the relay owns those directions); the
// sink's stream may keep reading (a pipelined request, or the client's EOF). The owner cancels
// the relay before it closes either socket (the relay's registration names the fd number, which
// a later socket may reuse). Backpressure: the relay waits for the sink to be writable and then
// stops watching the source, so a slow client holds at most a pipe-full in the kernel.
// Loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "rondel/net/splice_pipe.h"

namespace rondel::net {

// The owner's answer when a segment's bytes all reached the sink.
enum class SpliceNext : uint8_t {
  kEnd,       // nothing more: the relay writes the prefix extend() gave (if any), then ends kDone
  kContinue,  // extend() gave the next segment
  kWait,      // the next segment is not known yet: ask again once the source is readable
};

// What a relay waits for, between its steps.
enum class SpliceWait : uint8_t { kSource, kSink };

// What a relay reports to its owner. Callbacks run on the loop thread.
class SpliceEvents {
 public:
  // Every byte given so far reached the sink. The owner may call extend() from here (with
  // kContinue, or with 0 bytes and kEnd for a last prefix). Default: kEnd.
  virtual SpliceNext on_splice_segment_done() noexcept { return SpliceNext::kEnd; }
  // The relay now waits for the source to be readable or the sink to be writable (after the
  // progress of the same step, if any): which side stalls it. Default: nothing.
  virtual void on_splice_wait(SpliceWait on) noexcept { (void)on; }
  // Bytes moved since the last call: `in` taken from the source, `out` written to the sink (for
  // the byte counters and the inactivity timeouts, which every moved byte starts again). The
  // owner may cancel() the relay from here.
  virtual void on_splice_progress(size_t in, size_t out) noexcept = 0;
  // The relay ended: kDone (every byte reached the sink), kSourceEof, kSourceError or
  // kSinkError (`error` -errno). The relay is gone for the owner from here on (it frees itself).
  virtual void on_splice_end(SpliceStop stop, int error) noexcept = 0;

 protected:
  ~SpliceEvents() = default;
};

class SpliceRelay;

// The worker's readiness for its relays: an epoll set of its own (opened on first use) watched
// by one uv_poll_t on the loop. When it is readable, one epoll_wait gathers every relay that can
// move and each steps in turn. A relay ended or cancelled during that pass is freed after it, so
// an event of the same pass never reaches a freed relay. Loop thread only.
class SplicePoller {
 public:
  explicit SplicePoller(uv_loop_t* loop) noexcept : loop_(loop) {}
  SplicePoller(const SplicePoller&) = delete;
  SplicePoller& operator=(const SplicePoller&) = delete;
  ~SplicePoller();
  // Stops watching and closes the epoll set (the worker's close, before the loop's last run).
  // Every relay must have ended or been cancelled before.
  void close() noexcept;

 private:
  friend class SpliceRelay;
  static constexpr int kBatch = 64;  // events taken per epoll_wait; more fire again at once
  int open() noexcept;               // 0, or -errno when no epoll set or watch could be had
  // Sets `fd`'s interest from `current` to `events` (EPOLLIN or EPOLLOUT; 0 takes it out of the
  // set), its events going to `r`. 0 or -errno (current unchanged).
  int set(int fd, uint32_t& current, uint32_t events, SpliceRelay* r) noexcept;
  // Frees `r` now, or after the current pass when one is running.
  void retire(SpliceRelay* r) noexcept;
  static void on_ready(uv_poll_t* h, int status, int events) noexcept;

  uv_loop_t* loop_;
  int ep_ = -1;
  uv_poll_t poll_{};
  bool open_ = false, closed_ = false;
  bool dispatching_ = false;
  size_t watched_ = 0;              // fds in the set: the handle holds the loop while > 0
  SpliceRelay* retired_ = nullptr;  // freed once the pass ends (linked through next_retired_)
};

class SpliceRelay final {
 public:
  // Starts relaying `bytes` (> 0) from socket `from` to socket `to` with a pipe of `pool` and
  // readiness from `poller` (both must outlive the relay). Nothing is reported before the
  // loop's next iteration. nullptr with *err = -errno when no pipe or epoll set could be had
  // (EMFILE...): the owner uses its copy path for this body.
  // `prefix` (at most kMaxPrefix bytes) goes to the sink before the body bytes.
  static SpliceRelay* start(SplicePoller& poller, PipePool& pool, int from, int to, uint64_t bytes,
                            SpliceEvents* events, int* err, std::string_view prefix = {}) noexcept;
  // From on_splice_segment_done only: `bytes` more from the source, after `prefix` (at most
  // kMaxPrefix bytes, the owner's framing) to the sink.
  void extend(uint64_t bytes, std::string_view prefix) noexcept;
  static constexpr size_t kMaxPrefix = 24;
  // Stops without another event and frees the relay (after the poller's pass, from inside one).
  // Bytes already in the pipe are dropped with it (the pool closes a pipe that holds bytes). Not
  // after on_splice_end.
  void cancel() noexcept;
  // Body bytes still to reach the sink.
  uint64_t remaining() const noexcept { return remaining_; }

 private:
  friend class SplicePoller;
  SpliceRelay(SplicePoller& poller, PipePool& pool, SpliceEvents* events, uint64_t bytes) noexcept
      : poller_(poller), pool_(pool), events_(events), remaining_(bytes) {}
  ~SpliceRelay();
  bool closing() const noexcept { return closing_; }
  void step() noexcept;
  // Writes what is left of the prefix: false when the relay waits for the sink or ended.
  bool send_prefix() noexcept;
  // The segment is done: false when the relay waits (or ended), true to go on in step().
  bool next_segment(uint64_t moved) noexcept;
  void wait_source() noexcept;
  void wait_sink() noexcept;
  void set_prefix(std::string_view prefix) noexcept;
  // Waits on the source (`source`) or the sink, and on nothing else.
  void watch(bool source) noexcept;
  void end(SpliceStop stop, int error) noexcept;
  void shut() noexcept;

  SplicePoller& poller_;
  PipePool& pool_;
  SpliceEvents* events_;
  SplicePipe* pipe_ = nullptr;
  SpliceRelay* next_retired_ = nullptr;
  uint64_t remaining_;
  int from_ = -1, to_ = -1;            // the connections' fds (the owner's; never closed here)
  uint32_t src_events_ = 0, dst_events_ = 0;  // their interest in the poller's set (0: not in it)
  bool closing_ = false;
  bool ending_ = false;  // the owner said kEnd: write the prefix, then end
  uint8_t prefix_len_ = 0, prefix_off_ = 0;
  char prefix_[kMaxPrefix] = {};
};

}  // namespace rondel::net
