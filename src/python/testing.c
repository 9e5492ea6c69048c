/* testing.c: hooks for tests and benchmarks, kept out of the runtime types: fault injection,
 * grid_eval, the extraction floor (Floor), a C call loop and the backend's own launch loop. */
#include "call_args.h"
#include "fastlaunch_testing.h"

#include <time.h>

/* ---- the floor: extraction only ---- */

/* Floor(kinds): a callable that extracts its arguments exactly as a launch does and stops there;
 * the least any Python-driven launch can cost, for benchmarks. */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  size_t n;
  int unpack; /* 0: data_ptr() for every tensor, never the tensor door */
  fl_ext_args spec; /* the call's arguments as a plan's (identity map, any memory) */
  fl_kind kinds[];
} FloorObject;

static PyObject *floor_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  FloorObject *self = (FloorObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  fl_value values[FL_EXT_STACK_VALUES];
  fl_error err;
  if (nargs != self->n || nargs > FL_EXT_STACK_VALUES)
    return fl_ext_raise_reason(self->state, true, "args_size_mismatch:%zu:%zu", nargs, self->n);
  uint64_t stream = 0;
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k);
      if (key != self->state->str_stream && PyUnicode_Compare(key, self->state->str_stream) != 0) {
        PyErr_Format(PyExc_TypeError, "Floor() got an unexpected keyword argument %R", key);
        return NULL;
      }
      if (fl_ext_parse_stream(args[nargs + (size_t)k], &stream, &err) < 0) return fl_ext_raise(self->state, &err);
    }
  }
  /* As a launch reads them: in words when every one reads as a word, the full way otherwise. */
  uint64_t words[FL_EXT_STACK_VALUES];
  const fl_tensor_door *door = FL_EXT_DOOR(self->state);
  if (self->spec.words && door && fl_ext_collect_words(door, &self->spec, args, words)) Py_RETURN_NONE;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  int r = fl_ext_collect(self->state, &self->spec, args, nargs, values, tmaps, &err);
  if (r == -2) return NULL;
  if (r < 0) return fl_ext_raise(self->state, &err);
  (void)stream;
  Py_RETURN_NONE;
}

static PyObject *floor_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kinds", "unpack", NULL};
  PyObject *kinds_obj;
  int unpack = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$p:Floor", kwlist, &kinds_obj, &unpack)) return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  fl_kind *kinds;
  size_t n;
  if (!st || fl_ext_parse_kinds(st, kinds_obj, false, &kinds, &n) < 0) return NULL;
  FloorObject *self = (FloorObject *)type->tp_alloc(type, (Py_ssize_t)n);
  if (self) {
    self->vectorcall = floor_vectorcall;
    self->state = st;
    self->n = n;
    self->unpack = unpack;
    memcpy(self->kinds, kinds, n * sizeof *kinds);
    self->spec = (fl_ext_args){.nruntime = n, .ncall = n, .kinds = self->kinds, .memory = FL_MEMORY_ANY,
                               .device = -1, .data_ptr_only = !unpack};
    /* In words as a plan of these kinds would be: pointers and signed 32- and 64-bit ints. */
    bool words = true;
    for (size_t i = 0; i < n; i++)
      words = words && (kinds[i] == FL_KIND_PTR || kinds[i] == FL_KIND_I32 || kinds[i] == FL_KIND_I64);
    if (fl_ext_args_index(&self->spec, words) < 0) Py_CLEAR(self);
  }
  PyMem_Free(kinds);
  return (PyObject *)self;
}

