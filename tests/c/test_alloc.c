/* test_alloc.c: zero heap allocations per steady-state launch, counted at two levels (alloc_count.c):
 * every heap allocation of the process (libc level, builds without ASan/TSan, whose malloc the
 * interposition would fight) and the library's own through fl_set_allocator (every build).
 * Each scenario warms up first (the first launch on a thread may resolve symbols, touch TLS),
 * then counts over many launches and asserts the count is exactly 0. The controls prove that the
 * counters do register an allocation made inside a counted window, on the launching thread and on
 * a backend worker thread. */
#include "fastlaunch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define FL_TESTS(X)                  \
  X(test_null_static)                \
  X(test_null_program)               \
  X(test_null_large_args)            \
  X(test_null_large_args_thread)     \
  X(test_host_caller_grid)           \
  X(test_host_grid_program)          \
  X(test_control_malloc_in_window)   \
  X(test_control_stream_per_launch)  \
  X(test_control_worker_malloc)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "fl_test_kernels.h"
#include "alloc_count.h"

enum { LAUNCHES = 10000, WARMUP = 300 };

/* Asserts that a counted window allocated and freed nothing, at both levels. */
#define ASSERT_NO_HEAP(d)                \
  do {                                   \
    ASSERT_EQ_U((d).libc_allocs, 0);     \
    ASSERT_EQ_U((d).libc_frees, 0);      \
    ASSERT_EQ_U((d).hook_allocs, 0);     \
    ASSERT_EQ_U((d).hook_frees, 0);      \
  } while (0)

/* ---- host kernels, compiled during the test ---- */

#ifndef FL_TEST_SRC_DIR
#define FL_TEST_SRC_DIR "."
#endif
#ifndef FL_TEST_CC
#define FL_TEST_CC "cc"
#endif

static char kernel_dir[512];
static char checksum_path[600], leaky_path[600], leaky_src[600];

static void remove_kernels(void) {
  if (checksum_path[0]) unlink(checksum_path);
  if (leaky_path[0]) unlink(leaky_path);
  if (leaky_src[0]) unlink(leaky_src);
  if (kernel_dir[0]) rmdir(kernel_dir);
}

static const char *make_dir(void) {
  if (kernel_dir[0]) return kernel_dir;
  const char *tmp = getenv("TMPDIR");
  snprintf(kernel_dir, sizeof kernel_dir, "%s/fl_test_alloc_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(kernel_dir)) {
    kernel_dir[0] = '\0';
    return NULL;
  }
  atexit(remove_kernels);
  return kernel_dir;
}

/* tests/c/kernels/checksum.c: checksum(ptr acc, i64 value, i32 mult) adds value * mult * (x + 1)
 * for program x. */
static const char *checksum_so(void) {
  if (checksum_path[0]) return checksum_path;
  if (!make_dir()) return NULL;
  char src[600];
  snprintf(src, sizeof src, "%s/tests/c/kernels/checksum.c", fl_test_root());
  char path[600];
  snprintf(path, sizeof path, "%s/checksum.so", kernel_dir);
  if (fl_test_compile_so(src, path) != 0) return NULL;
  memcpy(checksum_path, path, sizeof path);
  return checksum_path;
}

/* A deliberately wrong kernel for the worker-thread control: one malloc and free per program. */
static const char leaky_kernel[] =
    "#include \"fastlaunch.h\"\n"
    "#include <stdlib.h>\n"
    "void *volatile leaky_sink;\n"
    "void leaky(const void *args, const fl_host_program *p) {\n"
    "  (void)args; (void)p;\n"
    "  leaky_sink = malloc(16);\n"
    "  free(leaky_sink);\n"
    "}\n";

static const char *leaky_so(void) {
  if (leaky_path[0]) return leaky_path;
  if (!make_dir()) return NULL;
  char src[600], path[600];
  snprintf(src, sizeof src, "%s/leaky.c", kernel_dir);
  FILE *f = fopen(src, "w");
  if (!f) return NULL;
  fputs(leaky_kernel, f);
  fclose(f);
  memcpy(leaky_src, src, sizeof src);
  snprintf(path, sizeof path, "%s/leaky.so", kernel_dir);
  if (fl_test_compile_so(src, path) != 0) return NULL;
  memcpy(leaky_path, path, sizeof path);
  return leaky_path;
}

