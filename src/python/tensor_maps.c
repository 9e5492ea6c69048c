/* tensor_maps.c: Triton's host-side tensor descriptors for plans with tensor map arguments
 * (FL_KIND_TMAP): the metadata a plan is made with (Plan(tensor_maps=...): what the compiled
 * kernel's tensordesc_meta fixes), where each map's values sit among a call's, and a descriptor read
 * as Triton's make_tensordesc_arg reads it: base.data_ptr(), shape, strides, padding,
 * round_f32_to_tf32. The map itself is the core's (src/tensor_map.c). */
#include "ext.h"
#include "watch.h"

#include <stdio.h>
#include <string.h>

/* A map's launch values: the map, then its shape and its strides. */
static inline void tmap_values(const fl_tensor_map_value *t, uint32_t rank, fl_value *out) {
  out[0] = fl_tensor_map(t);
  for (uint32_t d = 0; d < rank; d++) {
    out[1 + d] = fl_int(t->shape[d]);
    out[1 + rank + d] = fl_int(t->strides[d]);
  }
}

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
  int rc;
  Py_BEGIN_CRITICAL_SECTION(module);
  rc = fl_ext_state_swap(st, &st->tensor_desc_type, cls == Py_None ? NULL : cls);
  Py_END_CRITICAL_SECTION();
  if (rc < 0) return NULL;
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
  if (FL_EXT_UNLIKELY(FL_EXT_LOAD(st->door_state) == 0)) fl_ext_door_load(st);
  if (FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack(base, &p, &where, &index)) return *addr = p, 0;
  PyObject *ptr = PyObject_CallMethodNoArgs(base, st->str_data_ptr);
  if (!ptr) return -1;
  int ok = PyLong_Check(ptr);
  *addr = ok ? PyLong_AsUnsignedLongLong(ptr) : 0;
  Py_DECREF(ptr);
  return ok && !PyErr_Occurred() ? 0 : (PyErr_Clear(), 1);
}

int fl_ext_extract_tmap(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_tensor_map_value *t,
                        fl_value *decomposed, fl_error *err) {
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
      read_ints(strides, t->strides) != rank) {
    /* Triton raises on these itself. (Its assertion that the innermost stride is 1 is the map's: the
     * core refuses such a map, tmap_inner_stride; the decomposed form passes any stride.) */
    PyErr_Clear();
    refuse(err, "tmap_descriptor_invalid", i);
    goto done;
  }
  t->base = addr;
  t->rank = (uint32_t)rank;
  t->nan_padding = padding == st->str_nan ||
                   (PyUnicode_Check(padding) && PyUnicode_Compare(padding, st->str_nan) == 0);
  t->round_tf32 = truth;
  tmap_values(t, (uint32_t)rank, out);
  if (decomposed) { /* what Triton passes below sm_90 and on gfx942 besides the shape and strides */
    uint64_t w;
    decomposed[0] = fl_ptr((const void *)(uintptr_t)addr);
    decomposed[1] = fl_bool(t->nan_padding);
    /* round_f32_to_tf32 as given (Triton's i1 slot takes the int): a bool, an exact int, or unread */
    decomposed[2] = PyBool_Check(tf32) ? fl_bool(tf32 == Py_True) : fl_ext_int_word(tf32, &w) ? fl_int((int64_t)w) : fl_none();
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

/* ---- a map from the call's tensor, its shape and strides fixed (Inductor's host-side TMA) ---- */
static int geometry_one(PyObject *entry, size_t j, const fl_tensor_map_meta *m, fl_tensor_map_value *t) {
  memset(t, 0, sizeof *t);
  if (entry == Py_None) return 0;
  PyObject *shape = NULL, *strides = NULL;
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) goto bad;
  shape = PyTuple_GET_ITEM(entry, 0), strides = PyTuple_GET_ITEM(entry, 1);
  Py_ssize_t rank = read_ints(shape, t->shape);
  if (rank != (Py_ssize_t)m->rank || read_ints(strides, t->strides) != rank) goto bad;
  for (Py_ssize_t d = 0; d < rank; d++)
    if (t->shape[d] < 1 || t->strides[d] < 1) goto bad;
  if (t->strides[rank - 1] != 1) {
    PyErr_Format(PyExc_ValueError, "tensor_map_geometry[%zu]: the innermost stride must be 1", j);
    return -1;
  }
  t->rank = (uint32_t)rank;
  return 0;
bad:
  PyErr_Format(PyExc_ValueError, "tensor_map_geometry[%zu]: expected None or (shape, strides), %u positive ints each", j,
               m->rank);
  return -1;
}

