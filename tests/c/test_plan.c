/* test_plan.c: plan building and launching through the public API on the null backend: every
 * descriptor and launch refusal with its own reason, templates, grid modes, exactly-once counting,
 * and every allocation failure point of plan creation. */
#include "fastlaunch.h"

#define FL_TESTS(X) \
  X(descriptor_refusals) X(fixed_args_and_template) X(static_grid_refusals) X(grid_program_plans) X(simple_grids_equal_the_interpreter) \
  X(launch_refusals_submit_nothing) X(caller_grid) X(npu_template) X(allocation_failures) X(introspection) \
  X(targets_by_name) X(backend_tables) X(fault_injection_targets_one_plan)
#define FL_TEST_MAIN
#include "fl_test.h"

static const fl_kind k3[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32};

static fl_plan_desc null_desc(void) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.name = "k";
  d.backend = FL_BACKEND_NULL;
  d.target.abi = FL_ABI_HOST;
  d.kinds = k3;
  d.nkinds = 3;
  d.runtime_arg_count = 3;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = d.static_grid[1] = d.static_grid[2] = 1;
  return d;
}

static uint64_t count_of(uint64_t stream) {
  fl_error err;
  uint64_t n = 0;
  if (fl_stream_count(FL_BACKEND_NULL, stream, &n, &err) != FL_OK) return UINT64_MAX;
  return n;
}

static void expect_refused(const fl_plan_desc *d, int status, const char *reason, int line) {
  fl_error err;
  fl_plan *p = (fl_plan *)0x1;
  int st = fl_plan_create(d, &p, &err);
  if (st == FL_OK) fl_plan_release(p);
  if (st != status || strcmp(err.reason, reason) != 0 || p != NULL || !err.stable || err.backend_submitted) {
    fprintf(stderr, "line %d: got %s \"%s\" (stable %d), expected %s \"%s\"\n", line, fl_status_name(st), err.reason,
            err.stable, fl_status_name(status), reason);
    fl_test_failures++;
  }
}
#define REFUSED(d, status, reason) expect_refused(&(d), status, reason, __LINE__)

