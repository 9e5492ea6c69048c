/* jit_call_grid.h: the grid of a JIT call read in C, inlined into the dispatcher's call path
 * (jit.c, its only includer): a tuple of ints, or the entry's grid program (Triton's common lambda
 * read inline; any other traced callable evaluated by its compiled program). */
#ifndef FL_JIT_CALL_GRID_H
#define FL_JIT_CALL_GRID_H

#include "jit_base.h"

/* An int variable of a grid program: 0, or 1 when the value is not an int that fits. */
static int grid_var(PyObject *v, int64_t *out) {
  if (!v || !PyLong_Check(v)) return 1;
  uint64_t w;
  if (fl_ext_int_word(v, &w)) { /* an exact int within int64 */
    *out = (int64_t)w;
    return 0;
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 1;
  }
  *out = x;
  return 0;
}

/* A grid source's value (borrowed), NULL when it is not there. */
static FL_EXT_ALWAYS_INLINE PyObject *grid_source_value(const grid_source *s, const jit_entry *e, PyObject *const *pv,
                                          PyObject *closure) {
  if (s->kind == SRC_ARG) return pv[s->index];
  if (s->kind == SRC_CELL)
    return closure && s->index < PyTuple_GET_SIZE(closure) ? PyCell_GET(PyTuple_GET_ITEM(closure, s->index)) : NULL;
  /* Borrowed, on every launch (a strong reference costs this path 20 instructions): read at once,
   * under the GIL, while the module's dict holds it. The lookup can run a colliding key's __eq__,
   * which may clear the table: the entry is then in the graveyard (jit_table.c), still readable, and
   * the caller's generation check after the grid sends the call to Triton. */
  PyObject *v = PyDict_GetItemWithError(e->grid_globals, s->name);
  if (!v) PyErr_Clear();
  return v;
}

/* Whether `grid` is a function of the entry's grid code that Triton would call with its defaults
 * as they were when the code was compiled (none). */
static FL_EXT_ALWAYS_INLINE int grid_is_programs(const jit_entry *e, PyObject *grid) {
  return PyFunction_Check(grid) && e->grid_code && PyFunction_GET_CODE(grid) == e->grid_code &&
         PyFunction_GET_GLOBALS(grid) == e->grid_globals && !PyFunction_GET_DEFAULTS(grid) &&
         !PyFunction_GET_KW_DEFAULTS(grid);
}

/* Triton's common lambda read inline: one source that is an exact int, dimension 0 a shape, 1 and
 * 2 constant. 0 with the grid, or 1 (grid_program decides). */
static FL_EXT_ALWAYS_INLINE int grid_shaped(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t out[3]) {
  if (!e->grid_shaped || e->ngrid_src != 1 || !grid_is_programs(e, grid)) return 1;
  PyObject *v = grid_source_value(e->grid_src, e, pv, PyFunction_GET_CLOSURE(grid));
  uint64_t w;
  if (!v || !fl_ext_int_word(v, &w) || (int64_t)w > e->grid_shape.hi) return 1;
  out[0] = fl__grid_shape_apply(&e->grid_shape, (int64_t)w);
  out[1] = e->grid_const[1];
  out[2] = e->grid_const[2];
  return 0;
}

/* The grid from the entry's program when `grid` is a function of its code: 0, or 1 (not the
 * program's function, or a value it cannot compute: the callable is called instead). */
static int grid_program(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t out[3]) {
  if (!grid_is_programs(e, grid)) return 1;
  PyObject *closure = PyFunction_GET_CLOSURE(grid);
  int64_t vars[JIT_MAX_GRID_VARS];
  for (size_t i = 0; i < e->ngrid_src; i++)
    if (grid_var(grid_source_value(&e->grid_src[i], e, pv, closure), &vars[i])) return 1;
  if (e->grid_shaped && vars[0] <= e->grid_shape.hi) {
    out[0] = fl__grid_shape_apply(&e->grid_shape, vars[0]);
    out[1] = e->grid_const[1];
    out[2] = e->grid_const[2];
    return 0;
  }
  for (int d = 0; d < 3; d++) {
    fl_error err;
    if (!e->grid_prog[d]) out[d] = e->grid_const[d];
    else if (fl_grid_program_eval(e->grid_prog[d], vars, e->ngrid_src, &out[d], &err) != FL_OK) return 1;
  }
  return 0;
}

/* An exact tuple of 1-3 exact ints (a grid the caller computed, most often): 0, or what
 * fl_jit_read_grid says of any other. */
static FL_EXT_ALWAYS_INLINE int tuple_grid(PyObject *grid, int64_t g[3]) {
  Py_ssize_t n = PyTuple_GET_SIZE(grid);
  if (FL_EXT_UNLIKELY(n < 1 || n > 3)) return fl_jit_read_grid(grid, g);
  for (Py_ssize_t d = 0; d < 3; d++) {
    uint64_t w = 1;
    if (d < n && FL_EXT_UNLIKELY(!fl_ext_int_word(PyTuple_GET_ITEM(grid, d), &w))) return fl_jit_read_grid(grid, g);
    g[d] = (int64_t)w;
  }
  return 0;
}

/* The grid of a call to entry e, as Triton's run takes it: 0; 1 (a callable that is not e's grid
 * program: the full path calls it); -1 (not read here: Triton's path reads it, or raises). */
static FL_EXT_ALWAYS_INLINE int call_grid(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t g[3]) {
  int r;
  if (grid_shaped(e, pv, grid, g) == 0) r = 0;
  else if (PyTuple_CheckExact(grid)) r = tuple_grid(grid, g) ? -1 : 0;
  else if (PyCallable_Check(grid)) r = grid_program(e, pv, grid, g);
  else r = fl_jit_read_grid(grid, g) ? -1 : 0; /* a list, a range, a numpy array, ... */
  if (r == 0 && FL_EXT_UNLIKELY((g[1] | g[2]) != 1) && fl_jit_grid_product_wraps(g)) return -1;
  return r;
}

#endif
