/* plan_obj.c: the Plan type: a plan built once from Python, launched through vectorcall, and the
 * argument extraction that runs before the submit boundary. */
#include "ext.h"

int fl_ext_parse_kinds(fl_ext_state *st, PyObject *seq, fl_kind **out, size_t *n);
int fl_ext_host_kernel_take(PyObject *obj, PyTypeObject *type, void **fn, fl_host_lib **lib);

/* Packs larger argument lists than this through a heap array (rare: plans over 256 args). */
#define STACK_VALUES 256

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
  bool is_unsigned = kind >= FL_KIND_U8 && kind <= FL_KIND_U64;
  err->status = FL_BAD_VALUE;
  err->backend_submitted = false;
  err->stable = false;
  snprintf(err->reason, sizeof err->reason, "%s:%zu:%s", r == 2 && is_unsigned ? "uint_negative" : "int_out_of_range", i,
           fl_kind_name(kind));
  return -1;
}

static int extract(fl_ext_state *st, fl_kind kind, PyObject *obj, size_t i, fl_value *out, fl_error *err) {
  if (kind == FL_KIND_PTR) {
    if (obj == Py_None) {
      *out = fl_none();
      return 0;
    }
    PyObject *addr;
    if (PyLong_CheckExact(obj)) {
      unsigned long long a = PyLong_AsUnsignedLongLong(obj);
      if (!(a == (unsigned long long)-1 && PyErr_Occurred())) {
        out->type = FL_VALUE_PTR;
        out->v.p = a;
        return 0;
      }
      PyErr_Clear();
      addr = Py_NewRef(obj); /* negative: reported below */
    } else if (PyLong_Check(obj) && !PyBool_Check(obj)) {
      addr = Py_NewRef(obj);
    } else {
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
      PyErr_Clear();
      snprintf(err->reason, sizeof err->reason, "ptr_negative:%zu", i);
      err->status = FL_BAD_VALUE;
      err->backend_submitted = err->stable = false;
      return -1;
    }
    *out = fl_ptr((const void *)(uintptr_t)a);
    out->v.p = a;
    return 0;
  }
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

/* Extracts the positional arguments of a call into the plan's runtime values (skipping ignored
 * ones). values has room for plan->nruntime entries. */
static int collect_values(fl_PlanObject *plan, PyObject *const *args, size_t nargs, fl_value *values, fl_error *err) {
  if (nargs != plan->ncall) {
    err->status = FL_BAD_ARG_COUNT;
    err->backend_submitted = false;
    err->stable = true;
    snprintf(err->reason, sizeof err->reason, "args_size_mismatch:%zu:%zu", nargs, plan->ncall);
    return -1;
  }
  if (!plan->argmap) {
    for (size_t i = 0; i < nargs; i++) {
      int r = extract(plan->state, plan->kinds[i], args[i], i, &values[i], err);
      if (r < 0) return r;
    }
    return 0;
  }
  for (size_t i = 0; i < nargs; i++) {
    int32_t k = plan->argmap[i];
    int r = k >= 0 ? extract(plan->state, plan->kinds[k], args[i], (size_t)k, &values[k], err) : 0;
    if (r < 0) return r;
  }
  return 0;
}

int fl_ext_plan_launch(fl_PlanObject *plan, PyObject *const *args, size_t nargs, uint64_t stream,
                       const int64_t *grid, fl_error *err) {
  fl_value stack_values[STACK_VALUES];
  fl_value *values = stack_values;
  if (plan->nruntime > STACK_VALUES) {
    values = PyMem_Malloc(plan->nruntime * sizeof *values);
    if (!values) {
      PyErr_NoMemory();
      return -2;
    }
  }
  int rc = collect_values(plan, args, nargs, values, err);
  if (rc == 0 && fl_launch(plan->plan, stream, values, plan->nruntime, grid, err) != FL_OK) rc = -1;
  if (values != stack_values) PyMem_Free(values);
  return rc;
}

int fl_ext_parse_stream(fl_ext_state *st, PyObject *obj, uint64_t *stream) {
  if (obj == Py_None) {
    *stream = 0;
    return 0;
  }
  if (PyLong_Check(obj)) {
    unsigned long long s = PyLong_AsUnsignedLongLong(obj);
    if (!(s == (unsigned long long)-1 && PyErr_Occurred())) {
      *stream = s;
      return 0;
    }
    PyErr_Clear();
  }
  fl_ext_raise_reason(st, false, "stream_invalid_type:%.40s", Py_TYPE(obj)->tp_name);
  return -1;
}

int fl_ext_parse_grid(fl_ext_state *st, PyObject *obj, int64_t grid[3]) {
  if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
    fl_ext_raise_reason(st, false, "invalid_grid:%.40s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n < 1 || n > 3) {
    fl_ext_raise_reason(st, false, "grid_rank_mismatch:%zd", n);
    return -1;
  }
  for (Py_ssize_t d = 0; d < 3; d++) {
    if (d >= n) {
      grid[d] = 1;
      continue;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(obj, d);
    int overflow = 0;
    long long v = PyLong_Check(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : -1;
    if (!PyLong_Check(item) || overflow) {
      PyErr_Clear();
      fl_ext_raise_reason(st, false, PyLong_Check(item) ? "grid_dim_exceeds:%zd" : "invalid_grid:%zd", d);
      return -1;
    }
    grid[d] = v;
  }
  return 0;
}

/* plan(*args, stream=0, grid=None) */
static PyObject *plan_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  fl_PlanObject *plan = (fl_PlanObject *)callable;
  fl_ext_state *st = plan->state;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  uint64_t stream = 0;
  int64_t grid_storage[3];
  const int64_t *grid = NULL;
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + (size_t)k];
      if (key == st->str_stream || PyUnicode_Compare(key, st->str_stream) == 0) {
        if (fl_ext_parse_stream(st, value, &stream) < 0) return NULL;
      } else if (key == st->str_grid || PyUnicode_Compare(key, st->str_grid) == 0) {
        if (value != Py_None) {
          if (fl_ext_parse_grid(st, value, grid_storage) < 0) return NULL;
          grid = grid_storage;
        }
      } else {
        PyErr_Format(PyExc_TypeError, "Plan() got an unexpected keyword argument %R", key);
        return NULL;
      }
    }
  }
  fl_error err;
  int rc = fl_ext_plan_launch(plan, args, nargs, stream, grid, &err);
  if (rc == -2) return NULL;
  if (rc < 0) return fl_ext_raise(st, &err);
  Py_RETURN_NONE;
}

