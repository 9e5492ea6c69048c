/* convert.c: Python objects <-> the contract's values, one policy each: launch arguments (before
 * the submit boundary, creating no object for ints, floats and None), streams, grids, kinds,
 * strings, fixed values, targets and layouts. */
#include "ext.h"
#include <stdarg.h>
#include <strings.h>

/* ---- extraction: Python object -> fl_value, no object created for ints, floats, None ---- */

static int fail_extract(fl_error *err, const char *what, size_t i, const char *kind, PyObject *obj) {
  /* KeyboardInterrupt and friends are not a value's fault: they propagate as they are (-2). */
  if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception)) return -2;
  PyErr_Clear();
  err->status = FL_BAD_VALUE;
  err->backend_submitted = false;
  err->stable = false;
  if (kind)
    snprintf(err->reason, sizeof err->reason, "%s:%zu:%s:%.40s", what, i, kind, Py_TYPE(obj)->tp_name);
  else
    snprintf(err->reason, sizeof err->reason, "%s:%zu:%.40s", what, i, Py_TYPE(obj)->tp_name);
  return -1;
}

/* Reads a Python int: 0 when it fits 64 bits (signed or unsigned), 1 when above UINT64_MAX, 2 when
 * below INT64_MIN, -1 with an exception set. */
static int int_value(PyObject *obj, fl_value *out) {
  uint64_t mag;
  int neg;
  if (PyLong_CheckExact(obj) && fl_ext_int_digits(obj, &mag, &neg)) {
    if (!neg) {
      *out = mag <= (uint64_t)INT64_MAX ? fl_int((int64_t)mag) : fl_uint(mag);
      return 0;
    }
    if (mag <= (uint64_t)INT64_MAX + 1) {
      *out = fl_int(mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag);
      return 0;
    }
    return 2;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = fl_int(v);
    return 0;
  }
  if (overflow < 0) return 2;
  unsigned long long u = PyLong_AsUnsignedLongLong(obj);
  if (u == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 1;
  }
  *out = fl_uint(u);
  return 0;
}

static int fail_range(fl_error *err, int r, size_t i, fl_kind kind) {
  bool is_unsigned = fl_kind_is_unsigned(kind);
  err->status = FL_BAD_VALUE;
  err->backend_submitted = false;
  err->stable = false;
  snprintf(err->reason, sizeof err->reason, "%s:%zu:%s", r == 2 && is_unsigned ? "uint_negative" : "int_out_of_range", i,
           fl_kind_name(kind));
  return -1;
}

/* A pointer argument: None, an int address, a tensor through the door, else data_ptr(). */
static inline int extract_ptr(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_error *err,
                              const fl_ext_args *spec) {
  if (obj == Py_None) {
    *out = fl_none();
    return 0;
  }
  PyObject *addr;
  if (PyLong_CheckExact(obj)) {
    uint64_t fast;
    if (fl_ext_u64_of(obj, &fast)) {
      out->type = FL_VALUE_PTR;
      out->v.p = fast;
      return 0;
    }
    unsigned long long a = PyLong_AsUnsignedLongLong(obj);
    if (!(a == (unsigned long long)-1 && PyErr_Occurred())) {
      out->type = FL_VALUE_PTR;
      out->v.p = a;
      return 0;
    }
    PyErr_Clear();
    addr = Py_NewRef(obj); /* out of range: reported below */
  } else if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    addr = Py_NewRef(obj);
  } else {
    /* A plain tensor: its pointer and device straight from torch's C++ object (the door), and a
     * tensor from memory the backend does not read is refused before the boundary. */
    if (FL_EXT_UNLIKELY(FL_EXT_LOAD(st->door_state) == 0)) fl_ext_door_load(st);
    uint64_t p;
    int where, index;
    if (FL_EXT_DOOR(st) && !spec->data_ptr_only && FL_EXT_DOOR(st)->unpack(obj, &p, &where, &index)) {
      if (FL_EXT_UNLIKELY(!fl_ext_memory_takes(spec, where, index))) {
        snprintf(err->reason, sizeof err->reason, "ptr_device_mismatch:%zu", i);
        err->status = FL_BAD_VALUE;
        err->backend_submitted = err->stable = false;
        return -1;
      }
      out->type = FL_VALUE_PTR;
      out->v.p = p;
      return 0;
    }
    /* Declined by the door (a subclass, a meta tensor, no door): its device as torch says, checked
     * as the door's tensors are; an object without one (a wrapper with data_ptr()) as before. */
    int dwhere = 0, dindex = -1, dev = fl_ext_tensor_device(FL_EXT_DOOR(st), obj, &dwhere, &dindex);
    if (FL_EXT_UNLIKELY(dev == 2 || (dev == 0 && !fl_ext_memory_takes(spec, dwhere, dindex)))) {
      snprintf(err->reason, sizeof err->reason, dev == 2 ? "ptr_meta_tensor:%zu" : "ptr_device_mismatch:%zu", i);
      err->status = FL_BAD_VALUE;
      err->backend_submitted = err->stable = false;
      return -1;
    }
    PyObject *self_arg[2] = {NULL, obj};
    addr = PyObject_VectorcallMethod(st->str_data_ptr, self_arg + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (!addr) return fail_extract(err, "ptr_extract_failed", i, NULL, obj);
    if (!PyLong_Check(addr)) {
      Py_DECREF(addr);
      return fail_extract(err, "ptr_extract_failed", i, NULL, obj);
    }
  }
  unsigned long long a = PyLong_AsUnsignedLongLong(addr);
  Py_DECREF(addr);
  if (a == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear(); /* negative, or past 64 bits */
    snprintf(err->reason, sizeof err->reason, "ptr_out_of_range:%zu", i);
    err->status = FL_BAD_VALUE;
    err->backend_submitted = err->stable = false;
    return -1;
  }
  *out = fl_ptr((const void *)(uintptr_t)a);
  out->v.p = a;
  return 0;
}