/* A host plan whose owner is the kernel's library. */
static fl_plan *host_plan(const char *so, const char *symbol, const fl_kind *kinds, size_t nkinds, size_t nruntime,
                          const fl_value *fixed, int grid_mode, const char *const *exprs) {
  return fl_test_host_plan(so, symbol, kinds, nkinds, nruntime, fixed, grid_mode, NULL, exprs, NULL);
}

/* A null-backend plan, all arguments runtime unless `fixed` is given. */
static fl_plan *null_plan(const fl_kind *kinds, size_t nkinds, size_t nruntime, const fl_value *fixed, int grid_mode,
                          const int64_t *static_grid, const char *const *exprs, const char *const *names) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.name = "null_kernel";
  d.backend = FL_BACKEND_NULL;
  d.target.abi = FL_ABI_HOST;
  d.kinds = kinds;
  d.nkinds = nkinds;
  d.runtime_arg_count = nruntime;
  d.fixed_args = fixed;
  d.grid_mode = grid_mode;
  if (static_grid)
    for (int i = 0; i < 3; i++) d.static_grid[i] = static_grid[i];
  if (exprs)
    for (int i = 0; i < 3; i++) d.grid_exprs[i] = exprs[i];
  d.arg_names = names;
  fl_error err;
  fl_plan *plan = NULL;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) {
    fprintf(stderr, "plan: %s %s\n", fl_status_name(err.status), err.reason);
    return NULL;
  }
  return plan;
}

/* Launches `n` times with args[vary] set to fl_int(base + i) when vary < nargs; returns the
 * number of failed launches (the first failure's reason in *err). */
static int launch_n(const fl_plan *plan, uint64_t stream, fl_value *args, size_t nargs, size_t vary, int64_t base,
                    const int64_t *grid, int n, fl_error *err) {
  int failures = 0;
  fl_error local;
  for (int i = 0; i < n; i++) {
    if (vary < nargs) args[vary] = fl_int(base + i);
    if (fl_launch(plan, stream, args, nargs, grid, &local) != FL_OK && failures++ == 0) *err = local;
  }
  return failures;
}

/* ---- null backend ---- */

static void test_null_static(void) {
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32, FL_KIND_FP32, FL_KIND_I64};
  static const int64_t grid[3] = {64, 2, 1};
  hooks_on();
  fl_value fixed[1] = {fl_int(1 << 20)};
  fl_plan *plan = null_plan(kinds, 5, 4, fixed, FL_GRID_STATIC, grid, NULL, NULL);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
  float x[4];
  fl_value args[4] = {fl_ptr(x), fl_ptr(x + 1), fl_int(0), fl_float(0.25)};
  ASSERT_EQ(launch_n(plan, stream, args, 4, 2, 0, NULL, WARMUP, &err), 0);
  counts before = snap();
  int failures = launch_n(plan, stream, args, 4, 2, 0, NULL, LAUNCHES, &err);
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  report("null, static grid", LAUNCHES, d);
  ASSERT_NO_HEAP(d);
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_NULL, stream, &count, &err), &err);
  ASSERT_EQ_U(count, WARMUP + LAUNCHES);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

static void test_null_program(void) {
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32, FL_KIND_I32};
  static const char *const names[] = {"x", "out", "n", "m", "BLOCK"};
  static const char *const exprs[] = {"(n + BLOCK - 1) // BLOCK", "max(m, 1)", "1"};
  hooks_on();
  fl_value fixed[1] = {fl_int(128)};
  fl_plan *plan = null_plan(kinds, 5, 4, fixed, FL_GRID_PROGRAM, NULL, exprs, names);
  ASSERT_TRUE(plan != NULL);
  ASSERT_EQ(fl_plan_grid_mode(plan), FL_GRID_PROGRAM);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
  float x[4];
  fl_value args[4] = {fl_ptr(x), fl_ptr(x), fl_int(1), fl_int(3)};
  ASSERT_EQ(launch_n(plan, stream, args, 4, 2, 1, NULL, WARMUP, &err), 0);
  counts before = snap();
  int failures = launch_n(plan, stream, args, 4, 2, 1, NULL, LAUNCHES, &err);
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  report("null, grid program", LAUNCHES, d);
  ASSERT_NO_HEAP(d);
  /* The grid really is evaluated per launch. */
  uint32_t g[3];
  args[2] = fl_int(1000);
  ASSERT_OK(fl_plan_resolve_grid(plan, args, 4, NULL, g, &err), &err);
  ASSERT_EQ_U(g[0], 8);
  ASSERT_EQ_U(g[1], 3);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

