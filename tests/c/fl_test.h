/* fl_test.h: a minimal test harness for the C tests: assertions that print both sides, a registry. */
#ifndef FL_TEST_H
#define FL_TEST_H

#include "fastlaunch.h"
#include "fastlaunch_testing.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int fl_test_failures;

#define FL_FAIL_AT(...)                                                                            \
  do {                                                                                             \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                                \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    fl_test_failures++;                                                                            \
    return;                                                                                        \
  } while (0)

#define ASSERT_TRUE(c)                                                                             \
  do {                                                                                             \
    if (!(c)) FL_FAIL_AT("assertion failed: %s", #c);                                              \
  } while (0)
#define ASSERT_EQ(a, b)                                                                            \
  do {                                                                                             \
    long long fl_a_ = (long long)(a), fl_b_ = (long long)(b);                                      \
    if (fl_a_ != fl_b_) FL_FAIL_AT("%s == %s: %lld != %lld", #a, #b, fl_a_, fl_b_);               \
  } while (0)
#define ASSERT_EQ_U(a, b)                                                                          \
  do {                                                                                             \
    unsigned long long fl_a_ = (unsigned long long)(a), fl_b_ = (unsigned long long)(b);           \
    if (fl_a_ != fl_b_) FL_FAIL_AT("%s == %s: %llu != %llu", #a, #b, fl_a_, fl_b_);               \
  } while (0)
#define ASSERT_STREQ(a, b)                                                                         \
  do {                                                                                             \
    const char *fl_a_ = (a), *fl_b_ = (b);                                                         \
    if (!fl_a_ || !fl_b_ || strcmp(fl_a_, fl_b_) != 0)                                             \
      FL_FAIL_AT("%s == %s: \"%s\" != \"%s\"", #a, #b, fl_a_ ? fl_a_ : "(null)",                  \
                 fl_b_ ? fl_b_ : "(null)");                                                        \
  } while (0)
/* An fl call that must succeed; prints the error's reason otherwise. */
#define ASSERT_OK(call, errp)                                                                      \
  do {                                                                                             \
    int fl_st_ = (int)(call);                                                                      \
    if (fl_st_ != 0) FL_FAIL_AT("%s failed: %s (%s)", #call, fl_status_name(fl_st_), (errp)->reason); \
  } while (0)
/* An fl call that must fail with `status` and exactly `reason`. */
#define ASSERT_FAILS(call, errp, status, reason_text)                                              \
  do {                                                                                             \
    int fl_st_ = (int)(call);                                                                      \
    if (fl_st_ != (int)(status))                                                                   \
      FL_FAIL_AT("%s: status %s, expected %s (reason %s)", #call, fl_status_name((fl_status)fl_st_), \
                 fl_status_name(status), (errp)->reason);                                          \
    if (strcmp((errp)->reason, (reason_text)) != 0)                                                \
      FL_FAIL_AT("%s: reason \"%s\", expected \"%s\"", #call, (errp)->reason, (reason_text));      \
  } while (0)

/* Ends the calling test as skipped, with the reason printed: for what this machine cannot check
 * (a header, a library, a build mode). A file whose every test skipped exits 77, which meson reports
 * as SKIP; otherwise the summary line counts the skips. */
extern int fl_test_skips;
#define SKIP(...)                                                                                  \
  do {                                                                                             \
    printf("skip %s: ", __func__);                                                                 \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
    fl_test_skips++;                                                                               \
    return;                                                                                        \
  } while (0)

typedef struct fl_test_case {
  const char *name;
  void (*fn)(void);
} fl_test_case;

/* Each test file defines FL_TESTS as a list of X(name) and includes this header once with
 * FL_TEST_MAIN defined; the runner takes an optional test name to run just that one. */
#ifdef FL_TEST_MAIN
int fl_test_failures = 0;
int fl_test_skips = 0;
#define FL__DECL(name) static void name(void);
FL_TESTS(FL__DECL)
#define FL__ENTRY(name) {#name, name},
static const fl_test_case fl_test_cases[] = {FL_TESTS(FL__ENTRY){NULL, NULL}};
int main(int argc, char **argv) {
  int ran = 0, failed = 0, skipped = 0;
  for (const fl_test_case *t = fl_test_cases; t->name; t++) {
    if (argc > 1 && strcmp(argv[1], t->name) != 0) continue;
    int before = fl_test_failures, skips_before = fl_test_skips;
    t->fn();
    ran++;
    if (fl_test_failures != before) {
      failed++;
      fprintf(stderr, "FAIL %s\n", t->name);
    } else if (fl_test_skips != skips_before) {
      skipped++;
    } else {
      printf("ok   %s\n", t->name);
    }
  }
  printf("%d passed, %d failed, %d skipped\n", ran - failed - skipped, failed, skipped);
  if (failed || !ran) return 1;
  return skipped == ran ? 77 : 0;
}
#endif

#endif /* FL_TEST_H */