/* ---- the floor: extraction only ---- */

/* Floor(kinds): a callable that extracts its arguments exactly as a launch does and stops there;
 * the least any Python-driven launch can cost, for benchmarks. */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  size_t n;
  fl_kind kinds[];
} FloorObject;

static PyObject *floor_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  FloorObject *self = (FloorObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  fl_value values[STACK_VALUES];
  fl_error err;
  if (nargs != self->n || nargs > STACK_VALUES)
    return fl_ext_raise_reason(self->state, true, "args_size_mismatch:%zu:%zu", nargs, self->n);
  uint64_t stream = 0;
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k);
      if (key != self->state->str_stream && PyUnicode_Compare(key, self->state->str_stream) != 0) {
        PyErr_Format(PyExc_TypeError, "Floor() got an unexpected keyword argument %R", key);
        return NULL;
      }
      if (fl_ext_parse_stream(self->state, args[nargs + (size_t)k], &stream) < 0) return NULL;
    }
  }
  for (size_t i = 0; i < nargs; i++) {
    int r = extract(self->state, self->kinds[i], args[i], i, &values[i], &err);
    if (r == -2) return NULL;
    if (r < 0) return fl_ext_raise(self->state, &err);
  }
  (void)stream;
  Py_RETURN_NONE;
}

