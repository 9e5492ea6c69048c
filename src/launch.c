/* launch.c: the steady-state launch: copy the template, pack the runtime args, resolve the grid,
 * submit. Everything before the backend's submit is validation that can still fall back. */
#include "fl_internal.h"

#include <stdio.h>
#include <string.h>

/* Buffers too large for the stack live here; each thread has its own, so launches never share. */
static _Thread_local _Alignas(16) unsigned char large_args[FL__MAX_ARGS_SIZE];

/* An argument read by a grid program, as an int64; false when it has no int64 value. */
static inline bool grid_arg(const fl_value *a, int64_t *x) {
  switch (a->type) {
    case FL_VALUE_INT: *x = a->v.i; return true;
    case FL_VALUE_BOOL: *x = a->v.b; return true;
    case FL_VALUE_UINT: *x = (int64_t)a->v.u; return a->v.u <= (uint64_t)INT64_MAX;
    default: return false;
  }
}

/* A grid whose dimensions all have a shape of fl__grid_shape (plan->grid_simple): the values the
 * grid programs give, without the interpreter, and the limits checked inline when they hold.
 * Returns false, having done nothing, when an argument lies past a shape's range: the programs
 * run then. */
static inline bool simple_grid(const fl_plan *plan, const fl_value *args, uint32_t out[3], fl_error *err,
                               fl_status *st) {
  int64_t g[3];
  for (int d = 0; d < 3; d++) {
    const fl__grid_shape *sh = &plan->grid_dim[d];
    if (sh->constant) {
      g[d] = sh->value;
      continue;
    }
    int64_t x;
    if (FL__UNLIKELY(!grid_arg(&args[sh->var], &x))) {
      *st = fl__fail(err, FL_GRID_EVAL, false, "grid_overflow:arg%u", sh->var);
      return true;
    }
    if (FL__UNLIKELY(x > sh->hi)) return false;
    g[d] = fl__grid_shape_apply(sh, x);
  }
  const int64_t *max = plan->base->grid_max;
  uint64_t product;
  if (FL__LIKELY(g[0] > 0 && g[1] > 0 && g[2] > 0 && g[0] <= max[0] && g[1] <= max[1] && g[2] <= max[2] &&
                 !__builtin_mul_overflow((uint64_t)g[0] * (uint64_t)g[1], (uint64_t)g[2], &product) &&
                 (!plan->grid_max_product || product <= plan->grid_max_product))) {
    out[0] = (uint32_t)g[0];
    out[1] = (uint32_t)g[1];
    out[2] = (uint32_t)g[2];
    *st = FL_OK;
    return true;
  }
  *st = fl__plan_check_grid(plan, g, out, err); /* a zero, or past a limit: its answer and reason */
  return true;
}

/* plan->grid_1d: true with the grid in out when x lands within the limits; false, having done
 * nothing, otherwise (resolve_grid then decides, and says why). */
static inline bool one_dim_grid(const fl_plan *plan, const fl_value *args, uint32_t out[3]) {
  const fl__grid_shape *sh = &plan->grid_dim[0];
  const fl_value *a = &args[sh->var];
  if (FL__UNLIKELY(a->type != FL_VALUE_INT)) return false;
  int64_t x = a->v.i, g;
  if (FL__UNLIKELY(x < 0 || x > sh->hi || sh->shift < 0)) return false;
  g = fl__grid_shape_apply(sh, x);
  if (FL__UNLIKELY(g < 1 || g > plan->grid_x_max)) return false;
  out[0] = (uint32_t)g;
  out[1] = (uint32_t)plan->grid_dim[1].value;
  out[2] = (uint32_t)plan->grid_dim[2].value;
  return true;
}

static FL__NOINLINE fl_status resolve_grid(const fl_plan *plan, const fl_value *args, const int64_t *grid, uint32_t out[3],
                              fl_error *err) {
  switch (plan->grid_mode) {
    case FL_GRID_STATIC:
      if (FL__UNLIKELY(grid != NULL)) return fl__fail(err, FL_BAD_GRID, true, "grid_unexpected");
      out[0] = plan->static_grid[0];
      out[1] = plan->static_grid[1];
      out[2] = plan->static_grid[2];
      return FL_OK;
    case FL_GRID_PROGRAM: {
      if (FL__UNLIKELY(grid != NULL)) return fl__fail(err, FL_BAD_GRID, true, "grid_unexpected");
      fl_status simple;
      if (FL__LIKELY(plan->grid_simple) && FL__LIKELY(simple_grid(plan, args, out, err, &simple))) return simple;
      /* The programs index variables by argument position; only the ones they read are filled. */
      int64_t vars[plan->grid_nvars ? plan->grid_nvars : 1];
      for (size_t k = 0; k < plan->ngrid_vars; k++) {
        uint32_t v = plan->grid_vars[k];
        if (FL__UNLIKELY(!grid_arg(&args[v], &vars[v])))
          return fl__fail(err, FL_GRID_EVAL, false, "grid_overflow:arg%u", v);
      }
      int64_t g[3];
      for (int d = 0; d < 3; d++) {
        fl_status st = fl_grid_program_eval(plan->grid_prog[d], vars, plan->grid_nvars, &g[d], err);
        if (FL__UNLIKELY(st != FL_OK)) {
          size_t n = strlen(err->reason);
          if (n + 3 < sizeof err->reason) snprintf(err->reason + n, sizeof err->reason - n, ":%d", d);
          return st;
        }
      }
      return fl__plan_check_grid(plan, g, out, err);
    }
    default:
      if (FL__UNLIKELY(grid == NULL)) return fl__fail(err, FL_BAD_GRID, true, "grid_missing");
      return fl__plan_check_grid(plan, grid, out, err);
  }
}

