/* test_host.c: the host and null backends and host kernel loading, end to end through the API. */
#include "fastlaunch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define FL_TESTS(X)            \
  X(test_vadd)                 \
  X(test_vadd_static_grid)     \
  X(test_order_10000)          \
  X(test_program_order)        \
  X(test_threads_streams)      \
  X(test_threads_one_stream)   \
  X(test_queue_full)           \
  X(test_destroy_drains)       \
  X(test_stale_handle)         \
  X(test_bad_handles)          \
  X(test_destroy_race)         \
  X(test_null_counts)          \
  X(test_null_table_full)      \
  X(test_stream_nomem)         \
  X(test_lib_missing)          \
  X(test_symbol_missing)       \
  X(test_host_kernel_null)     \
  X(test_owner_keeps_lib)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "fl_test_kernels.h"

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
static const char *kernel_so(const char *name) {
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
static int load_kernel(const char *file, const char *symbol, fl_host_lib **lib, void **fn) {
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
static int make_plan(const char *file, const char *symbol, const fl_kind *kinds, size_t nkinds, size_t nruntime,
                     const fl_value *fixed, int grid_mode, const int64_t *static_grid, const char *const *exprs,
                     const char *const *names, fl_plan **plan) {
  *plan = fl_test_host_plan(kernel_so(file), symbol, kinds, nkinds, nruntime, fixed, grid_mode, static_grid, exprs,
                            names);
  return *plan ? 0 : -1;
}

/* The record kernel: kinds ptr ptr i64, all runtime. */
static const fl_kind record_kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I64};
/* The checksum kernel: ptr i64 runtime, the i32 multiplier fixed. */
static const fl_kind checksum_kinds[] = {FL_KIND_PTR, FL_KIND_I64, FL_KIND_I32};
/* The gated kernel: ptr ptr i64, all runtime. */
static const fl_kind gated_kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I64};

static fl_plan *record_plan(int grid_mode, const int64_t *static_grid) {
  fl_plan *p = NULL;
  if (make_plan("record", "record", record_kinds, 3, 3, NULL, grid_mode, static_grid, NULL, NULL, &p) != 0)
    return NULL;
  return p;
}

static fl_plan *checksum_plan(int32_t mult) {
  fl_plan *p = NULL;
  fl_value fixed[1] = {fl_int(mult)};
  if (make_plan("checksum", "checksum", checksum_kinds, 3, 2, fixed, FL_GRID_CALLER, NULL, NULL, NULL, &p) != 0)
    return NULL;
  return p;
}

static char *hex_reason(char *buf, size_t n, uint64_t handle) {
  snprintf(buf, n, "stream_invalid:0x%" PRIx64, handle);
  return buf;
}

/* ---- vadd ---- */

static void run_vadd(int grid_mode) {
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32};
  static const char *const names[] = {"x", "y", "out", "n", "BLOCK"};
  static const char *const exprs[] = {"(n + BLOCK - 1) // BLOCK", "1", "1"};
  enum { N = 1000, BLOCK = 128, CAP = 1100 };
  fl_value fixed[1] = {fl_int(BLOCK)};
  fl_plan *plan = NULL;
  fl_error err;
  ASSERT_EQ(make_plan("vadd", "vadd", kinds, 5, 4, fixed, grid_mode, NULL,
                      grid_mode == FL_GRID_PROGRAM ? exprs : NULL, names, &plan),
            0);
  /* The packed buffer must match the kernel's struct: three pointers, then two int32. */
  ASSERT_EQ_U(fl_plan_layout(plan)->size, 32);
  ASSERT_EQ_U(fl_plan_arg_offset(plan, 3), 24);
  ASSERT_EQ_U(fl_plan_arg_offset(plan, 4), 28);

  static float x[CAP], y[CAP], out[CAP];
  for (int i = 0; i < CAP; i++) {
    x[i] = (float)i * 0.5f;
    y[i] = (float)i * 2.0f;
    out[i] = -1.0f;
  }
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  int64_t grid[3] = {(N + BLOCK - 1) / BLOCK, 1, 1};
  const int64_t *g = grid_mode == FL_GRID_CALLER ? grid : NULL;
  fl_value args[4] = {fl_ptr(x), fl_ptr(y), fl_ptr(out), fl_int(N)};
  ASSERT_OK(fl_launch(plan, stream, args, 4, g, &err), &err);
  /* A second launch over a prefix of 3 elements into the tail of `out` (one program). */
  fl_value args2[4] = {fl_ptr(x + 1), fl_ptr(y + 1), fl_ptr(out + N + 10), fl_int(3)};
  int64_t grid2[3] = {1, 1, 1};
  ASSERT_OK(fl_launch(plan, stream, args2, 4, grid_mode == FL_GRID_CALLER ? grid2 : NULL, &err), &err);
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  uint64_t count = 0;
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, stream, &count, &err), &err);
  ASSERT_EQ_U(count, 2);
  for (int i = 0; i < N; i++) {
    if (out[i] != (float)i * 2.5f) FL_FAIL_AT("out[%d] = %f, expected %f", i, out[i], (float)i * 2.5f);
  }
  for (int i = N; i < N + 10; i++) ASSERT_TRUE(out[i] == -1.0f);
  for (int i = 0; i < 3; i++) ASSERT_TRUE(out[N + 10 + i] == (float)(i + 1) * 2.5f);
  ASSERT_TRUE(out[N + 13] == -1.0f);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  fl_plan_release(plan);
}

