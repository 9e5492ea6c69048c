/* test_stress.c: concurrency stress for ThreadSanitizer (make test runs it under TSan too): launcher
 * threads on shared plans while another thread destroys and recreates their streams and a third
 * swaps the plans they launch. Every launch that returns OK runs exactly once (a kernel counts
 * them); every other one was refused before the boundary and never runs. The null backend's
 * streams get the same treatment: each launch is counted on its own stream or refused, never on
 * the stream that took its slot next. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FL_TESTS(X) X(launchers_destroyer_and_plan_swaps) X(null_launchers_and_destroyer)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "fl_test_kernels.h"

enum { LAUNCHERS = 4, STREAMS = 3, LAUNCHES = 20000 };

static const fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I64, FL_KIND_I32};
static char so_path[512];

static struct {
  pthread_mutex_t lock;    /* the test's own sharing of the plan slot (not fastlaunch's) */
  fl_plan *plan;
  _Atomic uint64_t streams[STREAMS];
  atomic_int stop;
  uint64_t acc;            /* the kernel adds value * mult into it, once per launch */
  atomic_ullong ok_sum;    /* what the launches that returned OK should have added */
  atomic_ullong refused;
  atomic_ullong swaps, recreated;
  atomic_int failures;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static fl_plan *make(void) {
  fl_value mult = fl_int(1);
  int64_t one[3] = {1, 1, 1};
  return fl_test_host_plan(so_path, "checksum", kinds, 3, 2, &mult, FL_GRID_STATIC, one, NULL, NULL);
}

static void *launcher(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < LAUNCHES; i++) {
    pthread_mutex_lock(&S.lock);
    fl_plan *p = S.plan;
    fl_plan_retain(p);
    pthread_mutex_unlock(&S.lock);
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    uint64_t stream = atomic_load(&S.streams[seed % STREAMS]);
    int64_t value = (int64_t)(seed % 1000) + 1;
    fl_value args[2] = {fl_ptr(&S.acc), fl_int(value)};
    fl_error err;
    fl_status st = fl_launch(p, stream, args, 2, NULL, &err);
    if (st == FL_OK) {
      atomic_fetch_add(&S.ok_sum, (unsigned long long)value);
    } else if (st == FL_BAD_STREAM && !err.backend_submitted) {
      atomic_fetch_add(&S.refused, 1); /* the stream was destroyed under it: nothing ran */
    } else {
      fprintf(stderr, "unexpected: %s %s\n", fl_status_name(st), err.reason);
      atomic_fetch_add(&S.failures, 1);
    }
    fl_plan_release(p);
  }
  return NULL;
}

static void *destroyer(void *arg) {
  (void)arg;
  unsigned k = 0;
  while (!atomic_load(&S.stop)) {
    fl_error err;
    uint64_t fresh;
    if (fl_stream_create(FL_BACKEND_HOST, &fresh, &err) != FL_OK) {
      atomic_fetch_add(&S.failures, 1);
      break;
    }
    uint64_t old = atomic_exchange(&S.streams[k++ % STREAMS], fresh);
    if (fl_stream_destroy(FL_BACKEND_HOST, old, &err) != FL_OK) atomic_fetch_add(&S.failures, 1); /* drains */
    atomic_fetch_add(&S.recreated, 1);
    usleep(50);
  }
  return NULL;
}

static void *swapper(void *arg) {
  (void)arg;
  while (!atomic_load(&S.stop)) {
    fl_plan *fresh = make();
    if (!fresh) {
      atomic_fetch_add(&S.failures, 1);
      break;
    }
    pthread_mutex_lock(&S.lock);
    fl_plan *old = S.plan;
    S.plan = fresh;
    pthread_mutex_unlock(&S.lock);
    fl_plan_release(old); /* freed when the last launcher using it lets go */
    atomic_fetch_add(&S.swaps, 1);
    usleep(100);
  }
  return NULL;
}

static void launchers_destroyer_and_plan_swaps(void) {
  char src[600];
  snprintf(src, sizeof src, "%s/tests/c/kernels/checksum.c", fl_test_root());
  snprintf(so_path, sizeof so_path, "/tmp/fl_stress_%d.so", (int)getpid());
  ASSERT_EQ(fl_test_compile_so(src, so_path), 0);
  S.plan = make();
  ASSERT_TRUE(S.plan != NULL);
  fl_error err;
  for (int s = 0; s < STREAMS; s++) {
    uint64_t h;
    ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &h, &err), &err);
    atomic_store(&S.streams[s], h);
  }
  pthread_t l[LAUNCHERS], d, w;
  ASSERT_EQ(pthread_create(&d, NULL, destroyer, NULL), 0);
  ASSERT_EQ(pthread_create(&w, NULL, swapper, NULL), 0);
  for (int i = 0; i < LAUNCHERS; i++) ASSERT_EQ(pthread_create(&l[i], NULL, launcher, (void *)(uintptr_t)(i + 1)), 0);
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(l[i], NULL);
  atomic_store(&S.stop, 1);
  pthread_join(d, NULL);
  pthread_join(w, NULL);
  for (int s = 0; s < STREAMS; s++) ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, atomic_load(&S.streams[s]), &err), &err);
  fl_plan_release(S.plan);
  unlink(so_path);
  unsigned long long ok = (unsigned long long)LAUNCHERS * LAUNCHES - atomic_load(&S.refused);
  printf("     %llu launches ran exactly once, %llu refused (stream destroyed), %llu streams recreated, %llu plan "
         "swaps\n", ok, (unsigned long long)atomic_load(&S.refused), (unsigned long long)atomic_load(&S.recreated),
         (unsigned long long)atomic_load(&S.swaps));
  ASSERT_EQ(atomic_load(&S.failures), 0);
  /* Every launch that returned OK added its value once; the refused ones added nothing. */
  ASSERT_EQ_U(__atomic_load_n(&S.acc, __ATOMIC_ACQUIRE), atomic_load(&S.ok_sum));
  ASSERT_TRUE(atomic_load(&S.swaps) > 0 && atomic_load(&S.recreated) > 0);
}

