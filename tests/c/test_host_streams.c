/* test_host_streams.c: host streams' lifetime and handles, the null backend, host kernel libraries. */
#include "fastlaunch.h"

#include <pthread.h>
#include <stdatomic.h>

#define FL_TESTS(X)         \
  X(test_destroy_drains)    \
  X(test_stale_handle)      \
  X(test_bad_handles)       \
  X(test_destroy_race)      \
  X(test_null_counts)       \
  X(test_null_table_full)   \
  X(test_stream_nomem)      \
  X(test_lib_missing)       \
  X(test_symbol_missing)    \
  X(test_host_kernel_null)  \
  X(test_owner_keeps_lib)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "host_fixtures.h"

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
