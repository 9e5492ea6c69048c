/* module.c: the fastlaunch._C module: its state, layout(), streams and backends, and the types and
 * testing hooks of the layers below registered on it. */
#include "ext.h"

_Thread_local unsigned fl_ext_triton_depth;
unsigned fl_ext_triton_calls;

/* ---- layout(abi, kinds, **options) ---- */

static PyObject *layout_of(fl_ext_state *st, PyObject *abi, PyObject *kinds_obj, PyObject *options);

static PyObject *ext_layout(PyObject *module, PyObject *args) {
  /* layout(abi, kinds, options=None, /): fastlaunch.layout(abi, kinds, **options) calls it. */
  PyObject *abi, *kinds_obj, *options = Py_None;
  if (!PyArg_ParseTuple(args, "UO|O:layout", &abi, &kinds_obj, &options)) return NULL;
  if (options != Py_None && !PyDict_Check(options)) {
    PyErr_Format(PyExc_TypeError, "layout: options must be a dict, not %.80s", Py_TYPE(options)->tp_name);
    return NULL;
  }
  return layout_of(PyModule_GetState(module), abi, kinds_obj, options);
}

static PyObject *layout_of(fl_ext_state *st, PyObject *abi, PyObject *kinds_obj, PyObject *options) {
  fl_target target;
  if (fl_ext_parse_target(abi, options, FL_ABI_HOST, &target) < 0) return NULL;
  fl_kind *kinds = NULL;
  size_t n = 0;
  if (fl_ext_parse_kinds(st, kinds_obj, false, &kinds, &n) < 0) return NULL;
  size_t *offsets = PyMem_Calloc(n ? n : 1, sizeof *offsets);
  PyObject *result = NULL;
  fl_layout layout;
  fl_error err;
  if (!offsets) {
    PyErr_NoMemory();
  } else if (fl_layout_compute(&target, kinds, n, &layout, offsets, &err) != FL_OK) {
    fl_ext_raise_as(PyExc_ValueError, err.reason); /* reason and code as attributes */
  } else {
    result = fl_ext_layout_dict(&layout, offsets, n);
  }
  PyMem_Free(offsets);
  PyMem_Free(kinds);
  return result;
}

/* ---- streams ---- */

static int parse_backend(PyObject *name, fl_backend_id *out) { return fl_ext_parse_backend(name, out); }

static PyObject *ext_stream_create(PyObject *module, PyObject *args) {
  PyObject *name = NULL;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "|U:stream_create", &name) || parse_backend(name, &b) < 0) return NULL;
  uint64_t s;
  fl_error err;
  if (fl_stream_create(b, &s, &err) != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
  return PyLong_FromUnsignedLongLong(s);
}

/* ---- backend settings ---- */

static PyObject *ext_backend_configure(PyObject *module, PyObject *args) {
  PyObject *backend;
  const char *name, *value;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "Uss:backend_configure", &backend, &name, &value) || parse_backend(backend, &b) < 0)
    return NULL;
  fl_error err;
  if (fl_backend_configure(b, name, value, &err) != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
  Py_RETURN_NONE;
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
  Py_END_ALLOW_THREADS if (status != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
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
  if (fl_stream_count(b, s, &n, &err) != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
  return PyLong_FromUnsignedLongLong(n);
}

static PyObject *ext_backend_load(PyObject *module, PyObject *args) {
  PyObject *name = NULL;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "U:backend_load", &name) || parse_backend(name, &b) < 0) return NULL;
  fl_error err;
  if (fl_backend_load(b, &err) != FL_OK) return fl_ext_raise_unavailable(PyModule_GetState(module), &err);
  Py_RETURN_NONE;
}

/* kinds(seq) -> list of canonical kind names: C parses kinds (Triton's spellings included); a kind
 * no plan takes is a stable FastLaunchPlanUnavailable naming the argument. */
