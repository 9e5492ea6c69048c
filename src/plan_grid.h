/* plan_grid.h: a plan's grid, in one module (plan_grid.c, and the evaluation every launch inlines,
 * here). One contract: built once from the descriptor (compile each dimension's expression, fold
 * the fixed arguments in, recognise each dimension's shape, or check a static grid), then
 * evaluated per launch in the cheapest form that holds: static, the 1-D shape, the shapes, the
 * programs; the caller's grid is checked against the same limits. The shapes' arithmetic is
 * fl__grid_shape_apply (fl_internal.h), the one place it is written. */
#ifndef FL_PLAN_GRID_H
#define FL_PLAN_GRID_H

#include "fl_internal.h"

/* Builds the plan's grid from the descriptor (grid_mode, static_grid, grid_exprs): programs
 * compiled, fixed arguments folded, shapes recognised; a grid that is constant becomes static and
 * is written into the template's grid slots (npu). Refusals are stable. */
fl_status fl__plan_grid_build(fl_plan *plan, const fl_plan_desc *desc, fl_error *err);
/* The grid of a launch, every form (out of line: the inline path below calls it when its forms do
 * not hold). */
fl_status fl__plan_grid_resolve(const fl_plan *plan, const fl_value *args, const int64_t *grid, uint32_t out[3],
                                fl_error *err);
/* Checks a grid against the plan's limits; returns BAD_GRID (not stable) with
 * "grid_dim_negative:i", "grid_dim_zero:i", "grid_dim_exceeds:i" or "grid_product_exceeds". */
fl_status fl__plan_check_grid(const fl_plan *plan, const int64_t grid[3], uint32_t out[3], fl_error *err);
/* Writes the grid into the npu ABI's int32 grid slots of a packed buffer. */
void fl__plan_write_grid(const fl_plan *plan, unsigned char *buf, const uint32_t grid[3]);

/* plan->grid_1d: true with the grid in out when x (the shape's argument) lands within the limits;
 * false, having done nothing, otherwise (fl__plan_grid_resolve then decides, and says why). */
static inline bool fl__plan_grid_one_dim_of(const fl_plan *plan, int64_t x, uint32_t out[3]) {
  const fl__grid_shape *sh = &plan->grid_dim[0];
  int64_t g;
  if (FL__UNLIKELY(x < 0 || x > sh->hi || sh->shift < 0)) return false;
  g = fl__grid_shape_apply(sh, x);
  if (FL__UNLIKELY(g < 1 || g > plan->grid_x_max)) return false;
  out[0] = (uint32_t)g;
  out[1] = (uint32_t)plan->grid_dim[1].value;
  out[2] = (uint32_t)plan->grid_dim[2].value;
  return true;
}

/* The same, x read from the launch's values (an int only). */
static inline bool fl__plan_grid_one_dim(const fl_plan *plan, const fl_value *args, uint32_t out[3]) {
  const fl_value *a = &args[plan->grid_dim[0].var];
  return FL__LIKELY(a->type == FL_VALUE_INT) && fl__plan_grid_one_dim_of(plan, a->v.i, out);
}

/* True with out filled when every dimension of g lies in [1, the backend's limit] and their product
 * within the plan's; false, having done nothing, otherwise (fl__plan_check_grid then says why). */
static inline bool fl__grid_fits(const fl_plan *plan, const int64_t g[3], uint32_t out[3]) {
  const int64_t *max = plan->base->grid_max;
  uint64_t product;
  /* g in [1, max]: g - 1 below max, unsigned (a limit is at least 1) */
  if (FL__LIKELY((uint64_t)g[0] - 1 < (uint64_t)max[0] && (uint64_t)g[1] - 1 < (uint64_t)max[1] &&
                 (uint64_t)g[2] - 1 < (uint64_t)max[2] &&
                 !__builtin_mul_overflow((uint64_t)g[0] * (uint64_t)g[1], (uint64_t)g[2], &product) &&
                 (!plan->grid_max_product || product <= plan->grid_max_product))) {
    out[0] = (uint32_t)g[0];
    out[1] = (uint32_t)g[1];
    out[2] = (uint32_t)g[2];
    return true;
  }
  return false;
}

/* A static plan launched without a grid: true with its grid in g. */
static inline bool fl__plan_grid_static(const fl_plan *plan, const int64_t *grid, uint32_t g[3]) {
  if (FL__UNLIKELY(plan->grid_mode != FL_GRID_STATIC || grid != NULL)) return false;
  g[0] = plan->static_grid[0];
  g[1] = plan->static_grid[1];
  g[2] = plan->static_grid[2];
  return true;
}

#endif