static void descriptor_refusals(void) {
  fl_error err;
  fl_plan *p;
  ASSERT_FAILS(fl_plan_create(NULL, &p, &err), &err, FL_BAD_DESCRIPTOR, "desc_null");
  fl_plan_desc d = null_desc();
  ASSERT_FAILS(fl_plan_create(&d, NULL, &err), &err, FL_BAD_DESCRIPTOR, "plan_out_null");
  d = null_desc(); d.backend = 9; REFUSED(d, FL_BAD_DESCRIPTOR, "backend_unknown:9");
  d = null_desc(); d.target.abi = 5; REFUSED(d, FL_BAD_DESCRIPTOR, "abi_unknown:5");
  d = null_desc(); d.backend = FL_BACKEND_HOST; d.target.abi = FL_ABI_NPU; d.kernel = (void *)1;
  REFUSED(d, FL_BAD_DESCRIPTOR, "abi_not_for_backend:npu:host");
  d = null_desc(); d.runtime_arg_count = 4; REFUSED(d, FL_BAD_DESCRIPTOR, "runtime_arg_count_exceeds:4:3");
  d = null_desc(); d.runtime_arg_count = 1; REFUSED(d, FL_BAD_DESCRIPTOR, "fixed_args_null:2");
  d = null_desc(); d.backend = FL_BACKEND_HOST; REFUSED(d, FL_BAD_DESCRIPTOR, "kernel_null");
  d = null_desc(); d.grid_mode = 7; REFUSED(d, FL_BAD_DESCRIPTOR, "grid_mode_unknown:7");
  fl_kind bad[] = {FL_KIND_PTR, (fl_kind)77};
  d = null_desc(); d.kinds = bad; d.nkinds = 2; d.runtime_arg_count = 2;
  REFUSED(d, FL_BAD_KIND, "kind_unknown:1:77");
  /* A fixed pointer cannot be baked into a template. */
  fl_value fixed[2] = {fl_int(1), fl_int(2)};
  d = null_desc(); d.runtime_arg_count = 0; d.fixed_args = fixed;
  fl_value three[3] = {fl_ptr(NULL), fl_int(1), fl_int(2)};
  d.fixed_args = three;
  REFUSED(d, FL_BAD_DESCRIPTOR, "fixed_ptr_unsupported:0");
  /* A fixed value out of range refuses the plan, stably. */
  fl_value over[2] = {fl_int(1), fl_int(1LL << 40)};
  d = null_desc(); d.runtime_arg_count = 1; d.fixed_args = over;
  REFUSED(d, FL_BAD_VALUE, "int_out_of_range:2:i32");
  /* Arguments beyond the backend's parameter space are refused: the host backend takes 4 KiB. */
  static fl_kind many[1025];
  for (int i = 0; i < 1025; i++) many[i] = FL_KIND_I64;
  d = null_desc(); d.backend = FL_BACKEND_HOST; d.kernel = (void *)1; d.kinds = many; d.nkinds = 600;
  d.runtime_arg_count = 600;
  REFUSED(d, FL_UNSUPPORTED, "args_too_large:4800:4096");
  d.nkinds = 1025; d.runtime_arg_count = 1025;
  REFUSED(d, FL_BAD_DESCRIPTOR, "too_many_args:1025:1024");
  /* A count far past the limit is refused before anything is allocated: stable, not NOMEM. */
  d.nkinds = (size_t)1 << 27; d.runtime_arg_count = d.nkinds;
  REFUSED(d, FL_BAD_DESCRIPTOR, "too_many_args:134217728:1024");
  d.nkinds = SIZE_MAX / 2; d.runtime_arg_count = d.nkinds;
  REFUSED(d, FL_BAD_DESCRIPTOR, "too_many_args:9223372036854775807:1024");
  /* Names the grid language could refer to: identifiers, not keywords or its functions, unique. */
  static const char *const bad_names[][3] = {{"p", "if", "n"}, {"p", "min", "n"}, {"p", "", "n"},
                                             {"p", "a b", "n"}, {"p", "1x", "n"}, {"p", "n", "n"}};
  static const char *const bad_reasons[] = {"arg_name_invalid:1:if", "arg_name_invalid:1:min",
                                            "arg_name_invalid:1:", "arg_name_invalid:1:a b",
                                            "arg_name_invalid:1:1x", "arg_name_duplicate:2:n"};
  for (size_t i = 0; i < sizeof bad_reasons / sizeof bad_reasons[0]; i++) {
    d = null_desc();
    d.arg_names = bad_names[i];
    REFUSED(d, FL_BAD_DESCRIPTOR, bad_reasons[i]);
  }
  d = null_desc();
  static const char *const good_names[] = {"in_ptr0", "_x", "XBLOCK"};
  d.arg_names = good_names;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  fl_plan_release(p);
  /* The null backend takes 32 KiB: 600 i64 fit there. */
  d = null_desc(); d.kinds = many; d.nkinds = 600; d.runtime_arg_count = 600;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_layout(p)->size, 4800);
  fl_plan_release(p);
  /* Backends that cannot load here say so, with the loader's words. */
  d = null_desc(); d.backend = FL_BACKEND_CUDA; d.target.abi = FL_ABI_CUDA; d.kernel = (void *)1;
  int st = fl_plan_create(&d, &p, &err);
  if (st == FL_BACKEND_UNAVAILABLE) {
    ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:cuda:", 25) == 0);
    ASSERT_TRUE(err.stable);
  } else {
    printf("     (libcuda loaded here: the unavailable path was not exercised)\n");
    if (st == FL_OK) fl_plan_release(p);
  }
  d = null_desc(); d.backend = FL_BACKEND_NPU; d.target.abi = FL_ABI_NPU; d.kernel = (void *)1;
  st = fl_plan_create(&d, &p, &err);
  ASSERT_EQ(st, FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:npu:", 24) == 0);
}

static void fixed_args_and_template(void) {
  fl_error err;
  fl_plan *p;
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_FP16, FL_KIND_I64, FL_KIND_I1};
  fl_value fixed[] = {fl_float(0.5), fl_int(-7), fl_bool(true)};
  fl_plan_desc d = null_desc();
  d.kinds = kinds; d.nkinds = 5; d.runtime_arg_count = 2; d.fixed_args = fixed;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  unsigned char t[64];
  memset(t, 0xEE, sizeof t);
  ASSERT_OK(fl_plan_template(p, t, sizeof t, &err), &err);
  uint16_t h;
  int64_t i64;
  memcpy(&h, t + fl_plan_arg_offset(p, 2), 2);
  ASSERT_EQ(h, 0x3800); /* 0.5 in fp16 */
  memcpy(&i64, t + fl_plan_arg_offset(p, 3), 8);
  ASSERT_EQ(i64, -7);
  ASSERT_EQ(t[fl_plan_arg_offset(p, 4)], 1);
  /* Runtime slots start zeroed. */
  for (size_t b = 0; b < 12; b++) ASSERT_EQ(t[b], 0);
  ASSERT_FAILS(fl_plan_template(p, t, 4, &err), &err, FL_BAD_VALUE, "template_buffer_too_small:4:32");
  ASSERT_FAILS(fl_plan_template(p, NULL, 4096, &err), &err, FL_BAD_VALUE, "template_dst_null");
  uint64_t s;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &s, &err), &err);
  fl_value args[] = {fl_ptr(t), fl_int(3)};
  for (int i = 0; i < 100; i++) ASSERT_OK(fl_launch(p, s, args, 2, NULL, &err), &err);
  ASSERT_EQ(count_of(s), 100);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, s, &err), &err);
  fl_plan_release(p);
}

