/* scratch.c: global scratch as Triton's launcher gets it for a kernel whose metadata asks for it:
 * the allocator triton.set_allocator set (its ContextVar, read per call) called with the launch's
 * size (programs x num_ctas x bytes per CTA), alignment and stream, and the buffer's address read as
 * the launcher reads its scratch pointers; and the scratch launch sequence of a plan (call_args.h's
 * fl_ext_scratch_launch) for a kept compiled kernel's call (compiled_values.c) and the Inductor entry
 * (entry.c); the JIT's allocates here too (jit_launch.c). */
#include "call_args.h"

/* The buffer's address as Triton's launcher reads its scratch pointers (extractPointer): None is 0,
 * an int is itself, anything else its data_ptr(), which must give an int; with Triton's errors.
 * (Its device check, cuPointerGetAttribute, is the driver's own: a buffer an allocator made in host
 * memory is the allocator's bug, launched here as given.) 0, or -1 with an exception. */
static int buffer_address(fl_ext_state *st, PyObject *obj, uint64_t *addr) {
  *addr = 0;
  if (obj == Py_None) return 0;
  int where, index;
  if (FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack(obj, addr, &where, &index)) return 0; /* a tensor: its data_ptr(), read in C */
  PyObject *ptr = PyLong_Check(obj) ? Py_NewRef(obj) : NULL;
  if (!ptr) {
    ptr = PyObject_CallMethodNoArgs(obj, st->str_data_ptr);
    if (!ptr) {
      PyErr_SetString(PyExc_TypeError, "Pointer argument must be either uint64 or have data_ptr method");
      return -1;
    }
    if (!PyLong_Check(ptr)) {
      Py_DECREF(ptr);
      PyErr_SetString(PyExc_TypeError, "data_ptr method of Pointer object must return 64-bit int");
      return -1;
    }
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *addr = v;
  return 0;
}

void fl_ext_scratch_ints_clear(fl_ext_scratch_ints *ints) {
  Py_CLEAR(ints->size); /* ints: releasing one runs no code */
  Py_CLEAR(ints->stream);
}

/* The int for v: the one kept when it has that value, else a new one kept instead. New reference, or NULL. */
static PyObject *kept_int(PyObject **kept, uint64_t *kept_v, uint64_t v) {
  if (*kept && *kept_v == v) return Py_NewRef(*kept);
  PyObject *o = PyLong_FromUnsignedLongLong(v);
  if (o) {
    Py_XSETREF(*kept, Py_NewRef(o));
    *kept_v = v;
  }
  return o;
}

int fl_ext_scratch_alloc(fl_ext_state *st, PyObject *var, uint64_t size, uint64_t align, unsigned ctas, const int64_t g[3],
                         uint64_t stream, PyObject *stream_obj, fl_ext_scratch_ints *ints, PyObject **buf,
                         uint64_t *addr) {
  *buf = NULL;
  unsigned __int128 total = (unsigned __int128)(uint64_t)g[0] * (uint64_t)g[1] * (uint64_t)g[2] * ctas * size;
  if (total > UINT64_MAX) return PyErr_SetString(PyExc_OverflowError, "global scratch size exceeds 64 bits"), -1;
  PyObject *alloc = NULL;
  if (PyContextVar_Get(var, NULL, &alloc) < 0) return -1;
  if (!alloc) return PyErr_SetString(PyExc_RuntimeError, "no allocator"), -1;
  PyObject *sz = kept_int(&ints->size, &ints->size_v, (uint64_t)total);
  PyObject *al = sz ? PyLong_FromUnsignedLongLong(align) : NULL; /* a power of two up to 256: a cached int */
  PyObject *so = al ? (stream_obj ? Py_NewRef(stream_obj) : kept_int(&ints->stream, &ints->stream_v, stream)) : NULL;
  if (so) {
    PyObject *argv[3] = {sz, al, so};
    *buf = PyObject_Vectorcall(alloc, argv, 3, NULL);
  }
  Py_XDECREF(sz);
  Py_XDECREF(al);
  Py_XDECREF(so);
  Py_DECREF(alloc);
  if (*buf && buffer_address(st, *buf, addr) == 0) return 0;
  Py_CLEAR(*buf);
  return -1;
}

int fl_ext_scratch_launch(fl_PlanObject *plan, const fl_ext_scratch_ref *sc, PyObject *const *full, size_t nfull,
                          uint64_t stream, PyObject *stream_obj, const int64_t *grid, fl_error *err) {
  fl_ext_state *st = plan->state;
  size_t n = plan->args.nruntime;
  fl_ext_values home;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  fl_value *values = fl_ext_values_get(&home, n);
  if (!values) return -1;
  uint32_t gu[3];
  int rc = fl_ext_collect_checked(st, plan, full, nfull, values, tmaps, err);
  if (rc == 0 && fl_plan_resolve_grid(plan->plan, values, n, grid, gu, err) != FL_OK) rc = -1;
  if (rc != 0) {
    fl_ext_values_put(&home);
    return rc == -2 ? -2 : 1;
  }
  const int64_t g[3] = {gu[0], gu[1], gu[2]};
  PyObject *buf = NULL;
  uint64_t addr = 0;
  if (fl_ext_scratch_alloc(st, sc->var, sc->size, sc->align, sc->ctas, g, stream, stream_obj, sc->ints, &buf, &addr) < 0) {
    fl_ext_values_put(&home);
    return -1;
  }
  /* The allocator ran Python code: read again (the grid stays the one the buffer was sized for). */
  rc = fl_ext_collect_checked(st, plan, full, nfull, values, tmaps, err);
  if (rc == 0) {
    values[n - sc->nhidden] = fl_ptr((const void *)(uintptr_t)addr);
    if (fl_launch(plan->plan, stream, values, n, g, err) == FL_OK) rc = 0;
    else if (err->backend_submitted) rc = (fl_ext_raise_named(st, err, plan->arg_names), -1);
    else rc = 2;
  } else if (rc == -2) {
    rc = -3;
  } else {
    snprintf(err->reason, sizeof err->reason, "args_changed_by_allocator");
    err->stable = false;
    rc = 2;
  }
  Py_DECREF(buf); /* dropped once the launch returns, as the launchers drop theirs */
  fl_ext_values_put(&home);
  return rc;
}
