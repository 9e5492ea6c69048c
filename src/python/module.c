/* module.c: the fastlaunch._C module: state, the error types, layout(), host streams. */
#include "ext.h"

#include <stdarg.h>
#include <time.h>

fl_ext_state *fl_ext_state_from_type(PyTypeObject *type) {
  PyObject *m = PyType_GetModuleByDef(type, &fl_ext_module);
  return m ? fl_ext_state_of(m) : NULL;
}

/* ---- errors ---- */

/* __init__(self, reason, *, backend_submitted=False, stable=...) for both error types; the
 * default of `stable` comes from the class attribute _default_stable. */
static PyObject *error_init(PyObject *unused, PyObject *args, PyObject *kwds) {
  (void)unused;
  PyObject *self, *reason;
  PyObject *submitted = Py_False, *stable = NULL;
  static char *kwlist[] = {"self", "reason", "backend_submitted", "stable", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$OO:__init__", kwlist, &self, &reason, &submitted, &stable))
    return NULL;
  PyObject *base_args = PyTuple_Pack(1, reason);
  if (!base_args) return NULL;
  int r = ((PyTypeObject *)PyExc_RuntimeError)->tp_init(self, base_args, NULL);
  Py_DECREF(base_args);
  if (r < 0) return NULL;
  if (!stable) {
    stable = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_default_stable");
    if (!stable) return NULL;
  } else {
    Py_INCREF(stable);
  }
  int is_stable = PyObject_IsTrue(stable), is_submitted = PyObject_IsTrue(submitted);
  Py_DECREF(stable);
  if (is_stable < 0 || is_submitted < 0) return NULL;
  if (PyObject_SetAttrString(self, "reason", reason) < 0 ||
      PyObject_SetAttrString(self, "backend_submitted", is_submitted ? Py_True : Py_False) < 0 ||
      PyObject_SetAttrString(self, "stable", is_stable ? Py_True : Py_False) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef error_init_def = {"__init__", (PyCFunction)(void (*)(void))error_init, METH_VARARGS | METH_KEYWORDS,
                                     NULL};

static PyObject *make_error_type(const char *name, const char *doc, bool default_stable) {
  PyObject *dict = PyDict_New(), *fn = NULL, *method = NULL, *type = NULL;
  if (!dict) return NULL;
  fn = PyCFunction_New(&error_init_def, NULL);
  if (!fn) goto done;
  method = PyInstanceMethod_New(fn);
  if (!method) goto done;
  if (PyDict_SetItemString(dict, "__init__", method) < 0 ||
      PyDict_SetItemString(dict, "_default_stable", default_stable ? Py_True : Py_False) < 0)
    goto done;
  type = PyErr_NewExceptionWithDoc(name, doc, PyExc_RuntimeError, dict);
done:
  Py_XDECREF(method);
  Py_XDECREF(fn);
  Py_DECREF(dict);
  return type;
}

int fl_ext_add_errors(PyObject *module, fl_ext_state *st) {
  st->error_type = make_error_type(
      "fastlaunch._C.FastLaunchError",
      "A launch through fastlaunch failed.\n\nreason: a short stable code; backend_submitted: the launch may have "
      "been submitted (never retry it); stable: the same launcher would fail the same way again.",
      false);
  if (!st->error_type) return -1;
  st->unavailable_type = make_error_type(
      "fastlaunch._C.FastLaunchPlanUnavailable",
      "No plan can be built for this launcher (reason says why); stable refusals are negative-cached.", true);
  if (!st->unavailable_type) return -1;
  if (PyModule_AddObjectRef(module, "FastLaunchError", st->error_type) < 0) return -1;
  if (PyModule_AddObjectRef(module, "FastLaunchPlanUnavailable", st->unavailable_type) < 0) return -1;
  return 0;
}

static PyObject *raise_typed(PyObject *type, const char *reason, bool submitted, bool stable) {
  /* Reasons are cut at a byte count and may end inside a character: decode leniently, so the
   * error raised is always this one (a UnicodeDecodeError would lose backend_submitted). */
  PyObject *text = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
  if (!text) return NULL;
  PyObject *exc = PyObject_CallOneArg(type, text);
  Py_DECREF(text);
  if (!exc) return NULL;
  if (PyObject_SetAttrString(exc, "backend_submitted", submitted ? Py_True : Py_False) < 0 ||
      PyObject_SetAttrString(exc, "stable", stable ? Py_True : Py_False) < 0) {
    Py_DECREF(exc);
    return NULL;
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *fl_ext_raise(fl_ext_state *st, const fl_error *err) {
  return raise_typed(st->error_type, err->reason, err->backend_submitted, err->stable);
}

PyObject *fl_ext_raise_unavailable(fl_ext_state *st, const fl_error *err) {
  return raise_typed(st->unavailable_type, err->reason, false, err->stable);
}

PyObject *fl_ext_raise_reason(fl_ext_state *st, bool stable, const char *fmt, ...) {
  char reason[FL_REASON_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  return raise_typed(st->error_type, reason, false, stable);
}

/* ---- layout(abi, kinds, *, ffts, simt_only, dtdata, scratch, hidden_ptrs) ---- */

int fl_ext_parse_kinds(fl_ext_state *st, PyObject *seq, fl_kind **out, size_t *n);

static PyObject *offset_or_none(int64_t off) { return off < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(off); }

static PyObject *ext_layout(PyObject *module, PyObject *args, PyObject *kwds) {
  fl_ext_state *st = fl_ext_state_of(module);
  static char *kwlist[] = {"abi", "kinds", "ffts", "simt_only", "dtdata", "scratch", "hidden_ptrs", NULL};
  const char *abi_name;
  PyObject *kinds_obj;
  int ffts = 0, simt_only = 0, dtdata = 0;
  unsigned int scratch = 0, hidden = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "sO|$pppII:layout", kwlist, &abi_name, &kinds_obj, &ffts, &simt_only,
                                   &dtdata, &scratch, &hidden))
    return NULL;
  fl_abi_options abi = {0};
  if (strcmp(abi_name, "host") == 0) abi.abi = FL_ABI_HOST;
  else if (strcmp(abi_name, "cuda") == 0) abi.abi = FL_ABI_CUDA;
  else if (strcmp(abi_name, "npu") == 0) abi.abi = FL_ABI_NPU;
  else {
    PyErr_Format(PyExc_ValueError, "abi: unknown flavour '%s' (expected 'host', 'cuda' or 'npu')", abi_name);
    return NULL;
  }
  abi.npu_ffts = ffts;
  abi.npu_simt_only = simt_only;
  abi.npu_dtdata = dtdata;
  abi.npu_scratch = scratch;
  abi.cuda_hidden_ptrs = hidden;
  fl_kind *kinds = NULL;
  size_t n = 0;
  if (fl_ext_parse_kinds(st, kinds_obj, &kinds, &n) < 0) return NULL;
  size_t *offsets = PyMem_Calloc(n ? n : 1, sizeof *offsets);
  PyObject *result = NULL, *list = NULL;
  if (!offsets) {
    PyErr_NoMemory();
    goto done;
  }
  fl_layout layout;
  fl_error err;
  if (fl_layout_compute(&abi, kinds, n, &layout, offsets, &err) != FL_OK) {
    PyErr_Format(PyExc_ValueError, "layout refused: %s", err.reason);
    goto done;
  }
  list = PyList_New((Py_ssize_t)n);
  if (!list) goto done;
  for (size_t i = 0; i < n; i++) {
    PyObject *o = PyLong_FromSize_t(offsets[i]);
    if (!o) goto done;
    PyList_SET_ITEM(list, (Py_ssize_t)i, o);
  }
  PyObject *grid = layout.grid[0] < 0 ? Py_NewRef(Py_None)
                                      : Py_BuildValue("[LLL]", (long long)layout.grid[0], (long long)layout.grid[1],
                                                      (long long)layout.grid[2]);
  if (!grid) goto done;
  PyObject *hidden_list = PyList_New(layout.hidden_count);
  if (!hidden_list) {
    Py_DECREF(grid);
    goto done;
  }
  for (uint32_t h = 0; h < layout.hidden_count; h++) {
    PyObject *o = PyLong_FromLongLong(layout.hidden_first + 8 * (int64_t)h);
    if (!o) {
      Py_DECREF(grid);
      Py_DECREF(hidden_list);
      goto done;
    }
    PyList_SET_ITEM(hidden_list, h, o);
  }
  result = Py_BuildValue("{s:n,s:n,s:O,s:N,s:N,s:N}", "size", (Py_ssize_t)layout.size, "align",
                         (Py_ssize_t)layout.align, "args", list, "grid", grid, "ffts", offset_or_none(layout.ffts),
                         "hidden", hidden_list);
done:
  Py_XDECREF(list);
  PyMem_Free(offsets);
  PyMem_Free(kinds);
  return result;
}

/* Parses a sequence of kind names or Triton signature entries ("*fp32", "i32", ...). */
int fl_ext_parse_kinds(fl_ext_state *st, PyObject *seq, fl_kind **out, size_t *n) {
  (void)st;
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
    const char *text = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
    fl_error err;
    if (!text) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "kinds[%zd]: expected a str, got %.80s", i, Py_TYPE(item)->tp_name);
      goto error;
    }
    if (fl_kind_parse(text, &kinds[i], &err) != FL_OK) {
      PyErr_Format(PyExc_ValueError, "kinds[%zd]: %s", i, err.reason);
      goto error;
    }
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

/* ---- streams ---- */

static int parse_backend(PyObject *name, fl_backend_id *out) {
  const char *text = name ? PyUnicode_AsUTF8(name) : "host";
  if (!text) return -1;
  fl_error err;
  if (fl_backend_parse(text, out, &err) != FL_OK) {
    PyErr_Format(PyExc_ValueError, "backend: unknown backend %R (expected host, null, cuda or npu)", name);
    return -1;
  }
  return 0;
}

static PyObject *ext_stream_create(PyObject *module, PyObject *args) {
  PyObject *name = NULL;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "|U:stream_create", &name) || parse_backend(name, &b) < 0) return NULL;
  uint64_t s;
  fl_error err;
  if (fl_stream_create(b, &s, &err) != FL_OK) return fl_ext_raise(fl_ext_state_of(module), &err);
  return PyLong_FromUnsignedLongLong(s);
}

typedef fl_status (*stream_op)(fl_backend_id, uint64_t, fl_error *);

static PyObject *stream_call(PyObject *module, PyObject *args, const char *fmt, stream_op op) {
  PyObject *name = NULL;
  unsigned long long s;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, fmt, &s, &name) || parse_backend(name, &b) < 0) return NULL;
  fl_error err;
  fl_status status;
  /* Synchronizing and draining wait for the worker: let other Python threads run meanwhile. */
  Py_BEGIN_ALLOW_THREADS status = op(b, s, &err);
  Py_END_ALLOW_THREADS if (status != FL_OK) return fl_ext_raise(fl_ext_state_of(module), &err);
  Py_RETURN_NONE;
}