/* 520 runtime args (ptr and i64 alternating) and 8 fixed i32: 4192 bytes, more than the 4096-byte
 * stack buffer, so the launch packs into the per-thread buffer. */
enum { LARGE_RUNTIME = 520, LARGE_FIXED = 8, LARGE_ARGS = LARGE_RUNTIME + LARGE_FIXED };

typedef struct large_case {
  fl_kind kinds[LARGE_ARGS];
  fl_value fixed[LARGE_FIXED];
  fl_value args[LARGE_RUNTIME];
} large_case;

static large_case large;

static fl_plan *large_plan(void) {
  static const int64_t grid[3] = {1, 1, 1};
  for (size_t i = 0; i < LARGE_ARGS; i++)
    large.kinds[i] = i >= LARGE_RUNTIME ? FL_KIND_I32 : (i % 2 ? FL_KIND_I64 : FL_KIND_PTR);
  for (size_t i = 0; i < LARGE_FIXED; i++) large.fixed[i] = fl_int((int64_t)i);
  for (size_t i = 0; i < LARGE_RUNTIME; i++)
    large.args[i] = i % 2 ? fl_int((int64_t)i << 33) : fl_ptr((const void *)(uintptr_t)(0x1000 + 64 * i));
  return null_plan(large.kinds, LARGE_ARGS, LARGE_RUNTIME, large.fixed, FL_GRID_STATIC, grid, NULL, NULL);
}

static void test_null_large_args(void) {
  hooks_on();
  fl_plan *plan = large_plan();
  ASSERT_TRUE(plan != NULL);
  ASSERT_TRUE(fl_plan_layout(plan)->size > 4096);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
  ASSERT_EQ(launch_n(plan, stream, large.args, LARGE_RUNTIME, 1, 7, NULL, WARMUP, &err), 0);
  counts before = snap();
  int failures = launch_n(plan, stream, large.args, LARGE_RUNTIME, 1, 7, NULL, LAUNCHES, &err);
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  report("null, 4192-byte args (per-thread buffer)", LAUNCHES, d);
  ASSERT_NO_HEAP(d);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

/* The same from a second thread, whose per-thread buffer is its own. The main thread reads the
 * counters while the launcher waits between barriers, after its warm-up. */
typedef struct thread_ctx {
  const fl_plan *plan;
  uint64_t stream;
  pthread_barrier_t warm, go, done;
  int failures;
  fl_value args[LARGE_RUNTIME];
} thread_ctx;

static void *large_launcher(void *arg) {
  thread_ctx *c = arg;
  fl_error err;
  c->failures += launch_n(c->plan, c->stream, c->args, LARGE_RUNTIME, 1, 0, NULL, WARMUP, &err);
  pthread_barrier_wait(&c->warm);
  pthread_barrier_wait(&c->go);
  c->failures += launch_n(c->plan, c->stream, c->args, LARGE_RUNTIME, 1, 0, NULL, LAUNCHES, &err);
  pthread_barrier_wait(&c->done);
  return NULL;
}

static void test_null_large_args_thread(void) {
  hooks_on();
  fl_plan *plan = large_plan();
  ASSERT_TRUE(plan != NULL);
  static thread_ctx c;
  fl_error err;
  c.plan = plan;
  c.failures = 0;
  memcpy(c.args, large.args, sizeof c.args);
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &c.stream, &err), &err);
  ASSERT_EQ(pthread_barrier_init(&c.warm, NULL, 2), 0);
  ASSERT_EQ(pthread_barrier_init(&c.go, NULL, 2), 0);
  ASSERT_EQ(pthread_barrier_init(&c.done, NULL, 2), 0);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, large_launcher, &c), 0);
  pthread_barrier_wait(&c.warm);
  counts before = snap();
  pthread_barrier_wait(&c.go);
  pthread_barrier_wait(&c.done);
  counts d = since(before);
  pthread_join(th, NULL);
  pthread_barrier_destroy(&c.warm);
  pthread_barrier_destroy(&c.go);
  pthread_barrier_destroy(&c.done);
  ASSERT_EQ(c.failures, 0);
  report("null, 4192-byte args, second thread", LAUNCHES, d);
  ASSERT_NO_HEAP(d);
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_NULL, c.stream, &count, &err), &err);
  ASSERT_EQ_U(count, WARMUP + LAUNCHES);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, c.stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

