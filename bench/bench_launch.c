/* bench_launch.c: the cost of a planned launch against deriving the layout and packing per call.
 *
 * For each backend (null, host) and argument mix it times three ways of launching one kernel with
 * the same fl_value arguments:
 *
 *   planned    fl_launch on a plan made once (template copy, runtime packing, grid program
 *              evaluated in C, submit).
 *   unplanned  what a launcher without a plan does on every call: parse the Triton signature
 *              strings (fl_kind_parse), compute the layout (fl_layout_compute into stack arrays),
 *              zero a stack buffer, pack every value (fl_pack_value), compute the grid from the args
 *              in C, then submit that buffer through the backend's submit entry, the same function
 *              fl_launch ends in, on a caller-grid plan of the same kinds made once (which only
 *              supplies the kernel handle). So both modes share the submit exactly; the difference
 *              is the per-call derivation.
 *   submit     the floor: the backend's submit of an already packed buffer, nothing else.
 *
 * The host backend runs a real no-op kernel from a shared object compiled at start (cc -shared
 * -fPIC), grid 1, on the stream's worker thread; each repeat ends with fl_stream_synchronize, so its
 * time includes executing the launches. The null backend validates the stream and counts.
 *
 * Timing: CLOCK_MONOTONIC around a loop of N launches, N calibrated per measurement so that one
 * repeat takes about 30 ms (10 ms with --quick); the three modes take turns within each repeat; the
 * median of 7 repeats (3 with --quick) in ns per launch. Nothing is asserted about timing.
 *
 * Usage: bench_launch [--quick] [--json FILE] */
#include "fastlaunch.h"
#include "fl_internal.h" /* the backend vtable, for the unplanned and submit modes' submit */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FL_BENCH_CC
#define FL_BENCH_CC "cc"
#endif

#define MAX_ARGS 64
#define BLOCK 1024
#define N_ELEMENTS 1000 /* (N_ELEMENTS + BLOCK - 1) / BLOCK == 1 program */

/* ---- argument mixes (Triton signature strings) ---- */

typedef struct bench_case {
  const char *name;
  size_t nargs;
  const char *sig[MAX_ARGS];
  size_t n_index; /* the i32 argument the grid is computed from */
} bench_case;

static bench_case cases[4] = {
    {"2 tensors + 1 int", 3, {"*fp32", "*fp32", "i32"}, 2},
    {"4 tensors + 2 ints", 6, {"*fp32", "*fp32", "*fp32", "*fp32", "i32", "i32"}, 4},
    {"19 args",
     19,
     {"*fp32", "*fp32", "*fp32", "*fp32", "*fp32", "*fp32", "*bf16", "*bf16", "*i64", "*fp32", "*fp16", "*i32",
      "i32", "i32", "i32", "i32", "i64", "fp32", "i32"},
     12},
    {"64 args", 64, {NULL}, 1}, /* filled in main: ptr i32 i64 fp32, repeated */
};

/* ---- a measured launcher ---- */

enum { MODE_PLANNED, MODE_UNPLANNED, MODE_SUBMIT, MODE_COUNT };

typedef struct launcher {
  int backend;
  const bench_case *c;
  fl_plan *planned;  /* grid program over the n argument */
  fl_plan *caller;   /* all runtime, caller grid: the unplanned mode's kernel handle */
  uint64_t stream;
  fl_value values[MAX_ARGS];
  /* The submit floor's buffer, packed once. */
  _Alignas(16) unsigned char packed[4096];
  size_t packed_size;
  uint32_t packed_grid[3];
  long failures;
} launcher;

static void die(const char *what, const fl_error *err) {
  fprintf(stderr, "bench_launch: %s: %s\n", what, err ? err->reason : "");
  exit(1);
}