static PyObject *ext_stream_synchronize(PyObject *m, PyObject *a) {
  return stream_call(m, a, "K|U:stream_synchronize", fl_stream_synchronize);
}
static PyObject *ext_stream_destroy(PyObject *m, PyObject *a) {
  return stream_call(m, a, "K|U:stream_destroy", fl_stream_destroy);
}

static PyObject *ext_stream_count(PyObject *module, PyObject *args) {
  PyObject *name = NULL;
  unsigned long long s;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "K|U:stream_count", &s, &name) || parse_backend(name, &b) < 0) return NULL;
  uint64_t n;
  fl_error err;
  if (fl_stream_count(b, s, &n, &err) != FL_OK) return fl_ext_raise(fl_ext_state_of(module), &err);
  return PyLong_FromUnsignedLongLong(n);
}

static PyObject *ext_backend_load(PyObject *module, PyObject *args) {
  PyObject *name = NULL;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "U:backend_load", &name) || parse_backend(name, &b) < 0) return NULL;
  fl_error err;
  if (fl_backend_load(b, &err) != FL_OK) return fl_ext_raise_unavailable(fl_ext_state_of(module), &err);
  Py_RETURN_NONE;
}

/* grid_eval(expr, names, values): compiles and evaluates one grid expression (tools and tests). */
static PyObject *ext_grid_eval(PyObject *module, PyObject *args) {
  const char *expr;
  PyObject *names_obj, *values_obj;
  if (!PyArg_ParseTuple(args, "sOO:grid_eval", &expr, &names_obj, &values_obj)) return NULL;
  fl_ext_state *st = fl_ext_state_of(module);
  PyObject *names = PySequence_Fast(names_obj, "names: expected a sequence of str");
  if (!names) return NULL;
  PyObject *values = PySequence_Fast(values_obj, "values: expected a sequence of int");
  if (!values) {
    Py_DECREF(names);
    return NULL;
  }
  PyObject *result = NULL;
  Py_ssize_t nn = PySequence_Fast_GET_SIZE(names), nv = PySequence_Fast_GET_SIZE(values);
  const char **cnames = PyMem_Calloc(nn ? (size_t)nn : 1, sizeof *cnames);
  int64_t *cvalues = PyMem_Calloc(nv ? (size_t)nv : 1, sizeof *cvalues);
  fl_grid_program *prog = NULL;
  if (!cnames || !cvalues) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < nn; i++)
    if (!(cnames[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(names, i)))) goto done;
  for (Py_ssize_t i = 0; i < nv; i++) {
    cvalues[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(values, i));
    if (cvalues[i] == -1 && PyErr_Occurred()) goto done;
  }
  fl_error err;
  if (fl_grid_program_compile(expr, cnames, (size_t)nn, &prog, &err) != FL_OK) {
    fl_ext_raise(st, &err);
    goto done;
  }
  int64_t out;
  if (fl_grid_program_eval(prog, cvalues, (size_t)nv, &out, &err) != FL_OK) {
    fl_ext_raise(st, &err);
    goto done;
  }
  result = PyLong_FromLongLong(out);
