/* host_fixtures.h: the host tests' kernels (built once per process), plans over them and small helpers,
 * shared by test_host.c and test_host_streams.c. */
#ifndef FL_HOST_FIXTURES_H
#define FL_HOST_FIXTURES_H

#include "fastlaunch.h"
#include "fl_test.h"
#include "fl_test_kernels.h"

#include <time.h>
#include <unistd.h>

/* The ring of a host stream has this many entries (src/backends/host.c). */
#define HOST_RING 256

/* ---- building the test kernels ---- */

#ifndef FL_TEST_SRC_DIR
#define FL_TEST_SRC_DIR "."
#endif

static char kernel_dir[512];
static char kernel_paths[4][600];
static const char *kernel_names[4];

/* Removes what kernel_so built; unlinking a loaded shared object is harmless on Linux. */
static void remove_kernels(void) {
  for (int i = 0; i < 4; i++)
    if (kernel_names[i]) unlink(kernel_paths[i]);
  if (kernel_dir[0]) rmdir(kernel_dir);
}

/* Compiles tests/c/kernels/<name>.c into <tmpdir>/<name>.so once per process and returns its path.
 * The repository root comes from $FL_TEST_SRC_DIR, else from the compile-time FL_TEST_SRC_DIR. */
static inline const char *kernel_so(const char *name) {
  char (*paths)[600] = kernel_paths;
  const char **names = kernel_names;
  for (int i = 0; i < 4; i++)
    if (names[i] && strcmp(names[i], name) == 0) return paths[i];
  int slot = 0;
  while (slot < 4 && names[slot]) slot++;
  if (slot == 4) return NULL;
  if (!kernel_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(kernel_dir, sizeof kernel_dir, "%s/fl_test_host_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(kernel_dir)) {
      kernel_dir[0] = '\0';
      return NULL;
    }
    atexit(remove_kernels);
  }
  snprintf(paths[slot], sizeof paths[slot], "%s/%s.so", kernel_dir, name);
  char src[700];
  snprintf(src, sizeof src, "%s/tests/c/kernels/%s.c", fl_test_root(), name);
  if (fl_test_compile_so(src, paths[slot]) != 0) return NULL;
  names[slot] = name;
  return paths[slot];
}

/* Opens a test kernel; the caller owns one reference to *lib. */
static inline int load_kernel(const char *file, const char *symbol, fl_host_lib **lib, void **fn) {
  fl_error err;
  const char *path = kernel_so(file);
  if (!path) return -1;
  if (fl_host_lib_open(path, lib, &err) != FL_OK) {
    fprintf(stderr, "open %s: %s\n", path, err.reason);
    return -1;
  }
  if (fl_host_lib_symbol(*lib, symbol, fn, &err) != FL_OK) {
    fprintf(stderr, "symbol %s: %s\n", symbol, err.reason);
    fl_host_lib_release(*lib);
    return -1;
  }
  return 0;
}

/* Makes a host plan whose owner is the kernel's library: on success the plan holds the library. */
static inline int make_plan(const char *file, const char *symbol, const fl_kind *kinds, size_t nkinds, size_t nruntime,
                     const fl_value *fixed, int grid_mode, const int64_t *static_grid, const char *const *exprs,
                     const char *const *names, fl_plan **plan) {
  *plan = fl_test_host_plan(kernel_so(file), symbol, kinds, nkinds, nruntime, fixed, grid_mode, static_grid, exprs,
                            names);
  return *plan ? 0 : -1;
}

/* The threaded tests: this many threads, each launching this many times. */
enum { THREADS = 4, PER_THREAD = 5000 };

/* The record kernel: kinds ptr ptr i64, all runtime. */
static const fl_kind record_kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I64};
/* The checksum kernel: ptr i64 runtime, the i32 multiplier fixed. */
static const fl_kind checksum_kinds[] = {FL_KIND_PTR, FL_KIND_I64, FL_KIND_I32};

static inline fl_plan *record_plan(int grid_mode, const int64_t *static_grid) {
  fl_plan *p = NULL;
  if (make_plan("record", "record", record_kinds, 3, 3, NULL, grid_mode, static_grid, NULL, NULL, &p) != 0)
    return NULL;
  return p;
}

static inline fl_plan *checksum_plan(int32_t mult) {
  fl_plan *p = NULL;
  fl_value fixed[1] = {fl_int(mult)};
  if (make_plan("checksum", "checksum", checksum_kinds, 3, 2, fixed, FL_GRID_CALLER, NULL, NULL, NULL, &p) != 0)
    return NULL;
  return p;
}

static inline char *hex_reason(char *buf, size_t n, uint64_t handle) {
  snprintf(buf, n, "stream_invalid:0x%" PRIx64, handle);
  return buf;
}

static inline void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

#endif