static void static_grid_refusals(void) {
  fl_plan_desc d = null_desc();
  d.static_grid[0] = -1; REFUSED(d, FL_BAD_GRID, "grid_dim_negative:0");
  d = null_desc(); d.static_grid[1] = (int64_t)INT32_MAX + 1; REFUSED(d, FL_BAD_GRID, "grid_dim_exceeds:1");
  /* Far beyond int32: refused at plan time. */
  d = null_desc(); d.static_grid[2] = 1LL << 40; REFUSED(d, FL_BAD_GRID, "grid_dim_exceeds:2");
}

static void grid_program_plans(void) {
  fl_error err;
  fl_plan *p;
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32, FL_KIND_I32};
  const char *names[] = {"out", "xnumel", "ynumel", "XBLOCK"};
  fl_value fixed[] = {fl_int(128)};
  fl_plan_desc d = null_desc();
  d.kinds = kinds; d.nkinds = 4; d.runtime_arg_count = 3; d.fixed_args = fixed; d.arg_names = names;
  d.grid_mode = FL_GRID_PROGRAM;
  d.grid_exprs[0] = "-((xnumel) // -(XBLOCK))";
  d.grid_exprs[1] = "min(ynumel, 65535)";
  d.grid_exprs[2] = "-((ynumel) // -(65535))";
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_grid_mode(p), FL_GRID_PROGRAM);
  uint32_t g[3];
  for (int64_t x = 0; x < 2000; x += 37) {
    for (int64_t y = 1; y < 200000; y += 9999) {
      fl_value a[] = {fl_ptr(NULL), fl_int(x), fl_int(y)};
      ASSERT_OK(fl_plan_resolve_grid(p, a, 3, NULL, g, &err), &err);
      ASSERT_EQ(g[0], (x + 127) / 128);
      ASSERT_EQ(g[1], y < 65535 ? y : 65535);
      ASSERT_EQ(g[2], (y + 65534) / 65535);
    }
  }
  /* A negative numel gives a negative grid: refused before anything is submitted, not stable. */
  fl_value a[] = {fl_ptr(NULL), fl_int(-1000), fl_int(1)};
  ASSERT_FAILS(fl_plan_resolve_grid(p, a, 3, NULL, g, &err), &err, FL_BAD_GRID, "grid_dim_negative:0");
  ASSERT_TRUE(!err.stable);
  fl_plan_release(p);

  /* Constant after folding the fixed argument: the plan gets a static grid. */
  d.grid_exprs[0] = "-((4096) // -(XBLOCK))";
  d.grid_exprs[1] = "1";
  d.grid_exprs[2] = "1";
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_grid_mode(p), FL_GRID_STATIC);
  fl_value b[] = {fl_ptr(NULL), fl_int(1), fl_int(1)};
  ASSERT_OK(fl_plan_resolve_grid(p, b, 3, NULL, g, &err), &err);
  ASSERT_EQ(g[0], 32);
  fl_plan_release(p);

  /* Refusals, each stable and naming the dimension. */
  d.grid_exprs[0] = "xnumel";
  d.grid_exprs[1] = "out";
  REFUSED(d, FL_BAD_GRID_PROGRAM, "grid_var_not_int:0:ptr:1");
  d.grid_exprs[1] = "nope + 1";
  REFUSED(d, FL_BAD_GRID_PROGRAM, "grid_expr_unknown_name:nope:1");
  d.grid_exprs[1] = NULL;
  REFUSED(d, FL_BAD_GRID_PROGRAM, "grid_expr_null:1");
  d.grid_exprs[1] = "1";
  d.grid_exprs[2] = "XBLOCK // 0";
  REFUSED(d, FL_BAD_GRID_PROGRAM, "grid_expr_const_div_by_zero:2");
  d.grid_exprs[0] = "$1";
  d.grid_exprs[2] = "$9";
  d.arg_names = NULL;
  REFUSED(d, FL_BAD_GRID_PROGRAM, "grid_var_out_of_range:9:2");
  /* Constant after folding and negative: the static grid check refuses it. */
  d.grid_exprs[0] = "1";
  d.grid_exprs[2] = "$3 - 200";
  REFUSED(d, FL_BAD_GRID, "grid_dim_negative:2");
}

