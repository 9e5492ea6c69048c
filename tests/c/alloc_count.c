/* alloc_count.c: the counters of test_alloc.c.
 *  - libc level (builds without ASan/TSan): this file, linked into the test executable, defines
 *    malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign, valloc
 *    and pvalloc, forwarding to glibc's __libc_* entry points. Definitions in the executable
 *    interpose the libc ones for the whole process, so the counter sees every heap allocation.
 *  - library level (every build): counting hooks given to fl_set_allocator. */
#include "alloc_count.h"

#include "fastlaunch.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if FL_LIBC_COUNT
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#endif

static atomic_ulong libc_allocs, libc_frees, hook_allocs, hook_frees;

#if FL_LIBC_COUNT
/* glibc's own allocator entry points (exported by libc.so.6 since 2.2.5). */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_memalign(size_t alignment, size_t size);

static inline void count_alloc(void) { atomic_fetch_add_explicit(&libc_allocs, 1, memory_order_relaxed); }

void *malloc(size_t size) {
  count_alloc();
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  count_alloc();
  return __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size) {
  count_alloc();
  return __libc_realloc(ptr, size);
}

void *reallocarray(void *ptr, size_t count, size_t size) {
  count_alloc();
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(ptr, count * size);
}

void free(void *ptr) {
  if (ptr) atomic_fetch_add_explicit(&libc_frees, 1, memory_order_relaxed);
  __libc_free(ptr);
}

void *memalign(size_t alignment, size_t size) {
  count_alloc();
  return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  count_alloc();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  count_alloc();
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) return EINVAL;
  void *p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t size) {
  count_alloc();
  return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *pvalloc(size_t size) {
  count_alloc();
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_memalign(page, (size + page - 1) / page * page);
}
#endif

static void *hook_malloc(size_t size) {
  atomic_fetch_add_explicit(&hook_allocs, 1, memory_order_relaxed);
  return malloc(size);
}

static void hook_free(void *ptr) {
  atomic_fetch_add_explicit(&hook_frees, 1, memory_order_relaxed);
  free(ptr);
}

counts snap(void) {
  counts c;
  c.libc_allocs = atomic_load(&libc_allocs);
  c.libc_frees = atomic_load(&libc_frees);
  c.hook_allocs = atomic_load(&hook_allocs);
  c.hook_frees = atomic_load(&hook_frees);
  return c;
}

counts since(counts before) {
  counts now = snap(), d;
  d.libc_allocs = now.libc_allocs - before.libc_allocs;
  d.libc_frees = now.libc_frees - before.libc_frees;
  d.hook_allocs = now.hook_allocs - before.hook_allocs;
  d.hook_frees = now.hook_frees - before.hook_frees;
  return d;
}

void report(const char *what, unsigned long launches, counts d) {
  if (FL_LIBC_COUNT)
    printf("     %-40s %6lu launches: libc allocs %lu frees %lu; fastlaunch allocs %lu frees %lu\n", what, launches,
           d.libc_allocs, d.libc_frees, d.hook_allocs, d.hook_frees);
  else
    printf("     %-40s %6lu launches: fastlaunch allocs %lu frees %lu (libc-level count: non-sanitized build "
           "only)\n",
           what, launches, d.hook_allocs, d.hook_frees);
}

void hooks_on(void) { fl_set_allocator(hook_malloc, hook_free); }
void hooks_off(void) { fl_set_allocator(NULL, NULL); }
