// OutQueue: the buffers of one vectored write, with storage for the chunk-size lines it frames.
//
// A queue points into buffers it does not own (a read buffer, a rewritten head); they must stay
// unchanged until the write completes. Loop thread only; no allocation.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>

namespace rondel::proxy {

struct OutQueue {
  static constexpr int kMaxBufs = 12;
  uv_buf_t bufs[kMaxBufs];
  int n = 0;
  size_t bytes = 0;
  char chunk_heads[kMaxBufs][20];
  int heads = 0;
  size_t sent_now = 0;  // bytes the last flush() wrote synchronously
  uv_write_t req{};
  bool pending = false;

  bool room(int k) const noexcept { return n + k <= kMaxBufs; }
  void push(const char* p, size_t len) noexcept;
  void push_chunk_header(uint64_t len) noexcept;
  void clear() noexcept { n = 0; bytes = 0; heads = 0; }
  // Writes what is queued: 0 = all written now, 1 = a write is pending (cb will run), <0 = error.
  int flush(uv_stream_t* s, uv_write_cb cb) noexcept;
};

}  // namespace rondel::proxy