done:
  fl_grid_program_free(prog);
  PyMem_Free(cnames);
  PyMem_Free(cvalues);
  Py_DECREF(names);
  Py_DECREF(values);
  return result;
}

static PyObject *ext_fault_inject(PyObject *module, PyObject *args) {
  static const char *const points[] = {"none", "pack", "grid", "submit_refused", "submit_after", "submit_lost"};
  const char *name;
  unsigned int one_in = 1;
  unsigned long long seed = 0;
  PyObject *plan = Py_None;
  if (!PyArg_ParseTuple(args, "s|IKO:fault_inject", &name, &one_in, &seed, &plan)) return NULL;
  fl_ext_state *st = fl_ext_state_of(module);
  if (plan != Py_None && !PyObject_TypeCheck(plan, st->plan_type)) {
    PyErr_SetString(PyExc_TypeError, "fault_inject: plan must be a Plan or None");
    return NULL;
  }
  for (int p = 0; p < FL_FAULT_COUNT; p++) {
    if (strcmp(name, points[p]) == 0) {
      /* The targeted plan stays alive while armed: tests disarm before dropping it. */
      fl_fault_inject(p, one_in, seed, plan == Py_None ? NULL : ((fl_PlanObject *)plan)->plan);
      Py_RETURN_NONE;
    }
  }
  PyErr_Format(PyExc_ValueError, "fault_inject: unknown point %s", name);
  return NULL;
}