static void floor_dealloc(PyObject *op) {
  FloorObject *self = (FloorObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyMem_Free(self->spec.ptr_pos);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMemberDef floor_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(FloorObject, vectorcall), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot floor_slots[] = {
    {Py_tp_new, floor_new},
    {Py_tp_dealloc, floor_dealloc},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, floor_members},
    {Py_tp_doc, "Floor(kinds, *, unpack=True)\n--\n\nExtracts its arguments like a launch and submits nothing "
                "(the benchmark floor); unpack=False reads every tensor through data_ptr()."},
    {0, NULL},
};

static PyType_Spec floor_spec = {
    .name = "fastlaunch._C.Floor",
    .basicsize = sizeof(FloorObject),
    .itemsize = sizeof(fl_kind),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = floor_slots,
};

/* grid_eval(expr, names, values): compiles and evaluates one grid expression (tools and tests). The
 * values are read first, from tuples of our own: their __index__ may run any code, and the names'
 * UTF-8 pointers must still be alive when the compiler reads them. */
static PyObject *ext_grid_eval(PyObject *module, PyObject *args) {
  PyObject *expr_obj, *names_obj, *values_obj;
  if (!PyArg_ParseTuple(args, "UOO:grid_eval", &expr_obj, &names_obj, &values_obj)) return NULL;
  fl_ext_state *st = PyModule_GetState(module);
  PyObject *values = PySequence_Tuple(values_obj);
  if (!values) return NULL;
  PyObject *result = NULL, *names_keep = NULL;
  const char **cnames = NULL;
  Py_ssize_t nv = PyTuple_GET_SIZE(values);
  int64_t *cvalues = PyMem_Calloc(nv ? (size_t)nv : 1, sizeof *cvalues);
  fl_grid_program *prog = NULL;
  if (!cvalues) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < nv; i++) {
    cvalues[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(values, i));
    if (cvalues[i] == -1 && PyErr_Occurred()) goto done;
  }
  if (fl_ext_parse_strings(names_obj, "names", 0, &cnames, &names_keep) < 0) goto done;
  Py_ssize_t size;
  const char *expr = PyUnicode_AsUTF8AndSize(expr_obj, &size);
  if (!expr) goto done;
  if ((size_t)size != strlen(expr)) {
    PyErr_SetString(PyExc_ValueError, "expr: embedded NUL character");
    goto done;
  }
  fl_error err;
  if (fl_grid_program_compile(expr, cnames, (size_t)PyTuple_GET_SIZE(names_keep), &prog, &err) != FL_OK) {
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
  Py_XDECREF(names_keep);
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
  fl_ext_state *st = PyModule_GetState(module);
  if (plan != Py_None && !PyObject_TypeCheck(plan, st->plan_type)) {
    PyErr_SetString(PyExc_TypeError, "fault_inject: plan must be a Plan or None");
    return NULL;
  }
  for (int p = 0; p < FL_FAULT_COUNT; p++) {
    if (strcmp(name, points[p]) != 0) continue;
    if (p != FL_FAULT_NONE && plan == Py_None) {
      PyErr_SetString(PyExc_ValueError, "fault_inject: a point other than 'none' needs the plan to arm");
      return NULL;
    }
    /* The core holds its own reference to the armed plan until it is disarmed. */
    fl_error err;
    if (fl_fault_inject((fl_fault_point)p, one_in, seed, plan == Py_None ? NULL : ((fl_PlanObject *)plan)->plan,
                        &err) != FL_OK)
      return fl_ext_raise(st, &err);
    Py_RETURN_NONE;
  }
  PyErr_Format(PyExc_ValueError, "fault_inject: unknown point %s", name);
  return NULL;
}

static PyObject *ext_fault_wrap(PyObject *module, PyObject *args) {
  PyObject *name;
  int on = 1;
  fl_backend_id b;
  if (!PyArg_ParseTuple(args, "U|p:fault_wrap", &name, &on) || fl_ext_parse_backend(name, &b) < 0) return NULL;
  fl_error err;
  if (fl_fault_wrap(b, on, &err) != FL_OK) return fl_ext_raise(PyModule_GetState(module), &err);
  Py_RETURN_NONE;
}

static PyObject *ext_accept_host_memory(PyObject *module, PyObject *args) {
  int on = 1;
  if (!PyArg_ParseTuple(args, "|p:accept_host_memory", &on)) return NULL;
  (void)module;
  fl_accept_any_memory(on);
  Py_RETURN_NONE;
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

/* n calls of obj[key](*args, **kwargs): Triton's `kernel[grid](...)`, subscript included; with attr,
 * of getattr(obj, key)(...): `compiled.run(...)`, the attribute read per call as callers read it. */
__attribute__((visibility("default"))) Py_NO_INLINE PyObject *fl_bench_loop_subscript(
    PyObject *obj, PyObject *key, PyObject *const *argv, size_t nargs, PyObject *kwnames, long long n, long long *ns,
    int attr) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long long i = 0; i < n; i++) {
    PyObject *call = attr ? PyObject_GetAttr(obj, key) : PyObject_GetItem(obj, key);
    if (!call) return NULL;
    PyObject *r = PyObject_Vectorcall(call, argv, nargs, kwnames);
    Py_DECREF(call);
    if (!r) return NULL;
    Py_DECREF(r);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  return Py_None;
}

/* n calls of callable(*call_args, **kwargs), or of callable[key](...) when key is given, in a C loop
 * holding its own references to every argument (the loop calls arbitrary code): nanoseconds. */
static PyObject *bench_calls(PyObject *callable, PyObject *key, PyObject *call_args, PyObject *kwargs, long long n,
                             int attr) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(call_args), nkw = PyDict_GET_SIZE(kwargs);
  PyObject **argv = PyMem_Calloc((size_t)(nargs + nkw) + 1, sizeof(PyObject *));
  PyObject *kwnames = nkw ? PyTuple_New(nkw) : NULL;
  PyObject *result = NULL;
  if (!argv || (nkw && !kwnames)) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = Py_NewRef(PyTuple_GET_ITEM(call_args, i));
  Py_ssize_t pos = 0, k = 0;
  PyObject *kname, *value;
  while (PyDict_Next(kwargs, &pos, &kname, &value)) {
    PyTuple_SET_ITEM(kwnames, k, Py_NewRef(kname));
    argv[nargs + k++] = Py_NewRef(value);
  }
  Py_INCREF(callable);
  Py_XINCREF(key);
  long long ns = 0;
  PyObject *ok = key ? fl_bench_loop_subscript(callable, key, argv, (size_t)nargs, kwnames, n, &ns, attr)
                     : fl_bench_loop(callable, argv, (size_t)nargs, kwnames, n, &ns);
  if (ok) result = PyLong_FromLongLong(ns);
  Py_DECREF(callable);
  Py_XDECREF(key);
  for (Py_ssize_t i = 0; i < nargs + k; i++) Py_DECREF(argv[i]);
done:
  Py_XDECREF(kwnames);
  PyMem_Free(argv);
  return result;
}