/* Grids of the shapes the plan computes without the interpreter (a constant, x, ceil(x / B) as
 * `-(x // -B)` or `cdiv(x, B)`, floor((x + a) / B) as torch_npu's `(x + B - 1) // B`) against the
 * same expressions kept out of those shapes by a `* 1`: the same grid, or the same status and
 * reason, for every value (past a shape's range too, where a step overflows), powers of two or not. */
static void simple_grids_equal_the_interpreter(void) {
  fl_error e1, e2;
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I64, FL_KIND_U64, FL_KIND_I64};
  const char *names[] = {"out", "x", "u", "B"};
  static const char *const shapes[][2] = {
      {"-((x) // -(B))", "-((x * 1) // -(B))"},
      {"cdiv(x, B)", "cdiv(x * 1, B)"},
      {"x", "x * 1"},
      {"-((u) // -(B))", "-((u * 1) // -(B))"},
      {"(x + B - 1) // B", "(x * 1 + B - 1) // B"},
      {"(x + 300 - 7) // B", "(x * 1 + 300 - 7) // B"},
      {"x + 5", "x * 1 + 5"},
      {"(u + B) // B", "(u * 1 + B) // B"},
      {"(x - 1 + B) // B", "(x * 1 - 1 + B) // B"}, /* an offset below zero: not a shape, both interpret */
  };
  static const int64_t blocks[] = {1, 2, 3, 7, 64, 128, 1000, 1024, 4096, 1LL << 40, INT64_MAX};
  static const int64_t xs[] = {INT64_MIN, INT64_MIN + 1, -(1LL << 40), -129, -128, -127, -1, 0, 1, 2, 127, 128,
                               129, 1000, 1023, 1024, 1025, INT32_MAX, (int64_t)INT32_MAX + 1, (int64_t)UINT32_MAX,
                               1LL << 40, INT64_MAX - 1, INT64_MAX};
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
      fl_value fixed[] = {fl_int(blocks[b])};
      fl_plan *p[2];
      for (int k = 0; k < 2; k++) {
        fl_plan_desc d = null_desc();
        d.kinds = kinds; d.nkinds = 4; d.runtime_arg_count = 3; d.fixed_args = fixed; d.arg_names = names;
        d.grid_mode = FL_GRID_PROGRAM;
        d.grid_exprs[0] = shapes[s][k];
        d.grid_exprs[1] = k ? "2 + 0 * x" : "2"; /* a constant dimension, and its interpreted twin */
        d.grid_exprs[2] = "1";
        ASSERT_OK(fl_plan_create(&d, &p[k], &e1), &e1);
        ASSERT_EQ(fl_plan_grid_mode(p[k]), FL_GRID_PROGRAM);
      }
      for (size_t i = 0; i < sizeof xs / sizeof xs[0] + 200; i++) {
        int64_t x;
        if (i < sizeof xs / sizeof xs[0]) {
          x = xs[i];
        } else {
          rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
          x = (int64_t)(rng >> (rng & 63)) * ((rng & 64) ? -1 : 1);
        }
        /* u: the same value as an unsigned argument, or one past INT64_MAX (grid_overflow). */
        fl_value a[] = {fl_ptr(NULL), fl_int(x), fl_uint(x >= 0 ? (uint64_t)x : (uint64_t)INT64_MAX + 1 + (uint64_t)(i & 1))};
        uint32_t g1[3] = {0, 0, 0}, g2[3] = {0, 0, 0};
        memset(&e1, 0, sizeof e1);
        memset(&e2, 0, sizeof e2);
        fl_status s1 = fl_plan_resolve_grid(p[0], a, 3, NULL, g1, &e1);
        fl_status s2 = fl_plan_resolve_grid(p[1], a, 3, NULL, g2, &e2);
        if (s1 != s2 || strcmp(e1.reason, e2.reason) != 0 || memcmp(g1, g2, sizeof g1) != 0)
          FL_FAIL_AT("%s, B=%" PRId64 ", x=%" PRId64 ": %s %s (%u %u %u) against %s %s (%u %u %u)", shapes[s][0],
                     blocks[b], x, fl_status_name(s1), e1.reason, g1[0], g1[1], g1[2], fl_status_name(s2), e2.reason,
                     g2[0], g2[1], g2[2]);
      }
      fl_plan_release(p[0]);
      fl_plan_release(p[1]);
    }
  }
}

