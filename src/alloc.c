/* alloc.c: the core's replaceable allocator; every heap allocation of the library goes through it. */
#include "fl_internal.h"

#include <stdlib.h>
#include <string.h>

/* The pair is swapped as a unit: tests set it before creating anything, as the header says. */
static _Atomic(fl_malloc_fn) alloc_malloc; /* zero: malloc */
static _Atomic(fl_free_fn) alloc_free; /* zero: free */

void fl_set_allocator(fl_malloc_fn malloc_fn, fl_free_fn free_fn) {
  if (!malloc_fn || !free_fn) {
    malloc_fn = NULL;
    free_fn = NULL;
  }
  atomic_store(&alloc_malloc, malloc_fn);
  atomic_store(&alloc_free, free_fn);
}

void *fl__malloc(size_t size) {
  fl_malloc_fn fn = atomic_load(&alloc_malloc);
  if (size == 0) size = 1;
  return fn ? fn(size) : malloc(size);
}

void *fl__calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  size_t total = count * size;
  void *p = fl__malloc(total);
  if (p && total > 0) memset(p, 0, total);
  return p;
}

void fl__free(void *ptr) {
  if (!ptr) return;
  fl_free_fn fn = atomic_load(&alloc_free);
  if (fn)
    fn(ptr);
  else
    free(ptr);
}

char *fl__strdup(const char *text) {
  size_t n = strlen(text) + 1;
  char *p = fl__malloc(n);
  if (p) memcpy(p, text, n);
  return p;
}