static PyObject *ext_fault_fired(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromUnsignedLongLong(fl_fault_fired());
}

/* bench_loop(callable, args, kwargs, n) -> ns: calls callable(*args, **kwargs) n times from C and
 * returns the elapsed nanoseconds, so every benchmark mode pays the same loop overhead (none of
 * Python's). Callgrind counts instructions between the toggles on this function's name. */
__attribute__((visibility("default"))) Py_NO_INLINE PyObject *fl_bench_loop(PyObject *callable, PyObject *const *argv, size_t nargs, PyObject *kwnames,
                                            long long n, long long *ns) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long long i = 0; i < n; i++) {
    PyObject *r = PyObject_Vectorcall(callable, argv, nargs, kwnames);
    if (!r) return NULL;
    Py_DECREF(r);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  return Py_None;
}

static PyObject *ext_bench_loop(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *callable, *call_args, *kwargs;
  long long n;
  if (!PyArg_ParseTuple(args, "OO!O!L:bench_loop", &callable, &PyTuple_Type, &call_args, &PyDict_Type, &kwargs, &n))
    return NULL;
  Py_ssize_t nargs = PyTuple_GET_SIZE(call_args), nkw = PyDict_GET_SIZE(kwargs);
  PyObject **argv = PyMem_Calloc((size_t)(nargs + nkw) + 1, sizeof(PyObject *));
  PyObject *kwnames = nkw ? PyTuple_New(nkw) : NULL;
  PyObject *result = NULL;
  if (!argv || (nkw && !kwnames)) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = PyTuple_GET_ITEM(call_args, i);
  /* The loop calls arbitrary code: it holds its own references to every argument. */
  for (Py_ssize_t i = 0; i < nargs; i++) Py_INCREF(argv[i]);
  Py_ssize_t pos = 0, k = 0;
  PyObject *key, *value;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    PyTuple_SET_ITEM(kwnames, k, Py_NewRef(key));
    argv[nargs + k++] = Py_NewRef(value);
  }
  long long ns = 0;
  if (fl_bench_loop(callable, argv, (size_t)nargs, kwnames, n, &ns)) result = PyLong_FromLongLong(ns);
  for (Py_ssize_t i = 0; i < nargs + k; i++) Py_DECREF(argv[i]);