/* A bool, int or float argument of an integer or float kind. */
static int extract_number(fl_kind kind, PyObject *obj, size_t i, fl_value *out, fl_error *err) {
  if (PyBool_Check(obj)) {
    *out = fl_bool(obj == Py_True);
    return 0;
  }
  if (PyLong_Check(obj)) {
    int r = int_value(obj, out);
    if (r < 0) return fail_extract(err, "int_expected", i, fl_kind_name(kind), obj);
    if (r > 0) {
      if (fl_kind_is_float(kind)) {
        /* A huge int is still a number for a float kind, as float() would take it. */
        double d = PyLong_AsDouble(obj);
        if (d == -1.0 && PyErr_Occurred()) return fail_extract(err, "float_out_of_range", i, fl_kind_name(kind), obj);
        *out = fl_float(d);
        return 0;
      }
      return fail_range(err, r, i, kind);
    }
    return 0;
  }
  if (fl_kind_is_float(kind)) {
    if (PyFloat_Check(obj)) {
      *out = fl_float(PyFloat_AS_DOUBLE(obj));
      return 0;
    }
    double d = PyFloat_AsDouble(obj); /* numpy and torch scalars: their __float__ */
    if (d == -1.0 && PyErr_Occurred()) return fail_extract(err, "float_expected", i, fl_kind_name(kind), obj);
    *out = fl_float(d);
    return 0;
  }
  /* Integer kinds: anything with __index__ (numpy integers) converts; floats do not. */
  if (!PyFloat_Check(obj) && Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_index) {
    PyObject *index = PyNumber_Index(obj);
    if (!index) return fail_extract(err, "int_expected", i, fl_kind_name(kind), obj);
    int r = int_value(index, out);
    Py_DECREF(index);
    if (r < 0) return fail_extract(err, "int_expected", i, fl_kind_name(kind), obj);
    if (r > 0) return fail_range(err, r, i, kind);
    return 0;
  }
  return fail_extract(err, "int_expected", i, fl_kind_name(kind), obj);
}

Py_NO_INLINE int fl_ext_extract(fl_ext_state *st, fl_kind kind, PyObject *obj, size_t i, fl_value *out,
                                fl_error *err, const fl_ext_args *spec) {
  if (kind == FL_KIND_PTR) return extract_ptr(st, obj, i, out, err, spec);
  return extract_number(kind, obj, i, out, err);
}