static PyObject *floor_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kinds", NULL};
  PyObject *kinds_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Floor", kwlist, &kinds_obj)) return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  fl_kind *kinds;
  size_t n;
  if (!st || fl_ext_parse_kinds(st, kinds_obj, &kinds, &n) < 0) return NULL;
  FloorObject *self = (FloorObject *)type->tp_alloc(type, (Py_ssize_t)n);
  if (self) {
    self->vectorcall = floor_vectorcall;
    self->state = st;
    self->n = n;
    memcpy(self->kinds, kinds, n * sizeof *kinds);
  }
  PyMem_Free(kinds);
  return (PyObject *)self;
}

static void floor_dealloc(FloorObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMemberDef floor_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FloorObject, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot floor_slots[] = {
    {Py_tp_new, floor_new},
    {Py_tp_dealloc, floor_dealloc},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, floor_members},
    {Py_tp_doc, "Floor(kinds): extracts its arguments like a launch and submits nothing (benchmark floor)."},
    {0, NULL},
};

static PyType_Spec floor_spec = {
    .name = "fastlaunch._C.Floor",
    .basicsize = sizeof(FloorObject),
    .itemsize = sizeof(fl_kind),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = floor_slots,
};

/* ---- construction ---- */

static int parse_values(PyObject *seq, fl_value **out, size_t *n) {
  PyObject *fast = PySequence_Fast(seq, "fixed_args: expected a sequence");
  if (!fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  fl_value *values = PyMem_Calloc(len ? (size_t)len : 1, sizeof *values);
  if (!values) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
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
  Py_DECREF(fast);
  *out = values;
  *n = (size_t)len;
  return 0;
error:
  Py_DECREF(fast);
  PyMem_Free(values);
  return -1;
}

/* Reads a sequence of str as UTF-8 pointers. The pointers live as long as the str objects, which
 * the returned list (*keep) holds: the caller releases it once it is done with them. */
static int parse_strings(PyObject *seq, const char *what, size_t want, const char ***out, PyObject **keep) {
  PyObject *fast = PySequence_Fast(seq, "expected a sequence of str");
  if (!fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  if (want && (size_t)len != want) {
    PyErr_Format(PyExc_ValueError, "%s: expected %zu entries, got %zd", what, want, len);
    Py_DECREF(fast);
    return -1;
  }
  const char **strs = PyMem_Calloc(len ? (size_t)len : 1, sizeof *strs);
  if (!strs) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyUnicode_Check(item) || !(strs[i] = PyUnicode_AsUTF8(item))) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s[%zd]: expected a str", what, i);
      PyMem_Free(strs);
      Py_DECREF(fast);
      return -1;
    }
  }
  *out = strs;
  *keep = fast;
  return 0;
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kernel",       "kinds",     "backend",  "owner",       "runtime_arg_count",
                           "fixed_args",   "grid",      "grid_exprs", "arg_names", "name",
                           "hidden_ptrs",  "ffts",      "simt_only", "dtdata",     "scratch",
                           "ffts_addr",    "num_warps", "num_ctas", "shared",      "cooperative",
                           "pdl",          "npu_simt",  "dyn_ubuf", "clamp_blocks", "ignore", NULL};
  PyObject *kernel, *kinds_obj, *backend_obj = NULL, *owner = Py_None, *runtime_obj = Py_None;
  PyObject *fixed_obj = NULL, *grid_obj = Py_None, *exprs_obj = Py_None, *names_obj = Py_None, *name_obj = Py_None;
  unsigned int hidden = 0, scratch = 0, num_warps = 4, num_ctas = 1, shared = 0, dyn_ubuf = 0, clamp = 0;
  int ffts = 0, simt_only = 0, dtdata = 0, cooperative = 0, pdl = 0, npu_simt = 0;
  unsigned long long ffts_addr = 0;
  PyObject *ignore_obj = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$UOOOOOOOIpppIKIIIpppIIO:Plan", kwlist, &kernel, &kinds_obj,
                                   &backend_obj, &owner, &runtime_obj, &fixed_obj, &grid_obj, &exprs_obj, &names_obj,
                                   &name_obj, &hidden, &ffts, &simt_only, &dtdata, &scratch, &ffts_addr, &num_warps,
                                   &num_ctas, &shared, &cooperative, &pdl, &npu_simt, &dyn_ubuf, &clamp, &ignore_obj))
    return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  fl_kind *kinds = NULL;
  fl_value *fixed = NULL;
  const char **names = NULL, **exprs = NULL;
  PyObject *names_keep = NULL, *exprs_keep = NULL;
  fl_host_lib *lib = NULL;
  fl_PlanObject *self = NULL;
  size_t nkinds = 0, nfixed = 0;
  fl_backend_id backend = FL_BACKEND_HOST;
  fl_error err;

  const char *backend_name = backend_obj ? PyUnicode_AsUTF8(backend_obj) : "host";
  if (!backend_name) goto error;
  if (fl_backend_parse(backend_name, &backend, &err) != FL_OK) {
    PyErr_Format(PyExc_ValueError, "backend: unknown backend %R (expected host, null, cuda or npu)", backend_obj);
    goto error;
  }
  if (fl_ext_parse_kinds(st, kinds_obj, &kinds, &nkinds) < 0) goto error;
  if (fixed_obj && parse_values(fixed_obj, &fixed, &nfixed) < 0) goto error;
  size_t nruntime = nkinds - nfixed;
  if (nfixed > nkinds) {
    PyErr_Format(PyExc_ValueError, "fixed_args: %zu values for %zu kinds", nfixed, nkinds);
    goto error;
  }
  if (runtime_obj != Py_None) {
    Py_ssize_t r = PyNumber_AsSsize_t(runtime_obj, PyExc_OverflowError);
    if (r == -1 && PyErr_Occurred()) goto error;
    if (r < 0 || (size_t)r + nfixed != nkinds) {
      PyErr_Format(PyExc_ValueError, "runtime_arg_count: %zd runtime + %zu fixed args must equal %zu kinds", r, nfixed,
                   nkinds);
      goto error;
    }
  }
  d.name = name_obj == Py_None ? NULL : PyUnicode_AsUTF8(name_obj);
  if (name_obj != Py_None && !d.name) goto error;
  d.backend = backend;
  d.abi.abi = backend == FL_BACKEND_CUDA ? FL_ABI_CUDA : backend == FL_BACKEND_NPU ? FL_ABI_NPU : FL_ABI_HOST;
  /* The null backend measures any flavour: it follows the options given. */
  if (backend == FL_BACKEND_NULL && (ffts || simt_only || dtdata || scratch)) d.abi.abi = FL_ABI_NPU;
  else if (backend == FL_BACKEND_NULL && hidden) d.abi.abi = FL_ABI_CUDA;
  d.abi.cuda_hidden_ptrs = hidden;
  d.abi.npu_ffts = ffts;
  d.abi.npu_simt_only = simt_only;
  d.abi.npu_dtdata = dtdata;
  d.abi.npu_scratch = scratch;
  d.npu_ffts_addr = ffts_addr;
  d.kinds = kinds;
  d.nkinds = nkinds;
  d.runtime_arg_count = nruntime;
  d.fixed_args = fixed;
  d.config.num_warps = num_warps;
  d.config.num_ctas = num_ctas;
  d.config.shared_mem = shared;
  d.config.cooperative = cooperative;
  d.config.pdl = pdl;
  d.config.npu_simt = npu_simt;
  d.config.npu_dyn_ubuf = dyn_ubuf;
  d.config.npu_clamp_blocks = clamp;
  if (fl_ext_host_kernel_take(kernel, st->host_kernel_type, &d.kernel, &lib)) {
    d.owner = lib;
    d.owner_release = fl_host_lib_release_owner;
  } else if (kernel == Py_None) {
    d.kernel = NULL;
  } else if (backend == FL_BACKEND_HOST) {
    /* A host kernel is called on a worker thread: only a loaded HostKernel is trusted there. */
    PyErr_Format(PyExc_TypeError, "kernel: the host backend needs a HostKernel, got %.80s", Py_TYPE(kernel)->tp_name);
    goto error;
  } else if (PyLong_Check(kernel)) {
    d.kernel = PyLong_AsVoidPtr(kernel);
    if (!d.kernel && PyErr_Occurred()) goto error;
  } else {
    PyErr_Format(PyExc_TypeError, "kernel: expected a HostKernel or an int handle, got %.80s", Py_TYPE(kernel)->tp_name);
    goto error;
  }
  if (grid_obj != Py_None && exprs_obj != Py_None) {
    PyErr_SetString(PyExc_ValueError, "grid and grid_exprs: give one, not both");
    goto error;
  }
  if (grid_obj != Py_None) {
    if (fl_ext_parse_grid(st, grid_obj, d.static_grid) < 0) {
      /* A malformed static grid is a refusal of the plan. */
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "grid: expected 1 to 3 ints, got %R", grid_obj);
      goto error;
    }
    d.grid_mode = FL_GRID_STATIC;
  } else if (exprs_obj != Py_None) {
    if (parse_strings(exprs_obj, "grid_exprs", 3, &exprs, &exprs_keep) < 0) goto error;
    d.grid_mode = FL_GRID_PROGRAM;
    for (int i = 0; i < 3; i++) d.grid_exprs[i] = exprs[i];
  } else {
    d.grid_mode = FL_GRID_CALLER;
  }
  if (names_obj != Py_None) {
    if (parse_strings(names_obj, "arg_names", nkinds, &names, &names_keep) < 0) goto error;
    d.arg_names = names;
  }
  fl_plan *plan;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) {
    fl_ext_raise_unavailable(st, &err);
    goto error;
  }
  lib = NULL; /* the plan owns that reference now */
  self = (fl_PlanObject *)type->tp_alloc(type, 0);
  if (!self) {
    fl_plan_release(plan);
    goto error;
  }
  self->vectorcall = plan_vectorcall;
  self->plan = plan;
  self->state = st;
  self->owner = Py_NewRef(owner);
  self->name = PyUnicode_FromString(fl_plan_name(plan));
  self->nruntime = fl_plan_runtime_arg_count(plan);
  self->backend = backend;
  self->kinds = NULL;
  /* The plan keeps its own copy of the kinds; read them through the introspection API once. */
  self->kinds = (const fl_kind *)PyMem_Calloc(nkinds ? nkinds : 1, sizeof(fl_kind));
  if (!self->kinds || !self->name) {
    Py_DECREF(self);
    self = NULL;
    PyErr_NoMemory();
    goto error;
  }
  memcpy((void *)self->kinds, kinds, nkinds * sizeof(fl_kind));
  self->ncall = self->nruntime;
  self->argmap = NULL;
  if (ignore_obj && ignore_obj != Py_None) {
    /* Positional arguments a call passes that are not kernel arguments (values Triton folded into
     * the binary): the call still passes them; the plan skips them. */
    PyObject *fast = PySequence_Fast(ignore_obj, "ignore: expected a sequence of positions");
    if (!fast) {
      Py_CLEAR(self);
      goto error;
    }
    Py_ssize_t ni = PySequence_Fast_GET_SIZE(fast);
    self->ncall = self->nruntime + (size_t)ni;
    self->argmap = PyMem_Calloc(self->ncall ? self->ncall : 1, sizeof(int32_t));
    if (!self->argmap) {
      Py_DECREF(fast);
      Py_CLEAR(self);
      PyErr_NoMemory();
      goto error;
    }
    for (size_t i = 0; i < self->ncall; i++) self->argmap[i] = 0;
    for (Py_ssize_t j = 0; j < ni; j++) {
      Py_ssize_t pos = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(fast, j), PyExc_OverflowError);
      if (pos < 0 || (size_t)pos >= self->ncall || self->argmap[pos] < 0) {
        if (!PyErr_Occurred())
          PyErr_Format(PyExc_ValueError, "ignore[%zd]: position out of range or repeated (0..%zu)", j, self->ncall - 1);
        Py_DECREF(fast);
        Py_CLEAR(self);
        goto error;
      }
      self->argmap[pos] = -1;
    }
    Py_DECREF(fast);
    int32_t k = 0;
    for (size_t i = 0; i < self->ncall; i++)
      if (self->argmap[i] == 0) self->argmap[i] = k++;
  }
