/* jit_grid.c: a grid that is a value (not a callable), read the way Triton's JIT reads it.
 *
 * JITFunction.run takes `len(grid)`, then `grid[0]`, `grid[1]` and `grid[2]` as far as the length
 * goes (more items are ignored; 1 for a missing dimension), and its launcher converts each to a C
 * int with `__index__`. Whatever object does that, Triton takes: a tuple, a list, a range, a numpy
 * array, torch.Size, a dict keyed 0..2, items that are ints, bools or numpy integers. This file
 * reads the objects whose len, items and __index__ are C code without side effects (the types
 * CPython and extensions define statically); anything else (a class of the caller's, whose
 * methods may count or raise, a torch tensor with its __torch_function__) is read by Triton
 * alone, once, on its path: fastlaunch declines before it calls any of the object's code.
 * Depends on the C API only. */
#include "jit_base.h"

#include <string.h>

/* A type defined in C and not in a Python class statement: its slots run no Python code. */
static int static_type(PyTypeObject *t) {
  return !PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE);
}

/* torch.Tensor itself (not a subclass): its __index__ is torch's C function, which for this exact
 * type calls no Python code (a subclass may have a __torch_function__). Found once torch is
 * loaded, never importing it; the class lives as long as the process. */
static PyTypeObject *torch_tensor;

static int is_torch_tensor(PyTypeObject *t) {
  if (torch_tensor) return t == torch_tensor;
  if (strcmp(t->tp_name, "Tensor") != 0) return 0; /* cheap first: only a class named so looks further */
  PyObject *name = PyUnicode_FromString("torch");
  PyObject *torch = name ? PyImport_GetModule(name) : NULL;
  Py_XDECREF(name);
  PyObject *cls = torch ? PyObject_GetAttrString(torch, "Tensor") : NULL;
  Py_XDECREF(torch);
  if (PyErr_Occurred()) PyErr_Clear();
  if (cls && PyType_Check(cls)) torch_tensor = (PyTypeObject *)cls; /* kept: one reference for the process */
  else Py_XDECREF(cls);
  return t == torch_tensor;
}

/* One dimension: 0 with *out, or 1 (not read here; Triton converts it or raises). */
static int read_dim(PyObject *item, int64_t *out) {
  PyObject *index;
  if (PyLong_Check(item) && static_type(Py_TYPE(item))) { /* int and bool */
    index = Py_NewRef(item);
  } else {
    PyNumberMethods *nb = Py_TYPE(item)->tp_as_number;
    if (!(static_type(Py_TYPE(item)) || is_torch_tensor(Py_TYPE(item))) || !nb || !nb->nb_index) return 1;
    index = PyNumber_Index(item); /* numpy's integers */
    if (!index) {
      PyErr_Clear();
      return 1;
    }
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 1; /* beyond a C int: Triton's launcher raises OverflowError */
  }
  *out = v;
  return 0;
}

static int read_items(PyObject *const *items, Py_ssize_t n, int64_t g[3]) {
  if (n < 1) return 1; /* Triton's grid[0] raises IndexError */
  for (Py_ssize_t d = 0; d < 3; d++) {
    g[d] = 1;
    if (d < n && read_dim(items[d], &g[d])) return 1;
  }
  return 0;
}

/* Any other static type: its len() and its [0], [1], [2]. */
static int read_object(PyObject *grid, int64_t g[3]) {
  Py_ssize_t n = PyObject_Length(grid);
  if (n < 0) {
    PyErr_Clear();
    return 1;
  }
  PyObject *items[3] = {NULL, NULL, NULL};
  int r = n < 1;
  for (Py_ssize_t d = 0; d < 3 && d < n && !r; d++) {
    PyObject *key = PyLong_FromSsize_t(d); /* a small int: no allocation */
    items[d] = key ? PyObject_GetItem(grid, key) : NULL;
    Py_XDECREF(key);
    if (!items[d]) {
      PyErr_Clear();
      r = 1;
    }
  }
  if (!r) r = read_items(items, n < 3 ? n : 3, g);
  for (int d = 0; d < 3; d++) Py_XDECREF(items[d]);
  return r;
}

/* A tuple subclass whose len() and [i] are the tuple's own (a namedtuple): read as a tuple. */
static int tuple_like(PyTypeObject *t) {
  return t->tp_as_sequence && t->tp_as_mapping && t->tp_as_sequence->sq_length == PyTuple_Type.tp_as_sequence->sq_length &&
         t->tp_as_mapping->mp_length == PyTuple_Type.tp_as_mapping->mp_length &&
         t->tp_as_mapping->mp_subscript == PyTuple_Type.tp_as_mapping->mp_subscript;
}

int fl_jit_read_grid(PyObject *grid, int64_t g[3]) {
  if (PyTuple_Check(grid) && (static_type(Py_TYPE(grid)) || tuple_like(Py_TYPE(grid)))) /* tuple, torch.Size, a namedtuple */
    return PyTuple_GET_SIZE(grid) < 1 || read_items(&PyTuple_GET_ITEM(grid, 0), PyTuple_GET_SIZE(grid), g);
  if (PyList_CheckExact(grid)) { /* its items held while read: another thread may change the list (3.13t) */
    int r;
    Py_BEGIN_CRITICAL_SECTION(grid);
    r = PyList_GET_SIZE(grid) < 1 || read_items(&PyList_GET_ITEM(grid, 0), PyList_GET_SIZE(grid), g);
    Py_END_CRITICAL_SECTION();
    return r;
  }
  if (!static_type(Py_TYPE(grid)) || PyCallable_Check(grid)) return 1;
  return read_object(grid, g);
}

/* Whether Triton's launcher, which multiplies the three dimensions as C ints and launches only
 * when the product is positive, could decide otherwise than the plan: dimensions all positive
 * whose product is beyond a C int. */
int fl_jit_grid_product_wraps(const int64_t g[3]) {
  for (int d = 0; d < 3; d++)
    if (g[d] <= 0 || g[d] > INT32_MAX) return 0; /* none launched, or the plan refuses it */
  int64_t p;
  return __builtin_mul_overflow(g[0], g[1], &p) || __builtin_mul_overflow(p, g[2], &p) || p > INT32_MAX;
}