void fl_ext_npu_queue_probe(fl_ext_state *st) {
  if (st->npu_queue_state != 0) return;
  PyObject *mod = PyImport_ImportModule("fastlaunch._npu_queue");
  if (!mod) {
    PyErr_Clear();
    st->npu_queue_state = -2;
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "fastlaunch._npu_queue was not built (no C++ compiler)");
    return;
  }
  PyObject *state = PyObject_CallMethod(mod, "probe", NULL);
  PyObject *capsule = PyObject_GetAttrString(mod, "queue");
  const char *s = state && PyUnicode_Check(state) ? PyUnicode_AsUTF8(state) : NULL;
  const fl_npu_queue *q = capsule ? PyCapsule_GetPointer(capsule, "fastlaunch.npu_queue") : NULL;
  PyErr_Clear();
  fl_error err;
  if (!s || !q) {
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "fastlaunch._npu_queue is broken");
  } else if (strcmp(s, "absent") == 0) {
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "torch_npu not loaded: launches go to the stream");
  } else if (fl_npu_set_queue(q, &err) != FL_OK) {
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "%s", err.reason);
  } else if (strcmp(s, "ok") == 0) {
    st->npu_queue_state = 1;
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "torch_npu's task queue (RunAclCall)");
  } else {
    st->npu_queue_state = -1; /* its mode() answers -1: npu launches are refused, never unordered */
    snprintf(st->npu_queue_why, sizeof st->npu_queue_why, "%s", s);
  }
  Py_XDECREF(state);
  Py_XDECREF(capsule);
  Py_DECREF(mod);
}

static int fail_reason(fl_error *err, fl_status status, const char *fmt, const char *detail) {
  err->status = status;
  err->backend_submitted = false;
  err->stable = false;
  snprintf(err->reason, sizeof err->reason, fmt, detail);
  return -1;
}

int fl_ext_parse_stream(PyObject *obj, uint64_t *stream, fl_error *err) {
  if (obj == Py_None) {
    *stream = 0;
    return 0;
  }
  if (!PyLong_Check(obj) || PyBool_Check(obj))
    return fail_reason(err, FL_BAD_STREAM, "stream_invalid_type:%.40s", Py_TYPE(obj)->tp_name);
  uint64_t fast;
  if (fl_ext_u64_of(obj, &fast)) {
    *stream = fast;
    return 0;
  }
  unsigned long long s = PyLong_AsUnsignedLongLong(obj);
  if (s == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear(); /* negative or past 64 bits */
    return fail_reason(err, FL_BAD_STREAM, "stream_out_of_range%s", "");
  }
  *stream = s;
  return 0;
}

int fl_ext_parse_grid(PyObject *obj, int64_t grid[3], fl_error *err) {
  if (!PyTuple_Check(obj) && !PyList_Check(obj))
    return fail_reason(err, FL_BAD_GRID, "invalid_grid:%.40s", Py_TYPE(obj)->tp_name);
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n < 1 || n > 3) {
    char count[24];
    snprintf(count, sizeof count, "%zd", n);
    return fail_reason(err, FL_BAD_GRID, "grid_rank_mismatch:%s", count);
  }
  for (Py_ssize_t d = 0; d < 3; d++) {
    if (d >= n) {
      grid[d] = 1;
      continue;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(obj, d);
    int overflow = 0;
    long long v = PyLong_Check(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : 0;
    if (FL_EXT_UNLIKELY(!PyLong_Check(item) || overflow)) {
      char dim[8];
      snprintf(dim, sizeof dim, "%d", (int)d);
      return fail_reason(err, FL_BAD_GRID, PyLong_Check(item) ? "grid_dim_exceeds:%s" : "invalid_grid:%s", dim);
    }
    grid[d] = v;
  }
  return 0;
}

int fl_ext_parse_backend(PyObject *name, fl_backend_id *out) {
  if (!name || name == Py_None) {
    *out = FL_BACKEND_DEFAULT;
    return 0;
  }
  Py_ssize_t size;
  const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &size) : NULL;
  if (!text && PyErr_Occurred()) return -1;
  fl_error err;
  if (text && (size_t)size == strlen(text) && fl_backend_parse(text, out, &err) == FL_OK) return 0;
  /* The names come from the backends' own tables. */
  char names[120] = "";
  for (int b = 0; b < FL_BACKEND_COUNT; b++) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", b ? ", " : "", fl_backend_name((fl_backend_id)b));
  }
  PyErr_Format(PyExc_ValueError, "backend: unknown backend %R (expected one of %s)", name, names);
  return -1;
}