static void launch_refusals_submit_nothing(void) {
  fl_error err;
  fl_plan *p;
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_U8};
  const char *names[] = {"p", "n", "c"};
  fl_plan_desc d = null_desc();
  d.kinds = kinds; d.arg_names = names; d.grid_mode = FL_GRID_PROGRAM;
  d.grid_exprs[0] = "1024 // n"; d.grid_exprs[1] = "1"; d.grid_exprs[2] = "1";
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  uint64_t s;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &s, &err), &err);
  fl_value ok[] = {fl_ptr(&d), fl_int(8), fl_int(255)};
  ASSERT_OK(fl_launch(p, s, ok, 3, NULL, &err), &err);
  ASSERT_EQ(count_of(s), 1);
  /* Each of these fails before the submit boundary: not submitted, nothing counted. */
  fl_value bad_u8[] = {fl_ptr(&d), fl_int(8), fl_int(256)};
  fl_value neg_u8[] = {fl_ptr(&d), fl_int(8), fl_int(-1)};
  fl_value bad_ptr[] = {fl_float(1.0), fl_int(8), fl_int(1)};
  fl_value zero[] = {fl_ptr(&d), fl_int(0), fl_int(1)};
  fl_value big[] = {fl_ptr(&d), fl_int(-1), fl_int(1)};
  int64_t grid[3] = {1, 1, 1};
  struct {
    const fl_value *args;
    size_t n;
    const int64_t *grid;
    uint64_t stream;
    int status;
    const char *reason;
    bool stable;
  } cases[] = {
      {ok, 2, NULL, 0, FL_BAD_ARG_COUNT, "args_size_mismatch:2:3", true},
      {NULL, 3, NULL, 0, FL_BAD_VALUE, "args_null", false},
      {bad_u8, 3, NULL, 0, FL_BAD_VALUE, "int_out_of_range:2:u8", false},
      {neg_u8, 3, NULL, 0, FL_BAD_VALUE, "uint_negative:2:u8", false},
      {bad_ptr, 3, NULL, 0, FL_BAD_VALUE, "ptr_expected:0:float", false},
      {zero, 3, NULL, 0, FL_GRID_EVAL, "grid_div_by_zero:0", false},
      {big, 3, NULL, 0, FL_BAD_GRID, "grid_dim_negative:0", false},
      {ok, 3, grid, 0, FL_BAD_GRID, "grid_unexpected", true},
      {ok, 3, NULL, 0xdead0001, FL_BAD_STREAM, "stream_invalid:0xdead0001", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&err, 0, sizeof err);
    err.backend_submitted = true;
    int st = fl_launch(p, cases[i].stream ? cases[i].stream : s, cases[i].args, cases[i].n, cases[i].grid, &err);
    if (st != cases[i].status || strcmp(err.reason, cases[i].reason) != 0 || err.backend_submitted ||
        err.stable != cases[i].stable) {
      fprintf(stderr, "case %zu: %s \"%s\" stable %d submitted %d\n", i, fl_status_name(st), err.reason, err.stable,
              err.backend_submitted);
      fl_test_failures++;
    }
  }
  ASSERT_EQ(count_of(s), 1);
  ASSERT_FAILS(fl_launch(NULL, s, ok, 3, NULL, &err), &err, FL_BAD_DESCRIPTOR, "plan_null");
  /* A zero grid launches nothing and is not an error, as with Triton's launchers. */
  fl_value wide[] = {fl_ptr(&d), fl_int(2048), fl_int(1)};
  ASSERT_OK(fl_launch(p, s, wide, 3, NULL, &err), &err);
  ASSERT_EQ(count_of(s), 1);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, s, &err), &err);
  fl_value ok2[] = {fl_ptr(&d), fl_int(8), fl_int(1)};
  char want[64];
  snprintf(want, sizeof want, "stream_invalid:0x%llx", (unsigned long long)s);
  ASSERT_FAILS(fl_launch(p, s, ok2, 3, NULL, &err), &err, FL_BAD_STREAM, want);
  fl_plan_release(p);
}

