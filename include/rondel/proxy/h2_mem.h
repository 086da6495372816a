// H2Mem: the heap nghttp2 uses for a worker's HTTP/2 sessions (nghttp2_session_server_new3's
// nghttp2_mem). nghttp2 allocates per stream (the stream, the submitted header block, frame
// queue items, HPACK buffers): about 5.8 malloc calls per request with the system heap. Here
// blocks come from free lists by power-of-two size class (64 B to 64 KiB) and go back to them,
// so in steady state a request takes no allocation from the system. Blocks larger than the
// biggest class go to malloc. What a class keeps is bounded (kKeepBytes), so a burst of streams
// does not pin its peak for good.
//
// One per worker; loop thread only. It must outlive every session made with it (the worker
// closes its sessions and runs its loop to the end before it is destroyed).
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace rondel::proxy {

class H2Mem {
 public:
  H2Mem() noexcept;
  H2Mem(const H2Mem&) = delete;
  H2Mem& operator=(const H2Mem&) = delete;
  ~H2Mem();

  nghttp2_mem* mem() noexcept { return &mem_; }

  void* alloc(size_t n) noexcept;
  void release(void* p) noexcept;
  void* resize(void* p, size_t n) noexcept;

  // Blocks handed out and not yet given back (all classes and the large ones).
  size_t outstanding() const noexcept { return outstanding_; }
  // Blocks kept on the free lists.
  size_t kept() const noexcept;
  // Blocks taken from malloc so far (a class's free list was empty, or a large block).
  uint64_t from_system() const noexcept { return from_system_; }

  static constexpr size_t kMinShift = 6;   // 64 B
  static constexpr size_t kMaxShift = 16;  // 64 KiB
  static constexpr size_t kClasses = kMaxShift - kMinShift + 1;
  static constexpr size_t kKeepBytes = 1u << 20;  // kept per class at most

 private:
  struct Free {
    Free* next;
  };
  nghttp2_mem mem_{};
  std::array<Free*, kClasses> free_{};
  std::array<uint32_t, kClasses> kept_{};
  size_t outstanding_ = 0;
  uint64_t from_system_ = 0;
};

}  // namespace rondel::proxy
