// OutQueue: try the write at once, queue the rest with libuv.
#include "rondel/net/out_queue.h"

namespace rondel::net {

void OutQueue::push(const char* p, size_t len) noexcept {
  if (len == 0) return;
  bufs[n++] = uv_buf_init(const_cast<char*>(p), static_cast<unsigned>(len));
  bytes += len;
}

int OutQueue::flush(uv_stream_t* s, uv_write_cb cb) noexcept {
  sent_now = 0;
  if (n == 0) return 0;
  int r = uv_try_write(s, bufs, static_cast<unsigned>(n));
  if (r < 0 && r != UV_EAGAIN) return r;
  size_t written = r > 0 ? static_cast<size_t>(r) : 0;
  sent_now = written;
  if (written == bytes) {
    clear();
    return 0;
  }
  int i = 0;
  while (written >= bufs[i].len) {
    written -= bufs[i].len;
    ++i;
  }
  bufs[i].base += written;
  bufs[i].len -= written;
  int rc = uv_write(&req, s, bufs + i, static_cast<unsigned>(n - i), cb);
  if (rc != 0) return rc;
  pending = true;
  return 1;
}

}  // namespace rondel::net
