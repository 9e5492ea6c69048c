/* fl_test_kernels.h: building host kernels during a C test and making host plans from them. */
#ifndef FL_TEST_KERNELS_H
#define FL_TEST_KERNELS_H

#include "fastlaunch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FL_TEST_SRC_DIR
#define FL_TEST_SRC_DIR "."
#endif
#ifndef FL_TEST_CC
#define FL_TEST_CC "cc"
#endif

/* The repository root: $FL_TEST_SRC_DIR, else the compile-time FL_TEST_SRC_DIR. */
static inline const char *fl_test_root(void) {
  const char *root = getenv("FL_TEST_SRC_DIR");
  return root && *root ? root : FL_TEST_SRC_DIR;
}

/* Compiles one C source into a shared object with $CC (else the build's compiler) and the public
 * header on the include path; $FL_TEST_KERNEL_CFLAGS adds flags (for example -fsanitize=thread, so
 * that the sanitizer also sees the kernels' accesses). Returns 0 or -1 (the command printed). */
static inline int fl_test_compile_so(const char *src, const char *out) {
  const char *cc = getenv("CC");
  if (!cc || !*cc) cc = FL_TEST_CC;
  const char *extra = getenv("FL_TEST_KERNEL_CFLAGS");
  if (!extra) extra = "";
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -std=c11 -D_GNU_SOURCE -O2 -Wall -Werror -shared -fPIC %s -I'%s/include' -o '%s' '%s'",
           cc, extra, fl_test_root(), out, src);
  if (system(cmd) != 0) {
    fprintf(stderr, "kernel build failed: %s\n", cmd);
    return -1;
  }
  return 0;
}

/* A host plan of `symbol` in the shared object `so`, whose owner is the library (on success the
 * plan holds it). static_grid, exprs and names may be NULL. Returns NULL with the reason printed. */
static inline fl_plan *fl_test_host_plan(const char *so, const char *symbol, const fl_kind *kinds, size_t nkinds,
                                         size_t nruntime, const fl_value *fixed, int grid_mode,
                                         const int64_t *static_grid, const char *const *exprs,
                                         const char *const *names) {
  if (!so) return NULL;
  fl_error err;
  fl_host_lib *lib;
  void *fn;
  if (fl_host_lib_open(so, &lib, &err) != FL_OK) {
    fprintf(stderr, "open %s: %s\n", so, err.reason);
    return NULL;
  }
  if (fl_host_lib_symbol(lib, symbol, &fn, &err) != FL_OK) {
    fprintf(stderr, "symbol %s: %s\n", symbol, err.reason);
    fl_host_lib_release(lib);
    return NULL;
  }
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.name = symbol;
  d.backend = FL_BACKEND_HOST;
  d.target.abi = FL_ABI_HOST;
  d.kernel = fn;
  d.owner = lib;
  d.owner_release = fl_host_lib_release_owner;
  d.kinds = kinds;
  d.nkinds = nkinds;
  d.runtime_arg_count = nruntime;
  d.fixed_args = fixed;
  d.grid_mode = grid_mode;
  for (int i = 0; i < 3; i++) {
    if (static_grid) d.static_grid[i] = static_grid[i];
    if (exprs) d.grid_exprs[i] = exprs[i];
  }
  d.arg_names = names;
  fl_plan *plan = NULL;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) {
    fprintf(stderr, "plan %s: %s %s\n", symbol, fl_status_name(err.status), err.reason);
    fl_host_lib_release(lib);
    return NULL;
  }
  return plan;
}

#endif /* FL_TEST_KERNELS_H */