/* ---- null streams: counted where launched, or refused ---- */

enum { NULL_RECORDS = 1 << 14 };

static struct {
  struct {
    uint64_t handle;
    atomic_ullong ok;
  } rec[NULL_RECORDS];
  atomic_uint current[STREAMS]; /* record index of each live stream */
  atomic_uint created;
  atomic_int stop;
  atomic_ullong refused;
  atomic_int failures;
} N;

static void *null_launcher(void *arg) {
  fl_plan *p = (fl_plan *)((void **)arg)[0];
  uint64_t seed = (uint64_t)(uintptr_t)((void **)arg)[1] * 0x9e3779b97f4a7c15ull + 1;
  uint64_t x = 7;
  for (int i = 0; i < LAUNCHES * 5; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    unsigned r = atomic_load(&N.current[seed % STREAMS]);
    fl_value args[2] = {fl_ptr(&x), fl_int(1)};
    fl_error err;
    fl_status st = fl_launch(p, N.rec[r].handle, args, 2, NULL, &err);
    if (st == FL_OK) {
      atomic_fetch_add(&N.rec[r].ok, 1);
    } else if (st == FL_BAD_STREAM && !err.backend_submitted) {
      atomic_fetch_add(&N.refused, 1);
    } else {
      fprintf(stderr, "unexpected: %s %s\n", fl_status_name(st), err.reason);
      atomic_fetch_add(&N.failures, 1);
    }
  }
  return NULL;
}

static void *null_destroyer(void *arg) {
  (void)arg;
  unsigned k = 0;
  while (!atomic_load(&N.stop) && atomic_load(&N.created) < NULL_RECORDS) {
    fl_error err;
    unsigned r = atomic_fetch_add(&N.created, 1);
    if (fl_stream_create(FL_BACKEND_NULL, &N.rec[r].handle, &err) != FL_OK) {
      atomic_fetch_add(&N.failures, 1);
      break;
    }
    unsigned old = atomic_exchange(&N.current[k++ % STREAMS], r);
    if (fl_stream_destroy(FL_BACKEND_NULL, N.rec[old].handle, &err) != FL_OK) atomic_fetch_add(&N.failures, 1);
    usleep(20);
  }
  return NULL;
}

static void null_launchers_and_destroyer(void) {
  static const fl_kind nkinds[] = {FL_KIND_PTR, FL_KIND_I32};
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_NULL;
  d.kinds = nkinds;
  d.nkinds = 2;
  d.runtime_arg_count = 2;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = d.static_grid[1] = d.static_grid[2] = 1;
  fl_error err;
  fl_plan *plan = NULL;
  ASSERT_OK(fl_plan_create(&d, &plan, &err), &err);
  for (int s = 0; s < STREAMS; s++) {
    unsigned r = atomic_fetch_add(&N.created, 1);
    ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &N.rec[r].handle, &err), &err);
    atomic_store(&N.current[s], r);
  }
  pthread_t l[LAUNCHERS], dt;
  void *args[LAUNCHERS][2];
  ASSERT_EQ(pthread_create(&dt, NULL, null_destroyer, NULL), 0);
  for (int i = 0; i < LAUNCHERS; i++) {
    args[i][0] = plan;
    args[i][1] = (void *)(uintptr_t)(i + 1);
    ASSERT_EQ(pthread_create(&l[i], NULL, null_launcher, args[i]), 0);
  }
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(l[i], NULL);
  atomic_store(&N.stop, 1);
  pthread_join(dt, NULL);
  ASSERT_EQ(atomic_load(&N.failures), 0);
  /* The live streams counted exactly the launches that returned OK on their handles. */
  unsigned long long live_ok = 0;
  for (int s = 0; s < STREAMS; s++) {
    unsigned r = atomic_load(&N.current[s]);
    uint64_t count = 0;
    ASSERT_OK(fl_stream_count(FL_BACKEND_NULL, N.rec[r].handle, &count, &err), &err);
    ASSERT_EQ_U(count, atomic_load(&N.rec[r].ok));
    live_ok += count;
    ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, N.rec[r].handle, &err), &err);
    /* Gone: every later use is refused. */
    ASSERT_EQ(fl_stream_count(FL_BACKEND_NULL, N.rec[r].handle, &count, &err), FL_BAD_STREAM);
  }
  printf("     null: %u streams created, %llu launches refused (stream destroyed), %llu counted on the live ones\n",
         atomic_load(&N.created), (unsigned long long)atomic_load(&N.refused), live_ok);
  ASSERT_TRUE(atomic_load(&N.created) > STREAMS);
  fl_plan_release(plan);
}