error:
  if (lib) fl_host_lib_release(lib);
  PyMem_Free(kinds);
  PyMem_Free(fixed);
  PyMem_Free(names);
  PyMem_Free(exprs);
  Py_XDECREF(names_keep);
  Py_XDECREF(exprs_keep);
  return (PyObject *)self;
}

static void plan_dealloc(fl_PlanObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->name);
  PyMem_Free((void *)self->kinds);
  PyMem_Free(self->argmap);
  if (self->plan) fl_plan_release(self->plan);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static int plan_traverse(fl_PlanObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->owner);
  return 0;
}

static int plan_clear(fl_PlanObject *self) {
  Py_CLEAR(self->owner);
  return 0;
}

static PyObject *plan_get_layout(fl_PlanObject *self, void *closure) {
  (void)closure;
  const fl_layout *l = fl_plan_layout(self->plan);
  size_t n = fl_plan_nargs(self->plan);
  PyObject *args = PyList_New((Py_ssize_t)n);
  if (!args) return NULL;
  for (size_t i = 0; i < n; i++) {
    PyObject *o = PyLong_FromSize_t(fl_plan_arg_offset(self->plan, i));
    if (!o) {
      Py_DECREF(args);
      return NULL;
    }
    PyList_SET_ITEM(args, (Py_ssize_t)i, o);
  }
  PyObject *grid = l->grid[0] < 0 ? Py_NewRef(Py_None)
                                  : Py_BuildValue("[LLL]", (long long)l->grid[0], (long long)l->grid[1], (long long)l->grid[2]);
  PyObject *ffts = l->ffts < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(l->ffts);
  PyObject *hidden = PyList_New(l->hidden_count);
  if (!grid || !ffts || !hidden) {
    Py_XDECREF(grid);
    Py_XDECREF(ffts);
    Py_XDECREF(hidden);
    Py_DECREF(args);
    return NULL;
  }
  for (uint32_t h = 0; h < l->hidden_count; h++) {
    PyObject *o = PyLong_FromLongLong(l->hidden_first + 8 * (int64_t)h);
    if (!o) {
      Py_DECREF(grid);
      Py_DECREF(ffts);
      Py_DECREF(hidden);
      Py_DECREF(args);
      return NULL;
    }
    PyList_SET_ITEM(hidden, h, o);
  }
  return Py_BuildValue("{s:n,s:n,s:N,s:N,s:N,s:N}", "size", (Py_ssize_t)l->size, "align", (Py_ssize_t)l->align, "args",
                       args, "grid", grid, "ffts", ffts, "hidden", hidden);
}

