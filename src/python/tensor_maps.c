/* tensor_maps.c: Triton's host-side tensor descriptors for plans with tensor map arguments
 * (FL_KIND_TMAP): the metadata a plan is made with (Plan(tensor_maps=...): what the compiled
 * kernel's tensordesc_meta fixes), where each map's values sit among a call's, and a descriptor read
 * as Triton's make_tensordesc_arg reads it: base.data_ptr(), shape, strides, padding,
 * round_f32_to_tf32. The map itself is the core's (src/tensor_map.c). */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static void refuse(fl_error *err, const char *what, size_t i) {
  err->status = FL_BAD_VALUE;
  err->backend_submitted = false;
  err->stable = false;
  snprintf(err->reason, sizeof err->reason, "%s:%zu", what, i);
}

static int meta_int(PyObject *item, Py_ssize_t i, const char *what, long lo, long hi, int *out) {
  long v = PyLong_Check(item) ? PyLong_AsLong(item) : -1;
  if (!PyLong_Check(item) || (v == -1 && PyErr_Occurred()) || v < lo || v > hi) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "tensor_maps[%zd]: %s must be an int in [%ld, %ld]", i, what, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_one(PyObject *entry, Py_ssize_t i, fl_tensor_map_meta *m) {
  memset(m, 0, sizeof *m);
  PyObject *t = PySequence_Tuple(entry);
  if (!t) return -1;
  int rc = -1, fp4;
  if (PyTuple_GET_SIZE(t) != 5) {
    PyErr_Format(PyExc_ValueError, "tensor_maps[%zd]: (swizzle, elem_size, elem_type, block_shape, fp4_padded)", i);
    goto done;
  }
  if (meta_int(PyTuple_GET_ITEM(t, 0), i, "swizzle", 0, 6, &m->swizzle) < 0 ||
      meta_int(PyTuple_GET_ITEM(t, 1), i, "elem_size", 1, 8, &m->elem_size) < 0 ||
      meta_int(PyTuple_GET_ITEM(t, 2), i, "elem_type", 0, 15, &m->elem_type) < 0 ||
      (fp4 = PyObject_IsTrue(PyTuple_GET_ITEM(t, 4))) < 0)
    goto done;
  m->fp4_padded = fp4;
  PyObject *block = PySequence_Tuple(PyTuple_GET_ITEM(t, 3));
  if (!block) goto done;
  Py_ssize_t rank = PyTuple_GET_SIZE(block);
  if (rank < 1 || rank > FL_TENSOR_MAP_MAX_RANK) {
    PyErr_Format(PyExc_ValueError, "tensor_maps[%zd]: block_shape must have 1 to 5 entries, not %zd", i, rank);
    Py_DECREF(block);
    goto done;
  }
  m->rank = (uint32_t)rank;
  for (Py_ssize_t d = 0; d < rank; d++) {
    int v;
    if (meta_int(PyTuple_GET_ITEM(block, d), i, "block_shape's entry", 1, 1 << 20, &v) < 0) {
      Py_DECREF(block);
      goto done;
    }
    m->block[d] = (uint32_t)v;
  }
  Py_DECREF(block);
  rc = 0;
done:
  Py_DECREF(t);
  return rc;
}

int fl_ext_parse_tensor_maps(PyObject *obj, fl_tensor_map_meta *metas, size_t *n) {
  PyObject *items = PySequence_Tuple(obj);
  if (!items) return -1;
  Py_ssize_t count = PyTuple_GET_SIZE(items);
  int rc = 0;
  if (count > FL_EXT_MAX_TMAPS) {
    PyErr_Format(PyExc_ValueError, "tensor_maps: at most %d, not %zd", FL_EXT_MAX_TMAPS, count);
    rc = -1;
  }
  for (Py_ssize_t i = 0; rc == 0 && i < count; i++) rc = parse_one(PyTuple_GET_ITEM(items, i), i, &metas[i]);
  Py_DECREF(items);
  *n = rc == 0 ? (size_t)count : 0;
  return rc;
}

PyObject *fl_ext_set_tensor_desc_type(PyObject *module, PyObject *cls) {
  if (cls != Py_None && !PyType_Check(cls)) return PyErr_Format(PyExc_TypeError, "tensor_descriptor_type: a class or None");
  fl_ext_state *st = PyModule_GetState(module);
  Py_XSETREF(st->tensor_desc_type, cls == Py_None ? NULL : Py_NewRef(cls));
  Py_RETURN_NONE;
}

int fl_ext_args_tmaps(fl_ext_args *a, const fl_tensor_map_meta *metas, size_t n) {
  a->tmap_index = PyMem_Calloc(a->nruntime ? a->nruntime : 1, 1);
  if (!a->tmap_index) return PyErr_NoMemory(), -1;
  size_t j = 0;
  for (size_t k = 0; k < a->nruntime && j < n; k++) {
    if (a->kinds[k] != FL_KIND_TMAP) continue;
    a->tmap_index[k] = (uint8_t)j;
    a->tmap_rank[j] = (uint8_t)metas[j].rank;
    j++;
  }
  return 0;
}

/* A list or tuple of at most 5 ints (exact or subclasses: Triton's PyLong_Check) into out; its
 * length, or -1 (not one: the caller refuses). Nothing allocated for a list or a tuple. */
static Py_ssize_t read_ints(PyObject *seq, int64_t *out) {
  PyObject *fast = seq ? PySequence_Fast(seq, "") : NULL;
  if (!fast) return PyErr_Clear(), -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject **items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t d = 0; n <= FL_TENSOR_MAP_MAX_RANK && d < n; d++) {
    int overflow = 0;
    long long x = PyLong_Check(items[d]) ? PyLong_AsLongLongAndOverflow(items[d], &overflow) : 0;
    if (!PyLong_Check(items[d]) || overflow || (x == -1 && PyErr_Occurred())) n = -1;
    else out[d] = x;
  }
  Py_DECREF(fast);
  PyErr_Clear();
  return n > FL_TENSOR_MAP_MAX_RANK ? -1 : n;
}

