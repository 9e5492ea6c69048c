/* grid_asserts.h: assertions over grid programs, shared by the grid tests (after fl_test.h). */
#ifndef FL_GRID_ASSERTS_H
#define FL_GRID_ASSERTS_H

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

#endif