static void test_vadd(void) { run_vadd(FL_GRID_PROGRAM); }
static void test_vadd_static_grid(void) { run_vadd(FL_GRID_CALLER); }

/* ---- order ---- */

static void test_order_10000(void) {
  enum { N = 10000 };
  static const int64_t one[3] = {1, 1, 1};
  fl_plan *plan = record_plan(FL_GRID_STATIC, one);
  ASSERT_TRUE(plan != NULL);
  int64_t *log = calloc(N + 1, sizeof *log);
  int64_t cursor = 0;
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  for (int64_t i = 0; i < N; i++) {
    fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(i)};
    ASSERT_OK(fl_launch(plan, stream, args, 3, NULL, &err), &err);
  }
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(cursor, N);
  for (int64_t i = 0; i < N; i++) {
    if (log[i] != i * 1000000) FL_FAIL_AT("log[%" PRId64 "] = %" PRId64, i, log[i]);
  }
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, stream, &count, &err), &err);
  ASSERT_EQ_U(count, N);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  free(log);
  fl_plan_release(plan);
}

/* Programs run z outermost, then y, then x; the kernel sees the grid it was launched with. */
static void test_program_order(void) {
  fl_plan *plan = record_plan(FL_GRID_CALLER, NULL);
  ASSERT_TRUE(plan != NULL);
  int64_t log[64];
  int64_t cursor = 0;
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(7)};
  int64_t grid[3] = {3, 2, 2};
  ASSERT_OK(fl_launch(plan, stream, args, 3, grid, &err), &err);
  /* A zero dimension runs nothing. */
  int64_t empty[3] = {4, 0, 1};
  ASSERT_OK(fl_launch(plan, stream, args, 3, empty, &err), &err);
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(cursor, 12);
  int k = 0;
  for (int64_t z = 0; z < 2; z++)
    for (int64_t y = 0; y < 2; y++)
      for (int64_t x = 0; x < 3; x++, k++) ASSERT_EQ(log[k], 7 * 1000000 + z * 10000 + y * 100 + x);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  fl_plan_release(plan);
}

/* ---- threads ---- */

enum { THREADS = 4, PER_THREAD = 5000 };

typedef struct worker_ctx {
  const fl_plan *plan;
  uint64_t stream;
  uint64_t *acc;
  int index;
  int failures;
} worker_ctx;

/* Value of launch i of thread t, and its grid width (1 to 4 programs). */
static int64_t launch_value(int t, int i) { return (int64_t)t * 1000003 + i; }
static int64_t launch_width(int i) { return 1 + i % 4; }

static void *launch_worker(void *arg) {
  worker_ctx *c = arg;
  fl_error err;
  for (int i = 0; i < PER_THREAD; i++) {
    fl_value args[2] = {fl_ptr(c->acc), fl_int(launch_value(c->index, i))};
    int64_t grid[3] = {launch_width(i), 1, 1};
    if (fl_launch(c->plan, c->stream, args, 2, grid, &err) != FL_OK) c->failures++;
  }
  return NULL;
}

/* What the checksum kernel adds for thread t's launches with multiplier mult: program x adds
 * value * mult * (x + 1), so a launch of width w adds value * mult * w (w + 1) / 2. */
