/* fuzz_grid.c: libFuzzer target for the grid-program compiler and evaluator, through the public
 * headers only. Input: an expression, a NUL byte, then up to 8 little-endian int64 variables. Every
 * refusal must carry a reason; an evaluation must not crash or trip a sanitizer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastlaunch.h"
#include "fastlaunch_testing.h"

static const char *const names[] = {"xnumel", "ynumel", "znumel", "XBLOCK", "YBLOCK", "RSPLIT", "ks0", "ks1"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t elen = nul ? (size_t)(nul - data) : size;
  char *expr = malloc(elen + 1);
  if (!expr) return 0;
  memcpy(expr, data, elen);
  expr[elen] = '\0';
  int64_t vars[8] = {0};
  size_t nvars = 0;
  if (nul) {
    const uint8_t *v = nul + 1;
    size_t left = size - elen - 1;
    for (; nvars < 8 && left >= 8; nvars++, v += 8, left -= 8) memcpy(&vars[nvars], v, 8);
  }
  fl_error err;
  fl_grid_program *p = NULL;
  fl_status st = fl_grid_program_compile(expr, names, 8, &p, &err);
  if (st != FL_OK) {
    if (p != NULL || err.reason[0] == '\0' || !err.stable) abort(); /* a refusal says why, stably */
  } else {
    int64_t out;
    st = fl_grid_program_eval(p, vars, nvars, &out, &err);
    if (st != FL_OK && err.reason[0] == '\0') abort();
    /* A constant program evaluates the same with any variables. */
    if (fl_grid_program_is_constant(p)) {
      int64_t again;
      if (fl_grid_program_eval(p, NULL, 0, &again, &err) != FL_OK || (st == FL_OK && again != out)) abort();
    }
    fl_grid_program_free(p);
  }
  free(expr);
  return 0;
}