static PyObject *plan_get_kinds(fl_PlanObject *self, void *closure) {
  (void)closure;
  size_t n = fl_plan_nargs(self->plan);
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (!list) return NULL;
  for (size_t i = 0; i < n; i++) {
    PyObject *o = PyUnicode_FromString(fl_kind_name(fl_plan_arg_kind(self->plan, i)));
    if (!o) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, o);
  }
  return list;
}

static PyObject *plan_get_grid_mode(fl_PlanObject *self, void *closure) {
  (void)closure;
  static const char *const modes[] = {"caller", "static", "program"};
  return PyUnicode_FromString(modes[fl_plan_grid_mode(self->plan)]);
}

static PyObject *plan_get_backend(fl_PlanObject *self, void *closure) {
  (void)closure;
  return PyUnicode_FromString(fl_backend_name(self->backend));
}

static PyObject *plan_get_runtime(fl_PlanObject *self, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(self->nruntime);
}

static PyObject *plan_get_call_args(fl_PlanObject *self, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(self->ncall);
}

static PyObject *plan_get_ignored(fl_PlanObject *self, void *closure) {
  (void)closure;
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && self->argmap && i < self->ncall; i++) {
    if (self->argmap[i] >= 0) continue;
    PyObject *pos = PyLong_FromSize_t(i);
    if (!pos || PyList_Append(list, pos) < 0) {
      Py_XDECREF(pos);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(pos);
  }
  if (!list) return NULL;
  PyObject *tuple = PyList_AsTuple(list);
  Py_DECREF(list);
  return tuple;
}

