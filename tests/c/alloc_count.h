/* alloc_count.h: counting every heap allocation of the process (alloc_count.c) for test_alloc.c. */
#ifndef FL_ALLOC_COUNT_H
#define FL_ALLOC_COUNT_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define FL_SANITIZED 1
#endif
#endif
#ifndef FL_SANITIZED
#define FL_SANITIZED 0
#define FL_LIBC_COUNT 1
#else
#define FL_LIBC_COUNT 0
#endif

/* Allocations and frees seen at each level since the process began (or, from since(), in a window). */
typedef struct counts {
  unsigned long libc_allocs, libc_frees, hook_allocs, hook_frees;
} counts;

/* The counts now; the counts since `before`; one line saying what a window counted. */
counts snap(void);
counts since(counts before);
void report(const char *what, unsigned long launches, counts d);

/* Each test installs the counting hooks before it creates anything and removes them after it has
 * destroyed everything, as fl_set_allocator asks. */
void hooks_on(void);
void hooks_off(void);

#endif