int fl_ext_args_tmap_geometry(fl_ext_args *a, PyObject *obj, const fl_tensor_map_meta *metas, size_t n) {
  PyObject *items = PySequence_Tuple(obj);
  if (!items) return -1;
  int rc = -1;
  if ((size_t)PyTuple_GET_SIZE(items) != n) {
    PyErr_Format(PyExc_ValueError, "tensor_map_geometry: %zd entries for %zu tensor maps", PyTuple_GET_SIZE(items), n);
  } else if ((a->tmap_fixed = PyMem_Calloc(n ? n : 1, sizeof *a->tmap_fixed)) == NULL) {
    PyErr_NoMemory();
  } else {
    rc = 0;
    for (size_t j = 0; rc == 0 && j < n; j++) rc = geometry_one(PyTuple_GET_ITEM(items, (Py_ssize_t)j), j, &metas[j], &a->tmap_fixed[j]);
  }
  Py_DECREF(items);
  return rc;
}

int fl_ext_tmap_of_tensor(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_tensor_map_value *t,
                          const fl_tensor_map_value *fixed, fl_error *err) {
  unsigned long long addr = 0;
  int r = base_address(st, obj, &addr);
  if (r < 0) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return -2;
    PyErr_Clear();
  }
  if (r != 0) return refuse(err, "tmap_tensor_expected", i), -1;
  if (addr % 16 != 0) return refuse(err, "tmap_base_unaligned", i), -1;
  *t = *fixed; /* padding "zero", round_f32_to_tf32 False: TensorDescriptor's defaults */
  t->base = addr;
  tmap_values(t, t->rank, out);
  return 0;
}

/* ---- the JIT memo's read (jit_key.c): no Python code runs ---- */

static PyObject *const *desc_names(fl_ext_state *st, PyObject *names[6]) {
  names[0] = st->str_base, names[1] = st->str_shape, names[2] = st->str_strides;
  names[3] = st->str_block_shape, names[4] = st->str_padding, names[5] = st->str_round_tf32;
  return names;
}

unsigned fl_ext_tmap_plain_class(fl_ext_state *st, PyTypeObject *type) {
  if (type->tp_getattro != PyObject_GenericGetAttr) return 0; /* a __getattr__ or __getattribute__ of its own */
  PyObject *names[6];
  desc_names(st, names);
  for (int i = 0; i < 6; i++) {
    PyObject *found = _PyType_Lookup(type, names[i]); /* borrowed; no code runs */
    if (found && Py_TYPE(found) != &PyMemberDescr_Type &&
        (Py_TYPE(found)->tp_descr_get || Py_TYPE(found)->tp_descr_set))
      return 0; /* a property, or any descriptor whose code could run */
  }
  return type->tp_version_tag; /* 0 when none is assigned: not memoized */
}

int fl_ext_tmap_dtype(fl_ext_state *st, PyObject *desc, int *dtype) {
  if (FL_EXT_LOAD(st->door_state) == 0) fl_ext_door_load(st);
  PyObject *base = PyObject_GetAttr(desc, st->str_base);
  uint64_t p;
  int where, index, ok = base && FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack_typed(base, &p, &where, &index, dtype);
  Py_XDECREF(base);
  PyErr_Clear();
  return ok ? 0 : 1;
}