/* One unplanned launch: everything derived from the signature and the values on this call. */
static inline fl_status launch_unplanned(launcher *l, fl_error *err) {
  const bench_case *c = l->c;
  fl_kind kinds[MAX_ARGS];
  size_t offsets[MAX_ARGS];
  fl_layout layout;
  fl_status st;
  for (size_t i = 0; i < c->nargs; i++)
    if ((st = fl_kind_parse(c->sig[i], &kinds[i], err)) != FL_OK) return st;
  fl_target abi;
  memset(&abi, 0, sizeof abi);
  abi.abi = FL_ABI_HOST;
  if ((st = fl_layout_compute(&abi, kinds, c->nargs, &layout, offsets, err)) != FL_OK) return st;
  _Alignas(16) unsigned char buf[4096];
  if (layout.size > sizeof buf) return FL_UNSUPPORTED;
  memset(buf, 0, layout.size);
  for (size_t i = 0; i < c->nargs; i++)
    if ((st = fl_pack_value(abi.abi, kinds[i], &l->values[i], buf + offsets[i], i, err)) != FL_OK) return st;
  int64_t n = l->values[c->n_index].v.i;
  int64_t g[3] = {(n + BLOCK - 1) / BLOCK, 1, 1};
  uint32_t grid[3];
  if (g[0] < 0 || g[0] > INT32_MAX) return FL_BAD_GRID;
  grid[0] = (uint32_t)g[0];
  grid[1] = (uint32_t)g[1];
  grid[2] = (uint32_t)g[2];
  return l->caller->base->submit(l->caller->base, l->caller, l->stream, buf, grid, err); /* layout.size: the caller plan's */
}

static void run_loop(launcher *l, int mode, long iters) {
  fl_error err;
  long failures = 0;
  switch (mode) {
    case MODE_PLANNED:
      for (long i = 0; i < iters; i++)
        if (fl_launch(l->planned, l->stream, l->values, l->c->nargs, NULL, &err) != FL_OK) failures++;
      break;
    case MODE_UNPLANNED:
      for (long i = 0; i < iters; i++)
        if (launch_unplanned(l, &err) != FL_OK) failures++;
      break;
    default:
      for (long i = 0; i < iters; i++)
        if (l->caller->base->submit(l->caller->base, l->caller, l->stream, l->packed, l->packed_grid, &err) != FL_OK)
          failures++;
      break;
  }
  if (l->backend == FL_BACKEND_HOST && fl_stream_synchronize(FL_BACKEND_HOST, l->stream, &err) != FL_OK)
    failures++;
  l->failures += failures;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double time_loop(launcher *l, int mode, long iters) {
  double t0 = now_ns();
  run_loop(l, mode, iters);
  return now_ns() - t0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct result {
  double ns[MODE_COUNT];
  long iters[MODE_COUNT];
} result;

static int repeats = 7;
static double target_ns = 30e6;

/* Calibrates a mode's iteration count so that one repeat takes about the target time. */
static long calibrate(launcher *l, int mode) {
  long iters = 256;
  run_loop(l, mode, iters); /* warm-up */
  for (;;) {
    double t = time_loop(l, mode, iters);
    if (t >= target_ns / 2 || iters >= (1L << 26)) {
      if (t > 0) iters = (long)((double)iters * target_ns / t);
      return iters < 256 ? 256 : iters;
    }
    iters *= t < target_ns / 16 ? 8 : 2;
  }
}

/* The median ns/launch of each mode. The modes take turns within each repeat, so a slow phase of
 * the machine (the host worker sleeping or not, another process) hits all of them alike. */
static void measure(launcher *l, result *r) {
  double per[MODE_COUNT][32];
  for (int m = 0; m < MODE_COUNT; m++) r->iters[m] = calibrate(l, m);
  for (int rep = 0; rep < repeats; rep++)
    for (int m = 0; m < MODE_COUNT; m++) per[m][rep] = time_loop(l, m, r->iters[m]) / (double)r->iters[m];
  for (int m = 0; m < MODE_COUNT; m++) {
    qsort(per[m], (size_t)repeats, sizeof per[m][0], cmp_double);
    r->ns[m] = per[m][repeats / 2];
  }
}

/* ---- setup ---- */

static char kernel_dir[512], kernel_src[600], kernel_so[600];

static void remove_kernel(void) {
  if (kernel_so[0]) unlink(kernel_so);
  if (kernel_src[0]) unlink(kernel_src);
  if (kernel_dir[0]) rmdir(kernel_dir);
}

/* Builds the no-op host kernel; returns its function and keeps the library in *lib. */
static void *build_noop(fl_host_lib **lib) {
  const char *tmp = getenv("TMPDIR");
  snprintf(kernel_dir, sizeof kernel_dir, "%s/fl_bench_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(kernel_dir)) {
    perror("mkdtemp");
    exit(1);
  }
  atexit(remove_kernel);
  snprintf(kernel_src, sizeof kernel_src, "%s/noop.c", kernel_dir);
  snprintf(kernel_so, sizeof kernel_so, "%s/noop.so", kernel_dir);
  FILE *f = fopen(kernel_src, "w");
  if (!f) {
    perror("fopen");
    exit(1);
  }
  fputs("struct fl_host_program;\n"
        "void noop(const void *args, const struct fl_host_program *program) { (void)args; (void)program; }\n",
        f);
  fclose(f);
  const char *cc = getenv("CC");
  if (!cc || !*cc) cc = FL_BENCH_CC;
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -std=c11 -O2 -shared -fPIC -o '%s' '%s'", cc, kernel_so, kernel_src);
  if (system(cmd) != 0) {
    fprintf(stderr, "bench_launch: kernel build failed: %s\n", cmd);
    exit(1);
  }
  fl_error err;
  void *fn;
  if (fl_host_lib_open(kernel_so, lib, &err) != FL_OK) die("open noop.so", &err);
  if (fl_host_lib_symbol(*lib, "noop", &fn, &err) != FL_OK) die("symbol noop", &err);
  return fn;
}

static fl_plan *make_plan(int backend, void *kernel, fl_host_lib *lib, const bench_case *c, const fl_kind *kinds,
                          bool program) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.name = c->name;
  d.backend = backend;
  d.target.abi = FL_ABI_HOST;
  if (backend == FL_BACKEND_HOST) {
    d.kernel = kernel;
    fl_host_lib_retain(lib);
    d.owner = lib;
    d.owner_release = fl_host_lib_release_owner;
  }
  d.kinds = kinds;
  d.nkinds = c->nargs;
  d.runtime_arg_count = c->nargs;
  char expr[64];
  snprintf(expr, sizeof expr, "($%zu + %d - 1) // %d", c->n_index, BLOCK, BLOCK);
  if (program) {
    d.grid_mode = FL_GRID_PROGRAM;
    d.grid_exprs[0] = expr;
    d.grid_exprs[1] = "1";
    d.grid_exprs[2] = "1";
  } else {
    d.grid_mode = FL_GRID_CALLER;
  }
  fl_error err;
  fl_plan *plan;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) die("fl_plan_create", &err);
  return plan;
}

