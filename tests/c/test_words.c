/* test_words.c: fl_launch_words against fl_launch on the host backend. Random plans of pointers and
 * signed 32- and 64-bit ints (some fixed), every grid form (static, caller, the one-argument shape,
 * a program), random words including ints past a 32-bit slot: each pair of launches hands the
 * kernel the same bytes and grid, or is refused with the same reason with nothing launched. Then
 * the refusals of the words form itself. */
#include "fastlaunch.h"

#define FL_TESTS(X) X(words_launch_what_values_launch) X(words_refusals)
#define FL_TEST_MAIN
#include "fl_test.h"

/* What the kernel saw at program (0, 0, 0): its argument bytes and grid. One stream, synchronized
 * after each launch, so the worker's writes happen before the test reads them. */
static size_t seen_size;
static unsigned char seen[4096];
static uint32_t seen_grid[3];
static int seen_calls;

static void copy_args(const void *args, const fl_host_program *p) {
  if (p->pid[0] || p->pid[1] || p->pid[2]) return;
  memcpy(seen, args, seen_size);
  memcpy(seen_grid, p->grid, sizeof seen_grid);
  seen_calls++;
}

/* The kernel as the descriptor takes it (a function pointer's bytes, without a cast C leaves open). */
static void *kernel_ptr(void) {
  fl_host_kernel_fn fn = copy_args;
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1du;
}

/* An int for an int slot: mostly in range of 32 bits, sometimes the edges and past them. */
static int64_t some_int(void) {
  static const int64_t edges[] = {0, 1, -1, INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
                                  INT64_MAX, INT64_MIN, 4096, 100000};
  uint64_t r = next();
  if (r % 4 == 0) return edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
  return (int64_t)(r >> 40) - (1 << 23);
}

typedef struct {
  fl_status st;
  char reason[FL_REASON_MAX];
  int calls;
  unsigned char bytes[4096];
  uint32_t grid[3];
} outcome;

static void run(const fl_plan *p, uint64_t stream, const fl_value *values, const uint64_t *words, size_t n,
                const int64_t *grid, outcome *o) {
  fl_error err;
  seen_calls = 0;
  memset(seen, 0xa5, sizeof seen);
  memset(seen_grid, 0, sizeof seen_grid);
  o->st = values ? fl_launch(p, stream, values, n, grid, &err) : fl_launch_words(p, stream, words, n, grid, &err);
  snprintf(o->reason, sizeof o->reason, "%s", o->st == FL_OK ? "" : err.reason);
  fl_stream_synchronize(FL_BACKEND_HOST, stream, &err);
  o->calls = seen_calls;
  memcpy(o->bytes, seen, sizeof o->bytes);
  memcpy(o->grid, seen_grid, sizeof o->grid);
}

static void words_launch_what_values_launch(void) {
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  static const fl_kind choice[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I64};
  static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l",
                                      "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x"};
  int launched = 0, refused = 0, plans = 0;
  for (int round = 0; round < 400; round++) {
    fl_kind kinds[24];
    size_t nkinds = 1 + next() % 24, nfixed = next() % 3;
    if (nfixed >= nkinds) nfixed = 0;
    size_t nrt = nkinds - nfixed;
    for (size_t i = 0; i < nkinds; i++) kinds[i] = choice[next() % (i < nrt ? 3 : 2) + (i < nrt ? 0 : 1)];
    /* An int runtime argument for the computed grids, when there is one. */
    size_t var = SIZE_MAX;
    for (size_t i = 0; i < nrt; i++)
      if (kinds[i] != FL_KIND_PTR) var = i;
    fl_value fixed[3];
    for (size_t i = 0; i < nfixed; i++) fixed[i] = fl_int(7 - (int64_t)i); /* fixed: ints only */
    fl_plan_desc d;
    memset(&d, 0, sizeof d);
    d.name = "copy_args";
    d.backend = FL_BACKEND_HOST;
    d.target.abi = FL_ABI_HOST;
    d.kernel = kernel_ptr();
    d.kinds = kinds;
    d.nkinds = nkinds;
    d.runtime_arg_count = nrt;
    d.fixed_args = fixed;
    d.arg_names = names;
    char expr0[64], expr1[64];
    int form = (int)(next() % 4);
    if (var == SIZE_MAX && form >= 2) form = (int)(next() % 2);
    d.grid_mode = form == 0 ? FL_GRID_STATIC : form == 1 ? FL_GRID_CALLER : FL_GRID_PROGRAM;
    d.static_grid[0] = 3, d.static_grid[1] = 2, d.static_grid[2] = 1;
    if (form == 2) { /* the one-argument shape: inline in both forms */
      snprintf(expr0, sizeof expr0, "cdiv(%s, 64)", names[var]);
      d.grid_exprs[0] = expr0, d.grid_exprs[1] = "2", d.grid_exprs[2] = "1";
    } else if (form == 3) { /* a program: through the values the words stand for */
      snprintf(expr0, sizeof expr0, "%s %% 5 + 1", names[var]);
      snprintf(expr1, sizeof expr1, "1 if %s > 0 else 2", names[var]);
      d.grid_exprs[0] = expr0, d.grid_exprs[1] = expr1, d.grid_exprs[2] = "1";
    }
    fl_plan *p;
    ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
    ASSERT_TRUE(fl_plan_takes_words(p));
    seen_size = fl_plan_layout(p)->size;
    plans++;
    for (int call = 0; call < 20; call++) {
      fl_value values[24];
      uint64_t words[24];
      for (size_t i = 0; i < nrt; i++) {
        if (kinds[i] == FL_KIND_PTR) {
          uint64_t a = 0x7f0000000000u + (next() & 0xffffffffffu);
          values[i] = fl_ptr((void *)(uintptr_t)a);
          words[i] = a;
        } else {
          int64_t x = some_int();
          if (i == var && form >= 2) x = (int64_t)(next() % 100000); /* grids in range, mostly */
          values[i] = fl_int(x);
          words[i] = (uint64_t)x;
        }
      }
      int64_t caller[3] = {1 + (int64_t)(next() % 9), 1, 2};
      const int64_t *grid = form == 1 ? caller : NULL;
      outcome a, b;
      run(p, stream, values, NULL, nrt, grid, &a);
      run(p, stream, NULL, words, nrt, grid, &b);
      if (a.st != b.st || strcmp(a.reason, b.reason) != 0 || a.calls != b.calls ||
          memcmp(a.grid, b.grid, sizeof a.grid) != 0 || memcmp(a.bytes, b.bytes, seen_size) != 0) {
        fprintf(stderr, "round %d call %d (%zu kinds, grid form %d): values %s \"%s\" %d call(s), words %s \"%s\" %d\n",
                round, call, nkinds, form, fl_status_name(a.st), a.reason, a.calls, fl_status_name(b.st), b.reason,
                b.calls);
        fl_test_failures++;
        fl_plan_release(p);
        fl_stream_destroy(FL_BACKEND_HOST, stream, &err);
        return;
      }
      /* Refused: before anything ran. Launched: exactly once. */
      ASSERT_EQ(b.calls, b.st == FL_OK && b.grid[0] ? 1 : 0);
      if (b.st == FL_OK) launched++;
      else refused++;
    }
    fl_plan_release(p);
  }
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
  /* Both sides of the comparison were exercised. */
  ASSERT_TRUE(launched > 1000);
  ASSERT_TRUE(refused > 100);
  printf("    %d plans, %d launches equal, %d refusals equal\n", plans, launched, refused);
}