static uint64_t expected_sum(int t, int32_t mult) {
  uint64_t s = 0;
  for (int i = 0; i < PER_THREAD; i++) {
    int64_t w = launch_width(i);
    s += (uint64_t)launch_value(t, i) * (uint64_t)mult * (uint64_t)(w * (w + 1) / 2);
  }
  return s;
}

static void run_threads(bool one_stream) {
  enum { MULT = 3 };
  fl_plan *plan = checksum_plan(MULT);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  uint64_t streams[THREADS];
  uint64_t shared_acc = 0;
  uint64_t own_acc[THREADS] = {0};
  worker_ctx ctx[THREADS];
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) {
    if (t == 0 || !one_stream) ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &streams[t], &err), &err);
    else streams[t] = streams[0];
    ctx[t] = (worker_ctx){plan, streams[t], one_stream ? &shared_acc : &own_acc[t], t, 0};
  }
  for (int t = 0; t < THREADS; t++) ASSERT_EQ(pthread_create(&th[t], NULL, launch_worker, &ctx[t]), 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  uint64_t total = 0;
  for (int t = 0; t < THREADS; t++) {
    ASSERT_EQ(ctx[t].failures, 0);
    total += expected_sum(t, MULT);
  }
  int nstreams = one_stream ? 1 : THREADS;
  for (int t = 0; t < nstreams; t++) {
    ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, streams[t], &err), &err);
    uint64_t count;
    ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, streams[t], &count, &err), &err);
    ASSERT_EQ_U(count, one_stream ? (uint64_t)THREADS * PER_THREAD : (uint64_t)PER_THREAD);
    if (!one_stream) ASSERT_EQ_U(own_acc[t], expected_sum(t, MULT));
    ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, streams[t], &err), &err);
  }
  if (one_stream) ASSERT_EQ_U(shared_acc, total);
  fl_plan_release(plan);
}

static void test_threads_streams(void) { run_threads(false); }
static void test_threads_one_stream(void) { run_threads(true); }

/* ---- a full queue ---- */

enum { GATED_LAUNCHES = 1000 };

typedef struct gated_ctx {
  const fl_plan *plan;
  uint64_t stream;
  int32_t *gate;
  int64_t *sum;
  atomic_int submitted;
  int failures;
} gated_ctx;

static void *gated_submitter(void *arg) {
  gated_ctx *c = arg;
  fl_error err;
  for (int i = 1; i <= GATED_LAUNCHES; i++) {
    fl_value args[3] = {fl_ptr(c->gate), fl_ptr(c->sum), fl_int(i)};
    int64_t grid[3] = {1, 1, 1};
    if (fl_launch(c->plan, c->stream, args, 3, grid, &err) != FL_OK) c->failures++;
    atomic_fetch_add(&c->submitted, 1);
  }
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Wait hooks: the submitter calls them around each wait for a free entry, and only then. */
static atomic_int waits_begun, waits_ended;
static int wait_token;
static void *count_wait_begin(void) {
  atomic_fetch_add(&waits_begun, 1);
  return &wait_token;
}
static void count_wait_end(void *token) {
  if (token == &wait_token) atomic_fetch_add(&waits_ended, 1);
}

/* The first launch holds the worker, so the ring fills; the submitter must then block (not drop,
 * not fail) until the gate opens, and every launch must run once. */
static void test_queue_full(void) {
  fl_set_wait_hooks(count_wait_begin, count_wait_end);
  fl_plan *plan = NULL;
  ASSERT_EQ(make_plan("checksum", "gated_add", gated_kinds, 3, 3, NULL, FL_GRID_CALLER, NULL, NULL, NULL, &plan), 0);
  fl_error err;
  int32_t gate = 0;
  int64_t sum = 0;
  gated_ctx c = {plan, 0, &gate, &sum, 0, 0};
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &c.stream, &err), &err);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, gated_submitter, &c), 0);
  for (int waited = 0; atomic_load(&c.submitted) < HOST_RING && waited < 5000; waited++) sleep_ms(1);
  sleep_ms(50);
  /* The running launch keeps its entry until it finishes, so exactly HOST_RING got in. */
  int blocked_at = atomic_load(&c.submitted);
  int begun_while_full = atomic_load(&waits_begun);
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, c.stream, &count, &err), &err);
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  fl_set_wait_hooks(NULL, NULL);
  /* Blocked on the full ring, the submitter was inside exactly one wait; every wait ended. */
  ASSERT_EQ(begun_while_full, 1);
  ASSERT_TRUE(atomic_load(&waits_begun) >= 1);
  ASSERT_EQ(atomic_load(&waits_begun), atomic_load(&waits_ended));
  ASSERT_EQ(blocked_at, HOST_RING);
  ASSERT_EQ_U(count, 0);
  ASSERT_EQ(c.failures, 0);
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, c.stream, &err), &err);
  ASSERT_EQ(sum, (int64_t)GATED_LAUNCHES * (GATED_LAUNCHES + 1) / 2);
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, c.stream, &count, &err), &err);
  ASSERT_EQ_U(count, GATED_LAUNCHES);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, c.stream, &err), &err);
  fl_plan_release(plan);
}

