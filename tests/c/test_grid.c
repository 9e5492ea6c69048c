/* test_grid.c: grid programs checked against an independent __int128 reference of Python semantics. */
#include "fastlaunch.h"
#include "fl_internal.h"

#include <time.h>

#define FL_TESTS(X)                                                                                \
  X(inductor_forms)                                                                                \
  X(python_edge_values)                                                                            \
  X(compile_refusals)                                                                              \
  X(limits)                                                                                        \
  X(eval_errors)                                                                                   \
  X(substitute_and_introspection)                                                                  \
  X(allocation_failures)                                                                           \
  X(random_against_reference)                                                                      \
  X(eval_timing)
#define FL_TEST_MAIN
#include "fl_test.h"

/* Compiles `expr` over `names` and evaluates it on `vars`; fails the calling test on any error. */
#define ASSERT_EVAL(expr, names, nnames, vars, nvars, expected)                                    \
  do {                                                                                             \
    fl_error e_;                                                                                   \
    fl_grid_program *p_ = NULL;                                                                    \
    int64_t out_ = 0;                                                                              \
    ASSERT_OK(fl_grid_program_compile((expr), (names), (nnames), &p_, &e_), &e_);                 \
    int st_ = fl_grid_program_eval(p_, (vars), (nvars), &out_, &e_);                               \
    fl_grid_program_free(p_);                                                                      \
    if (st_ != FL_OK) FL_FAIL_AT("eval %s failed: %s", (expr), e_.reason);                         \
    if (out_ != (int64_t)(expected))                                                               \
      FL_FAIL_AT("%s = %" PRId64 ", expected %" PRId64, (expr), out_, (int64_t)(expected));        \
  } while (0)

#define ASSERT_COMPILE_FAILS(expr, names, nnames, reason_text)                                     \
  do {                                                                                             \
    fl_error e_;                                                                                   \
    fl_grid_program *p_ = (fl_grid_program *)&e_;                                                  \
    ASSERT_FAILS(fl_grid_program_compile((expr), (names), (nnames), &p_, &e_), &e_,                \
                 FL_BAD_GRID_PROGRAM, (reason_text));                                              \
    ASSERT_TRUE(e_.stable);                                                                        \
    ASSERT_TRUE(p_ == NULL);                                                                       \
  } while (0)

#define ASSERT_EVAL_FAILS(expr, vars, nvars, reason_text)                                          \
  do {                                                                                             \
    fl_error e_;                                                                                   \
    fl_grid_program *p_ = NULL;                                                                    \
    int64_t out_ = 0;                                                                              \
    ASSERT_OK(fl_grid_program_compile((expr), NULL, 0, &p_, &e_), &e_);                            \
    int st_ = fl_grid_program_eval(p_, (vars), (nvars), &out_, &e_);                               \
    fl_grid_program_free(p_);                                                                      \
    if (st_ != FL_GRID_EVAL) FL_FAIL_AT("%s: status %s, expected GRID_EVAL", (expr), fl_status_name(st_)); \
    if (strcmp(e_.reason, (reason_text)) != 0)                                                     \
      FL_FAIL_AT("%s: reason \"%s\", expected \"%s\"", (expr), e_.reason, (reason_text));          \
    ASSERT_TRUE(!e_.stable);                                                                       \
  } while (0)

/* Inductor's launcher grid forms; the expected values were computed with Python's own eval. */
static void inductor_forms(void) {
  const char *xn[] = {"xnumel", "XBLOCK"};
  const char *yn[] = {"ynumel", "YBLOCK"};
  int64_t v[2];
  const char *ceil = "-((xnumel) // -(XBLOCK))";
  v[0] = 1000, v[1] = 128;
  ASSERT_EVAL(ceil, xn, 2, v, 2, 8);
  v[0] = 1024;
  ASSERT_EVAL(ceil, xn, 2, v, 2, 8);
  v[0] = 1025;
  ASSERT_EVAL(ceil, xn, 2, v, 2, 9);
  v[0] = 0;
  ASSERT_EVAL(ceil, xn, 2, v, 2, 0);
  v[0] = ((int64_t)1 << 40) + 3, v[1] = 1024;
  ASSERT_EVAL(ceil, xn, 2, v, 2, 1073741825);

  const char *clamp = "min(-((ynumel) // -(YBLOCK)), 65535)";
  v[0] = 10000000, v[1] = 32;
  ASSERT_EVAL(clamp, yn, 2, v, 2, 65535);
  v[0] = 100;
  ASSERT_EVAL(clamp, yn, 2, v, 2, 4);

  const char *split = "-((-((ynumel) // -(YBLOCK))) // -(65535))";
  v[0] = 10000000, v[1] = 32;
  ASSERT_EVAL(split, yn, 2, v, 2, 5);
  v[0] = 100;
  ASSERT_EVAL(split, yn, 2, v, 2, 1);

  /* The y/z split for grids past 65535 blocks in y, as fastlaunch receives it with Inductor's
   * prefix assignments inlined. y divides by z, which is 0 when ynumel is; only the chosen branch of
   * the conditional runs. Expected values from Python's eval. */
  const char *const ys[] = {"ynumel"};
  const char *zsplit = "(-((-((ynumel) // -(32))) // -(65535)))";
  const char *ysplit = "(0 if (-((-((ynumel) // -(32))) // -(65535))) == 0 else -(((-((ynumel) // -(32)))) // "
                       "-((-((-((ynumel) // -(32))) // -(65535))))))";
  static const int64_t split_cases[][3] = {
      {0, 0, 0}, {1, 1, 1}, {32, 1, 1}, {65535 * 32, 65535, 1}, {65535 * 32 + 1, 32768, 2}, {1000000000, 65514, 477},
  };
  for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; i++) {
    v[0] = split_cases[i][0];
    ASSERT_EVAL(ysplit, ys, 1, v, 1, split_cases[i][1]);
    ASSERT_EVAL(zsplit, ys, 1, v, 1, split_cases[i][2]);
    /* Folded to a constant when ynumel is fixed. */
    for (int form = 0; form < 2; form++) {
      fl_error err;
      fl_grid_program *p = NULL;
      int64_t out = -1;
      ASSERT_OK(fl_grid_program_compile(form ? zsplit : ysplit, ys, 1, &p, &err), &err);
      fl_status st = fl__grid_program_substitute(p, 0, v[0], &err);
      bool constant = fl_grid_program_is_constant(p);
      if (st == FL_OK) st = fl_grid_program_eval(p, NULL, 0, &out, &err);
      fl_grid_program_free(p);
      ASSERT_OK(st, &err);
      ASSERT_TRUE(constant);
      ASSERT_EQ(out, split_cases[i][form ? 2 : 1]);
    }
  }

  ASSERT_EVAL("1", xn, 2, NULL, 0, 1);
  v[0] = 77;
  ASSERT_EVAL("xnumel", xn, 2, v, 2, 77);
  ASSERT_EVAL("$1", NULL, 0, v, 2, 32);
  ASSERT_EVAL("cdiv(xnumel, XBLOCK) + ceildiv($0, 7)", xn, 2, v, 2, 3 + 11);
}

/* Python's floor division, modulo and shifts at the awkward signs and limits, through variables
 * (evaluated at run time) and through literals (folded at compile time). Values from Python. */