static void fill_values(launcher *l, const fl_kind *kinds) {
  static float storage[MAX_ARGS];
  for (size_t i = 0; i < l->c->nargs; i++) {
    switch (kinds[i]) {
      case FL_KIND_PTR: l->values[i] = fl_ptr(&storage[i]); break;
      case FL_KIND_I64: l->values[i] = fl_int((int64_t)1 << 40); break;
      case FL_KIND_FP32: l->values[i] = fl_float(0.5); break;
      default: l->values[i] = fl_int(i == l->c->n_index ? N_ELEMENTS : 7); break;
    }
  }
}

int main(int argc, char **argv) {
  const char *json_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      repeats = 3;
      target_ns = 10e6;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--quick] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  static const char *const mix64[4] = {"*fp32", "i32", "i64", "fp32"};
  for (size_t i = 0; i < 64; i++) cases[3].sig[i] = mix64[i % 4];

  fl_host_lib *lib = NULL;
  void *noop = build_noop(&lib);
  static const int backends[2] = {FL_BACKEND_NULL, FL_BACKEND_HOST};
  enum { NCASES = sizeof cases / sizeof cases[0] };
  result results[2][NCASES];
  long failures = 0;

  printf("fastlaunch bench_launch: median of %d repeats of ~%.0f ms, ns per launch\n", repeats, target_ns / 1e6);
  printf("planned   = fl_launch on a plan built once (grid program evaluated per launch)\n");
  printf("unplanned = per call: fl_kind_parse x n, fl_layout_compute, zero, fl_pack_value x n, grid in C, "
         "same backend submit\n");
  printf("submit    = the backend submit of a prepacked buffer alone (floor)\n");
  printf("host: no-op kernel, grid 1, worker thread; each repeat ends with fl_stream_synchronize\n\n");
  printf("%-7s %-20s %10s %10s %10s %9s %9s\n", "backend", "case", "planned", "unplanned", "submit", "unpl/pl",
         "pl-submit");
  for (int b = 0; b < 2; b++) {
    fl_error err;
    uint64_t stream;
    if (fl_stream_create(backends[b], &stream, &err) != FL_OK) die("fl_stream_create", &err);
    for (size_t k = 0; k < NCASES; k++) {
      static launcher l;
      memset(&l, 0, sizeof l);
      l.backend = backends[b];
      l.c = &cases[k];
      l.stream = stream;
      fl_kind kinds[MAX_ARGS];
      for (size_t i = 0; i < l.c->nargs; i++)
        if (fl_kind_parse(l.c->sig[i], &kinds[i], &err) != FL_OK) die("fl_kind_parse", &err);
      fill_values(&l, kinds);
      l.planned = make_plan(l.backend, noop, lib, l.c, kinds, true);
      l.caller = make_plan(l.backend, noop, lib, l.c, kinds, false);
      l.packed_size = fl_plan_layout(l.planned)->size;
      if (l.packed_size > sizeof l.packed) die("packed size", NULL);
      if (fl_plan_template(l.planned, l.packed, sizeof l.packed, &err) != FL_OK) die("template", &err);
      for (size_t i = 0; i < l.c->nargs; i++)
        if (fl_pack_value(FL_ABI_HOST, kinds[i], &l.values[i], l.packed + fl_plan_arg_offset(l.planned, i), i,
                          &err) != FL_OK)
          die("pack", &err);
      if (fl_plan_resolve_grid(l.planned, l.values, l.c->nargs, NULL, l.packed_grid, &err) != FL_OK)
        die("grid", &err);
      /* Both paths must produce the same launch. */
      {
        fl_error e2;
        if (launch_unplanned(&l, &e2) != FL_OK) die("unplanned launch", &e2);
      }
      result *r = &results[b][k];
      measure(&l, r);
      failures += l.failures;
      printf("%-7s %-20s %10.1f %10.1f %10.1f %8.2fx %9.1f\n", fl_backend_name(l.backend), l.c->name,
             r->ns[MODE_PLANNED], r->ns[MODE_UNPLANNED], r->ns[MODE_SUBMIT], r->ns[MODE_UNPLANNED] / r->ns[MODE_PLANNED],
             r->ns[MODE_PLANNED] - r->ns[MODE_SUBMIT]);
      fflush(stdout);
      fl_plan_release(l.planned);
      fl_plan_release(l.caller);
    }
    if (fl_stream_destroy(backends[b], stream, &err) != FL_OK) die("fl_stream_destroy", &err);
  }
  fl_host_lib_release(lib);
  if (failures) {
    fprintf(stderr, "bench_launch: %ld launches failed\n", failures);
    return 1;
  }
  if (json_path) {
    FILE *f = fopen(json_path, "w");
    if (!f) {
      perror(json_path);
      return 1;
    }
    fprintf(f, "{\"repeats\": %d, \"target_ms\": %.1f, \"unit\": \"ns_per_launch_median\", \"results\": [\n", repeats,
            target_ns / 1e6);
    for (int b = 0; b < 2; b++) {
      for (size_t k = 0; k < NCASES; k++) {
        const result *r = &results[b][k];
        fprintf(f,
                "  {\"backend\": \"%s\", \"case\": \"%s\", \"nargs\": %zu, \"planned_ns\": %.2f, "
                "\"unplanned_ns\": %.2f, \"submit_ns\": %.2f, \"ratio\": %.3f, \"iters\": [%ld, %ld, %ld]}%s\n",
                fl_backend_name(backends[b]), cases[k].name, cases[k].nargs, r->ns[MODE_PLANNED],
                r->ns[MODE_UNPLANNED], r->ns[MODE_SUBMIT], r->ns[MODE_UNPLANNED] / r->ns[MODE_PLANNED],
                r->iters[MODE_PLANNED], r->iters[MODE_UNPLANNED], r->iters[MODE_SUBMIT],
                b == 1 && k == NCASES - 1 ? "" : ",");
      }
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
  return 0;
}
