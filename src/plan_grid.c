/* plan_grid.c: a plan's grid (plan_grid.h): building it once from the descriptor, checking a grid
 * against the backend's limits, resolving a launch's grid in every form, and the npu grid slots. */
#include "plan_grid.h"

#include <stdio.h>
#include <string.h>

fl_status fl__plan_check_grid(const fl_plan *plan, const int64_t grid[3], uint32_t out[3], fl_error *err) {
  const fl__backend *be = plan->base;
  uint64_t product = 1;
  bool zero = false;
  for (int d = 0; d < 3; d++) {
    int64_t g = grid[d];
    if (g < 0) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_negative:%d", d);
    if (g == 0) {
      if (!be->grid_allow_zero) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_zero:%d", d);
      zero = true;
    }
    if (g > be->grid_max[d]) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_exceeds:%d", d);
    out[d] = (uint32_t)g;
    /* Each factor is below 2^32 and the running product is checked before it can pass 2^64. */
    if (!zero && plan->grid_max_product) {
      product *= (uint64_t)g;
      if (product > plan->grid_max_product)
        return fl__fail(err, FL_BAD_GRID, false, "grid_product_exceeds");
    }
  }
  return FL_OK;
}

/* Reads an integer value as int64 for grid programs; the packer has range-checked it already. */
static bool value_to_i64(const fl_value *v, int64_t *out) {
  switch (v->type) {
    case FL_VALUE_INT:
      *out = v->v.i;
      return true;
    case FL_VALUE_UINT:
      if (v->v.u > (uint64_t)INT64_MAX) return false;
      *out = (int64_t)v->v.u;
      return true;
    case FL_VALUE_BOOL:
      *out = v->v.b ? 1 : 0;
      return true;
    default:
      return false;
  }
}

static void write_grid_slots(fl_plan *plan, unsigned char *buf, const uint32_t grid[3]) {
  for (int d = 0; d < 3; d++) {
    int32_t g = (int32_t)grid[d];
    memcpy(buf + plan->layout.grid[d], &g, 4);
  }
}

/* Appends ":<dim>" to a grid program's reason, so the message names the dimension. */
static fl_status dim_fail(fl_error *err, fl_status st, int d) {
  if (err) {
    size_t n = strlen(err->reason);
    if (n + 3 < sizeof err->reason) snprintf(err->reason + n, sizeof err->reason - n, ":%d", d);
    err->stable = true;
  }
  return st;
}

/* Compiles the three grid expressions, folds the fixed integer arguments in, and records which
 * runtime arguments they read. All three constant: the plan gets a static grid instead. */