static void caller_grid(void) {
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = null_desc();
  d.grid_mode = FL_GRID_CALLER;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  uint64_t s;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &s, &err), &err);
  fl_value a[] = {fl_ptr(NULL), fl_int(1), fl_int(2)};
  int64_t g[3] = {4, 2, 1}, neg[3] = {4, -2, 1}, huge[3] = {(int64_t)INT32_MAX + 1, 1, 1};
  ASSERT_FAILS(fl_launch(p, s, a, 3, NULL, &err), &err, FL_BAD_GRID, "grid_missing");
  ASSERT_FAILS(fl_launch(p, s, a, 3, neg, &err), &err, FL_BAD_GRID, "grid_dim_negative:1");
  ASSERT_FAILS(fl_launch(p, s, a, 3, huge, &err), &err, FL_BAD_GRID, "grid_dim_exceeds:0");
  ASSERT_OK(fl_launch(p, s, a, 3, g, &err), &err);
  ASSERT_EQ(count_of(s), 1);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, s, &err), &err);
  fl_plan_release(p);
}

static void npu_template(void) {
  /* The null backend takes the npu ABI: the static grid and the FFTS address are in the template. */
  fl_error err;
  fl_plan *p;
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32};
  fl_plan_desc d = null_desc();
  d.target.abi = FL_ABI_NPU;
  d.target.npu.ffts = true;
  d.target.npu.ffts_addr = 0xabcdef00;
  d.kinds = kinds;
  d.static_grid[0] = 40; d.static_grid[1] = 2; d.static_grid[2] = 1;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  const fl_layout *l = fl_plan_layout(p);
  ASSERT_EQ(l->size, 56); /* the research note's first worked example */
  unsigned char t[56];
  ASSERT_OK(fl_plan_template(p, t, sizeof t, &err), &err);
  uint64_t ffts;
  int32_t gx, gy, gz;
  memcpy(&ffts, t + l->ffts, 8);
  memcpy(&gx, t + l->grid[0], 4);
  memcpy(&gy, t + l->grid[1], 4);
  memcpy(&gz, t + l->grid[2], 4);
  ASSERT_EQ_U(ffts, 0xabcdef00);
  ASSERT_EQ(gx, 40);
  ASSERT_EQ(gy, 2);
  ASSERT_EQ(gz, 1);
  fl_plan_release(p);
}

/* Fails the Nth allocation; counts what is live so leaks show even without LeakSanitizer. */
static int alloc_budget = -1;
static int alloc_live = 0;
static void *failing_malloc(size_t n) {
  if (alloc_budget == 0) return NULL;
  if (alloc_budget > 0) alloc_budget--;
  alloc_live++;
  return malloc(n);
}
static void counting_free(void *p) {
  alloc_live--;
  free(p);
}

static void allocation_failures(void) {
  fl_kind kinds[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32};
  const char *names[] = {"p", "n", "B"};
  fl_value fixed[] = {fl_int(64)};
  fl_plan_desc d = null_desc();
  d.kinds = kinds; d.runtime_arg_count = 2; d.fixed_args = fixed; d.arg_names = names;
  d.grid_mode = FL_GRID_PROGRAM;
  d.grid_exprs[0] = "cdiv(n, B)"; d.grid_exprs[1] = "max(n // 4096, 1)"; d.grid_exprs[2] = "1";
  fl_set_allocator(failing_malloc, counting_free);
  int points = 0;
  for (int budget = 0; budget < 1000; budget++) {
    fl_error err;
    fl_plan *p = NULL;
    alloc_budget = budget;
    alloc_live = 0;
    int st = fl_plan_create(&d, &p, &err);
    if (st == FL_OK) {
      fl_plan_release(p);
      ASSERT_EQ(alloc_live, 0);
      break;
    }
    points++;
    ASSERT_EQ(st, FL_NOMEM);
    ASSERT_TRUE(strncmp(err.reason, "nomem", 5) == 0);
    ASSERT_EQ(alloc_live, 0);
  }
  fl_set_allocator(NULL, NULL);
  ASSERT_TRUE(points >= 5); /* plan, name, kinds, offsets, template, three programs */
  printf("     %d allocation failure points in plan creation, each refused cleanly\n", points);
}

static void introspection(void) {
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = null_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_nargs(p), 3);
  ASSERT_EQ(fl_plan_runtime_arg_count(p), 3);
  ASSERT_EQ(fl_plan_arg_offset(p, 1), 8);
  ASSERT_EQ(fl_plan_arg_offset(p, 2), 12);
  ASSERT_EQ_U(fl_plan_arg_offset(p, 3), SIZE_MAX);
  ASSERT_EQ(fl_plan_arg_kind(p, 0), FL_KIND_PTR);
  ASSERT_EQ(fl_plan_arg_kind(p, 9), FL_KIND_COUNT);
  ASSERT_STREQ(fl_plan_name(p), "k");
  ASSERT_EQ(fl_plan_backend(p), FL_BACKEND_NULL);
  ASSERT_EQ(fl_plan_layout(p)->size, 16);
  fl_plan_retain(p);
  fl_plan_release(p);
  ASSERT_EQ(fl_plan_nargs(p), 3); /* still alive after one of two releases */
  fl_plan_release(p);
}

