// SpliceRelay: moves the rest of one body from a source socket to a sink socket through a pooled
// pipe (splice_step), driven by the loop's readiness, so that the body's bytes never enter user
// space; what an exchange hands a Content-Length body (or one chunk's data) to.
//
// Readiness: uv_poll_t handles on dup(2)s of both fds (see splice_pipe.h for why not the fds
// themselves). While a relay runs, the source's stream must not read and the sink's stream must
// not write (the relay owns those directions); the sink's stream may keep reading (a pipelined
// request, or the client's EOF). The relay's dups keep both connections open: the owner cancels
// the relay before it closes either socket. Backpressure: the relay waits for the sink to be writable and
// then stops watching the source, so a slow client holds at most a pipe-full in the kernel.
// Loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>

#include "rondel/net/splice_pipe.h"
#include "rondel/net/uv_util.h"

namespace rondel::net {

// What a relay reports to its owner. Callbacks run on the loop thread.
class SpliceEvents {
 public:
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

class SpliceRelay final : public HandleCloser {
 public:
  // Starts relaying `bytes` (> 0) from socket `from` to socket `to` with a pipe of `pool`
  // (which must outlive the relay's close, i.e. the loop's last run). Nothing is reported
  // before the loop's next iteration. nullptr with *err = -errno when no pipe or descriptor
  // could be had (EMFILE...): the owner uses its copy path for this body.
  static SpliceRelay* start(uv_loop_t* loop, PipePool& pool, int from, int to, uint64_t bytes,
                            SpliceEvents* events, int* err) noexcept;
  // Stops without another event and frees the relay once its handles closed. Bytes already in
  // the pipe are dropped with it (the pool closes a pipe that holds bytes). Not after
  // on_splice_end.
  void cancel() noexcept;
  // Body bytes still to reach the sink.
  uint64_t remaining() const noexcept { return remaining_; }

 private:
  SpliceRelay(PipePool& pool, SpliceEvents* events, uint64_t bytes) noexcept
      : pool_(pool), events_(events), remaining_(bytes) {}
  ~SpliceRelay() override = default;
  void on_all_closed() noexcept override;
  static void on_poll(uv_poll_t* h, int status, int events) noexcept;
  void step() noexcept;
  void watch(uv_poll_t* p, int events) noexcept;
  void end(SpliceStop stop, int error) noexcept;
  void shut() noexcept;

  PipePool& pool_;
  SpliceEvents* events_;
  SplicePipe* pipe_ = nullptr;
  uint64_t remaining_;
  int from_ = -1, to_ = -1;  // the dups the polls watch (closed once the polls are)
  uv_poll_t src_{};
  uv_poll_t dst_{};
  bool src_open_ = false, dst_open_ = false;
};

}  // namespace rondel::net
