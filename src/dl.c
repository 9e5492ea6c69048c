/* dl.c: dlopen behind a three-function contract, keeping the loader's own error text. */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>

void *fl__dl_open(const char *const *names, char *why, size_t why_size) {
  if (why && why_size) why[0] = '\0';
  for (const char *const *n = names; *n; n++) {
    void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *e = dlerror();
    if (why && why_size) snprintf(why, why_size, "%s", e ? e : "dlopen failed");
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
