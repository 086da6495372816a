// H2Mem, the heap of nghttp2's sessions: blocks come back from their class's free list, realloc
// keeps the bytes, each size lands in the smallest class that holds it, large blocks go to malloc
// and back, and what a class keeps is bounded.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "rondel/proxy/h2_mem.h"

using rondel::proxy::H2Mem;

TEST_CASE("a freed block is handed out again for a request of its class") {
  H2Mem m;
  void* a = m.alloc(100);  // the 128-byte class
  REQUIRE(a != nullptr);
  CHECK(m.from_system() == 1);
  m.release(a);
  CHECK(m.outstanding() == 0);
  CHECK(m.kept() == 1);
  void* b = m.alloc(120);
  CHECK(b == a);
  CHECK(m.from_system() == 1);
  void* c = m.alloc(200);  // another class: a new block
  CHECK(c != a);
  CHECK(m.from_system() == 2);
  m.release(b);
  m.release(c);
  m.release(nullptr);
  CHECK(m.outstanding() == 0);
}

TEST_CASE("nghttp2's calloc and realloc through the mem table keep their contracts") {
  H2Mem m;
  nghttp2_mem* mem = m.mem();
  auto* z = static_cast<unsigned char*>(mem->calloc(10, 30, mem->mem_user_data));
  REQUIRE(z != nullptr);
  std::memset(z, 0xab, 300);
  mem->free(z, mem->mem_user_data);
  z = static_cast<unsigned char*>(mem->calloc(10, 30, mem->mem_user_data));  // the same block
  for (int i = 0; i < 300; ++i) REQUIRE(z[i] == 0);
  for (int i = 0; i < 300; ++i) z[i] = static_cast<unsigned char>(i);
  auto* g = static_cast<unsigned char*>(mem->realloc(z, 5000, mem->mem_user_data));
  REQUIRE(g != nullptr);
  for (int i = 0; i < 300; ++i) REQUIRE(g[i] == static_cast<unsigned char>(i));
  auto* same = mem->realloc(g, 4096, mem->mem_user_data);  // fits its 8 KiB block
  CHECK(same == g);
  auto* big = static_cast<unsigned char*>(mem->realloc(same, 200000, mem->mem_user_data));
  REQUIRE(big != nullptr);  // past the largest class: malloc's own
  for (int i = 0; i < 300; ++i) REQUIRE(big[i] == static_cast<unsigned char>(i));
  auto* back = static_cast<unsigned char*>(mem->realloc(big, 100, mem->mem_user_data));
  REQUIRE(back != nullptr);
  for (int i = 0; i < 100; ++i) REQUIRE(back[i] == static_cast<unsigned char>(i));
  mem->free(back, mem->mem_user_data);
  CHECK(m.outstanding() == 0);
  CHECK(mem->malloc(SIZE_MAX - 8, mem->mem_user_data) == nullptr);
  CHECK(mem->calloc(SIZE_MAX / 2, 4, mem->mem_user_data) == nullptr);
}

TEST_CASE("a class keeps at most kKeepBytes of free blocks") {
  H2Mem m;
  std::vector<void*> blocks;
  const size_t n = H2Mem::kKeepBytes / 4096 + 50;  // the 4 KiB class, past its bound
  for (size_t i = 0; i < n; ++i) blocks.push_back(m.alloc(4096));
  for (void* p : blocks) m.release(p);
  CHECK(m.kept() == H2Mem::kKeepBytes / 4096);
  CHECK(m.outstanding() == 0);
}

TEST_CASE("a size lands in the smallest class that holds it, and past 64 KiB in malloc's own") {
  H2Mem m;
  void* a = m.alloc(64);
  m.release(a);
  CHECK(m.alloc(1) == a);  // 1..64 bytes: the 64-byte class
  m.release(a);
  void* b = m.alloc(65);   // 65: the next class, another block
  CHECK(b != a);
  m.release(b);
  CHECK(m.alloc(128) == b);
  void* top = m.alloc(65536);  // the largest class: kept when freed
  m.release(top);
  CHECK(m.alloc(40000) == top);
  const size_t kept = m.kept();
  void* large = m.alloc(65537);  // past every class: freed to malloc, never kept
  m.release(large);
  CHECK(m.kept() == kept);
  m.release(top);
  m.release(b);
  CHECK(m.outstanding() == 0);
}
