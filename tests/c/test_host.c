/* test_host.c: the host backend end to end through the API: results, order, threads, a full queue. */
#include "fastlaunch.h"

#include <pthread.h>
#include <stdatomic.h>

#define FL_TESTS(X)           \
  X(test_vadd)                \
  X(test_vadd_static_grid)    \
  X(test_order_10000)         \
  X(test_program_order)       \
  X(test_threads_streams)     \
  X(test_threads_one_stream)  \
  X(test_queue_full)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "host_fixtures.h"

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

/* The gated kernel: ptr ptr i64, all runtime. */
static const fl_kind gated_kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I64};

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
