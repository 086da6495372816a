// alloc_count: an LD_PRELOAD shim that counts heap allocations (malloc, calloc, realloc,
// aligned variants; C++ operator new ends in malloc) of a process, for measuring allocations per
// request in steady state.
//
// Build:  cc -O2 -shared -fPIC -o alloc_count.so alloc_count.c -ldl -lpthread
// Use:    ALLOC_COUNT_FILE=/tmp/allocs LD_PRELOAD=./alloc_count.so rondel -f cfg.yaml
// A background thread rewrites ALLOC_COUNT_FILE every 100 ms with one line "allocs frees";
// read it before and after a load run and divide the difference by the requests served.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_ulong g_allocs, g_frees;

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_realloc(p, n);
}
void free(void* p) {
  if (p != NULL) atomic_fetch_add_explicit(&g_frees, 1, memory_order_relaxed);
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void** out, size_t a, size_t n) {
  void* p = memalign(a, n);
  if (p == NULL) return 12;
  *out = p;
  return 0;
}

static void* reporter(void* arg) {
  const char* path = arg;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  for (;;) {
    FILE* f = fopen(tmp, "w");
    if (f != NULL) {
      fprintf(f, "%lu %lu\n", atomic_load(&g_allocs), atomic_load(&g_frees));
      fclose(f);
      rename(tmp, path);
    }
    usleep(100000);
  }
  return NULL;
}

__attribute__((constructor)) static void start_reporter(void) {
  const char* path = getenv("ALLOC_COUNT_FILE");
  if (path == NULL || *path == 0) return;
  pthread_t t;
  pthread_create(&t, NULL, reporter, strdup(path));
  pthread_detach(t);
}