/* ---- stream lifetime ---- */

static void test_destroy_drains(void) {
  enum { N = 3000 };
  static const int64_t one[3] = {1, 1, 1};
  fl_plan *plan = record_plan(FL_GRID_STATIC, one);
  ASSERT_TRUE(plan != NULL);
  int64_t *log = calloc(N, sizeof *log);
  int64_t cursor = 0;
  fl_error err;
  uint64_t stream;
  /* Synchronize then count. */
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  for (int64_t i = 0; i < N; i++) {
    fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(i)};
    ASSERT_OK(fl_launch(plan, stream, args, 3, NULL, &err), &err);
  }
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  uint64_t count;
  ASSERT_OK(fl_stream_count(FL_BACKEND_HOST, stream, &count, &err), &err);
  ASSERT_EQ_U(count, N);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(cursor, N);
  /* Destroy without synchronizing: everything queued still runs, in order, before it returns. */
  cursor = 0;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  for (int64_t i = 0; i < N; i++) {
    fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(N - i)};
    ASSERT_OK(fl_launch(plan, stream, args, 3, NULL, &err), &err);
  }
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(cursor, N);
  for (int64_t i = 0; i < N; i++) {
    if (log[i] != (N - i) * 1000000) FL_FAIL_AT("log[%" PRId64 "] = %" PRId64, i, log[i]);
  }
  free(log);
  fl_plan_release(plan);
}

static void test_stale_handle(void) {
  static const int64_t one[3] = {1, 1, 1};
  fl_plan *plan = record_plan(FL_GRID_STATIC, one);
  ASSERT_TRUE(plan != NULL);
  int64_t log[4];
  int64_t cursor = 0;
  fl_error err;
  char want[64];
  uint64_t stream, next;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  ASSERT_TRUE(stream != 0);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  /* A new stream never gets the old handle back. */
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &next, &err), &err);
  ASSERT_TRUE(next != stream);
  hex_reason(want, sizeof want, stream);
  fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(1)};
  ASSERT_FAILS(fl_launch(plan, stream, args, 3, NULL, &err), &err, FL_BAD_STREAM, want);
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_TRUE(!err.stable);
  ASSERT_FAILS(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err, FL_BAD_STREAM, want);
  uint64_t count = 99;
  ASSERT_FAILS(fl_stream_count(FL_BACKEND_HOST, stream, &count, &err), &err, FL_BAD_STREAM, want);
  ASSERT_EQ_U(count, 99);
  ASSERT_FAILS(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err, FL_BAD_STREAM, want);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, next, &err), &err);
  ASSERT_EQ(cursor, 0);
  fl_plan_release(plan);
}

static void test_bad_handles(void) {
  static const int64_t one[3] = {1, 1, 1};
  fl_plan *plan = record_plan(FL_GRID_STATIC, one);
  ASSERT_TRUE(plan != NULL);
  int64_t log[4];
  int64_t cursor = 0;
  fl_error err;
  char want[64];
  uint64_t host, nul;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &host, &err), &err);
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &nul, &err), &err);
  /* Zero, random integers, a live handle with another generation, another backend's handle. */
  const uint64_t bad[] = {0, 0x1234, UINT64_MAX, 0xdeadbeefcafef00dull, host ^ (1ull << 16), host ^ (1ull << 40),
                          nul, host + 1};
  fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(1)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hex_reason(want, sizeof want, bad[i]);
    ASSERT_FAILS(fl_launch(plan, bad[i], args, 3, NULL, &err), &err, FL_BAD_STREAM, want);
    ASSERT_TRUE(!err.backend_submitted);
    ASSERT_FAILS(fl_stream_synchronize(FL_BACKEND_HOST, bad[i], &err), &err, FL_BAD_STREAM, want);
    ASSERT_FAILS(fl_stream_destroy(FL_BACKEND_HOST, bad[i], &err), &err, FL_BAD_STREAM, want);
  }
  ASSERT_STREQ(hex_reason(want, sizeof want, 0x1234), "stream_invalid:0x1234");
  /* The host handle is not a null-backend handle either. */
  hex_reason(want, sizeof want, host);
  ASSERT_FAILS(fl_stream_destroy(FL_BACKEND_NULL, host, &err), &err, FL_BAD_STREAM, want);
  /* Nothing ran and both streams are still fine. */
  ASSERT_OK(fl_launch(plan, host, args, 3, NULL, &err), &err);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, host, &err), &err);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, nul, &err), &err);
  ASSERT_EQ(cursor, 1);
  ASSERT_EQ(log[0], 1000000);
  fl_plan_release(plan);
}