static PyObject *plan_get_template(fl_PlanObject *self, void *closure) {
  (void)closure;
  size_t size = fl_plan_layout(self->plan)->size;
  PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
  if (!bytes) return NULL;
  fl_error err;
  fl_plan_template(self->plan, PyBytes_AS_STRING(bytes), size, &err);
  return bytes;
}

static PyObject *plan_resolve_grid(fl_PlanObject *self, PyObject *const *args, Py_ssize_t nargs) {
  /* resolve_grid(*args): the grid a launch with these arguments would use. */
  fl_value values[STACK_VALUES];
  fl_error err;
  if (self->nruntime > STACK_VALUES)
    return fl_ext_raise_reason(self->state, true, "too_many_args:%zu", self->nruntime);
  int r = collect_values(self, args, (size_t)nargs, values, &err);
  if (r == -2) return NULL;
  if (r < 0) return fl_ext_raise(self->state, &err);
  uint32_t g[3];
  if (fl_plan_resolve_grid(self->plan, values, self->nruntime, NULL, g, &err) != FL_OK) return fl_ext_raise(self->state, &err);
  return Py_BuildValue("(III)", g[0], g[1], g[2]);
}

static PyObject *plan_repr(fl_PlanObject *self) {
  return PyUnicode_FromFormat("<fastlaunch Plan %U backend=%s args=%zu runtime=%zu grid=%s>", self->name,
                              fl_backend_name(self->backend), fl_plan_nargs(self->plan), self->nruntime,
                              (const char *[]){"caller", "static", "program"}[fl_plan_grid_mode(self->plan)]);
}