/* The items of a list or a tuple (a subclass too: torch.Size) of `rank` entries, or NULL. */
static PyObject **items_of(PyObject *seq, uint32_t rank) {
  if (PyList_CheckExact(seq)) return (size_t)PyList_GET_SIZE(seq) == rank ? ((PyListObject *)seq)->ob_item : NULL;
  if (PyTuple_Check(seq)) return (size_t)PyTuple_GET_SIZE(seq) == rank ? &PyTuple_GET_ITEM(seq, 0) : NULL;
  return NULL;
}

/* Ints (exact or subclasses, as read_ints) of a list or tuple of `rank` entries into out: 1, or 0. */
static int ints_quiet(PyObject *seq, uint32_t rank, int64_t *out) {
  PyObject **items = items_of(seq, rank);
  for (uint32_t d = 0; items && d < rank; d++) {
    uint64_t w;
    if (fl_ext_int_word(items[d], &w)) { /* an exact int within int64 */
      out[d] = (int64_t)w;
      continue;
    }
    int overflow = 0;
    long long x = PyLong_Check(items[d]) ? PyLong_AsLongLongAndOverflow(items[d], &overflow) : 0;
    if (!PyLong_Check(items[d]) || overflow || (x == -1 && PyErr_Occurred())) return PyErr_Clear(), 0;
    out[d] = x;
  }
  return items != NULL;
}

/* A list or tuple's exact ints equal to `want`. */
static inline int ints_are(PyObject *seq, uint32_t rank, const int64_t *want) {
  PyObject **items = items_of(seq, rank);
  if (!items) return 0;
  for (uint32_t d = 0; d < rank; d++) {
    uint64_t w;
    if (!fl_ext_int_word(items[d], &w) || (int64_t)w != want[d]) return 0;
  }
  return 1;
}

/* A list or tuple's exact ints equal to the key's words. */
static inline int block_is(PyObject *seq, const uint64_t *block, uint32_t rank) {
  PyObject **items = items_of(seq, rank);
  if (!items) return 0;
  for (uint32_t d = 0; d < rank; d++) {
    uint64_t w;
    if (!fl_ext_int_word(items[d], &w) || (int64_t)w < 0 || w != block[d]) return 0;
  }
  return 1;
}

/* The six names' values in an instance dict (new references; NULL where a name is not there). Its
 * keys are the names set by attribute (interned, as the names here are): one pass over its entries
 * compares them by address; any left unfound are looked up. */
static void dict_read(PyObject *dict, PyObject *const names[6], PyObject *a[6]) {
#ifndef Py_GIL_DISABLED
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  int found = 0, next = 0; /* the dataclass's field order is the names' order: tried first */
  while (found < 6 && PyDict_Next(dict, &pos, &key, &value)) {
    int i = next < 6 && key == names[next] ? next : 0;
    while (i < 6 && key != names[i]) i++;
    if (i == 6) continue;
    if (!a[i]) found++;
    Py_XSETREF(a[i], Py_NewRef(value));
    next = i + 1;
  }
  if (found == 6) return;
#endif
  for (int i = 0; i < 6; i++) {
    if (a[i]) continue;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyDict_GetItemRef(dict, names[i], &a[i]) < 0) PyErr_Clear();
#else
    a[i] = Py_XNewRef(PyDict_GetItemWithError(dict, names[i]));
    PyErr_Clear(); /* str keys: no error; a failed lookup is the attribute read's (below) */
#endif
  }
}