/* Threads keep launching while the stream is destroyed: each launch either gets in (and then
 * runs exactly once) or is refused with BAD_STREAM, never submitted. */
typedef struct race_ctx {
  const fl_plan *plan;
  uint64_t stream;
  uint64_t *acc;
  atomic_int *stop;
  int ok;
  int refused;
  int other;
} race_ctx;

static void *race_worker(void *arg) {
  race_ctx *c = arg;
  fl_error err;
  char want[64];
  hex_reason(want, sizeof want, c->stream);
  int64_t grid[3] = {1, 1, 1};
  fl_value args[2] = {fl_ptr(c->acc), fl_int(1)};
  while (!atomic_load(c->stop)) {
    fl_status st = fl_launch(c->plan, c->stream, args, 2, grid, &err);
    if (st == FL_OK) {
      c->ok++;
    } else if (st == FL_BAD_STREAM && strcmp(err.reason, want) == 0 && !err.backend_submitted) {
      /* Once refused, always refused: the handle is dead. */
      c->refused++;
      if (c->refused > 3) break;
    } else {
      c->other++;
      break;
    }
  }
  return NULL;
}

static void test_destroy_race(void) {
  fl_plan *plan = checksum_plan(1);
  ASSERT_TRUE(plan != NULL);
  fl_error err;
  for (int round = 0; round < 5; round++) {
    uint64_t stream;
    ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
    uint64_t acc = 0;
    atomic_int stop = 0;
    race_ctx ctx[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
      ctx[t] = (race_ctx){plan, stream, &acc, &stop, 0, 0, 0};
      ASSERT_EQ(pthread_create(&th[t], NULL, race_worker, &ctx[t]), 0);
    }
    sleep_ms(5 + round * 3);
    ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
    sleep_ms(2);
    atomic_store(&stop, 1);
    uint64_t ok = 0;
    for (int t = 0; t < THREADS; t++) {
      pthread_join(th[t], NULL);
      ASSERT_EQ(ctx[t].other, 0);
      ok += (uint64_t)ctx[t].ok;
    }
    /* A launch accepted after destroy returned would be lost: the sum proves none was. */
    ASSERT_EQ_U(__atomic_load_n(&acc, __ATOMIC_ACQUIRE), ok);
  }
  fl_plan_release(plan);
}

/* ---- null backend ---- */

typedef struct null_ctx {
  const fl_plan *plan;
  uint64_t stream;
  int failures;
} null_ctx;

static void *null_worker(void *arg) {
  null_ctx *c = arg;
  fl_error err;
  fl_value args[2] = {fl_ptr((void *)0x1000), fl_int(5)};
  for (int i = 0; i < PER_THREAD; i++)
    if (fl_launch(c->plan, c->stream, args, 2, NULL, &err) != FL_OK) c->failures++;
  return NULL;
}