static void python_edge_values(void) {
  static const struct {
    const char *expr;
    int64_t a, b, expected;
  } cases[] = {
      {"$0 // $1", -7, 2, -4},
      {"$0 // $1", 7, -2, -4},
      {"$0 % $1", -7, 2, 1},
      {"$0 % $1", 7, -2, -1},
      {"$0 % $1", -7, -2, -1},
      {"$0 % $1", INT64_MIN, -1, 0},
      {"$0 >> $1", -1, 100, -1},
      {"$0 >> $1", -5, 1, -3},
      {"$0 >> $1", INT64_MAX, 62, 1},
      {"$0 << $1", -1, 63, INT64_MIN},
      {"$0 << $1", 1, 62, 4611686018427387904},
      {"$0 << $1", 0, 1000, 0},
      {"$0 << $1", 3, 61, 6917529027641081856},
      {"-($0 // -$1)", 7, 2, 4},
      {"-($0 // -$1)", -7, 2, -3},
      {"-($0 // -$1)", 7, -2, -3},
      {"-($0 // -$1)", INT64_MAX, INT64_MAX, 1},
      {"-($0 // -$1)", INT64_MIN, INT64_MAX, -1},
      {"cdiv($0, $1)", INT64_MIN, INT64_MIN, 1},
      {"cdiv($0, $1)", 5, INT64_MIN, 0},
      {"$0 - $1 * 2", 5, 3, -1},
      {"-$0 * $1", 3, 4, -12},
      {"$0 - $1 - 1", 10, 3, 6},
      {"$0 << 2 + $1", 1, 1, 8},
      {"$0 + 1 << $1", 1, 2, 8},
      {"$0 // 2 * $1", 7, 2, 6},
      {"$0 % 5 % $1", 17, 3, 2},
      {"min($0, $1, 3)", 5, 4, 3},
      {"max($0, -$1)", -5, 4, -4},
      {"$0 >> 2 >> $1", 64, 1, 8},
      {"$0 - -$1", 1, -1, 0},
      /* Comparisons give True or False, which are 1 and 0 in arithmetic. */
      {"$0 == $1", 3, 3, 1},
      {"$0 == $1", 3, -3, 0},
      {"$0 != $1", INT64_MIN, INT64_MAX, 1},
      {"$0 < $1", INT64_MIN, INT64_MAX, 1},
      {"$0 < $1", -1, -1, 0},
      {"$0 <= $1", -1, -1, 1},
      {"$0 > $1", 0, -1, 1},
      {"$0 >= $1", -2, -1, 0},
      {"$0 << 2 < $1", 1, 5, 1},
      {"$0 + 1 == $1 * 2", 3, 2, 1},
      {"($0 < $1) + 1", 1, 2, 2},
      {"-($0 >= $1)", 3, 3, -1},
      {"$0 * ($1 != 0)", 7, 9, 7},
      {"min($0 <= $1, 5)", 7, 9, 1},
      /* Conditionals: any nonzero condition is true, and only the chosen branch is evaluated. */
      {"$0 if $1 else 7", 5, 0, 7},
      {"$0 if $1 else 7", 5, -3, 5},
      {"$0 if $1 < 0 else -$0", -5, -1, -5},
      {"0 if $1 == 0 else $0 // $1", 5, 0, 0},
      {"0 if $1 == 0 else $0 // $1", 5, 2, 2},
      {"$0 // $1 if $1 else -1", 7, 0, -1},
      {"-($0 // -$1) if $1 != 0 else $0 << 70", 0, 0, 0},
      {"1 if $0 else 2 if $1 else 3", 0, 0, 3},
      {"1 if $0 else 2 if $1 else 3", 0, 1, 2},
      {"1 if $0 else 2 if $1 else 3", 1, 0, 1},
      {"(1 if $0 else 2) if $1 else 3", 0, 1, 2},
      {"$0 + 2 if $1 else 3", 1, 1, 3},
      {"$0 + (2 if $1 else 3)", 1, 0, 4},
      {"min($0 if $1 else 9, 4) * (5 if $1 > 3 else 6)", 2, 4, 10},
      {"$0 if $0 >= $1 else $1", 2, 4, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t v[2] = {cases[i].a, cases[i].b};
    ASSERT_EVAL(cases[i].expr, NULL, 0, v, 2, cases[i].expected);
    /* The same expression with the values written in: INT64_MIN has no literal, so it is spelled
     * as a difference. */
    char text[256], lit[2][64];
    for (int k = 0; k < 2; k++) {
      if (v[k] == INT64_MIN) snprintf(lit[k], sizeof lit[k], "(-9223372036854775807 - 1)");
      else snprintf(lit[k], sizeof lit[k], "(%" PRId64 ")", v[k]);
    }
    size_t n = 0;
    for (const char *s = cases[i].expr; *s; s++) {
      if (s[0] == '$' && (s[1] == '0' || s[1] == '1')) {
        n += (size_t)snprintf(text + n, sizeof text - n, "%s", lit[s[1] - '0']);
        s++;
      } else {
        text[n++] = *s;
      }
    }
    text[n] = '\0';
    fl_error err;
    fl_grid_program *p = NULL;
    ASSERT_OK(fl_grid_program_compile(text, NULL, 0, &p, &err), &err);
    bool constant = fl_grid_program_is_constant(p);
    int64_t out = 0;
    int st = fl_grid_program_eval(p, NULL, 0, &out, &err);
    fl_grid_program_free(p);
    if (!constant) FL_FAIL_AT("%s was not folded", text);
    if (st != FL_OK || out != cases[i].expected)
      FL_FAIL_AT("%s = %" PRId64 " (%s), expected %" PRId64, text, out, err.reason, cases[i].expected);
  }
}

static void compile_refusals(void) {
  const char *names[] = {"xnumel", NULL, "XBLOCK"};
  ASSERT_COMPILE_FAILS(NULL, names, 3, "grid_expr_empty");
  ASSERT_COMPILE_FAILS("", names, 3, "grid_expr_empty");
  ASSERT_COMPILE_FAILS(" \t\n ", names, 3, "grid_expr_empty");
  ASSERT_COMPILE_FAILS("(1+2", names, 3, "grid_expr_syntax:4:expected ')'");
  ASSERT_COMPILE_FAILS("(xnumel + 2 3", names, 3, "grid_expr_syntax:12:expected ')'");
  ASSERT_COMPILE_FAILS("1 +", names, 3, "grid_expr_syntax:3:expected operand");
  ASSERT_COMPILE_FAILS("* 2", names, 3, "grid_expr_syntax:0:expected operand");
  ASSERT_COMPILE_FAILS("1 ** 2", names, 3, "grid_expr_syntax:3:expected operand");
  ASSERT_COMPILE_FAILS("()", names, 3, "grid_expr_syntax:1:expected operand");
  ASSERT_COMPILE_FAILS("1 2", names, 3, "grid_expr_syntax:2:unexpected input");
  ASSERT_COMPILE_FAILS("1)", names, 3, "grid_expr_syntax:1:unexpected input");
  ASSERT_COMPILE_FAILS("2xnumel", names, 3, "grid_expr_syntax:1:unexpected input");
  ASSERT_COMPILE_FAILS("xnumel / 2", names, 3, "grid_expr_syntax:7:true division '/' is not supported");
  ASSERT_COMPILE_FAILS("(1 / 2)", names, 3, "grid_expr_syntax:3:true division '/' is not supported");
  ASSERT_COMPILE_FAILS("1 # 2", names, 3, "grid_expr_syntax:2:unexpected character");
  ASSERT_COMPILE_FAILS("1.5", names, 3, "grid_expr_syntax:1:unexpected character");
  ASSERT_COMPILE_FAILS("xnumel = 2", names, 3, "grid_expr_syntax:7:unexpected character");
  ASSERT_COMPILE_FAILS("xnumel ! 2", names, 3, "grid_expr_syntax:7:unexpected character");
  ASSERT_COMPILE_FAILS("1 <> 2", names, 3, "grid_expr_syntax:3:expected operand");
  ASSERT_COMPILE_FAILS("1 <== 2", names, 3, "grid_expr_syntax:4:unexpected character");
  ASSERT_COMPILE_FAILS("1 < < 2", names, 3, "grid_expr_syntax:4:expected operand");
  /* Python reads a < b < c as a < b and b < c; that is refused rather than misread. */
  ASSERT_COMPILE_FAILS("1 < 2 < 3", names, 3, "grid_expr_syntax:6:chained comparison");
  ASSERT_COMPILE_FAILS("xnumel == 1 != 2", names, 3, "grid_expr_syntax:12:chained comparison");
  ASSERT_COMPILE_FAILS("0 if 1 < 2 < 3 else 1", names, 3, "grid_expr_syntax:11:chained comparison");
  ASSERT_COMPILE_FAILS("1 if 2", names, 3, "grid_expr_syntax:6:expected 'else'");
  ASSERT_COMPILE_FAILS("1 if 2 3", names, 3, "grid_expr_syntax:7:expected 'else'");
  ASSERT_COMPILE_FAILS("1 if 1 if 1 else 2 else 3", names, 3, "grid_expr_syntax:7:expected 'else'");
  ASSERT_COMPILE_FAILS("if 1 else 2", names, 3, "grid_expr_syntax:0:expected operand");
  ASSERT_COMPILE_FAILS("1 if else 2", names, 3, "grid_expr_syntax:5:expected operand");
  ASSERT_COMPILE_FAILS("1 if 0 else", names, 3, "grid_expr_syntax:11:expected operand");
  ASSERT_COMPILE_FAILS("1 else 2", names, 3, "grid_expr_syntax:2:unexpected input");
  ASSERT_COMPILE_FAILS("xnumel if xnumel else 1 / 2", names, 3,
                       "grid_expr_syntax:24:true division '/' is not supported");
  /* The keywords are never names, even when offered as one. */
  ASSERT_COMPILE_FAILS("if", (const char *const[]){"if"}, 1, "grid_expr_syntax:0:expected operand");
  ASSERT_COMPILE_FAILS("min(1 2)", names, 3, "grid_expr_syntax:6:expected ',' or ')'");
  ASSERT_COMPILE_FAILS("min(1,,2)", names, 3, "grid_expr_syntax:6:expected operand");
  ASSERT_COMPILE_FAILS("min(1", names, 3, "grid_expr_syntax:5:expected ',' or ')'");
  ASSERT_COMPILE_FAILS("$", names, 3, "grid_expr_syntax:0:expected variable number");
  ASSERT_COMPILE_FAILS("1 + $x", names, 3, "grid_expr_syntax:4:expected variable number");
  ASSERT_COMPILE_FAILS("$2147483648", names, 3, "grid_expr_syntax:0:variable index too large");
  ASSERT_COMPILE_FAILS("007", names, 3, "grid_expr_syntax:0:leading zeros are not allowed");
  ASSERT_COMPILE_FAILS("9223372036854775808", names, 3, "grid_expr_literal_overflow:0");
  ASSERT_COMPILE_FAILS("1 + 99999999999999999999", names, 3, "grid_expr_literal_overflow:4");
  /* Python reads -9223372036854775808 as the negation of a literal that int64 cannot hold. */
  ASSERT_COMPILE_FAILS("-9223372036854775808", names, 3, "grid_expr_literal_overflow:1");
  ASSERT_COMPILE_FAILS("foo", names, 3, "grid_expr_unknown_name:foo");
  ASSERT_COMPILE_FAILS("xnumel + xnumel2", names, 3, "grid_expr_unknown_name:xnumel2");
  ASSERT_COMPILE_FAILS("xnume", names, 3, "grid_expr_unknown_name:xnume");
  ASSERT_COMPILE_FAILS("xnumel", NULL, 3, "grid_expr_unknown_name:xnumel");
  ASSERT_COMPILE_FAILS("min", names, 3, "grid_expr_unknown_name:min");
  ASSERT_COMPILE_FAILS("foo(1)", names, 3, "grid_expr_unknown_function:foo");
  ASSERT_COMPILE_FAILS("xnumel (1)", names, 3, "grid_expr_unknown_function:xnumel");
  ASSERT_COMPILE_FAILS("min()", names, 3, "grid_expr_bad_arity:min");
  ASSERT_COMPILE_FAILS("max( )", names, 3, "grid_expr_bad_arity:max");
  ASSERT_COMPILE_FAILS("cdiv(1)", names, 3, "grid_expr_bad_arity:cdiv");
  ASSERT_COMPILE_FAILS("ceildiv(1, 2, 3)", names, 3, "grid_expr_bad_arity:ceildiv");
  /* A program without variables that always fails is refused. */
  ASSERT_COMPILE_FAILS("1 // 0", names, 3, "grid_expr_const_div_by_zero");
  ASSERT_COMPILE_FAILS("9223372036854775807 + 1", names, 3, "grid_expr_const_overflow");
  ASSERT_COMPILE_FAILS("-(-9223372036854775807 - 1)", names, 3, "grid_expr_const_overflow");
  ASSERT_COMPILE_FAILS("min(3, 1 << 64)", names, 3, "grid_expr_const_overflow");
  ASSERT_COMPILE_FAILS("2 + (1 >> (2 - 3))", names, 3, "grid_expr_const_negative_shift");
  /* The first failing constant subexpression in evaluation order names the error. */
  ASSERT_COMPILE_FAILS("(1 << -1) + 1 // 0", names, 3, "grid_expr_const_negative_shift");
  /* A syntax error later in the text wins over a constant that always fails. */
  ASSERT_COMPILE_FAILS("1 // 0 +", names, 3, "grid_expr_syntax:8:expected operand");
  ASSERT_COMPILE_FAILS("1 // 0 + nope", names, 3, "grid_expr_unknown_name:nope");
  ASSERT_COMPILE_FAILS("1 // 0 if 1 else", names, 3, "grid_expr_syntax:16:expected operand");
  ASSERT_COMPILE_FAILS("1 // 0 if 0 else nope", names, 3, "grid_expr_unknown_name:nope");
  /* A constant condition keeps only the branch it chooses, so what is left may read no variable. */
  ASSERT_COMPILE_FAILS("1 // 0 if 1 else 2", names, 3, "grid_expr_const_div_by_zero");
  ASSERT_COMPILE_FAILS("xnumel if 0 else 1 << -1", names, 3, "grid_expr_const_negative_shift");
  /* The condition fails before either branch, whatever they hold. */
  ASSERT_COMPILE_FAILS("1 << 64 if 1 // 0 else 1 << -1", names, 3, "grid_expr_const_div_by_zero");

  fl_error err;
  ASSERT_FAILS(fl_grid_program_compile("1", NULL, 0, NULL, &err), &err, FL_BAD_GRID_PROGRAM, "grid_program_null");
  /* A NULL error pointer is allowed. */
  fl_grid_program *p = NULL;
  ASSERT_EQ(fl_grid_program_compile("1 +", NULL, 0, &p, NULL), FL_BAD_GRID_PROGRAM);
  ASSERT_TRUE(p == NULL);
  /* Failing constants that may not run compile; those that never run leave no trace. */
  const char *const fold_ok[][2] = {
      {"1 // 0 if 0 else 2", "2"},
      {"xnumel if 1 else 1 // 0", "$0"},
      {"1 << -1 if 2 < 1 else 3 if 0 else 4", "4"},
      {"(1 if 0 else (9223372036854775807 + 1)) if 0 else min(5, 6)", "5"},
      {"xnumel if xnumel else 1 // 0", NULL},
      {"1 // 0 if xnumel else XBLOCK", NULL},
      {"(1 // 0 if xnumel else 1) + (1 << -1 if xnumel == 2 else 0)", NULL},
  };
  for (size_t i = 0; i < sizeof fold_ok / sizeof fold_ok[0]; i++) {
    fl_grid_program *q = NULL;
    ASSERT_OK(fl_grid_program_compile(fold_ok[i][0], names, 3, &q, &err), &err);
    size_t nv = fl_grid_program_nvars(q);
    bool constant = fl_grid_program_is_constant(q);
    int64_t out = -1, xv[3] = {0, 0, 9};
    fl_status st = fl_grid_program_eval(q, xv, 3, &out, &err);
    fl_grid_program_free(q);
    if (!fold_ok[i][1]) {
      ASSERT_TRUE(!constant);
      continue;
    }
    ASSERT_OK(st, &err);
    if (fold_ok[i][1][0] == '$') {
      ASSERT_TRUE(!constant);
      ASSERT_EQ(nv, 1);
      ASSERT_EQ(out, 0);
    } else {
      ASSERT_TRUE(constant);
      ASSERT_EQ(nv, 0);
      ASSERT_EQ(out, strtoll(fold_ok[i][1], NULL, 10));
    }
  }
  /* A program that reads a variable is not refused for a failing constant part, even one that
   * always runs: an operation on constants that fails is not folded, and fails when evaluated (here
   * with xnumel 1), the first failure in evaluation order. */
  static const char *const fail_at_eval[][2] = {
      {"xnumel + 1 % 0", "grid_div_by_zero"},
      {"cdiv(xnumel, 0 * 5) + cdiv(1, 0)", "grid_div_by_zero"},
      {"min(xnumel, 1 << 64)", "grid_overflow"},
      {"xnumel + (1 >> (2 - 3))", "grid_negative_shift"},
      {"2 if 1 % 0 else xnumel", "grid_div_by_zero"},
      {"2 if xnumel + 1 % 0 else 3", "grid_div_by_zero"},
      {"(xnumel if xnumel else 1 // 0) + (1 << 64)", "grid_overflow"},
      {"1 // 0 + (1 if xnumel else 2)", "grid_div_by_zero"},
      {"(1 if xnumel else 2) * (1 << -1 if 2 > 1 else 0)", "grid_negative_shift"},
  };
  for (size_t i = 0; i < sizeof fail_at_eval / sizeof fail_at_eval[0]; i++) {
    fl_grid_program *q = NULL;
    ASSERT_OK(fl_grid_program_compile(fail_at_eval[i][0], names, 3, &q, &err), &err);
    bool constant = fl_grid_program_is_constant(q);
    int64_t out = -1, xv[3] = {1, 0, 9};
    fl_status st = fl_grid_program_eval(q, xv, 3, &out, &err);
    fl_grid_program_free(q);
    ASSERT_TRUE(!constant);
    if (st != FL_GRID_EVAL || strcmp(err.reason, fail_at_eval[i][1]) != 0)
      FL_FAIL_AT("%s: %s %s, expected %s", fail_at_eval[i][0], fl_status_name(st), err.reason, fail_at_eval[i][1]);
  }
  /* What is accepted around the edges: all-zero literals, trailing commas, spacing. */
  ASSERT_EVAL("000 + 0", NULL, 0, NULL, 0, 0);
  ASSERT_EVAL("min(3, 2,)", NULL, 0, NULL, 0, 2);
  ASSERT_EVAL("\tmax (\n1 ,\r 2 ) ", NULL, 0, NULL, 0, 2);
  ASSERT_EVAL("9223372036854775807", NULL, 0, NULL, 0, INT64_MAX);
  ASSERT_EVAL("1if 0else(2)if(1)else 3", NULL, 0, NULL, 0, 2);
  ASSERT_EVAL("(3>=2)==1", NULL, 0, NULL, 0, 1);
  ASSERT_EVAL("-9223372036854775807 - 1", NULL, 0, NULL, 0, INT64_MIN);
  int64_t v[3] = {5, 6, 7};
  ASSERT_EVAL("XBLOCK * 10 + xnumel", names, 3, v, 3, 75);
}

/* Builds `count` right-nested additions of `leaf`: depth grows by one per level. */
static char *nested_sum(const char *leaf, int count) {
  size_t cap = (size_t)count * (strlen(leaf) + 8) + 16;
  char *s = malloc(cap);
  size_t n = 0;
  for (int i = 0; i < count - 1; i++) n += (size_t)snprintf(s + n, cap - n, "%s+(", leaf);
  n += (size_t)snprintf(s + n, cap - n, "%s", leaf);
  for (int i = 0; i < count - 1; i++) s[n++] = ')';
  s[n] = '\0';
  return s;
}

static void limits(void) {
  int64_t v[1] = {3};
  /* The evaluation stack holds 64 values: 64 right-nested variables fit, 65 do not. */
  char *s = nested_sum("$0", 64);
  ASSERT_EVAL(s, NULL, 0, v, 1, 64 * 3);
  free(s);
  s = nested_sum("$0", 65);
  ASSERT_COMPILE_FAILS(s, NULL, 0, "grid_expr_too_deep");
  free(s);
  /* Constants fold away, so the same shape over literals is shallow. */
  s = nested_sum("2", 150);
  ASSERT_EVAL(s, NULL, 0, NULL, 0, 300);
  free(s);
  /* Parenthesis nesting is bounded for the parser's own sake. */
  char buf[1024];
  memset(buf, '(', 200);
  buf[200] = '7';
  memset(buf + 201, ')', 200);
  buf[401] = '\0';
  ASSERT_EVAL(buf, NULL, 0, NULL, 0, 7);
  memset(buf, '(', 201);
  buf[201] = '7';
  memset(buf + 202, ')', 201);
  buf[403] = '\0';
  ASSERT_COMPILE_FAILS(buf, NULL, 0, "grid_expr_too_deep");
  /* Length: 4096 bytes are accepted, 4097 refused. A long run of signs costs no recursion. */
  char *big = malloc(4100);
  memset(big, '-', 4094);
  memcpy(big + 4094, "$0", 3);
  ASSERT_EQ(strlen(big), 4096);
  ASSERT_EVAL(big, NULL, 0, v, 1, 3);
  memset(big, ' ', 4097);
  big[0] = '1';
  big[4097] = '\0';
  ASSERT_COMPILE_FAILS(big, NULL, 0, "grid_expr_too_long");
  free(big);
  /* A conditional needs as many slots as its deepest part; a branch that is never chosen needs
   * none, and its nesting is still bounded. */
  char cbuf[1400];
  for (int n = 64; n <= 65; n++) {
    s = nested_sum("$0", n);
    snprintf(cbuf, sizeof cbuf, "1 if $0 == 2 else %s", s);
    if (n == 64) ASSERT_EVAL(cbuf, NULL, 0, v, 1, 64 * 3);
    else ASSERT_COMPILE_FAILS(cbuf, NULL, 0, "grid_expr_too_deep");
    snprintf(cbuf, sizeof cbuf, "(%s) if $0 == 2 else 1", s);
    if (n == 64) ASSERT_EVAL(cbuf, NULL, 0, v, 1, 1);
    else ASSERT_COMPILE_FAILS(cbuf, NULL, 0, "grid_expr_too_deep");
    snprintf(cbuf, sizeof cbuf, "1 if (%s) == 2 else 5", s);
    if (n == 64) ASSERT_EVAL(cbuf, NULL, 0, v, 1, 5);
    else ASSERT_COMPILE_FAILS(cbuf, NULL, 0, "grid_expr_too_deep");
    snprintf(cbuf, sizeof cbuf, "(%s) if 0 else 1", s);
    ASSERT_EVAL(cbuf, NULL, 0, v, 1, 1);
    free(s);
  }
  /* Right-nested conditionals, each `else` one level deeper; also replayed by substitution. */
  for (int n = 200; n <= 201; n++) {
    char *chain = malloc((size_t)n * 24 + 8);
    size_t k = 0;
    for (int i = 0; i < n; i++) k += (size_t)sprintf(chain + k, "%d if $0==%d else ", i, i);
    sprintf(chain + k, "-1");
    if (n == 201) {
      ASSERT_COMPILE_FAILS(chain, NULL, 0, "grid_expr_too_deep");
    } else {
      ASSERT_EVAL(chain, NULL, 0, v, 1, 3);
      fl_error err;
      fl_grid_program *p = NULL;
      int64_t out = 0;
      ASSERT_OK(fl_grid_program_compile(chain, NULL, 0, &p, &err), &err);
      fl_status st = fl__grid_program_substitute(p, 0, 150, &err);
      if (st == FL_OK) st = fl_grid_program_eval(p, NULL, 0, &out, &err);
      bool constant = fl_grid_program_is_constant(p);
      fl_grid_program_free(p);
      ASSERT_OK(st, &err);
      ASSERT_TRUE(constant);
      ASSERT_EQ(out, 150);
    }
    free(chain);
  }
  /* -INT64_MIN is an overflow even inside a pair of negations. */
  int64_t m[1] = {INT64_MIN};
  ASSERT_EVAL_FAILS("--$0", m, 1, "grid_overflow");
}

static void eval_errors(void) {
  int64_t v[2];
  v[0] = 1, v[1] = 0;
  ASSERT_EVAL_FAILS("$0 // $1", v, 2, "grid_div_by_zero");
  ASSERT_EVAL_FAILS("$0 % $1", v, 2, "grid_div_by_zero");
  ASSERT_EVAL_FAILS("cdiv($0, $1)", v, 2, "grid_div_by_zero");
  /* Only subexpressions without variables are folded: a variable over a bad constant compiles and
   * fails when evaluated. */
  ASSERT_EVAL_FAILS("$0 // 0", v, 2, "grid_div_by_zero");
  ASSERT_EVAL_FAILS("$0 >> (2 - 3)", v, 2, "grid_negative_shift");
  ASSERT_EVAL_FAILS("$0 + 9223372036854775807", v, 2, "grid_overflow");
  v[0] = INT64_MAX, v[1] = 2;
  ASSERT_EVAL_FAILS("$0 * $1", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("$0 + $1 - 5", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("-$0 - $1", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("$0 << 1", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("$1 << 63", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("$1 << 64", v, 2, "grid_overflow");
  v[0] = INT64_MIN, v[1] = -1;
  ASSERT_EVAL_FAILS("-$0", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("$0 // $1", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("cdiv($0, $1)", v, 2, "grid_overflow");
  /* -(a // -b) spelled out negates b first, which overflows where cdiv does not. */
  ASSERT_EVAL_FAILS("-($1 // -$0)", v, 2, "grid_overflow");
  ASSERT_EVAL("cdiv($1, $0)", NULL, 0, v, 2, 1);
  v[0] = 1, v[1] = -1;
  ASSERT_EVAL_FAILS("$0 << $1", v, 2, "grid_negative_shift");
  ASSERT_EVAL_FAILS("$0 >> $1", v, 2, "grid_negative_shift");
  ASSERT_EVAL_FAILS("0 << $1", v, 2, "grid_negative_shift");
  /* The first failure in evaluation order is the one reported. */
  ASSERT_EVAL_FAILS("($0 << $1) + (1 // ($1 + 1))", v, 2, "grid_negative_shift");
  ASSERT_EVAL_FAILS("(1 // ($1 + 1)) + ($0 << $1)", v, 2, "grid_div_by_zero");

  /* A failing constant in a branch that may run is raised only when it does, after whatever runs
   * before it. */
  v[0] = 1, v[1] = 0;
  ASSERT_EVAL("1 // 0 if $1 else 5", NULL, 0, v, 2, 5);
  ASSERT_EVAL_FAILS("5 if $1 else 1 << -1", v, 2, "grid_negative_shift");
  ASSERT_EVAL_FAILS("5 if $1 else $0 + (9223372036854775807 + 1)", v, 2, "grid_overflow");
  ASSERT_EVAL_FAILS("5 if $1 else $0 // $1", v, 2, "grid_div_by_zero");
  ASSERT_EVAL_FAILS("min(($0 << $1) + 1 // 0, $1) if $0 else 0", v, 2, "grid_div_by_zero");
  v[1] = 1;
  ASSERT_EVAL_FAILS("1 // 0 if $1 else 5", v, 2, "grid_div_by_zero");
  ASSERT_EVAL("5 if $1 else 1 << -1", NULL, 0, v, 2, 5);
  v[1] = -1;
  ASSERT_EVAL_FAILS("min(($0 << $1) + 1 // 0, $1) if $0 else 0", v, 2, "grid_negative_shift");
  /* The condition is evaluated first, and its errors are raised whatever the branches hold. */
  ASSERT_EVAL_FAILS("1 // 0 if $0 // ($1 + 1) else 1 << -1", v, 2, "grid_div_by_zero");
  /* Conditionals leave exactly one value on the stack, whichever branch runs. */
  for (int64_t a = 0; a < 2; a++)
    for (int64_t c = 0; c < 2; c++) {
      int64_t w[2] = {a, c};
      ASSERT_EVAL("(10 if $0 else 20 + $1) + (3 if $1 else $0 * 4) * (100 if $0 == $1 else 1000)", NULL, 0, w, 2,
                  (a ? 10 : 20 + c) + (c ? 3 : a * 4) * (a == c ? 100 : 1000));
    }

  ASSERT_EVAL_FAILS("$0 + $3", v, 2, "grid_var_missing:3");
  ASSERT_EVAL_FAILS("$5 + $3 + $0", v, 2, "grid_var_missing:3");
  ASSERT_EVAL_FAILS("$0", NULL, 0, "grid_var_missing:0");
  ASSERT_EVAL_FAILS("$1", v, 1, "grid_var_missing:1");
  /* A constant program needs no variables. */
  ASSERT_EVAL("3 * 4", NULL, 0, NULL, 0, 12);

  fl_error err;
  int64_t out;
  ASSERT_FAILS(fl_grid_program_eval(NULL, v, 2, &out, &err), &err, FL_BAD_GRID_PROGRAM, "grid_program_null");
  fl_grid_program *p = NULL;
  ASSERT_OK(fl_grid_program_compile("$0", NULL, 0, &p, &err), &err);
  ASSERT_FAILS(fl_grid_program_eval(p, v, 2, NULL, &err), &err, FL_BAD_GRID_PROGRAM, "grid_program_null");
  ASSERT_EQ(fl_grid_program_eval(p, NULL, 0, &out, NULL), FL_GRID_EVAL);
  fl_grid_program_free(p);
  fl_grid_program_free(NULL);
}

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

/* ---- the independent reference: expression trees evaluated with __int128 ---- */

typedef __int128 i128;

enum { R_OK, R_DIV0, R_OVF, R_SHIFT };
static const char *const eval_reasons[] = {"", "grid_div_by_zero", "grid_overflow", "grid_negative_shift"};
static const char *const const_reasons[] = {"", "grid_expr_const_div_by_zero", "grid_expr_const_overflow",
                                            "grid_expr_const_negative_shift"};

/* N_COND's kids are the condition, the value when true and the value when false. */
enum { N_LIT, N_VAR, N_NEG, N_POS, N_BIN, N_MIN, N_MAX, N_CDIV, N_COND };
enum { B_ADD, B_SUB, B_MUL, B_FLOORDIV, B_MOD, B_SHL, B_SHR, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_COUNT };
#define B_FIRST_CMP B_EQ
static const char *const bin_text[] = {"+", "-", "*", "//", "%", "<<", ">>", "==", "!=", "<", "<=", ">", ">="};
/* Python's binding strength: conditional 0, comparisons 1, shifts 2, + - 3, * // % 4, unary 5,
 * atoms 6. */
static const int bin_level[] = {3, 3, 4, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1};

#define MAX_NODES 6000
#define TEXT_MAX (MAX_NODES * 64)
#define MAX_KIDS 4
#define NVARS 6

typedef struct node {
  int kind, op, nkids, style;
  int64_t value;
  int kids[MAX_KIDS];
} node;

typedef struct tree {
  node n[MAX_NODES];
  int count;
} tree;

typedef struct res {
  int err;
  int64_t v;
} res;

static uint64_t rng_state;
static uint64_t rnd(void) {
  /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }

static res fit(i128 x) {
  res r = {R_OK, 0};
  if (x > INT64_MAX || x < INT64_MIN) r.err = R_OVF;
  else r.v = (int64_t)x;
  return r;
}

static i128 floordiv128(i128 a, i128 b) {
  i128 q = a / b, m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) q -= 1;
  return q;
}

static res ref_binary(int op, int64_t a, int64_t b) {
  res r = {R_OK, 0};
  switch (op) {
    case B_ADD: return fit((i128)a + b);
    case B_SUB: return fit((i128)a - b);
    case B_MUL: return fit((i128)a * b);
    case B_FLOORDIV:
      if (b == 0) return (res){R_DIV0, 0};
      return fit(floordiv128(a, b));
    case B_MOD:
      if (b == 0) return (res){R_DIV0, 0};
      return fit((i128)a - floordiv128(a, b) * b);
    case B_SHL:
      if (b < 0) return (res){R_SHIFT, 0};
      if (a == 0) return r;
      if (b >= 64) return (res){R_OVF, 0};
      return fit((i128)a * ((i128)1 << b));
    case B_SHR:
      if (b < 0) return (res){R_SHIFT, 0};
      if (b >= 64) return (res){R_OK, a < 0 ? -1 : 0};
      return fit(floordiv128(a, (i128)1 << b));
    case B_EQ: return (res){R_OK, a == b};
    case B_NE: return (res){R_OK, a != b};
    case B_LT: return (res){R_OK, a < b};
    case B_LE: return (res){R_OK, a <= b};
    case B_GT: return (res){R_OK, a > b};
    case B_GE: return (res){R_OK, a >= b};
  }
  return (res){-1, 0};
}

static res ref_eval(const tree *t, int i, const int64_t *vars) {
  const node *nd = &t->n[i];
  if (nd->kind == N_COND) {
    /* Python evaluates the condition, then only the branch it chooses. */
    res c = ref_eval(t, nd->kids[0], vars);
    if (c.err) return c;
    return ref_eval(t, nd->kids[c.v ? 1 : 2], vars);
  }
  res k[MAX_KIDS];
  for (int c = 0; c < nd->nkids; c++) {
    k[c] = ref_eval(t, nd->kids[c], vars);
    if (k[c].err) return k[c];
  }
  switch (nd->kind) {
    case N_LIT: return (res){R_OK, nd->value};
    case N_VAR: return (res){R_OK, vars[nd->value]};
    case N_NEG: return fit(-(i128)k[0].v);
    case N_POS: return k[0];
    case N_BIN: return ref_binary(nd->op, k[0].v, k[1].v);
    case N_MIN:
    case N_MAX: {
      int64_t v = k[0].v;
      for (int c = 1; c < nd->nkids; c++)
        if (nd->kind == N_MIN ? k[c].v < v : k[c].v > v) v = k[c].v;
      return (res){R_OK, v};
    }
    case N_CDIV:
      if (k[1].v == 0) return (res){R_DIV0, 0};
      return fit(-floordiv128(k[0].v, -(i128)k[1].v));
  }
  return (res){-1, 0};
}

/* The variables a compiled subtree reads (a bit each), written from Python's rules rather than
 * from the compiler's. A condition without variables that evaluates chooses its branch at compile
 * time and the other is dropped; any other condition keeps both, since an operation on constants
 * that fails is not folded but left to fail when it runs. */
static unsigned reads(const tree *t, int i) {
  const node *nd = &t->n[i];
  if (nd->kind == N_VAR) return 1u << nd->value;
  if (nd->kind == N_COND && !reads(t, nd->kids[0])) {
    res c = ref_eval(t, nd->kids[0], NULL);
    if (!c.err) return reads(t, nd->kids[c.v ? 1 : 2]);
  }
  unsigned vars = 0;
  for (int c = 0; c < nd->nkids; c++) vars |= reads(t, nd->kids[c]);
  return vars;
}

/* What the compiler must make of a tree: `vars`, the variables the program reads, and `err`, the
 * compile error: a program that reads no variable is evaluated, and refused when that fails. */
typedef struct stat {
  unsigned vars;
  int err;
} stat;

static stat analyze(const tree *t, int i) {
  unsigned vars = reads(t, i);
  return (stat){vars, vars ? R_OK : ref_eval(t, i, NULL).err};
}

static bool has_var(const tree *t, int i) {
  if (t->n[i].kind == N_VAR) return true;
  for (int c = 0; c < t->n[i].nkids; c++)
    if (has_var(t, t->n[i].kids[c])) return true;
  return false;
}

/* A constant subtree that always fails, anywhere: compiled programs that hold one show that the
 * compiler refuses only programs without variables. */
static bool has_failing_constant(const tree *t) {
  for (int i = 0; i < t->count; i++)
    if (!has_var(t, i) && ref_eval(t, i, NULL).err) return true;
  return false;
}

static int max_var(unsigned vars) {
  int m = -1;
  for (int v = 0; v < 32; v++)
    if (vars & (1u << v)) m = v;
  return m;
}

static int64_t random_value(void) {
  switch (rint_(10)) {
    case 0: return (int64_t)rnd();
    case 1: return INT64_MAX - rint_(3);
    case 2: return INT64_MIN + rint_(3);
    /* One draw per statement, so that a seed gives the same values with any compiler. */
    case 3: {
      int64_t p = (int64_t)1 << rint_(63);
      return p - 1 + rint_(3);
    }
    case 4: {
      int64_t p = (int64_t)1 << rint_(63);
      return -p + rint_(3);
    }
    case 5: return rint_(130) - 65;
    case 6: return rint_(2000000) - 1000000;
    default: return rint_(21) - 10;
  }
}

/* Literal values: never INT64_MIN, which has no literal spelling. */
static int64_t random_literal(void) {
  int64_t v = random_value();
  return v == INT64_MIN ? INT64_MIN + 1 : v;
}

static int gen(tree *t, int depth, bool vars) {
  int i = t->count++;
  node *nd = &t->n[i];
  memset(nd, 0, sizeof *nd);
  if (depth == 0 || rint_(10) < 3) {
    if (vars && rint_(2)) {
      nd->kind = N_VAR;
      nd->value = rint_(NVARS);
      nd->style = rint_(2);
    } else {
      nd->kind = N_LIT;
      nd->value = random_literal();
    }
    return i;
  }
  int r = rint_(100);
  int kids;
  if (r < 8) nd->kind = N_NEG, kids = 1;
  else if (r < 12) nd->kind = N_POS, kids = 1;
  else if (r < 62) nd->kind = N_BIN, nd->op = rint_(B_FIRST_CMP), kids = 2;
  else if (r < 70) nd->kind = N_BIN, nd->op = B_FIRST_CMP + rint_(B_COUNT - B_FIRST_CMP), kids = 2;
  else if (r < 80) nd->kind = N_COND, kids = 3;
  else if (r < 90) nd->kind = rint_(2) ? N_MIN : N_MAX, kids = 1 + rint_(MAX_KIDS);
  else nd->kind = N_CDIV, nd->style = rint_(2), kids = 2;
  for (int c = 0; c < kids; c++) {
    int k = gen(t, depth - 1, vars);
    t->n[i].kids[c] = k;
  }
  t->n[i].nkids = kids;
  return i;
}

static const char *const var_names[] = {"xnumel", "ynumel", "XBLOCK", "r0_numel"};

typedef struct text {
  char s[TEXT_MAX];
  size_t n;
} text;

static void put(text *x, const char *s) {
  size_t k = strlen(s);
  memcpy(x->s + x->n, s, k);
  x->n += k;
  x->s[x->n] = '\0';
}
static void space(text *x) {
  if (rint_(4) == 0) put(x, rint_(4) ? " " : "  ");
}

/* Python's binding strength of a node as written (see bin_level). */
static int level(const tree *t, int i) {
  const node *nd = &t->n[i];
  switch (nd->kind) {
    case N_LIT: return nd->value < 0 ? 5 : 6;
    case N_NEG:
    case N_POS: return 5;
    case N_BIN: return bin_level[nd->op];
    case N_COND: return 0;
    default: return 6;
  }
}

static void render(const tree *t, int i, text *x);

static void render_child(const tree *t, int i, text *x, bool parens) {
  parens = parens || rint_(8) == 0;
  if (parens) put(x, "("), space(x);
  render(t, i, x);
  if (parens) space(x), put(x, ")");
}

/* Writes the tree with the fewest parentheses Python needs, plus random extra ones and spaces, so
 * that precedence and associativity are exercised. */
static void render(const tree *t, int i, text *x) {
  const node *nd = &t->n[i];
  char buf[32];
  switch (nd->kind) {
    case N_LIT:
      snprintf(buf, sizeof buf, "%" PRId64, nd->value);
      put(x, buf);
      break;
    case N_VAR:
      if (nd->style && nd->value < 4) put(x, var_names[nd->value]);
      else snprintf(buf, sizeof buf, "$%d", (int)nd->value), put(x, buf);
      break;
    case N_NEG:
    case N_POS:
      put(x, nd->kind == N_NEG ? "-" : "+");
      space(x);
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < 5);
      break;
    case N_BIN: {
      /* Comparisons do not chain (a < b < c is refused), so each side of one binds tighter. */
      int lv = bin_level[nd->op];
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < lv + (lv == 1));
      space(x);
      put(x, bin_text[nd->op]);
      space(x);
      render_child(t, nd->kids[1], x, level(t, nd->kids[1]) <= lv);
      break;
    }
    case N_COND:
      /* `A if C else B`: A and C are comparisons at most, B may be another conditional. The
       * keywords always get spaces, so that a name never runs into them. */
      render_child(t, nd->kids[1], x, level(t, nd->kids[1]) < 1);
      put(x, " if "), space(x);
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < 1);
      put(x, " else "), space(x);
      render_child(t, nd->kids[2], x, false);
      break;
    default:
      put(x, nd->kind == N_MIN ? "min(" : nd->kind == N_MAX ? "max(" : nd->style ? "ceildiv(" : "cdiv(");
      for (int c = 0; c < nd->nkids; c++) {
        if (c) put(x, ","), space(x);
        render_child(t, nd->kids[c], x, false);
      }
      put(x, ")");
      break;
  }
}

/* Checks a compiled program against the reference on several inputs; prints the first mismatch. */
static bool check_evals(const tree *t, const fl_grid_program *p, const char *what, int64_t inputs[][NVARS],
                        int ninputs) {
  for (int k = 0; k < ninputs; k++) {
    res want = ref_eval(t, 0, inputs[k]);
    fl_error err;
    int64_t out = 0;
    int st = fl_grid_program_eval(p, inputs[k], NVARS, &out, &err);
    bool ok = want.err ? (st == FL_GRID_EVAL && strcmp(err.reason, eval_reasons[want.err]) == 0 && !err.stable)
                       : (st == FL_OK && out == want.v);
    if (!ok) {
      fprintf(stderr, "mismatch: %s\n  vars:", what);
      for (int v = 0; v < NVARS; v++) fprintf(stderr, " %" PRId64, inputs[k][v]);
      fprintf(stderr, "\n  want %s %" PRId64 ", got %s %s %" PRId64 "\n", eval_reasons[want.err], want.v,
              fl_status_name(st), st ? err.reason : "", out);
      return false;
    }
  }
  return true;
}

static bool check_compile(int want, int st, const fl_error *err, const char *what) {
  bool ok = want ? (st == FL_BAD_GRID_PROGRAM && strcmp(err->reason, const_reasons[want]) == 0 && err->stable)
                 : st == FL_OK;
  if (!ok)
    fprintf(stderr, "compile mismatch: %s\n  want %s, got %s %s\n", what, want ? const_reasons[want] : "ok",
            fl_status_name(st), st ? err->reason : "");
  return ok;
}

static void random_against_reference(void) {
  const char *seed_env = getenv("FL_GRID_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240611;
  rng_state = seed;
  int nexpr = 100000, ninputs = 8;
  long counts[4] = {0}, evals_ok = 0, evals_err = 0, const_errs = 0, substitutions = 0, conditionals = 0,
       kept_failing = 0;
  static tree t, t2;
  for (int e = 0; e < nexpr; e++) {
    t.count = 0;
    gen(&t, 1 + rint_(6), rint_(5) != 0);
    static text x;
    x.n = 0;
    x.s[0] = '\0';
    space(&x);
    render(&t, 0, &x);
    space(&x);
    /* Rare wide trees render past the length limit, which is tested on its own. */
    if (x.n > 4096) {
      e--;
      continue;
    }

    fl_error err;
    fl_grid_program *p = NULL;
    int st = fl_grid_program_compile(x.s, var_names, 4, &p, &err);
    stat an = analyze(&t, 0);
    int want = an.err;
    if (!check_compile(want, st, &err, x.s)) {
      fl_grid_program_free(p);
      FL_FAIL_AT("seed %" PRIu64 ", expression %d", seed, e);
    }
    if (want) {
      const_errs++;
      continue;
    }
    int64_t inputs[8][NVARS];
    for (int k = 0; k < ninputs; k++)
      for (int v = 0; v < NVARS; v++) inputs[k][v] = random_value();
    bool ok = check_evals(&t, p, x.s, inputs, ninputs);
    ok = ok && fl_grid_program_is_constant(p) == !an.vars;
    ok = ok && fl_grid_program_nvars(p) == (size_t)(max_var(an.vars) + 1);
    for (int v = 0; ok && v < NVARS; v++) ok = fl__grid_program_uses_var(p, (size_t)v) == !!(an.vars & (1u << v));
    if (!ok) {
      fl_grid_program_free(p);
      FL_FAIL_AT("seed %" PRIu64 ", expression %d: %s", seed, e, x.s);
    }
    for (int i = 0; i < t.count; i++) conditionals += t.n[i].kind == N_COND;
    kept_failing += has_failing_constant(&t);
    for (int k = 0; k < ninputs; k++) {
      res r = ref_eval(&t, 0, inputs[k]);
      counts[r.err]++;
      if (r.err) evals_err++;
      else evals_ok++;
    }

    /* Substitution: the same tree with one variable turned into a literal is the reference. */
    if (an.vars && rint_(2)) {
      int var = 0;
      for (int tries = 0; tries < 8; tries++) {
        var = rint_(NVARS);
        if (fl__grid_program_uses_var(p, (size_t)var)) break;
      }
      int64_t value = random_value();
      t2.count = t.count;
      memcpy(t2.n, t.n, (size_t)t.count * sizeof(node));
      for (int i = 0; i < t2.count; i++)
        if (t2.n[i].kind == N_VAR && t2.n[i].value == var) t2.n[i].kind = N_LIT, t2.n[i].value = value;
      substitutions++;
      st = fl__grid_program_substitute(p, (size_t)var, value, &err);
      static char what[4200];
      snprintf(what, sizeof what, "%.4100s with $%d = %" PRId64, x.s, var, value);
      stat an2 = analyze(&t2, 0);
      int want2 = an2.err;
      if (!check_compile(want2, st, &err, what)) {
        fl_grid_program_free(p);
        FL_FAIL_AT("seed %" PRIu64 ", expression %d (substitute)", seed, e);
      }
      /* A refused substitution leaves the program as it was. */
      const tree *ref = want2 ? &t : &t2;
      unsigned ref_vars = want2 ? an.vars : an2.vars;
      ok = check_evals(ref, p, what, inputs, ninputs) && fl_grid_program_is_constant(p) == !ref_vars &&
           fl_grid_program_nvars(p) == (size_t)(max_var(ref_vars) + 1);
      if (!ok) {
        fl_grid_program_free(p);
        FL_FAIL_AT("seed %" PRIu64 ", expression %d (substitute)", seed, e);
      }
    }
    fl_grid_program_free(p);
  }
  printf("     %d expressions (seed %" PRIu64 "): %ld const errors at compile, %ld evals ok, %ld eval errors "
         "(div0 %ld, overflow %ld, shift %ld), %ld substitutions; %ld conditionals, %ld compiled with a failing "
         "constant part\n",
         nexpr, seed, const_errs, evals_ok, evals_err, counts[R_DIV0], counts[R_OVF], counts[R_SHIFT],
         substitutions, conditionals, kept_failing);
  /* The generator must reach every outcome, or the comparison proves little. */
  ASSERT_TRUE(const_errs > 1000);
  ASSERT_TRUE(evals_ok > 50000);
  ASSERT_TRUE(counts[R_DIV0] > 100 && counts[R_OVF] > 100 && counts[R_SHIFT] > 100);
  ASSERT_TRUE(conditionals > 10000 && kept_failing > 1000);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Not an assertion: prints what one ceil-div costs, so that a slow interpreter is noticed. */
static void eval_timing(void) {
  const char *names[] = {"xnumel", "XBLOCK"};
  fl_error err;
  fl_grid_program *p = NULL;
  for (int form = 0; form < 2; form++) {
    ASSERT_OK(fl_grid_program_compile("-((xnumel) // -(XBLOCK))", names, 2, &p, &err), &err);
    if (form) ASSERT_OK(fl__grid_program_substitute(p, 1, 128, &err), &err);
    int64_t vars[2] = {0, 128}, sum = 0, out = 0;
    const int n = 2000000;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now_ns();
      for (int i = 0; i < n; i++) {
        vars[0] = i;
        if (fl_grid_program_eval(p, vars, 2, &out, &err) != FL_OK) break;
        sum += out;
      }
      double dt = (now_ns() - t0) / n;
      if (dt < best) best = dt;
    }
    int64_t expect = 0;
    for (int64_t i = 0; i < n; i++) expect += (i + 127) / 128;
    fl_grid_program_free(p);
    ASSERT_EQ(sum, expect * 5);
    printf("     ceil-div eval (%s): %.1f ns\n", form ? "XBLOCK folded" : "two variables", best);
  }
  /* Inductor's y split for grids past 65535 in y: a comparison, a conditional and six divisions. */
  const char *ysplit = "(0 if (-((-((ynumel) // -(32))) // -(65535))) == 0 else -(((-((ynumel) // -(32)))) // "
                       "-((-((-((ynumel) // -(32))) // -(65535))))))";
  ASSERT_OK(fl_grid_program_compile(ysplit, (const char *const[]){"ynumel"}, 1, &p, &err), &err);
  int64_t var = 0, sum = 0, out = 0, expect = 0;
  const int n = 1000000;
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
      var = (int64_t)i * 4099;
      if (fl_grid_program_eval(p, &var, 1, &out, &err) != FL_OK) break;
      sum += out;
    }
    double dt = (now_ns() - t0) / n;
    if (dt < best) best = dt;
  }
  fl_grid_program_free(p);
  for (int64_t i = 0; i < n; i++) {
    int64_t y = (i * 4099 + 31) / 32, z = (y + 65534) / 65535;
    expect += z ? (y + z - 1) / z : 0;
  }
  ASSERT_EQ(sum, expect * 5);
  printf("     y-split eval: %.1f ns\n", best);
}