static void targets_by_name(void) {
  fl_error err;
  fl_target t;
  memset(&t, 0, sizeof t);
  t.abi = FL_ABI_CUDA;
  ASSERT_OK(fl_target_set(&t, "num_warps", 8, &err), &err);
  ASSERT_OK(fl_target_set(&t, "pdl", 1, &err), &err);
  ASSERT_EQ(t.cuda.num_warps, 8);
  ASSERT_TRUE(t.cuda.pdl);
  ASSERT_FAILS(fl_target_set(&t, "num_warps", 33, &err), &err, FL_BAD_DESCRIPTOR, "option_out_of_range:num_warps:33");
  ASSERT_FAILS(fl_target_set(&t, "num_warps", -1, &err), &err, FL_BAD_DESCRIPTOR, "option_out_of_range:num_warps:-1");
  ASSERT_FAILS(fl_target_set(&t, "ffts", 1, &err), &err, FL_BAD_DESCRIPTOR, "option_unknown:cuda:ffts");
  ASSERT_FAILS(fl_target_set(NULL, "ffts", 1, &err), &err, FL_BAD_DESCRIPTOR, "target_null");
  t.abi = FL_ABI_NPU;
  /* The cuda options set above are now another ABI's: a layout refuses them. */
  fl_layout l;
  ASSERT_FAILS(fl_layout_compute(&t, k3, 3, &l, NULL, &err), &err, FL_BAD_DESCRIPTOR,
               "option_not_for_abi:num_warps:npu");
  memset(&t.cuda, 0, sizeof t.cuda);
  ASSERT_OK(fl_target_set(&t, "ffts_addr", -2, &err), &err); /* an address uses all 64 bits */
  ASSERT_TRUE(t.npu.ffts_addr == UINT64_MAX - 1);
  ASSERT_OK(fl_layout_compute(&t, k3, 3, &l, NULL, &err), &err);
  /* Each ABI lists its own options; host has none. */
  ASSERT_TRUE(fl_target_option_name(FL_ABI_HOST, 0) == NULL);
  ASSERT_STREQ(fl_target_option_name(FL_ABI_CUDA, 0), "hidden_ptrs");
  ASSERT_STREQ(fl_target_option_name(FL_ABI_NPU, 7), "clamp_blocks");
  ASSERT_STREQ(fl_target_option_name(FL_ABI_NPU, 8), "rt_stub");
  ASSERT_TRUE(fl_target_option_name(FL_ABI_NPU, 9) == NULL);
  ASSERT_STREQ(fl_target_option_name(FL_ABI_HIP, 2), "warp_size");
  ASSERT_TRUE(fl_target_option_name(FL_ABI_HIP, 6) == NULL);
  fl_abi a;
  ASSERT_OK(fl_abi_parse("npu", &a, &err), &err);
  ASSERT_EQ(a, FL_ABI_NPU);
  ASSERT_OK(fl_abi_parse("hip", &a, &err), &err);
  ASSERT_EQ(a, FL_ABI_HIP);
  ASSERT_FAILS(fl_abi_parse("gpu", &a, &err), &err, FL_BAD_DESCRIPTOR, "abi_unknown:gpu");
}

static void backend_tables(void) {
  fl_error err;
  fl_backend_info info;
  static const struct {
    fl_backend_id id;
    const char *name;
    fl_abi abi;
    fl_kernel_kind kernel;
    bool own_streams;
  } want[] = {{FL_BACKEND_HOST, "host", FL_ABI_HOST, FL_KERNEL_HOST_FN, true},
              {FL_BACKEND_NULL, "null", FL_ABI_HOST, FL_KERNEL_NONE, true},
              {FL_BACKEND_CUDA, "cuda", FL_ABI_CUDA, FL_KERNEL_HANDLE, false},
              {FL_BACKEND_NPU, "npu", FL_ABI_NPU, FL_KERNEL_HANDLE, false},
              {FL_BACKEND_HIP, "hip", FL_ABI_HIP, FL_KERNEL_HANDLE, false}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    ASSERT_OK(fl_backend_info_get(want[i].id, &info, &err), &err);
    ASSERT_STREQ(info.name, want[i].name);
    ASSERT_STREQ(fl_backend_name(want[i].id), want[i].name);
    ASSERT_EQ(info.default_abi, want[i].abi);
    ASSERT_EQ(info.kernel, want[i].kernel);
    ASSERT_TRUE(info.own_streams == want[i].own_streams);
    ASSERT_TRUE(info.abi_mask & (1u << want[i].abi));
  }
  ASSERT_FAILS(fl_backend_info_get(FL_BACKEND_COUNT, &info, &err), &err, FL_BAD_DESCRIPTOR, "backend_unknown:5");
  /* A backend without its own launch loop says so. */
  fl_plan_desc d = null_desc();
  fl_plan *p = NULL;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  unsigned char buf[64] = {0};
  uint32_t g[3] = {1, 1, 1};
  uint64_t ns;
  ASSERT_FAILS(fl_bench_launch_loop(p, 0, buf, g, 1, &ns, &err), &err, FL_UNSUPPORTED, "bench_loop_unsupported:null");
  fl_plan_release(p);
}

