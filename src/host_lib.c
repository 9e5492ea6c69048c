/* host_lib.c: loading host kernels from shared objects, reference-counted around dlopen. */
#include "dl.h"

struct fl_host_lib {
  atomic_long refcount;
  void *handle;
};

fl_status fl_host_lib_open(const char *path, fl_host_lib **lib, fl_error *err) {
  if (!lib) return fl__fail(err, FL_BAD_VALUE, true, "host_lib_out_null");
  *lib = NULL;
  if (!path) return fl__fail(err, FL_BAD_VALUE, true, "host_lib_path_null");
  /* Allocate first so that a failed allocation never has a library to close. */
  fl_host_lib *l = fl__malloc(sizeof *l);
  if (!l) return fl__fail(err, FL_NOMEM, false, "host_lib_alloc");
  /* fl__dl_open loads with RTLD_NOW (a missing dependency shows here, not at the first launch)
   * and RTLD_LOCAL (one kernel library's symbols never resolve another's). */
  char why[FL_REASON_MAX - 16];
  const char *const names[] = {path, NULL};
  void *handle = fl__dl_open(names, why, sizeof why);
  if (!handle) {
    fl__free(l);
    return fl__fail(err, FL_KERNEL_LOAD, true, "dlopen:%s", why);
  }
  atomic_init(&l->refcount, 1);
  l->handle = handle;
  *lib = l;
  fl__ok(err);
  return FL_OK;
}

fl_status fl_host_lib_symbol(fl_host_lib *lib, const char *name, void **symbol, fl_error *err) {
  if (!symbol) return fl__fail(err, FL_BAD_VALUE, true, "host_symbol_out_null");
  *symbol = NULL;
  if (!lib || !name) return fl__fail(err, FL_BAD_VALUE, true, "host_symbol_arg_null");
  char why[FL_REASON_MAX - 16];
  void *p = fl__dl_sym(lib->handle, name, why, sizeof why);
  if (!p) return fl__fail(err, FL_KERNEL_LOAD, true, "dlsym:%s", why);
  *symbol = p;
  fl__ok(err);
  return FL_OK;
}

void fl_host_lib_retain(fl_host_lib *lib) {
  if (lib) atomic_fetch_add_explicit(&lib->refcount, 1, memory_order_relaxed);
}

void fl_host_lib_release(fl_host_lib *lib) {
  if (!lib) return;
  /* Acquire-release, so every user's work happens before dlclose (a fence would do the same but
   * thread sanitizer does not model fences). */
  if (atomic_fetch_sub_explicit(&lib->refcount, 1, memory_order_acq_rel) != 1) return;
  fl__dl_close(lib->handle);
  fl__free(lib);
}

void fl_host_lib_release_owner(void *lib) { fl_host_lib_release(lib); }