int fl_ext_parse_kinds(fl_ext_state *st, PyObject *seq, bool refusal, fl_kind **out, size_t *n) {
  PyObject *fast = PySequence_Fast(seq, "kinds: expected a sequence of kind names");
  if (!fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  fl_kind *kinds = PyMem_Calloc(len ? (size_t)len : 1, sizeof *kinds);
  if (!kinds) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
    Py_ssize_t size;
    const char *text = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &size) : NULL;
    fl_error err;
    if (!text) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "kinds[%zd]: expected a str, got %.80s", i, Py_TYPE(item)->tp_name);
      goto error;
    }
    if ((size_t)size != strlen(text)) {
      snprintf(err.reason, sizeof err.reason, "kind_unknown:embedded NUL");
    } else if (fl_kind_parse(text, &kinds[i], &err) == FL_OK) {
      continue;
    }
    /* A kind no plan can take: for a plan, a refusal (stable) naming the argument. */
    if (refusal) fl_ext_raise_reason_unavailable(st, "kinds[%zd]: %.120s", i, err.reason);
    else {
      char reason[FL_REASON_MAX + 32];
      snprintf(reason, sizeof reason, "kinds[%zd]: %s", i, err.reason);
      fl_ext_raise_as(PyExc_ValueError, reason);
    }
    goto error;
  }
  Py_DECREF(fast);
  *out = kinds;
  *n = (size_t)len;
  return 0;
error:
  Py_DECREF(fast);
  PyMem_Free(kinds);
  return -1;
}

int fl_ext_parse_strings(PyObject *seq, const char *what, size_t want, const char ***out, PyObject **keep) {
  if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
    /* A str is a sequence of one-character strings: never what a caller means here. */
    PyErr_Format(PyExc_TypeError, "%s: expected a sequence of str, got %.80s", what, Py_TYPE(seq)->tp_name);
    return -1;
  }
  /* A tuple of our own: user code run while reading (an __iter__, a __len__) cannot change it. */
  PyObject *items = PySequence_Tuple(seq);
  if (!items) return -1;
  Py_ssize_t len = PyTuple_GET_SIZE(items);
  if (want && (size_t)len != want) {
    PyErr_Format(PyExc_ValueError, "%s: expected %zu entries, got %zd", what, want, len);
    Py_DECREF(items);
    return -1;
  }
  const char **strs = PyMem_Calloc(len ? (size_t)len : 1, sizeof *strs);
  if (!strs) {
    Py_DECREF(items);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PyTuple_GET_ITEM(items, i);
    Py_ssize_t size;
    if (!PyUnicode_Check(item) || !(strs[i] = PyUnicode_AsUTF8AndSize(item, &size))) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s[%zd]: expected a str", what, i);
      goto error;
    }
    if ((size_t)size != strlen(strs[i])) {
      PyErr_Format(PyExc_ValueError, "%s[%zd]: embedded NUL character", what, i);
      goto error;
    }
  }
  *out = strs;
  *keep = items;
  return 0;
error:
  PyMem_Free(strs);
  Py_DECREF(items);
  return -1;
}

int fl_ext_parse_values(PyObject *seq, fl_value **out, size_t *n) {
  PyObject *items = PySequence_Tuple(seq);
  if (!items) return -1;
  Py_ssize_t len = PyTuple_GET_SIZE(items);
  fl_value *values = PyMem_Calloc(len ? (size_t)len : 1, sizeof *values);
  if (!values) {
    Py_DECREF(items);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PyTuple_GET_ITEM(items, i);
    if (PyBool_Check(item)) {
      values[i] = fl_bool(item == Py_True);
    } else if (PyLong_Check(item)) {
      int r = int_value(item, &values[i]);
      if (r < 0) goto error;
      if (r > 0) {
        PyErr_Format(PyExc_OverflowError, "fixed_args[%zd]: %R does not fit in 64 bits", i, item);
        goto error;
      }
    } else if (PyFloat_Check(item)) {
      values[i] = fl_float(PyFloat_AS_DOUBLE(item));
    } else if (item == Py_None) {
      values[i] = fl_none();
    } else {
      PyErr_Format(PyExc_TypeError, "fixed_args[%zd]: expected int, float, bool or None, got %.80s", i,
                   Py_TYPE(item)->tp_name);
      goto error;
    }
  }
  Py_DECREF(items);
  *out = values;
  *n = (size_t)len;
  return 0;
error:
  Py_DECREF(items);
  PyMem_Free(values);
  return -1;
}

/* Raises ValueError with the message, and `argument` (the parameter or option it is about) as an
 * attribute, for callers that name it in their own terms (the command line names its flags). */
static void value_error_about(PyObject *argument, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  PyObject *exc = msg ? PyObject_CallOneArg(PyExc_ValueError, msg) : NULL;
  Py_XDECREF(msg);
  if (exc && PyObject_SetAttrString(exc, "argument", argument) == 0) PyErr_SetObject(PyExc_ValueError, exc);
  Py_XDECREF(exc);
}