static fl_status build_grid_program(fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  fl_status st;
  bool all_constant = true;
  for (int d = 0; d < 3; d++) {
    if (!desc->grid_exprs[d]) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_null:%d", d);
    st = fl_grid_program_compile(desc->grid_exprs[d], desc->arg_names, desc->arg_names ? plan->nargs : 0,
                                 &plan->grid_prog[d], err);
    if (st != FL_OK) return dim_fail(err, st, d);
    fl_grid_program *prog = plan->grid_prog[d];
    size_t nvars = fl_grid_program_nvars(prog);
    if (nvars > plan->nargs)
      return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_var_out_of_range:%zu:%d", nvars - 1, d);
    for (size_t v = 0; v < nvars; v++) {
      if (!fl__grid_program_uses_var(prog, v)) continue;
      int64_t value;
      if (!fl_kind_is_int(plan->kinds[v]) ||
          (v >= plan->nruntime && !value_to_i64(&desc->fixed_args[v - plan->nruntime], &value)))
        return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_var_not_int:%zu:%s:%d", v,
                        fl_kind_name(plan->kinds[v]), d);
      if (v >= plan->nruntime) {
        st = fl__grid_program_substitute(prog, v, value, err);
        if (st != FL_OK) return dim_fail(err, st, d);
      }
    }
    if (!fl_grid_program_is_constant(prog)) all_constant = false;
  }
  /* Record the runtime variables in increasing order, once each. */
  for (size_t v = 0; v < plan->nruntime; v++) {
    bool used = false;
    for (int d = 0; d < 3; d++) used = used || fl__grid_program_uses_var(plan->grid_prog[d], v);
    if (!used) continue;
    if (plan->ngrid_vars == FL__MAX_GRID_VARS)
      return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_too_many_vars:%d", FL__MAX_GRID_VARS);
    plan->grid_vars[plan->ngrid_vars++] = (uint32_t)v;
    plan->grid_nvars = v + 1;
  }
  plan->grid_simple = true;
  for (int d = 0; d < 3; d++) {
    const fl_grid_program *prog = plan->grid_prog[d];
    if (fl_grid_program_is_constant(prog)) {
      st = fl_grid_program_eval(prog, NULL, 0, &plan->grid_dim[d].value, err);
      if (st != FL_OK) return dim_fail(err, st, d);
      plan->grid_dim[d].constant = true;
    } else if (!fl__grid_program_shape(prog, &plan->grid_dim[d])) {
      plan->grid_simple = false;
    }
  }
  const fl__grid_shape *gd = plan->grid_dim;
  const int64_t *max = plan->base->grid_max;
  if (plan->grid_simple && !gd[0].constant && gd[1].constant && gd[2].constant && gd[1].value >= 1 &&
      gd[1].value <= max[1] && gd[2].value >= 1 && gd[2].value <= max[2]) {
    plan->grid_1d = true;
    plan->grid_x_max = max[0];
    if (plan->grid_max_product) { /* y * z <= 2^62: each is at most 2^31 - 1 */
      int64_t x_max = (int64_t)(plan->grid_max_product / (uint64_t)(gd[1].value * gd[2].value));
      if (x_max < plan->grid_x_max) plan->grid_x_max = x_max;
    }
  }
  if (!all_constant) return FL_OK;
  int64_t g[3];
  for (int d = 0; d < 3; d++) {
    st = fl_grid_program_eval(plan->grid_prog[d], NULL, 0, &g[d], err);
    if (st != FL_OK) return dim_fail(err, st, d);
    fl_grid_program_free(plan->grid_prog[d]);
    plan->grid_prog[d] = NULL;
  }
  st = fl__plan_check_grid(plan, g, plan->static_grid, err);
  if (st != FL_OK) {
    if (err) err->stable = true;
    return st;
  }
  plan->grid_mode = FL_GRID_STATIC;
  return FL_OK;
}

fl_status fl__plan_grid_build(fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  fl_status st;
  if (plan->grid_mode == FL_GRID_STATIC) {
    if ((st = fl__plan_check_grid(plan, desc->static_grid, plan->static_grid, err)) != FL_OK) {
      if (err) err->stable = true;
      return st;
    }
  } else if (plan->grid_mode == FL_GRID_PROGRAM) {
    if ((st = build_grid_program(plan, desc, err)) != FL_OK) return st;
  }
  if (plan->grid_mode == FL_GRID_STATIC && plan->layout.grid[0] >= 0) write_grid_slots(plan, plan->tmpl, plan->static_grid);
  return FL_OK;
}

void fl__plan_write_grid(const fl_plan *plan, unsigned char *buf, const uint32_t grid[3]) {
  write_grid_slots((fl_plan *)plan, buf, grid);
}

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
  if (FL__LIKELY(fl__grid_fits(plan, g, out))) {
    *st = FL_OK;
    return true;
  }
  *st = fl__plan_check_grid(plan, g, out, err); /* a zero, or past a limit: its answer and reason */
  return true;
}

FL__NOINLINE fl_status fl__plan_grid_resolve(const fl_plan *plan, const fl_value *args, const int64_t *grid,
                                           uint32_t out[3], fl_error *err) {
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