/* ---- host backend: a real kernel on the stream's worker thread ---- */

static const fl_kind checksum_kinds[] = {FL_KIND_PTR, FL_KIND_I64, FL_KIND_I32};

/* The checksum kernel's sum over launches i = first..first+n-1 of width w(i), multiplier mult. */
static uint64_t checksum_sum(int64_t first, int n, int32_t mult, int64_t (*width)(int64_t)) {
  uint64_t s = 0;
  for (int64_t i = first; i < first + n; i++) {
    int64_t w = width(i);
    s += (uint64_t)i * (uint64_t)(int64_t)mult * (uint64_t)(w * (w + 1) / 2);
  }
  return s;
}

static int64_t width_caller(int64_t i) { return 1 + i % 4; }
static int64_t width_program(int64_t i) { return i % 3 + 1; }

static void run_host(int grid_mode) {
  static const char *const exprs[] = {"$1 % 3 + 1", "1", "1"};
  enum { MULT = 5 };
  hooks_on();
  fl_value fixed[1] = {fl_int(MULT)};
  fl_plan *plan = host_plan(checksum_so(), "checksum", checksum_kinds, 3, 2, fixed, grid_mode,
                            grid_mode == FL_GRID_PROGRAM ? exprs : NULL);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  uint64_t acc = 0;
  int64_t (*width)(int64_t) = grid_mode == FL_GRID_PROGRAM ? width_program : width_caller;
  int failures = 0;
  fl_value args[2] = {fl_ptr(&acc), fl_int(0)};
  int64_t grid[3] = {1, 1, 1};
  const int64_t *g = grid_mode == FL_GRID_CALLER ? grid : NULL;
  /* Warm-up: the worker's first kernel call resolves symbols; synchronize touches the condvar. */
  for (int64_t i = 0; i < WARMUP; i++) {
    args[1] = fl_int(i);
    grid[0] = width(i);
    if (fl_launch(plan, stream, args, 2, g, &err) != FL_OK) failures++;
  }
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(failures, 0);

  counts before = snap();
  for (int64_t i = WARMUP; i < WARMUP + LAUNCHES; i++) {
    args[1] = fl_int(i);
    grid[0] = width(i);
    if (fl_launch(plan, stream, args, 2, g, &err) != FL_OK) failures++;
  }
  counts launches = since(before);
  before = snap();
  fl_status st = fl_stream_synchronize(FL_BACKEND_HOST, stream, &err);
  counts sync = since(before);
  ASSERT_EQ(failures, 0);
  ASSERT_OK(st, &err);
  /* The launches window also covers the worker running whatever it got to meanwhile; the sync
   * window covers the rest of the execution. */
  report(grid_mode == FL_GRID_PROGRAM ? "host, checksum kernel, grid program" : "host, checksum kernel, caller grid",
         LAUNCHES, launches);
  report("  ... then fl_stream_synchronize", 0, sync);
  ASSERT_NO_HEAP(launches);
  ASSERT_NO_HEAP(sync);
  ASSERT_EQ_U(acc, checksum_sum(0, WARMUP + LAUNCHES, MULT, width));
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, stream, &count, &err), &err);
  ASSERT_EQ_U(count, WARMUP + LAUNCHES);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

static void test_host_caller_grid(void) { run_host(FL_GRID_CALLER); }
static void test_host_grid_program(void) { run_host(FL_GRID_PROGRAM); }

