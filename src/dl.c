/* dl.c: dlopen behind a three-function contract, keeping the loader's own error text. */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>

void *fl__dl_open(const char *const *names, char *why, size_t why_size) {
  size_t used = 0;
  if (why && why_size) why[0] = '\0';
  for (const char *const *n = names; *n; n++) {
    void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    /* Every name's own reason, in order: a broken libcuda.so.1 must not read as a missing
     * libcuda.so. dlerror() already names the file. */
    const char *e = dlerror();
    if (why && used + 1 < why_size) {
      int w = snprintf(why + used, why_size - used, "%s%s", used ? "; " : "", e ? e : *n);
      if (w > 0) used += (size_t)w < why_size - used ? (size_t)w : why_size - used - 1;
    }
  }
  return NULL;
}

void *fl__dl_sym(void *handle, const char *name, char *why, size_t why_size) {
  (void)dlerror();
  void *p = dlsym(handle, name);
  if (!p && why && why_size) {
    const char *e = dlerror();
    snprintf(why, why_size, "%s", e ? e : name);
  }
  return p;
}

void fl__dl_close(void *handle) {
  if (handle) dlclose(handle);
}