done:
  Py_XDECREF(kwnames);
  PyMem_Free(argv);
  return result;
}

static PyMethodDef module_methods[] = {
    {"bench_loop", ext_bench_loop, METH_VARARGS,
     "bench_loop(callable, args, kwargs, n) -> ns: n calls from a C loop, for benchmarks"},
    {"fault_inject", ext_fault_inject, METH_VARARGS,
     "fault_inject(point, one_in=1, seed=0, plan=None): tests only; point is none, pack, grid, "
     "submit_refused, submit_after or submit_lost; plan limits the faults to one plan"},
    {"fault_fired", ext_fault_fired, METH_NOARGS, "faults fired since fault_inject"},
    {"layout", (PyCFunction)(void (*)(void))ext_layout, METH_VARARGS | METH_KEYWORDS,
     "layout(abi, kinds, *, ffts=False, simt_only=False, dtdata=False, scratch=0, hidden_ptrs=0) -> dict\n\n"
     "Where each argument of a signature sits in the packed buffer of an ABI flavour."},
    {"stream_create", ext_stream_create, METH_VARARGS, "stream_create(backend='host') -> int"},
    {"stream_synchronize", ext_stream_synchronize, METH_VARARGS, "stream_synchronize(stream, backend='host')"},
    {"stream_destroy", ext_stream_destroy, METH_VARARGS, "stream_destroy(stream, backend='host')"},
    {"stream_count", ext_stream_count, METH_VARARGS, "stream_count(stream, backend='host') -> int"},
    {"backend_load", ext_backend_load, METH_VARARGS,
     "backend_load(name): loads a backend or raises FastLaunchPlanUnavailable with the reason."},
    {"grid_eval", ext_grid_eval, METH_VARARGS, "grid_eval(expr, names, values) -> int"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *module) {
  fl_ext_state *st = fl_ext_state_of(module);
  st->str_data_ptr = PyUnicode_InternFromString("data_ptr");
  st->str_stream = PyUnicode_InternFromString("stream");
  st->str_grid = PyUnicode_InternFromString("grid");
  st->str_fallback = PyUnicode_InternFromString("entry_fallback");
  if (!st->str_data_ptr || !st->str_stream || !st->str_grid || !st->str_fallback) return -1;
  if (fl_ext_add_errors(module, st) < 0) return -1;
  if (fl_ext_add_host_kernel_type(module, st) < 0) return -1;
  if (fl_ext_add_plan_type(module, st) < 0) return -1;
  if (fl_ext_add_entry_type(module, st) < 0) return -1;
  if (PyModule_AddIntConstant(module, "STACK_ARGS", 4096) < 0) return -1;
  return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
  fl_ext_state *st = fl_ext_state_of(module);
  Py_VISIT(st->error_type);
  Py_VISIT(st->unavailable_type);
  Py_VISIT(st->plan_type);
  Py_VISIT(st->entry_type);
  Py_VISIT(st->host_kernel_type);
  return 0;
}

static int module_clear(PyObject *module) {
  fl_ext_state *st = fl_ext_state_of(module);
  Py_CLEAR(st->error_type);
  Py_CLEAR(st->unavailable_type);
  Py_CLEAR(st->plan_type);
  Py_CLEAR(st->entry_type);
  Py_CLEAR(st->host_kernel_type);
  Py_CLEAR(st->str_data_ptr);
  Py_CLEAR(st->str_stream);
  Py_CLEAR(st->str_grid);
  Py_CLEAR(st->str_fallback);
  return 0;
}

static void module_free(void *module) { module_clear((PyObject *)module); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyModuleDef fl_ext_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fastlaunch._C",
    .m_doc = "fastlaunch's C extension: plans, the finalized call-slot entry, errors, layouts, host streams.",
    .m_size = sizeof(fl_ext_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__C(void) { return PyModuleDef_Init(&fl_ext_module); }