static PyObject *ext_kinds(PyObject *module, PyObject *seq) {
  fl_kind *kinds = NULL;
  size_t n = 0;
  if (fl_ext_parse_kinds(PyModule_GetState(module), seq, true, &kinds, &n) < 0) return NULL;
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; list && i < n; i++) {
    PyObject *s = PyUnicode_FromString(fl_kind_name(kinds[i]));
    if (!s) Py_CLEAR(list);
    else PyList_SET_ITEM(list, (Py_ssize_t)i, s);
  }
  PyMem_Free(kinds);
  return list;
}

/* backend_info(name) -> dict: what the backend's table says (name, abi, abis, kernel, own_streams). */
static PyObject *ext_backend_info(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *name = NULL;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "U:backend_info", &name) || parse_backend(name, &b) < 0) return NULL;
  fl_backend_info info;
  fl_error err;
  if (fl_backend_info_get(b, &info, &err) != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
  static const char *const kernels[] = {"none", "host_fn", "handle"};
  PyObject *abis = PyList_New(0);
  for (int a = 0; abis && a < FL_ABI_COUNT; a++) {
    if (!(info.abi_mask & (1u << a))) continue;
    PyObject *s = PyUnicode_FromString(fl_abi_name((fl_abi)a));
    if (!s || PyList_Append(abis, s) < 0) Py_CLEAR(abis);
    Py_XDECREF(s);
  }
  if (!abis) return NULL;
  return Py_BuildValue("{s:s,s:s,s:N,s:s,s:O}", "name", info.name, "abi", fl_abi_name(info.default_abi), "abis", abis,
                       "kernel", kernels[info.kernel], "own_streams", info.own_streams ? Py_True : Py_False);
}

/* tensor_door() -> (in_use, why): whether tensors are read through fastlaunch._tensor or data_ptr(). */
static PyObject *ext_tensor_door(PyObject *module, PyObject *unused) {
  (void)unused;
  fl_ext_state *st = PyModule_GetState(module);
  if (FL_EXT_LOAD(st->door_state) == 0) fl_ext_door_load(st);
#ifdef Py_GIL_DISABLED
  PyMutex_Lock(&st->door_lock); /* door_why is written under it */
#endif
  const char *why = FL_EXT_LOAD(st->door_state) == 0 ? "torch not imported yet" : st->door_why;
  PyObject *out = Py_BuildValue("(Os)", FL_EXT_DOOR(st) ? Py_True : Py_False, why);
#ifdef Py_GIL_DISABLED
  PyMutex_Unlock(&st->door_lock);
#endif
  return out;
}

/* _door_retry(why): the background build of fastlaunch._tensor ended (why None: built): the next
 * tensor argument loads it, or tensors stay on data_ptr() with why. */
static PyObject *ext_door_retry(PyObject *module, PyObject *why) {
  fl_ext_state *st = PyModule_GetState(module);
  const char *text = why == Py_None ? NULL : PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : NULL;
  if (!text) PyErr_Clear();
#ifdef Py_GIL_DISABLED
  PyMutex_Lock(&st->door_lock); /* the build's thread calls this */
#endif
  if (FL_EXT_LOAD(st->door_state) == -2) {
    if (why != Py_None) snprintf(st->door_why, sizeof st->door_why, "not built: %s", text ? text : "?");
    FL_EXT_STORE(st->door_state, why == Py_None ? 0 : -1);
  }
#ifdef Py_GIL_DISABLED
  PyMutex_Unlock(&st->door_lock);
#endif
  Py_RETURN_NONE;
}

/* npu_queue() -> (state, why): how npu launches are ordered with torch_npu's task queue. */
static PyObject *ext_npu_queue(PyObject *module, PyObject *unused) {
  (void)unused;
  fl_ext_state *st = PyModule_GetState(module);
  fl_ext_npu_queue_probe(st);
  static const char *const names[] = {"none", "unusable", "queue", "stream"};
  int s = st->npu_queue_state;
  const char *state = s == 1 ? names[2] : s == -1 ? names[1] : s == 0 ? names[3] : names[0];
  return Py_BuildValue("(ss)", state, st->npu_queue_why);
}