/* The base's address: a tensor through the door, else data_ptr() as Triton calls it. */
static int base_address(fl_ext_state *st, PyObject *base, unsigned long long *addr) {
  uint64_t p;
  int where, index;
  if (st->door && st->door->unpack(base, &p, &where, &index)) return *addr = p, 0;
  PyObject *ptr = PyObject_CallMethodNoArgs(base, st->str_data_ptr);
  if (!ptr) return -1;
  int ok = PyLong_Check(ptr);
  *addr = ok ? PyLong_AsUnsignedLongLong(ptr) : 0;
  Py_DECREF(ptr);
  return ok && !PyErr_Occurred() ? 0 : (PyErr_Clear(), 1);
}

int fl_ext_extract_tmap(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_tensor_map_value *t,
                        fl_error *err) {
  memset(t, 0, sizeof *t);
  PyObject *base = PyObject_GetAttr(obj, st->str_base);
  PyObject *shape = base ? PyObject_GetAttr(obj, st->str_shape) : NULL;
  PyObject *strides = shape ? PyObject_GetAttr(obj, st->str_strides) : NULL;
  PyObject *padding = strides ? PyObject_GetAttr(obj, st->str_padding) : NULL;
  PyObject *tf32 = padding ? PyObject_GetAttr(obj, st->str_round_tf32) : NULL;
  int rc = -1, truth = -1, r = 1;
  Py_ssize_t rank = -1;
  unsigned long long addr = 0;
  if (!tf32 || (r = base_address(st, base, &addr)) < 0) {
    /* Not a descriptor (an attribute missing, a base without an address): refused, and Triton says
     * what it says. An exception that is not an AttributeError or a TypeError is the object's own:
     * it propagates. */
    if (PyErr_ExceptionMatches(PyExc_AttributeError) || PyErr_ExceptionMatches(PyExc_TypeError)) PyErr_Clear();
    else rc = -2;
    if (rc == -1) refuse(err, "tmap_expected", i);
    goto done;
  }
  if (r != 0 || (truth = PyObject_IsTrue(tf32)) < 0 || (rank = read_ints(shape, t->shape)) < 1 ||
      read_ints(strides, t->strides) != rank || t->strides[rank - 1] != 1) {
    /* Triton asserts the innermost stride is 1, and raises on anything else here itself. */
    PyErr_Clear();
    refuse(err, "tmap_descriptor_invalid", i);
    goto done;
  }
  t->base = addr;
  t->rank = (uint32_t)rank;
  t->nan_padding = padding == st->str_nan ||
                   (PyUnicode_Check(padding) && PyUnicode_Compare(padding, st->str_nan) == 0);
  t->round_tf32 = truth;
  out[0] = fl_tensor_map(t);
  for (Py_ssize_t d = 0; d < rank; d++) {
    out[1 + d] = fl_int(t->shape[d]);
    out[1 + rank + d] = fl_int(t->strides[d]);
  }
  rc = 0;
done:
  Py_XDECREF(base);
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  Py_XDECREF(padding);
  Py_XDECREF(tf32);
  return rc;
}