static PyObject *ext_bench_loop(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *callable, *call_args, *kwargs;
  long long n;
  if (!PyArg_ParseTuple(args, "OO!O!L:bench_loop", &callable, &PyTuple_Type, &call_args, &PyDict_Type, &kwargs, &n))
    return NULL;
  return bench_calls(callable, NULL, call_args, kwargs, n, 0);
}

/* bench_subscript_loop(obj, key, args, kwargs, n) -> ns. */
static PyObject *ext_bench_subscript_loop(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *obj, *key, *call_args, *kwargs;
  long long n;
  if (!PyArg_ParseTuple(args, "OOO!O!L:bench_subscript_loop", &obj, &key, &PyTuple_Type, &call_args, &PyDict_Type,
                        &kwargs, &n))
    return NULL;
  return bench_calls(obj, key, call_args, kwargs, n, 0);
}

/* bench_attr_loop(obj, name, args, kwargs, n) -> ns: getattr(obj, name)(*args, **kwargs) n times. */
static PyObject *ext_bench_attr_loop(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *obj, *name, *call_args, *kwargs;
  long long n;
  if (!PyArg_ParseTuple(args, "OUO!O!L:bench_attr_loop", &obj, &name, &PyTuple_Type, &call_args, &PyDict_Type, &kwargs,
                        &n))
    return NULL;
  return bench_calls(obj, name, call_args, kwargs, n, 1);
}

/* bench_launch_loop(plan, args, stream, n) -> ns: the backend's own launch loop (for cuda, the
 * driver's cuLaunchKernel in C) over this plan's kernel and arguments: the floor of a device. */