static PyMethodDef module_methods[] = {
    {"npu_queue", ext_npu_queue, METH_NOARGS,
     "npu_queue($module, /)\n--\n\n-> (state, why): 'queue' (torch_npu's task queue), 'stream' (torch_npu not loaded), "
     "'unusable' (npu launches refused) or 'none' (no shim)"},
    {"_door_retry", ext_door_retry, METH_O,
     "_door_retry($module, why, /)\n--\n\nThe tensor reader's background build ended (why None: built)"},
    {"tensor_door", ext_tensor_door, METH_NOARGS,
     "tensor_door($module, /)\n--\n\n-> (in_use, why): tensor arguments through torch's C++ object, or data_ptr() and why"},
    {"layout", ext_layout, METH_VARARGS,
     "layout($module, abi, kinds, options=None, /)\n--\n\n-> dict: "
     "Where each argument of a signature sits in the packed buffer of an ABI with those options."},
    {"backend_configure", ext_backend_configure, METH_VARARGS,
     "backend_configure($module, backend, name, value, /)\n--\n\nSets one setting of a backend before it loads "
     "(cuda params: packed or array; npu libascendcl, libruntime: a library path)"},
    {"stream_create", ext_stream_create, METH_VARARGS, "stream_create($module, backend='host', /)\n--\n\n-> int: a new stream of the backend"},
    {"stream_synchronize", ext_stream_synchronize, METH_VARARGS, "stream_synchronize($module, stream, backend='host', /)\n--\n\nWaits for the stream's launches."},
    {"stream_destroy", ext_stream_destroy, METH_VARARGS, "stream_destroy($module, stream, backend='host', /)\n--\n\nDrains, then destroys the stream."},
    {"stream_count", ext_stream_count, METH_VARARGS, "stream_count($module, stream, backend='host', /)\n--\n\n-> int: launches completed (host) or accepted (null)"},
    {"backend_load", ext_backend_load, METH_VARARGS,
     "backend_load($module, name, /)\n--\n\nLoads a backend or raises FastLaunchPlanUnavailable with the reason."},
    {"backend_info", ext_backend_info, METH_VARARGS, "backend_info($module, name, /)\n--\n\n-> dict: what the backend's table says"},
    {"launch_knobs", fl_ext_set_launch_knobs, METH_O,
     "launch_knobs($module, knobs, /)\n--\n\nWhere a call with launch hooks set reads them (triton.knobs.runtime; "
     "the policy gives it again when that object is replaced); "
     "None: such calls go to Triton"},
    {"tensor_descriptor_type", fl_ext_set_tensor_desc_type, METH_O,
     "tensor_descriptor_type($module, cls, /)\n--\n\nTriton's TensorDescriptor class: kernel[grid] reads its instances "
     "(None: they go to Triton)"},
    {"kinds", ext_kinds, METH_O, "kinds($module, seq, /)\n--\n\n-> list: canonical kind names (Triton's spellings parsed in C)"},
    {NULL, NULL, 0, NULL},
};

/* A launch waiting on a full host stream releases the GIL, when this thread holds it (a C caller's
 * thread may launch without Python). */
static void *release_gil(void) { return PyGILState_Check() ? (void *)PyEval_SaveThread() : NULL; }
static void reacquire_gil(void *token) {
  if (token) PyEval_RestoreThread((PyThreadState *)token);
}

