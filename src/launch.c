/* launch.c: the steady-state launch: copy the template, pack the runtime args, resolve the grid,
 * submit. Everything before the backend's submit is validation that can still fall back. */
#include "plan_grid.h"

#include <stdio.h>
#include <string.h>

/* Buffers too large for the stack live here; each thread has its own, so launches never share. */
static _Thread_local _Alignas(16) unsigned char large_args[FL__MAX_ARGS_SIZE];

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
  st = fl__launch_grid(plan, args, grid, g, err);
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