/* The map and values from a descriptor's base, shape, strides, block shape (borrowed) and flags. 0, or 1. */
static int tmap_fill(fl_ext_state *st, PyObject *const a[4], bool nan_padding, bool round_tf32, int dtype,
                     const uint64_t *block, uint32_t rank, fl_value *out, fl_tensor_map_value *t) {
  uint64_t p;
  int where, index, dt;
  if (!FL_EXT_DOOR(st) || !FL_EXT_DOOR(st)->unpack_typed(a[0], &p, &where, &index, &dt) || dt != dtype ||
      !block_is(a[3], block, rank))
    return 1;
  memset(t, 0, sizeof *t); /* the core's memo compares the whole value */
  if (!ints_quiet(a[1], rank, t->shape) || !ints_quiet(a[2], rank, t->strides) || t->strides[rank - 1] != 1) return 1;
  t->base = p;
  t->rank = rank;
  t->nan_padding = nan_padding;
  t->round_tf32 = round_tf32;
  tmap_values(t, rank, out);
  return 0;
}

int fl_ext_tmap_quiet(fl_ext_state *st, PyObject *obj, int dtype, const uint64_t *block, uint32_t rank, fl_value *out,
                      fl_tensor_map_value *t, fl_ext_tmap_seen *seen) {
  int rc = 1;
  /* The class's lookup is the generic one and none of the names is a data descriptor on it
   * (fl_ext_tmap_plain_class): each is the instance dict's, else the class's. The dict is read
   * whole (made from the object's inline values the first time, as `obj.__dict__` makes it). */
  PyObject *dict = PyObject_GenericGetDict(obj, NULL);
  if (!dict) return PyErr_Clear(), 1;
  if (seen && fl_ext_tmap_stamped() && seen->obj == obj && seen->dict == dict &&
      seen->stamp == fl_ext_tmap_stamp(dict)) {
    /* Met again, its dict unchanged since it was read (so holding what it held then): only what can
     * change without the dict is read again, the base's storage and dtype and the lists' items,
     * each item an exact int equal to what it was (else the full read below decides). */
    uint64_t p;
    int where, index, dt;
    if (FL_EXT_DOOR(st)->unpack_typed(seen->a[0], &p, &where, &index, &dt) && dt == dtype && /* the door: loaded for good */
        ints_are(seen->a[1], rank, seen->t.shape) && ints_are(seen->a[2], rank, seen->t.strides) &&
        block_is(seen->a[3], block, rank)) {
      Py_DECREF(dict);
      *t = seen->t;
      t->base = p;
      tmap_values(t, rank, out);
      return 0;
    }
  }
  PyObject *names[6], *a[6] = {0};
  desc_names(st, names);
  uint64_t stamp = 0;
  int stamped = seen && fl_ext_tmap_stamped();
  if (stamped) stamp = fl_ext_tmap_stamp(dict); /* before the reads, which run no Python code */
  dict_read(dict, names, a);
  for (int i = 0; i < 6; i++)
    if (!a[i]) {
      stamped = 0; /* a class attribute (a default): the dict's stamp does not say it holds */
      if (!(a[i] = PyObject_GenericGetAttr(obj, names[i]))) break;
    }
  PyObject *pad = a[4];
  int nan = 0;
  if (a[5] && (a[5] == Py_True || a[5] == Py_False) && PyUnicode_Check(pad)) {
    nan = pad == st->str_nan || (PyUnicode_GET_LENGTH(pad) == 3 && PyUnicode_Compare(pad, st->str_nan) == 0);
    PyObject *four[4] = {a[0], a[1], a[2], a[3]};
    rc = tmap_fill(st, four, nan, a[5] == Py_True, dtype, block, rank, out, t);
  }
  if (seen) {
    seen->obj = NULL;
    if (rc == 0 && stamped) { /* borrowed: the dict holds them while its stamp holds */
      *seen = (fl_ext_tmap_seen){obj, dict, stamp, {a[0], a[1], a[2], a[3]}, *t};
    }
  }
  Py_DECREF(dict);
  if (rc) PyErr_Clear();
  for (int i = 0; i < 6; i++) Py_XDECREF(a[i]);
  return rc;
}