/* ---- controls: the counters register what a wrong launch path would do ---- */

static void *volatile sink;

/* A launch loop that mallocs once, mid-window, on the launching thread. The libc counter must see
 * exactly that one allocation and its free; the library's hook sees none (it is not the library's). */
static void test_control_malloc_in_window(void) {
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32};
  static const int64_t grid[3] = {1, 1, 1};
  hooks_on();
  fl_plan *plan = null_plan(kinds, 2, 2, NULL, FL_GRID_STATIC, grid, NULL, NULL);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
  fl_value args[2] = {fl_ptr(&err), fl_int(0)};
  ASSERT_EQ(launch_n(plan, stream, args, 2, 1, 0, NULL, WARMUP, &err), 0);
  int failures = 0;
  counts before = snap();
  for (int i = 0; i < LAUNCHES; i++) {
    if (i == LAUNCHES / 2) {
      sink = malloc(24);
      free(sink);
    }
    args[1] = fl_int(i);
    if (fl_launch(plan, stream, args, 2, NULL, &err) != FL_OK) failures++;
  }
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  report("control: one malloc in the window", LAUNCHES, d);
  if (FL_LIBC_COUNT) {
    ASSERT_EQ_U(d.libc_allocs, 1);
    ASSERT_EQ_U(d.libc_frees, 1);
  }
  ASSERT_EQ_U(d.hook_allocs, 0);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}

/* A wrong launch path that builds and releases a plan per launch: library allocations on every
 * launch, seen by both counters (and as many frees). */
static void test_control_stream_per_launch(void) {
  enum { N = 100 };
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32};
  static const int64_t grid[3] = {1, 1, 1};
  hooks_on();
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
  fl_value args[2] = {fl_ptr(&err), fl_int(1)};
  int failures = 0;
  counts before = snap();
  for (int i = 0; i < N; i++) {
    fl_plan *plan = null_plan(kinds, 2, 2, NULL, FL_GRID_STATIC, grid, NULL, NULL);
    if (!plan) {
      failures++;
      continue;
    }
    if (fl_launch(plan, stream, args, 2, NULL, &err) != FL_OK) failures++;
    fl_plan_release(plan);
  }
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  report("control: a plan per launch", N, d);
  ASSERT_TRUE(d.hook_allocs >= N);
  ASSERT_EQ_U(d.hook_frees, d.hook_allocs);
  if (FL_LIBC_COUNT) {
    ASSERT_TRUE(d.libc_allocs >= N);
    ASSERT_EQ_U(d.libc_frees, d.libc_allocs);
  }
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
  hooks_off();
}

/* A kernel that mallocs on the host stream's worker thread: the libc counter counts every thread.
 * Under a sanitizer the kernel's malloc is the sanitizer's and nothing counts it. */
static void test_control_worker_malloc(void) {
  enum { N = 100 };
  static const fl_kind kinds[] = {FL_KIND_I32};
  if (!FL_LIBC_COUNT) SKIP("the libc-level count works in the non-sanitized build only");
  hooks_on();
  fl_plan *plan = host_plan(leaky_so(), "leaky", kinds, 1, 1, NULL, FL_GRID_CALLER, NULL);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  fl_value args[1] = {fl_int(0)};
  int64_t grid[3] = {1, 1, 1};
  ASSERT_OK(fl_launch(plan, stream, args, 1, grid, &err), &err);
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  int failures = 0;
  counts before = snap();
  for (int i = 0; i < N; i++)
    if (fl_launch(plan, stream, args, 1, grid, &err) != FL_OK) failures++;
  fl_status st = fl_stream_synchronize(FL_BACKEND_HOST, stream, &err);
  counts d = since(before);
  ASSERT_EQ(failures, 0);
  ASSERT_OK(st, &err);
  report("control: kernel mallocs on the worker", N, d);
  ASSERT_EQ_U(d.libc_allocs, N);
  ASSERT_EQ_U(d.libc_frees, N);
  ASSERT_EQ_U(d.hook_allocs, 0);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  fl_plan_release(plan);
  hooks_off();
}
