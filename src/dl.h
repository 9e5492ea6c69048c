/* dl.h: the dynamic-loading contract used by the cuda and npu backends and host kernel libraries. */
#ifndef FL_DL_H
#define FL_DL_H

#include "fl_internal.h"

/* Opens the first of `names` (a NULL-terminated list) that loads. On failure returns NULL and
 * writes the loader's own words for every attempt, "; "-separated, into `why`. */
void *fl__dl_open(const char *const *names, char *why, size_t why_size);
/* Resolves a symbol; NULL when absent (the dlerror() text goes to `why` when given). */
void *fl__dl_sym(void *handle, const char *name, char *why, size_t why_size);
void fl__dl_close(void *handle);

#endif
