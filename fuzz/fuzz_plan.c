/* fuzz_plan.c: libFuzzer target for plan building and packing, through the public headers only.
 * The input is read as a descriptor (ABI, options by name, kinds, fixed values, grid mode,
 * static grid or grid expressions, names) for the null backend, then as launches with random
 * values. Refusals must carry a reason and leave nothing allocated (LeakSanitizer); launches must
 * be counted exactly once when they succeed and never when they are refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastlaunch.h"
#include "fastlaunch_testing.h"

typedef struct {
  const uint8_t *p;
  size_t n;
} reader;

static uint64_t take(reader *r, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes && r->n; i++, r->n--) v |= (uint64_t)*r->p++ << (8 * i);
  return v;
}

static fl_value random_value(reader *r) {
  switch (take(r, 1) % 6) {
    case 0: return fl_int((int64_t)take(r, 8));
    case 1: return fl_uint(take(r, 8));
    case 2: return fl_bool(take(r, 1) & 1);
    case 3: {
      uint64_t bits = take(r, 8);
      double d;
      memcpy(&d, &bits, 8);
      return fl_float(d);
    }
    case 4: return fl_ptr((const void *)(uintptr_t)take(r, 8));
    default: return fl_none();
  }
}

static const char *const exprs[] = {"a0", "-((a1) // -(a2))", "1", "a0 * a1 + 3", "0 if a1 == 0 else a0 // a1",
                                    "max(a0, 1) << 2", "min(a2, 65535)", "a0 % (a1 + 1)", "1 // 0", "a9",
                                    "cdiv(a0, 128)", "a0 if a1 else a2"};
static const char *const opt_names[] = {"hidden_ptrs", "num_warps", "num_ctas", "shared_mem", "cooperative",
                                        "pdl", "ffts", "simt_only", "dtdata", "scratch", "ffts_addr", "simt",
                                        "dyn_ubuf", "clamp_blocks", "bogus"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint64_t stream;
  fl_error err;
  if (!stream && fl_stream_create(FL_BACKEND_NULL, &stream, &err) != FL_OK) abort();
  reader r = {data, size};
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_NULL;
  d.target.abi = (fl_abi)(take(&r, 1) % (FL_ABI_COUNT + 1)); /* one past the last: refused */
  for (uint64_t k = take(&r, 1) % 4; k > 0; k--)
    (void)fl_target_set(&d.target, opt_names[take(&r, 1) % 15], (int64_t)take(&r, 2) - 4, &err);
  size_t nkinds = take(&r, 1) % 24;
  fl_kind kinds[24];
  static char names_buf[24][8];
  const char *names[24];
  for (size_t i = 0; i < nkinds; i++) {
    kinds[i] = (fl_kind)(take(&r, 1) % (FL_KIND_COUNT + 1));
    names_buf[i][0] = 'a';
    names_buf[i][1] = (char)('0' + i % 10);
    names_buf[i][2] = i >= 10 ? (char)('a' + i / 10) : '\0';
    names_buf[i][3] = '\0';
    names[i] = names_buf[i];
  }
  size_t nfixed = nkinds ? take(&r, 1) % (nkinds + 1) : 0;
  fl_value fixed[24];
  for (size_t i = 0; i < nfixed; i++) fixed[i] = random_value(&r);
  d.kinds = kinds;
  d.nkinds = nkinds;
  d.runtime_arg_count = nkinds - nfixed;
  d.fixed_args = fixed;
  d.grid_mode = (fl_grid_mode)(take(&r, 1) % 3);
  for (int i = 0; i < 3; i++) {
    d.static_grid[i] = (int64_t)take(&r, 4) - 8;
    d.grid_exprs[i] = exprs[take(&r, 1) % 12];
  }
  if (take(&r, 1) & 1) d.arg_names = names;
  fl_plan *plan = NULL;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) {
    if (plan != NULL || err.reason[0] == '\0') abort(); /* a refusal says why and builds nothing */
    return 0;
  }
  size_t nrt = fl_plan_runtime_arg_count(plan);
  for (int launch = 0; launch < 4 && r.n; launch++) {
    fl_value args[24];
    for (size_t i = 0; i < nrt; i++) args[i] = random_value(&r);
    int64_t grid[3] = {(int64_t)take(&r, 2), 1, 1};
    uint64_t before, after;
    fl_error cerr;
    if (fl_stream_count(FL_BACKEND_NULL, stream, &before, &cerr) != FL_OK) abort();
    fl_status st = fl_launch(plan, stream, args, nrt, fl_plan_grid_mode(plan) == FL_GRID_CALLER ? grid : NULL, &err);
    if (fl_stream_count(FL_BACKEND_NULL, stream, &after, &cerr) != FL_OK) abort();
    if (st == FL_OK && after - before > 1) abort();             /* never twice */
    if (st != FL_OK && (after != before || err.backend_submitted || err.reason[0] == '\0')) {
      fprintf(stderr, "refused launch counted or unexplained: %s (submitted %d, %llu -> %llu)\n", err.reason,
              err.backend_submitted, (unsigned long long)before, (unsigned long long)after);
      abort();
    }
  }
  fl_plan_release(plan);
  return 0;
}