/* Packs the runtime arguments. The common cases (an address, an int for a signed 32- or 64-bit
 * slot: plan->fast, from each kind's row) are written inline; everything else goes through
 * fl_pack_value with its range checks. */
static inline fl_status pack_runtime(const fl_plan *plan, unsigned char *buf, const fl_value *args,
                                     fl_error *err) {
  const fl_abi abi = plan->target.abi;
  for (size_t i = 0; i < plan->nruntime; i++) {
    const fl_value *a = &args[i];
    unsigned char *dst = buf + plan->offsets[i];
    const unsigned fast = plan->fast[i];
    if (fast == FL__FAST_PTR && a->type == FL_VALUE_PTR) {
      memcpy(dst, &a->v.p, 8);
    } else if (fast == FL__FAST_S32 && a->type == FL_VALUE_INT && a->v.i >= INT32_MIN && a->v.i <= INT32_MAX) {
      int32_t x = (int32_t)a->v.i;
      memcpy(dst, &x, 4);
    } else if (fast == FL__FAST_S64 && a->type == FL_VALUE_INT) {
      memcpy(dst, &a->v.i, 8);
    } else {
      fl_status st = fl_pack_value(abi, plan->kinds[i], a, dst, i, err);
      if (FL__UNLIKELY(st != FL_OK)) return st;
    }
  }
  return FL_OK;
}

/* The grid of a launch: the static grid and the common computed one inline, the rest through
 * resolve_grid. fl_plan_resolve_grid answers through this too, so it shows what a launch gets. */
static inline fl_status launch_grid(const fl_plan *plan, const fl_value *args, const int64_t *grid, uint32_t g[3],
                                    fl_error *err) {
  if (FL__LIKELY(plan->grid_mode == FL_GRID_STATIC && grid == NULL)) {
    g[0] = plan->static_grid[0];
    g[1] = plan->static_grid[1];
    g[2] = plan->static_grid[2];
    return FL_OK;
  }
  if (plan->grid_1d && grid == NULL && one_dim_grid(plan, args, g)) return FL_OK;
  return resolve_grid(plan, args, grid, g, err);
}

fl_status fl_plan_resolve_grid(const fl_plan *plan, const fl_value *args, size_t nargs, const int64_t *grid,
                               uint32_t out[3], fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (!plan) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (nargs != plan->nruntime)
    return fl__fail(err, FL_BAD_ARG_COUNT, true, "args_size_mismatch:%zu:%zu", nargs, plan->nruntime);
  if (nargs && !args) return fl__fail(err, FL_BAD_VALUE, false, "args_null");
  return launch_grid(plan, args, grid, out, err);
}

fl_status fl_launch(const fl_plan *plan, uint64_t stream, const fl_value *args, size_t nargs, const int64_t *grid,
                    fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (FL__UNLIKELY(!plan)) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (FL__UNLIKELY(nargs != plan->nruntime))
    return fl__fail(err, FL_BAD_ARG_COUNT, true, "args_size_mismatch:%zu:%zu", nargs, plan->nruntime);
  if (FL__UNLIKELY(nargs && !args)) return fl__fail(err, FL_BAD_VALUE, false, "args_null");

  const size_t size = plan->layout.size;
  _Alignas(16) unsigned char stack_args[FL__STACK_ARGS_SIZE];
  unsigned char *buf = size <= sizeof stack_args ? stack_args : large_args;
  if (size <= FL__SMALL_ARGS)
    memcpy(buf, plan->tmpl, FL__SMALL_ARGS); /* a constant size: a few moves, no call */
  else
    memcpy(buf, plan->tmpl, size);
  fl_status st = pack_runtime(plan, buf, args, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;

  uint32_t g[3];
  st = launch_grid(plan, args, grid, g, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;
  /* A grid with a zero dimension runs no program: like Triton's launchers, launch nothing. */
  if (FL__UNLIKELY(g[0] == 0 || g[1] == 0 || g[2] == 0)) {
    fl__ok(err);
    return FL_OK;
  }
  if (plan->layout.grid[0] >= 0 && plan->grid_mode != FL_GRID_STATIC) fl__plan_write_grid(plan, buf, g);
  /* The submit boundary: from here on only the backend can fail, and says whether it submitted. */
  return plan->base->submit(plan->base, plan, stream, buf, g, err);
}