static void test_null_counts(void) {
  static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32};
  static const int abis[] = {FL_ABI_HOST, FL_ABI_CUDA};
  fl_error err;
  for (size_t a = 0; a < sizeof abis / sizeof abis[0]; a++) {
    fl_plan_desc d;
    memset(&d, 0, sizeof d);
    d.backend = FL_BACKEND_NULL;
    d.target.abi = abis[a];
    d.kinds = kinds;
    d.nkinds = 2;
    d.runtime_arg_count = 2;
    d.grid_mode = FL_GRID_STATIC;
    d.static_grid[0] = 4;
    d.static_grid[1] = d.static_grid[2] = 1;
    fl_plan *plan;
    ASSERT_OK(fl_plan_create(&d, &plan, &err), &err);
    uint64_t stream, count = 1;
    ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &stream, &err), &err);
    ASSERT_OK(fl_stream_count(FL_BACKEND_NULL, stream, &count, &err), &err);
    ASSERT_EQ_U(count, 0);
    null_ctx ctx[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
      ctx[t] = (null_ctx){plan, stream, 0};
      ASSERT_EQ(pthread_create(&th[t], NULL, null_worker, &ctx[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
      pthread_join(th[t], NULL);
      ASSERT_EQ(ctx[t].failures, 0);
    }
    /* An out-of-range value is refused before the boundary and not counted. */
    fl_value bad[2] = {fl_ptr(NULL), fl_int(INT64_C(1) << 40)};
    ASSERT_TRUE(fl_launch(plan, stream, bad, 2, NULL, &err) == FL_BAD_VALUE);
    ASSERT_TRUE(!err.backend_submitted);
    ASSERT_OK(fl_stream_synchronize(FL_BACKEND_NULL, stream, &err), &err);
    ASSERT_OK(fl_stream_count(FL_BACKEND_NULL, stream, &count, &err), &err);
    ASSERT_EQ_U(count, (uint64_t)THREADS * PER_THREAD);
    ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
    char want[64];
    hex_reason(want, sizeof want, stream);
    fl_value args[2] = {fl_ptr(NULL), fl_int(1)};
    ASSERT_FAILS(fl_launch(plan, stream, args, 2, NULL, &err), &err, FL_BAD_STREAM, want);
    ASSERT_FAILS(fl_stream_count(FL_BACKEND_NULL, stream, &count, &err), &err, FL_BAD_STREAM, want);
    fl_plan_release(plan);
  }
}

/* The registry has 256 slots; the 257th stream is refused, and freed slots are reusable. */
static void test_null_table_full(void) {
  enum { SLOTS = 256 };
  static uint64_t handles[SLOTS + 1];
  fl_error err;
  int made = 0;
  while (made <= SLOTS && fl_stream_create(FL_BACKEND_NULL, &handles[made], &err) == FL_OK) made++;
  ASSERT_EQ(made, SLOTS);
  ASSERT_EQ(err.status, FL_BACKEND_ERROR);
  ASSERT_STREQ(err.reason, "stream_table_full:256");
  /* The host backend shares the table: its worker is started, then stopped again. */
  uint64_t host = 7;
  ASSERT_FAILS(fl_stream_create(FL_BACKEND_HOST, &host, &err), &err, FL_BACKEND_ERROR, "stream_table_full:256");
  ASSERT_EQ_U(host, 0);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, handles[17], &err), &err);
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &handles[17], &err), &err);
  for (int i = 0; i < made; i++) ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, handles[i], &err), &err);
}

static void *failing_malloc(size_t size) {
  (void)size;
  return NULL;
}

static void test_stream_nomem(void) {
  fl_error err;
  uint64_t stream = 5;
  fl_set_allocator(failing_malloc, free);
  fl_status host = fl_stream_create(FL_BACKEND_HOST, &stream, &err);
  fl_error host_err = err;
  uint64_t host_stream = stream;
  fl_status nul = fl_stream_create(FL_BACKEND_NULL, &stream, &err);
  fl_set_allocator(NULL, NULL);
  ASSERT_EQ(host, FL_NOMEM);
  ASSERT_STREQ(host_err.reason, "stream_alloc");
  ASSERT_EQ_U(host_stream, 0);
  /* A null stream's state is static: it needs no memory. */
  ASSERT_EQ(nul, FL_OK);
  ASSERT_TRUE(stream != 0);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, stream, &err), &err);
}

/* ---- kernel libraries ---- */

static void test_lib_missing(void) {
  fl_error err;
  fl_host_lib *lib = (fl_host_lib *)&err;
  const char *path = "/nonexistent/fastlaunch/libnope.so";
  ASSERT_FAILS(fl_host_lib_open(path, &lib, &err), &err, FL_KERNEL_LOAD,
               "dlopen:/nonexistent/fastlaunch/libnope.so: cannot open shared object file: No such file or directory");
  ASSERT_TRUE(err.stable);
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_TRUE(lib == NULL);
  ASSERT_FAILS(fl_host_lib_open(NULL, &lib, &err), &err, FL_BAD_VALUE, "host_lib_path_null");
  /* A file that is not a shared object: dlerror names the problem. */
  char text[600];
  ASSERT_TRUE(kernel_so("vadd") != NULL);
  snprintf(text, sizeof text, "%s/not_elf.so", kernel_dir);
  FILE *f = fopen(text, "w");
  ASSERT_TRUE(f != NULL);
  fputs("not an ELF file, just text padding padding padding padding padding padding\n", f);
  fclose(f);
  ASSERT_TRUE(fl_host_lib_open(text, &lib, &err) == FL_KERNEL_LOAD);
  char want[1024];
  snprintf(want, sizeof want, "dlopen:%s: invalid ELF header", text);
  want[FL_REASON_MAX - 1] = '\0'; /* the reason is cut like this for a long $TMPDIR */
  ASSERT_STREQ(err.reason, want);
  unlink(text);
}

