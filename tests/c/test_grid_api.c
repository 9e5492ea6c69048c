/* test_grid_api.c: grid programs' substitution and introspection, and every allocation failure. */
#include "fastlaunch.h"
#include "fl_internal.h"

#define FL_TESTS(X)                                                                                \
  X(substitute_and_introspection)                                                                  \
  X(allocation_failures)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "grid_asserts.h"

static void substitute_and_introspection(void) {
  const char *names[] = {"xnumel", "ynumel", "XBLOCK", "YBLOCK"};
  fl_error err;
  fl_grid_program *p = NULL;
  int64_t v[4] = {1000, 0, 0, 0}, out = 0;

  ASSERT_OK(fl_grid_program_compile("-((xnumel) // -(XBLOCK)) + $5 * 0", names, 4, &p, &err), &err);
  ASSERT_EQ(fl_grid_program_nvars(p), 6);
  ASSERT_TRUE(!fl_grid_program_is_constant(p));
  ASSERT_TRUE(fl__grid_program_uses_var(p, 0));
  ASSERT_TRUE(!fl__grid_program_uses_var(p, 1));
  ASSERT_TRUE(fl__grid_program_uses_var(p, 2));
  ASSERT_TRUE(fl__grid_program_uses_var(p, 5));
  ASSERT_TRUE(!fl__grid_program_uses_var(p, 6));
  ASSERT_TRUE(!fl__grid_program_uses_var(p, SIZE_MAX));
  /* Substituting a variable the program does not read changes nothing. */
  ASSERT_OK(fl__grid_program_substitute(p, 1, 0, &err), &err);
  ASSERT_EQ(fl_grid_program_nvars(p), 6);
  ASSERT_OK(fl__grid_program_substitute(p, 5, 123, &err), &err);
  ASSERT_EQ(fl_grid_program_nvars(p), 3);
  ASSERT_TRUE(!fl__grid_program_uses_var(p, 5));
  ASSERT_OK(fl__grid_program_substitute(p, 2, 128, &err), &err);
  ASSERT_EQ(fl_grid_program_nvars(p), 1);
  ASSERT_TRUE(!fl__grid_program_uses_var(p, 2));
  ASSERT_TRUE(!fl_grid_program_is_constant(p));
  ASSERT_OK(fl_grid_program_eval(p, v, 1, &out, &err), &err);
  ASSERT_EQ(out, 8);
  ASSERT_OK(fl__grid_program_substitute(p, 0, 1025, &err), &err);
  ASSERT_TRUE(fl_grid_program_is_constant(p));
  ASSERT_EQ(fl_grid_program_nvars(p), 0);
  ASSERT_OK(fl_grid_program_eval(p, NULL, 0, &out, &err), &err);
  ASSERT_EQ(out, 9);
  fl_grid_program_free(p);

  /* A substitution that leaves no variable and a program that always fails is refused and leaves
   * the program as it was: it still evaluates as before (expected values by hand for xnumel 7,
   * ynumel 3). One that leaves a variable is accepted, and the program fails when evaluated. */
  static const struct {
    const char *expr;
    size_t var;
    int64_t value;
    const char *reason;
    int64_t before;
  } bad[] = {
      {"100 // ynumel", 1, 0, "grid_expr_const_div_by_zero", 33},
      {"cdiv(5, ynumel) * 2", 1, 0, "grid_expr_const_div_by_zero", 4},
      {"ynumel * 4 + 1", 1, INT64_MAX, "grid_expr_const_overflow", 13},
      {"-ynumel", 1, INT64_MIN, "grid_expr_const_overflow", -3},
      {"1 << ynumel", 1, -1, "grid_expr_const_negative_shift", 8},
      {"xnumel + 100 // ynumel", 1, 0, "grid_div_by_zero", 0},
      {"cdiv(5, ynumel) * xnumel", 1, 0, "grid_div_by_zero", 0},
      {"xnumel + ynumel * 4", 1, INT64_MAX, "grid_overflow", 0},
      {"-ynumel + xnumel", 1, INT64_MIN, "grid_overflow", 0},
      {"(1 << ynumel) + xnumel", 1, -1, "grid_negative_shift", 0},
      {"xnumel * (ynumel << 62)", 1, 2, "grid_overflow", 0},
      /* A condition that becomes constant chooses a branch that always fails, or fails itself. */
      {"xnumel if ynumel else 1 // 0", 1, 0, "grid_expr_const_div_by_zero", 7},
      {"5 + (1 << -1 if ynumel - 3 else 2)", 1, 4, "grid_expr_const_negative_shift", 7},
      {"xnumel + (1 << -1 if ynumel - 3 else 2)", 1, 4, "grid_negative_shift", 0},
      {"2 if 1 // ynumel else xnumel", 1, 0, "grid_div_by_zero", 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t vars[2] = {7, 3};
    if (strcmp(bad[i].expr, "xnumel * (ynumel << 62)") == 0) vars[0] = -2, vars[1] = 1;
    ASSERT_OK(fl_grid_program_compile(bad[i].expr, names, 4, &p, &err), &err);
    bool refused = strncmp(bad[i].reason, "grid_expr_const_", 16) == 0;
    int st = fl__grid_program_substitute(p, bad[i].var, bad[i].value, &err);
    if (refused ? st != FL_BAD_GRID_PROGRAM || strcmp(err.reason, bad[i].reason) != 0 || !err.stable
                : st != FL_OK) {
      fl_grid_program_free(p);
      FL_FAIL_AT("substitute in %s: %s %s, expected %s", bad[i].expr, fl_status_name(st), st ? err.reason : "",
                 refused ? bad[i].reason : "OK");
    }
    bool uses = fl__grid_program_uses_var(p, bad[i].var);
    st = fl_grid_program_eval(p, vars, 2, &out, &err);
    fl_grid_program_free(p);
    ASSERT_TRUE(uses == refused);
    if (refused) {
      ASSERT_OK(st, &err);
      ASSERT_EQ(out, bad[i].before);
    } else {
      ASSERT_EQ(st, FL_GRID_EVAL);
      ASSERT_STREQ(err.reason, bad[i].reason);
    }
  }
  /* Substitution re-folds conditionals: a constant condition keeps the chosen branch only. */
  static const struct {
    const char *expr;
    size_t var;
    int64_t value;
    size_t nvars_after; /* 0: constant */
    int64_t x, expected;
  } conds[] = {
      {"0 if ynumel == 0 else xnumel // ynumel", 1, 0, 0, 7, 0},
      {"0 if ynumel == 0 else xnumel // ynumel", 1, 3, 1, 7, 2},
      {"1 // 0 if ynumel else xnumel", 1, 0, 1, 7, 7},
      {"YBLOCK if xnumel else ynumel if XBLOCK else 5", 0, 0, 3, 0, 5},
      {"(YBLOCK if ynumel else 4) + (1 if xnumel > 3 else 2)", 1, 0, 1, 7, 5},
      {"(YBLOCK if ynumel else 4) + (1 if xnumel > 3 else 2)", 0, 1, 4, 0, 6},
      /* A branch that always fails after running part of itself is replayed whole, whatever the
       * substitution makes of the part before the failure. */
      {"xnumel if ynumel == 0 else XBLOCK - (YBLOCK + (1 << -1)) * xnumel", 0, 5, 4, 0, 5},
      {"YBLOCK if ynumel == 0 else (1 << xnumel) - (YBLOCK + (1 << -1))", 0, -1, 4, 0, 0},
  };
  for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
    int64_t vars[4] = {conds[i].x, 0, 0, 0};
    ASSERT_OK(fl_grid_program_compile(conds[i].expr, names, 4, &p, &err), &err);
    fl_status st = fl__grid_program_substitute(p, conds[i].var, conds[i].value, &err);
    size_t nv = fl_grid_program_nvars(p);
    bool constant = fl_grid_program_is_constant(p);
    if (st == FL_OK) st = fl_grid_program_eval(p, vars, 4, &out, &err);
    fl_grid_program_free(p);
    ASSERT_OK(st, &err);
    ASSERT_EQ(nv, conds[i].nvars_after);
    ASSERT_TRUE(constant == (conds[i].nvars_after == 0));
    ASSERT_EQ(out, conds[i].expected);
  }
  ASSERT_FAILS(fl__grid_program_substitute(NULL, 0, 1, &err), &err, FL_BAD_GRID_PROGRAM, "grid_program_null");
  ASSERT_TRUE(!fl_grid_program_is_constant(NULL));
  ASSERT_EQ(fl_grid_program_nvars(NULL), 0);
  ASSERT_TRUE(!fl__grid_program_uses_var(NULL, 0));
}

/* An allocator that fails the n-th request, to walk every allocation of compile and substitute. */
static long alloc_left;
static void *failing_malloc(size_t size) { return alloc_left-- > 0 ? malloc(size) : NULL; }

static void allocation_failures(void) {
  bool done = false;
  for (long n = 0; n < 20 && !done; n++) {
    alloc_left = n;
    fl_set_allocator(failing_malloc, free);
    fl_error err;
    fl_grid_program *p = NULL;
    int st = fl_grid_program_compile("min(-(xnumel // -XBLOCK), 65535)", (const char *const[]){"xnumel", "XBLOCK"},
                                     2, &p, &err);
    if (st == FL_OK) st = fl__grid_program_substitute(p, 1, 64, &err);
    if (st == FL_OK) {
      int64_t v[1] = {1000}, out = 0;
      st = fl_grid_program_eval(p, v, 1, &out, &err);
      ASSERT_EQ(out, 16);
      done = true;
    } else {
      ASSERT_EQ(st, FL_NOMEM);
      ASSERT_STREQ(err.reason, "nomem:grid_program");
      ASSERT_TRUE(!err.stable);
    }
    fl_grid_program_free(p);
    fl_set_allocator(NULL, NULL);
  }
  ASSERT_TRUE(done);
}