int fl_ext_parse_target(PyObject *abi, PyObject *options, fl_abi default_abi, fl_target *target) {
  memset(target, 0, sizeof *target);
  target->abi = default_abi;
  fl_error err;
  if (abi && abi != Py_None) {
    Py_ssize_t size;
    const char *name = PyUnicode_Check(abi) ? PyUnicode_AsUTF8AndSize(abi, &size) : NULL;
    if (!name) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "abi: expected a str, got %.80s", Py_TYPE(abi)->tp_name);
      return -1;
    }
    if ((size_t)size != strlen(name) || fl_abi_parse(name, &target->abi, &err) != FL_OK) {
      PyObject *what = PyUnicode_FromString("abi");
      if (what) value_error_about(what, "abi: unknown ABI %R (expected 'host', 'cuda' or 'npu')", abi);
      Py_XDECREF(what);
      return -1;
    }
  }
  if (!options || options == Py_None) return 0;
  if (!PyDict_Check(options)) {
    PyErr_Format(PyExc_TypeError, "options: expected a dict, got %.80s", Py_TYPE(options)->tp_name);
    return -1;
  }
  /* A copy: an option's __index__ may change the caller's dict while we read it. */
  PyObject *items = PyDict_Items(options);
  if (!items) return -1;
  int rc = -1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
    PyObject *pair = PyList_GET_ITEM(items, i);
    PyObject *key = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
    Py_ssize_t size;
    const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, &size) : NULL;
    if (!name || (size_t)size != strlen(name)) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "options: keys must be option names, got %R", key);
      goto done;
    }
    if (!PyLong_Check(value)) { /* bool is an int */
      PyErr_Format(PyExc_TypeError, "options[%R]: expected an int or a bool, got %.80s", key, Py_TYPE(value)->tp_name);
      goto done;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow > 0) {
      /* Only a 64-bit address needs the top bit: read it unsigned. */
      unsigned long long u = PyLong_AsUnsignedLongLong(value);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) goto done;
      v = (long long)u;
    } else if (overflow < 0 || (v == -1 && PyErr_Occurred())) {
      if (!PyErr_Occurred()) value_error_about(key, "options[%R]: option_out_of_range", key);
      goto done;
    }
    if (fl_target_set(target, name, v, &err) != FL_OK) {
      if (strncmp(err.reason, "option_unknown", 14) == 0) {
        char names[160] = "";
        for (size_t k = 0; fl_target_option_name(target->abi, k); k++) {
          size_t used = strlen(names);
          snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "", fl_target_option_name(target->abi, k));
        }
        value_error_about(key, "options: %R is not an option of the %s ABI (its options: %s)", key,
                     fl_abi_name(target->abi), names[0] ? names : "none");
      } else {
        value_error_about(key, "options[%R]: %s", key, err.reason);
      }
      goto done;
    }
  }
  rc = 0;
done:
  Py_DECREF(items);
  return rc;
}

static PyObject *offset_or_none(int64_t off) { return off < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(off); }

PyObject *fl_ext_layout_dict(const fl_layout *l, const size_t *offsets, size_t n) {
  PyObject *args = PyList_New((Py_ssize_t)n), *hidden = PyList_New(l->hidden_count), *grid = NULL, *ffts = NULL;
  if (!args || !hidden) goto error;
  for (size_t i = 0; i < n; i++) {
    PyObject *o = PyLong_FromSize_t(offsets[i]);
    if (!o) goto error;
    PyList_SET_ITEM(args, (Py_ssize_t)i, o);
  }
  for (uint32_t h = 0; h < l->hidden_count; h++) {
    PyObject *o = PyLong_FromLongLong(l->hidden_first + 8 * (int64_t)h);
    if (!o) goto error;
    PyList_SET_ITEM(hidden, h, o);
  }
  grid = l->grid[0] < 0 ? Py_NewRef(Py_None)
                        : Py_BuildValue("[LLL]", (long long)l->grid[0], (long long)l->grid[1], (long long)l->grid[2]);
  ffts = offset_or_none(l->ffts);
  if (!grid || !ffts) goto error;
  return Py_BuildValue("{s:n,s:n,s:N,s:N,s:N,s:N}", "size", (Py_ssize_t)l->size, "align", (Py_ssize_t)l->align, "args",
                       args, "grid", grid, "ffts", ffts, "hidden", hidden);
error:
  Py_XDECREF(args);
  Py_XDECREF(hidden);
  Py_XDECREF(grid);
  Py_XDECREF(ffts);
  return NULL;
}
