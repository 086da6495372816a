// H2Mem: size-class free lists under nghttp2's allocator interface.
#include "rondel/proxy/h2_mem.h"

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace rondel::proxy {

namespace {

// Every block starts with this header (16 bytes, so the caller's part keeps malloc's
// alignment): its class, or kLarge for a block of malloc's own.
struct alignas(16) Header {
  uint32_t cls;
  uint32_t pad;
  size_t large_size;  // the caller's size, for a large block
};
constexpr uint32_t kLarge = UINT32_MAX;

size_t class_of(size_t n) noexcept {
  if (n > (size_t{1} << H2Mem::kMaxShift)) return H2Mem::kClasses;  // larger than every class
  if (n <= (size_t{1} << H2Mem::kMinShift)) return 0;
  return static_cast<size_t>(std::bit_width(n - 1)) - H2Mem::kMinShift;  // smallest 2^k >= n
}

size_t class_bytes(size_t cls) noexcept { return size_t{1} << (H2Mem::kMinShift + cls); }

Header* header_of(void* p) noexcept { return static_cast<Header*>(p) - 1; }

}  // namespace

H2Mem::H2Mem() noexcept {
  mem_.mem_user_data = this;
  mem_.malloc = [](size_t n, void* ud) { return static_cast<H2Mem*>(ud)->alloc(n); };
  mem_.free = [](void* p, void* ud) { static_cast<H2Mem*>(ud)->release(p); };
  mem_.calloc = [](size_t k, size_t n, void* ud) -> void* {
    if (n != 0 && k > SIZE_MAX / n) return nullptr;
    void* p = static_cast<H2Mem*>(ud)->alloc(k * n);
    if (p != nullptr) std::memset(p, 0, k * n);
    return p;
  };
  mem_.realloc = [](void* p, size_t n, void* ud) { return static_cast<H2Mem*>(ud)->resize(p, n); };
}

H2Mem::~H2Mem() {
  for (Free*& f : free_) {
    while (f != nullptr) {
      Free* next = f->next;
      std::free(header_of(f));
      f = next;
    }
  }
}

size_t H2Mem::kept() const noexcept {
  size_t n = 0;
  for (uint32_t k : kept_) n += k;
  return n;
}

void* H2Mem::alloc(size_t n) noexcept {
  size_t cls = class_of(n);
  Header* h = nullptr;
  if (cls < kClasses && free_[cls] != nullptr) {
    Free* f = free_[cls];
    free_[cls] = f->next;
    --kept_[cls];
    h = header_of(f);
  } else if (cls < kClasses) {
    h = static_cast<Header*>(std::malloc(sizeof(Header) + class_bytes(cls)));
    if (h == nullptr) return nullptr;
    h->cls = static_cast<uint32_t>(cls);
    ++from_system_;
  } else {
    if (n > SIZE_MAX - sizeof(Header)) return nullptr;
    h = static_cast<Header*>(std::malloc(sizeof(Header) + n));
    if (h == nullptr) return nullptr;
    h->cls = kLarge;
    h->large_size = n;
    ++from_system_;
  }
  ++outstanding_;
  return h + 1;
}

void H2Mem::release(void* p) noexcept {
  if (p == nullptr) return;
  Header* h = header_of(p);
  --outstanding_;
  if (h->cls == kLarge || (kept_[h->cls] + 1) * class_bytes(h->cls) > kKeepBytes) {
    std::free(h);
    return;
  }
  auto* f = static_cast<Free*>(p);
  f->next = free_[h->cls];
  free_[h->cls] = f;
  ++kept_[h->cls];
}

void* H2Mem::resize(void* p, size_t n) noexcept {
  if (p == nullptr) return alloc(n);
  Header* h = header_of(p);
  size_t have = h->cls == kLarge ? h->large_size : class_bytes(h->cls);
  if (h->cls != kLarge && n <= have) return p;  // the block already holds it
  void* q = alloc(n);
  if (q == nullptr) return nullptr;  // p stays valid, as realloc's contract says
  std::memcpy(q, p, have < n ? have : n);
  release(p);
  return q;
}

}  // namespace rondel::proxy