static int module_exec(PyObject *module) {
  fl_set_wait_hooks(release_gil, reacquire_gil);
  fl_ext_state *st = PyModule_GetState(module);
  st->str_data_ptr = PyUnicode_InternFromString("data_ptr");
  st->str_stream = PyUnicode_InternFromString("stream");
  st->str_grid = PyUnicode_InternFromString("grid");
  st->str_fallback = PyUnicode_InternFromString("entry_fallback");
  st->str_pre_hook = PyUnicode_InternFromString("pre_hook");
  st->str_block_shape = PyUnicode_InternFromString("block_shape");
  st->str_base = PyUnicode_InternFromString("base");
  st->str_shape = PyUnicode_InternFromString("shape");
  st->str_strides = PyUnicode_InternFromString("strides");
  st->str_padding = PyUnicode_InternFromString("padding");
  st->str_round_tf32 = PyUnicode_InternFromString("round_f32_to_tf32");
  st->str_nan = PyUnicode_InternFromString("nan");
  if (!st->str_data_ptr || !st->str_stream || !st->str_grid || !st->str_fallback || !st->str_pre_hook ||
      !st->str_block_shape || !st->str_base || !st->str_shape || !st->str_strides || !st->str_padding ||
      !st->str_round_tf32 || !st->str_nan)
    return -1;
  if (fl_ext_add_errors(module, st) < 0) return -1;
  if (fl_ext_add_host_kernel_type(module, st) < 0) return -1;
  if (fl_ext_add_plan_type(module, st) < 0) return -1;
  if (fl_ext_add_entry_type(module, st) < 0) return -1;
  if (fl_ext_add_jit_types(module, st) < 0) return -1;
  if (fl_ext_add_autotune_type(module, st) < 0) return -1;
  if (fl_ext_add_heuristics_type(module, st) < 0) return -1;
  if (fl_ext_add_tuner_slot_type(module, st) < 0) return -1;
  if (fl_ext_add_jit_call_types(module, st) < 0) return -1;
  if (fl_ext_add_compiled_types(module, st) < 0 || fl_ext_add_compiled_run_type(module, st) < 0) return -1;
  if (fl_ext_add_extras(module, st) < 0) return -1;
  if (PyModule_AddIntConstant(module, "STACK_ARGS", 4096) < 0) return -1;
  return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
  fl_ext_state *st = PyModule_GetState(module);
  Py_VISIT(st->error_type);
  Py_VISIT(st->unavailable_type);
  Py_VISIT(st->plan_type);
  Py_VISIT(st->entry_type);
  Py_VISIT(st->host_kernel_type);
  Py_VISIT(st->jit_type);
  Py_VISIT(st->jit_call_type);
  Py_VISIT(st->jit_subscript_type);
  Py_VISIT(st->autotune_type);
  Py_VISIT(st->tuner_bound_type);
  Py_VISIT(st->heuristics_type);
  Py_VISIT(st->launch_knobs);
  Py_VISIT(st->tensor_desc_type);
  Py_VISIT(st->retired);
  return 0;
}

static int module_clear(PyObject *module) {
  fl_ext_state *st = PyModule_GetState(module);
  Py_CLEAR(st->error_type);
  Py_CLEAR(st->unavailable_type);
  Py_CLEAR(st->plan_type);
  Py_CLEAR(st->entry_type);
  Py_CLEAR(st->host_kernel_type);
  Py_CLEAR(st->str_data_ptr);
  Py_CLEAR(st->str_stream);
  Py_CLEAR(st->str_grid);
  Py_CLEAR(st->str_fallback);
  Py_CLEAR(st->str_warmup);
  Py_CLEAR(st->str_run);
  Py_CLEAR(st->str_dtype);
  Py_CLEAR(st->str_pre_hook);
  Py_CLEAR(st->str_heuristics_count);
  Py_CLEAR(st->str_launch_metadata);
  Py_CLEAR(st->str_launch_enter_hook);
  Py_CLEAR(st->str_launch_exit_hook);
  Py_CLEAR(st->launch_knobs);
  Py_CLEAR(st->tensor_desc_type);
  Py_CLEAR(st->retired);
  Py_CLEAR(st->jit_type);
  Py_CLEAR(st->jit_call_type);
  Py_CLEAR(st->jit_subscript_type);
  Py_CLEAR(st->autotune_type);
  Py_CLEAR(st->tuner_bound_type);
  Py_CLEAR(st->heuristics_type);
  return 0;
}

static void module_free(void *module) { module_clear((PyObject *)module); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* Some state is the process's, not the module's: the dict-watch epoch (watch.c), the interned
     * "__getitem__" the JIT's class slot looks up (jit_subscript.c), torch's shim functions
     * (jit.c), the npu backend's queue. One interpreter only. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* Safe without the GIL (ext.h, "free-threaded builds"): a free-threaded build keeps it off. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static PyModuleDef fl_ext_module = {
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