static PyMemberDef plan_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(fl_PlanObject, vectorcall), READONLY, NULL},
    {"owner", T_OBJECT, offsetof(fl_PlanObject, owner), READONLY, "what owns the kernel handle, kept alive"},
    {"name", T_OBJECT, offsetof(fl_PlanObject, name), READONLY, "the kernel's name"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef plan_getset[] = {
    {"layout", (getter)plan_get_layout, NULL, "the packed buffer's layout (size, args, grid, ffts, hidden)", NULL},
    {"kinds", (getter)plan_get_kinds, NULL, "argument kinds", NULL},
    {"grid_mode", (getter)plan_get_grid_mode, NULL, "'static', 'program' or 'caller'", NULL},
    {"backend", (getter)plan_get_backend, NULL, "the backend's name", NULL},
    {"runtime_arg_count", (getter)plan_get_runtime, NULL, "runtime kernel arguments per launch", NULL},
    {"call_arg_count", (getter)plan_get_call_args, NULL, "positional arguments per call (ignored ones included)", NULL},
    {"ignored", (getter)plan_get_ignored, NULL, "positions of the call's arguments the plan skips", NULL},
    {"template", (getter)plan_get_template, NULL, "the template buffer as bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *plan_cuda_launch_loop(fl_PlanObject *self, PyObject *args) {
  /* cuda_launch_loop(args, stream, n) -> ns: the driver's floor with this plan's kernel and args. */
  PyObject *call_args;
  unsigned long long stream, n;
  if (!PyArg_ParseTuple(args, "O!KK:cuda_launch_loop", &PyTuple_Type, &call_args, &stream, &n)) return NULL;
  fl_value values[STACK_VALUES];
  fl_error err;
  if (self->nruntime > STACK_VALUES)
    return fl_ext_raise_reason(self->state, true, "too_many_args:%zu", self->nruntime);
  int r = collect_values(self, &PyTuple_GET_ITEM(call_args, 0), (size_t)PyTuple_GET_SIZE(call_args), values, &err);
  if (r == -2) return NULL;
  if (r < 0) return fl_ext_raise(self->state, &err);
  const fl_layout *l = fl_plan_layout(self->plan);
  unsigned char *buf = PyMem_Calloc(l->size ? l->size : 1, 1);
  if (!buf) return PyErr_NoMemory();
  PyObject *result = NULL;
  uint32_t g[3];
  fl_plan_template(self->plan, buf, l->size, &err);
  for (size_t i = 0; i < self->nruntime; i++) {
    if (fl_pack_value(FL_ABI_CUDA, self->kinds[i], &values[i], buf + fl_plan_arg_offset(self->plan, i), i, &err) !=
        FL_OK) {
      fl_ext_raise(self->state, &err);
      goto done;
    }
  }
  if (fl_plan_resolve_grid(self->plan, values, self->nruntime, NULL, g, &err) != FL_OK) {
    fl_ext_raise(self->state, &err);
    goto done;
  }
  uint64_t ns = 0;
  fl_status st;
  Py_BEGIN_ALLOW_THREADS st = fl_cuda_launch_loop(self->plan, stream, buf, g, n, &ns, &err);
  Py_END_ALLOW_THREADS if (st != FL_OK) fl_ext_raise(self->state, &err);
  else result = PyLong_FromUnsignedLongLong(ns);
done:
  PyMem_Free(buf);
  return result;
}

static PyMethodDef plan_methods[] = {
    {"cuda_launch_loop", (PyCFunction)plan_cuda_launch_loop, METH_VARARGS,
     "cuda_launch_loop(args, stream, n) -> ns: the driver's floor (cuLaunchKernel in a C loop) for this cuda plan"},
    {"resolve_grid", (PyCFunction)(void (*)(void))plan_resolve_grid, METH_FASTCALL,
     "resolve_grid(*args) -> (x, y, z): the grid a launch with these runtime args would use"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot plan_slots[] = {
    {Py_tp_new, plan_new},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, plan_repr},
    {Py_tp_members, plan_members},
    {Py_tp_getset, plan_getset},
    {Py_tp_methods, plan_methods},
    {Py_tp_doc, "Plan(kernel, kinds, *, backend='host', owner=None, runtime_arg_count=None, fixed_args=(), grid=None, "
                "grid_exprs=None, arg_names=None, name=None, ...): a launch plan, built once.\n\n"
                "plan(*args, stream=0, grid=None) launches it."},
    {0, NULL},
};

static PyType_Spec plan_spec = {
    .name = "fastlaunch._C.Plan",
    .basicsize = sizeof(fl_PlanObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = plan_slots,
};

int fl_ext_add_plan_type(PyObject *module, fl_ext_state *st) {
  st->plan_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &plan_spec, NULL);
  if (!st->plan_type) return -1;
  if (PyModule_AddType(module, st->plan_type) < 0) return -1;
  PyTypeObject *floor = (PyTypeObject *)PyType_FromModuleAndSpec(module, &floor_spec, NULL);
  if (!floor) return -1;
  int r = PyModule_AddType(module, floor);
  Py_DECREF(floor);
  return r;
}
