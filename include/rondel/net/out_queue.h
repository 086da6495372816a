// OutQueue: the buffers of one vectored write, with small slots for the framing lines a codec
// writes between them (an HTTP/1 chunk-size line, for instance).
//
// A queue points into buffers it does not own (a read buffer, a rewritten head); they must stay
// unchanged until the write completes. Loop thread only; no allocation.
#pragma once

#include <uv.h>

#include <cstddef>

namespace rondel::net {

struct OutQueue {
  static constexpr int kMaxBufs = 12;
  uv_buf_t bufs[kMaxBufs];
  int n = 0;
  size_t bytes = 0;
  static constexpr size_t kSlotSize = 20;
  char slots[kMaxBufs][kSlotSize];
  int used_slots = 0;
  size_t sent_now = 0;  // bytes the last flush() wrote synchronously
  uv_write_t req{};
  bool pending = false;

  bool room(int k) const noexcept { return n + k <= kMaxBufs; }
  void push(const char* p, size_t len) noexcept;
  // A kSlotSize-byte slot that lives as long as the queued write (until clear()); the caller
  // fills it and pushes it. At most kMaxBufs per write.
  char* slot() noexcept { return slots[used_slots++]; }
  void clear() noexcept { n = 0; bytes = 0; used_slots = 0; }
  // Writes what is queued: 0 = all written now, 1 = a write is pending (cb will run), <0 = error.
  int flush(uv_stream_t* s, uv_write_cb cb) noexcept;
};

}  // namespace rondel::net