static PyObject *ext_bench_launch_loop(PyObject *module, PyObject *args) {
  fl_ext_state *st = PyModule_GetState(module);
  PyObject *plan_obj, *call_args;
  unsigned long long stream, n;
  if (!PyArg_ParseTuple(args, "O!O!KK:bench_launch_loop", st->plan_type, &plan_obj, &PyTuple_Type, &call_args, &stream,
                        &n))
    return NULL;
  fl_PlanObject *self = (fl_PlanObject *)plan_obj;
  fl_error err;
  const fl_layout *l = fl_plan_layout(self->plan);
  fl_value *values = PyMem_Calloc(self->args.nruntime ? self->args.nruntime : 1, sizeof *values);
  unsigned char *buf = PyMem_Calloc(l->size ? l->size : 1, 1);
  PyObject *result = NULL;
  if (!values || !buf) {
    PyErr_NoMemory();
    goto done;
  }
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  int r = fl_ext_collect(st, &self->args, &PyTuple_GET_ITEM(call_args, 0), (size_t)PyTuple_GET_SIZE(call_args), values,
                         tmaps, &err);
  if (r == -1) fl_ext_raise(st, &err);
  if (r < 0) goto done;
  uint32_t g[3];
  fl_plan_template(self->plan, buf, l->size, &err);
  for (size_t i = 0; i < self->args.nruntime; i++) {
    if (fl_pack_value(fl_plan_abi(self->plan), self->args.kinds[i], &values[i],
                      buf + fl_plan_arg_offset(self->plan, i), i, &err) != FL_OK) {
      fl_ext_raise(st, &err);
      goto done;
    }
  }
  if (fl_plan_resolve_grid(self->plan, values, self->args.nruntime, NULL, g, &err) != FL_OK) {
    fl_ext_raise(st, &err);
    goto done;
  }
  uint64_t ns = 0;
  fl_status status;
  Py_BEGIN_ALLOW_THREADS status = fl_bench_launch_loop(self->plan, stream, buf, g, n, &ns, &err);
  Py_END_ALLOW_THREADS if (status != FL_OK) fl_ext_raise(st, &err);
  else result = PyLong_FromUnsignedLongLong(ns);
done:
  PyMem_Free(values);
  PyMem_Free(buf);
  return result;
}

/* bench_c_launch_loop(plan, args, stream, n) -> ns: fl_launch, the C library's whole launch (the
 * template copied, the runtime arguments packed, the grid resolved, the backend's submit), in a C loop
 * over values read from args once: what a C caller of include/fastlaunch.h pays per launch, beside
 * bench_launch_loop's runtime-only floor. */
static PyObject *ext_bench_c_launch_loop(PyObject *module, PyObject *args) {
  fl_ext_state *st = PyModule_GetState(module);
  PyObject *plan_obj, *call_args;
  unsigned long long stream, n;
  if (!PyArg_ParseTuple(args, "O!O!KK:bench_c_launch_loop", st->plan_type, &plan_obj, &PyTuple_Type, &call_args,
                        &stream, &n))
    return NULL;
  fl_PlanObject *self = (fl_PlanObject *)plan_obj;
  if (fl_plan_grid_mode(self->plan) == FL_GRID_CALLER) {
    PyErr_SetString(PyExc_ValueError, "bench_c_launch_loop: plan: a caller-grid plan (give it a static or program grid)");
    return NULL;
  }
  fl_error err;
  size_t nv = self->args.nruntime;
  fl_value *values = PyMem_Calloc(nv ? nv : 1, sizeof *values);
  if (!values) return PyErr_NoMemory();
  PyObject *result = NULL;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  int r = fl_ext_collect(st, &self->args, &PyTuple_GET_ITEM(call_args, 0), (size_t)PyTuple_GET_SIZE(call_args), values,
                         tmaps, &err);
  if (r == -1) fl_ext_raise(st, &err);
  if (r < 0) goto done;
  struct timespec t0, t1;
  fl_status status = FL_OK;
  Py_BEGIN_ALLOW_THREADS clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned long long i = 0; i < n && status == FL_OK; i++) status = fl_launch(self->plan, stream, values, nv, NULL, &err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  Py_END_ALLOW_THREADS if (status != FL_OK) fl_ext_raise(st, &err);
  else result = PyLong_FromUnsignedLongLong((unsigned long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
                                                                 (t1.tv_nsec - t0.tv_nsec)));
done:
  PyMem_Free(values);
  return result;
}

/* bench_unpack(tensors, rounds) -> (door_ns, data_ptr_ns, door_sum, data_ptr_sum): nanoseconds per
 * tensor to read a data pointer, in a C loop over the tensors, through the tensor door and through
 * data_ptr() (door_ns is None when it is not in use), and the sums of the pointers each read (the
 * door's counts only the tensors it took). */
