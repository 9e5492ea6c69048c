/* test_grid.c: grid programs: Inductor's forms, Python's edge values, refusals, limits, evaluation
 * errors (substitution, introspection and allocation failures: test_grid_api.c; the random
 * differential test against an __int128 reference: test_grid_random.c). */
#include "fastlaunch.h"
#include "fl_internal.h"

#include <time.h>

#define FL_TESTS(X)                                                                                \
  X(inductor_forms)                                                                                \
  X(python_edge_values)                                                                            \
  X(compile_refusals)                                                                              \
  X(limits)                                                                                        \
  X(eval_errors)
#define FL_TEST_MAIN
#include "fl_test.h"

#include "grid_asserts.h"

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
      /* next_power_of_2 as Triton's: n - 1 with every lower bit set, plus one; 0 for n <= 0. */
      {"next_power_of_2($0) + $1", 1, 0, 1},
      {"next_power_of_2($0) + $1", 2, 0, 2},
      {"next_power_of_2($0) + $1", 3, 0, 4},
      {"next_power_of_2($0) + $1", 1000, 1, 1025},
      {"next_power_of_2($0) + $1", 0, 0, 0},
      {"next_power_of_2($0) + $1", -5, 0, 0},
      {"next_power_of_2($0) + $1", INT64_MIN + 1, 0, 0},
      {"next_power_of_2($0) + $1", 4611686018427387904, 0, 4611686018427387904},
      {"min(next_power_of_2($0 * 2), $1)", 33, 64, 64},
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
  ASSERT_COMPILE_FAILS("next_power_of_2(1, 2)", names, 3, "grid_expr_bad_arity:next_power_of_2");
  ASSERT_COMPILE_FAILS("next_power_of_2()", names, 3, "grid_expr_bad_arity:next_power_of_2");
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
  ASSERT_EVAL_FAILS("next_power_of_2($0)", v, 2, "grid_overflow"); /* n - 1 */
  v[0] = 4611686018427387905;
  ASSERT_EVAL_FAILS("next_power_of_2($0)", v, 2, "grid_overflow"); /* 2^63 */
  v[0] = INT64_MIN;
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