/* Faults fire only on the armed plan; every point reports what its stage would; disarming (or
 * arming another plan) restores the plan's own submit. Only a plan made while its backend was
 * wrapped can be armed. */
static void fault_injection_targets_one_plan(void) {
  fl_error err;
  fl_plan_desc d = null_desc();
  fl_plan *armed = NULL, *other = NULL, *plain = NULL;
  ASSERT_OK(fl_plan_create(&d, &plain, &err), &err);
  ASSERT_FAILS(fl_fault_wrap(FL_BACKEND_COUNT, true, &err), &err, FL_BAD_VALUE, "backend_unknown:5");
  ASSERT_OK(fl_fault_wrap(FL_BACKEND_NULL, true, &err), &err);
  ASSERT_OK(fl_plan_create(&d, &armed, &err), &err);
  ASSERT_OK(fl_plan_create(&d, &other, &err), &err);
  ASSERT_OK(fl_fault_wrap(FL_BACKEND_NULL, false, &err), &err);
  ASSERT_FAILS(fl_fault_inject(FL_FAULT_PACK, 1, 7, plain, &err), &err, FL_BAD_VALUE, "fault_plan_not_wrapped:null");
  fl_plan_release(plain);
  uint64_t s;
  ASSERT_OK(fl_stream_create(FL_BACKEND_NULL, &s, &err), &err);
  fl_value args[3] = {fl_ptr((void *)0x1000), fl_int(1), fl_int(2)};
  static const struct {
    fl_fault_point point;
    fl_status status;
    bool submitted;
    uint64_t counted; /* launches the backend saw */
    const char *reason;
  } cases[] = {{FL_FAULT_PACK, FL_BAD_VALUE, false, 0, "fault_injected:pack"},
               {FL_FAULT_GRID, FL_BAD_GRID, false, 0, "fault_injected:grid"},
               {FL_FAULT_SUBMIT_REFUSED, FL_BAD_STREAM, false, 0, "fault_injected:submit_refused"},
               {FL_FAULT_SUBMIT_AFTER, FL_BACKEND_ERROR, true, 1, "fault_injected:submit_after"},
               {FL_FAULT_SUBMIT_LOST, FL_BACKEND_ERROR, true, 0, "fault_injected:submit_lost"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ASSERT_OK(fl_fault_inject(cases[i].point, 1, 7, armed, &err), &err);
    uint64_t before = count_of(s);
    ASSERT_FAILS(fl_launch(armed, s, args, 3, NULL, &err), &err, cases[i].status, cases[i].reason);
    ASSERT_TRUE(err.backend_submitted == cases[i].submitted);
    ASSERT_EQ_U(count_of(s) - before, cases[i].counted);
    ASSERT_OK(fl_launch(other, s, args, 3, NULL, &err), &err); /* not the armed plan */
    ASSERT_EQ_U(count_of(s) - before, cases[i].counted + 1);
  }
  ASSERT_EQ_U(fl_fault_fired(), 1);
  /* The armed plan is held: released by its owner, it stays alive until disarmed. */
  fl_plan_release(armed);
  ASSERT_FAILS(fl_launch(armed, s, args, 3, NULL, &err), &err, FL_BACKEND_ERROR, "fault_injected:submit_lost");
  ASSERT_OK(fl_fault_inject(FL_FAULT_NONE, 0, 0, NULL, &err), &err);
  ASSERT_OK(fl_launch(other, s, args, 3, NULL, &err), &err);
  ASSERT_FAILS(fl_fault_inject(FL_FAULT_COUNT, 1, 0, other, &err), &err, FL_BAD_VALUE, "fault_point_unknown:6");
  fl_plan_release(other);
  ASSERT_OK(fl_stream_destroy(FL_BACKEND_NULL, s, &err), &err);
}