static PyObject *ext_bench_unpack(PyObject *module, PyObject *args) {
  fl_ext_state *st = PyModule_GetState(module);
  PyObject *seq;
  long long rounds;
  if (!PyArg_ParseTuple(args, "O!L:bench_unpack", &PyTuple_Type, &seq, &rounds)) return NULL;
  if (FL_EXT_LOAD(st->door_state) == 0) fl_ext_door_load(st);
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  struct timespec t0, t1;
  uint64_t sink = 0, door_sink = 0;
  PyObject *door_ns = Py_NewRef(Py_None);
  if (FL_EXT_DOOR(st)) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long long r = 0; r < rounds; r++)
      for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t p;
        int where, index;
        if (FL_EXT_DOOR(st)->unpack(PyTuple_GET_ITEM(seq, i), &p, &where, &index)) door_sink += p;
      }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_SETREF(door_ns, PyFloat_FromDouble(((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                                          ((double)rounds * (double)(n ? n : 1))));
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long long r = 0; r < rounds; r++)
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *a = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(seq, i), st->str_data_ptr);
      if (!a) {
        Py_XDECREF(door_ns);
        return NULL;
      }
      sink += PyLong_AsUnsignedLongLong(a);
      Py_DECREF(a);
    }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double dp = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / ((double)rounds * (double)(n ? n : 1));
  if (!door_ns) return NULL;
  return Py_BuildValue("(NdKK)", door_ns, dp, (unsigned long long)door_sink, (unsigned long long)sink);
}

static PyMethodDef testing_methods[] = {
    {"bench_unpack", ext_bench_unpack, METH_VARARGS,
     "bench_unpack($module, tensors, rounds, /)\n--\n\n-> (door_ns, data_ptr_ns, door_sum, data_ptr_sum): ns per tensor each way"},

    {"bench_subscript_loop", ext_bench_subscript_loop, METH_VARARGS,
     "bench_subscript_loop($module, obj, key, args, kwargs, n, /)\n--\n\n-> ns: n calls of obj[key](*args, **kwargs) in C"},
    {"bench_attr_loop", ext_bench_attr_loop, METH_VARARGS,
     "bench_attr_loop($module, obj, name, args, kwargs, n, /)\n--\n\n-> ns: n calls of getattr(obj, name)(*args, **kwargs) "
     "in C"},
    {"bench_loop", ext_bench_loop, METH_VARARGS,
     "bench_loop($module, callable, args, kwargs, n, /)\n--\n\n-> ns: n calls from a C loop, for benchmarks"},
    {"bench_launch_loop", ext_bench_launch_loop, METH_VARARGS,
     "bench_launch_loop($module, plan, args, stream, n, /)\n--\n\n-> ns: the backend's own launch loop over this plan (cuda only)"},
    {"bench_c_launch_loop", ext_bench_c_launch_loop, METH_VARARGS,
     "bench_c_launch_loop($module, plan, args, stream, n, /)\n--\n\n-> ns: n calls of fl_launch over this plan in a C loop"},
    {"fault_inject", ext_fault_inject, METH_VARARGS,
     "fault_inject($module, point, one_in=1, seed=0, plan=None, /)\n--\n\nTests only; point is none, pack, grid, "
     "submit_refused, submit_after or submit_lost, armed on one plan"},
    {"fault_wrap", ext_fault_wrap, METH_VARARGS,
     "fault_wrap($module, backend, on=True, /)\n--\n\nTests only; plans of the backend created from now on can be armed "
     "with fault_inject"},
    {"accept_host_memory", ext_accept_host_memory, METH_VARARGS,
     "accept_host_memory($module, on=True, /)\n--\n\nTests only; plans made from now on take host tensors where their "
     "backend wants device memory (the stand-in drivers)"},
    {"fault_fired", ext_fault_fired, METH_NOARGS, "fault_fired($module, /)\n--\n\n-> int: faults fired since fault_inject"},
    {"grid_eval", ext_grid_eval, METH_VARARGS, "grid_eval($module, expr, names, values, /)\n--\n\n-> int: one grid expression evaluated"},
    {NULL, NULL, 0, NULL},
};

int fl_ext_add_extras(PyObject *module, fl_ext_state *st) {
  (void)st;
  if (PyModule_AddFunctions(module, testing_methods) < 0) return -1;
  PyTypeObject *floor = (PyTypeObject *)PyType_FromModuleAndSpec(module, &floor_spec, NULL);
  if (!floor) return -1;
  int r = PyModule_AddType(module, floor);
  Py_DECREF(floor);
  return r;
}