static void test_symbol_missing(void) {
  fl_error err;
  fl_host_lib *lib;
  const char *path = kernel_so("vadd");
  ASSERT_TRUE(path != NULL);
  ASSERT_OK(fl_host_lib_open(path, &lib, &err), &err);
  void *sym = &err;
  char want[1024];
  snprintf(want, sizeof want, "dlsym:%s: undefined symbol: no_such_kernel", path);
  want[FL_REASON_MAX - 1] = '\0';
  ASSERT_FAILS(fl_host_lib_symbol(lib, "no_such_kernel", &sym, &err), &err, FL_KERNEL_LOAD, want);
  ASSERT_TRUE(err.stable);
  ASSERT_TRUE(sym == NULL);
  ASSERT_FAILS(fl_host_lib_symbol(lib, NULL, &sym, &err), &err, FL_BAD_VALUE, "host_symbol_arg_null");
  ASSERT_OK(fl_host_lib_symbol(lib, "vadd", &sym, &err), &err);
  ASSERT_TRUE(sym != NULL);
  fl_host_lib_release(lib);
}

static int owner_releases;
static void count_owner_release(void *owner) {
  (void)owner;
  owner_releases++;
}

/* A host plan without a kernel (which the worker would call) is refused when built, and the caller
 * keeps its owner. */
static void test_host_kernel_null(void) {
  static const fl_kind kinds[] = {FL_KIND_PTR};
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_HOST;
  d.target.abi = FL_ABI_HOST;
  d.kinds = kinds;
  d.nkinds = 1;
  d.runtime_arg_count = 1;
  d.grid_mode = FL_GRID_CALLER;
  d.owner = &d;
  d.owner_release = count_owner_release;
  fl_plan *plan = (fl_plan *)&d;
  fl_error err;
  owner_releases = 0;
  ASSERT_FAILS(fl_plan_create(&d, &plan, &err), &err, FL_BAD_DESCRIPTOR, "kernel_null");
  ASSERT_TRUE(err.stable);
  ASSERT_TRUE(plan == NULL);
  ASSERT_EQ(owner_releases, 0);
}

/* The plan keeps the library loaded after the caller drops its own reference, and queued launches
 * keep the plan alive after the caller releases it. */
static void test_owner_keeps_lib(void) {
  static const int64_t one[3] = {1, 1, 1};
  fl_host_lib *lib;
  void *fn;
  ASSERT_EQ(load_kernel("record", "record", &lib, &fn), 0);
  fl_host_lib_retain(lib);
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_HOST;
  d.target.abi = FL_ABI_HOST;
  d.kernel = fn;
  d.owner = lib;
  d.owner_release = fl_host_lib_release_owner;
  d.kinds = record_kinds;
  d.nkinds = 3;
  d.runtime_arg_count = 3;
  d.grid_mode = FL_GRID_STATIC;
  memcpy(d.static_grid, one, sizeof one);
  fl_plan *plan;
  fl_error err;
  ASSERT_OK(fl_plan_create(&d, &plan, &err), &err);
  /* Two references were taken (open and retain); the plan now owns one of them. */
  fl_host_lib_release(lib);
  int64_t log[8];
  int64_t cursor = 0;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  for (int64_t i = 0; i < 5; i++) {
    fl_value args[3] = {fl_ptr(log), fl_ptr(&cursor), fl_int(i)};
    ASSERT_OK(fl_launch(plan, stream, args, 3, NULL, &err), &err);
  }
  /* The worker holds the last references now; the plan and then the library go on the worker. */
  fl_plan_release(plan);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(cursor, 5);
  for (int i = 0; i < 5; i++) ASSERT_EQ(log[i], (int64_t)i * 1000000);
}