static void words_refusals(void) {
  fl_error err;
  uint64_t stream;
  ASSERT_OK(fl_stream_create(FL_BACKEND_HOST, &stream, &err), &err);
  static const fl_kind with_float[] = {FL_KIND_PTR, FL_KIND_FP32};
  static const fl_kind with_u32[] = {FL_KIND_PTR, FL_KIND_U32};
  static const fl_kind fine[] = {FL_KIND_PTR, FL_KIND_I32};
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_HOST;
  d.target.abi = FL_ABI_HOST;
  d.kernel = kernel_ptr();
  d.nkinds = 2;
  d.runtime_arg_count = 2;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = d.static_grid[1] = d.static_grid[2] = 1;
  uint64_t words[2] = {0x7f0000001000u, 5};
  fl_plan *p;
  /* A kind a word cannot say: refused, stable, nothing launched. A fixed float is fine. */
  const fl_kind *refused_kinds[] = {with_float, with_u32};
  for (int k = 0; k < 2; k++) {
    d.kinds = refused_kinds[k];
    ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
    ASSERT_TRUE(!fl_plan_takes_words(p));
    seen_calls = 0;
    ASSERT_FAILS(fl_launch_words(p, stream, words, 2, NULL, &err), &err, FL_UNSUPPORTED, "words_unsupported");
    ASSERT_TRUE(err.stable && !err.backend_submitted);
    fl_plan_release(p);
  }
  fl_value fixed[1] = {fl_float(1.5)};
  d.kinds = with_float;
  d.runtime_arg_count = 1;
  d.fixed_args = fixed;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_TRUE(fl_plan_takes_words(p));
  fl_plan_release(p);
  d.kinds = fine;
  d.runtime_arg_count = 2;
  d.fixed_args = NULL;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  seen_size = fl_plan_layout(p)->size;
  ASSERT_FAILS(fl_launch_words(NULL, stream, words, 2, NULL, &err), &err, FL_BAD_DESCRIPTOR, "plan_null");
  ASSERT_FAILS(fl_launch_words(p, stream, words, 1, NULL, &err), &err, FL_BAD_ARG_COUNT, "args_size_mismatch:1:2");
  ASSERT_FAILS(fl_launch_words(p, stream, NULL, 2, NULL, &err), &err, FL_BAD_VALUE, "args_null");
  int64_t g[3] = {1, 1, 1};
  ASSERT_FAILS(fl_launch_words(p, stream, words, 2, g, &err), &err, FL_BAD_GRID, "grid_unexpected");
  words[1] = (uint64_t)((int64_t)INT32_MAX + 1);
  ASSERT_FAILS(fl_launch_words(p, stream, words, 2, NULL, &err), &err, FL_BAD_VALUE, "int_out_of_range:1:i32");
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(seen_calls, 0);
  words[1] = (uint64_t)(int64_t)INT32_MIN;
  ASSERT_OK(fl_launch_words(p, stream, words, 2, NULL, &err), &err);
  ASSERT_OK(fl_stream_synchronize(FL_BACKEND_HOST, stream, &err), &err);
  ASSERT_EQ(seen_calls, 1);
  int32_t got;
  memcpy(&got, seen + fl_plan_arg_offset(p, 1), 4);
  ASSERT_EQ(got, INT32_MIN);
  fl_plan_release(p);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_HOST, stream, &err), &err);
}
