/* compiled_run.c: `compiled.run(gx, gy, gz, stream, function, packed_metadata, launch_metadata,
 * enter_hook, exit_hook, *args)` called directly on a kept CompiledKernel: Triton's launcher, the
 * form low-overhead callers use with no runner in between.
 *
 * CompiledRun stands in the kernel's launcher slot once fastlaunch has met the kernel: with its
 * CompiledLaunch (met as compiled[grid]), or lazily (a variant the JIT dispatcher bound: the first
 * call made outside Triton's own run attaches it). The policy sets it where Triton keeps its launcher
 * and gives the launcher back on disable. A call is served when it is the launcher's own form for this
 * kernel: three grid ints in [0, 2^31), an int stream, the kernel's own function and packed
 * metadata, the arguments the plan takes; the launch hooks passed are called around the launch as
 * Triton's launcher calls them. Anything else, and every call made from inside Triton's own run or
 * runner (fl_ext_in_triton), goes to Triton's launcher before anything is submitted. Depends on
 * compiled.c. */
#include "compiled_base.h"

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  LaunchObject *launch; /* NULL before the first call (lazy) and once detached */
  PyObject *attach;     /* lazy: attach(kernel) -> its CompiledLaunch, called at the first direct call */
  PyObject *kernel;     /* lazy: the kernel, until attached */
  int attaching;        /* attach running: calls meanwhile are Triton's */
  int detached;         /* detach() ran (a disable(), perhaps from inside attach): never served again */
  PyObject *stock;      /* Triton's launcher */
  PyObject *function;   /* kernel.function (int) */
  PyObject *packed;     /* kernel.packed_metadata, matched by identity */
  uint64_t function_word;
} RunObject;

#define RUN_LEADING 9 /* gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter, exit */

static FL_EXT_COLD PyObject *to_stock(RunObject *r, LaunchObject *L, const char *why, PyObject *const *args,
                                      size_t nargsf, PyObject *kwnames) {
  if (L && why) {
    L->stock++;
    fl_ext_count_reason(L->stock_counts, why, NULL);
  }
  PyObject *stock = Py_NewRef(r->stock);
  PyObject *res = PyObject_Vectorcall(stock, args, nargsf, kwnames);
  Py_DECREF(stock);
  return res;
}

static inline int grid_word(PyObject *o, int64_t *g) {
  uint64_t w;
  if (!PyLong_CheckExact(o) || !fl_ext_int_word(o, &w) || w > INT32_MAX) return 1;
  *g = (int64_t)w;
  return 0;
}

/* Triton's launcher for a hooked call refused before any hook (fl_compiled_hooked's to_triton). */
typedef struct {
  RunObject *r;
  LaunchObject *L;
  PyObject *const *args;
  size_t nargsf;
} run_ctx;

static FL_EXT_COLD PyObject *stock_of_run(void *ctx, const char *why) {
  run_ctx *c = ctx;
  return to_stock(c->r, c->L, why, c->args, c->nargsf, NULL);
}

/* With hooks passed: the launch sequence of a hooked compiled call (compiled.c), its hooks the call's. */
static FL_EXT_COLD PyObject *hooked(RunObject *r, LaunchObject *L, const int64_t g[3], uint64_t stream,
                                    PyObject *const *args, size_t nargsf, PyObject *const *full, size_t nfull) {
  size_t n = PyVectorcall_NARGS(nargsf);
  fl_ext_given_hooks given = {.md = args[6], .enter = args[7], .exit = args[8]};
  run_ctx ctx = {r, L, args, nargsf};
  fl_compiled_hooked_call c = {.L = L, .g = g, .stream = stream, .stream_obj = args[3], .args = args + RUN_LEADING,
                               .nargs = n - RUN_LEADING, .full = full, .nfull = nfull, .given = &given,
                               .to_triton = stock_of_run, .ctx = &ctx};
  return fl_compiled_hooked(&c);
}

/* A call while L is held (an argument's own code or a hook may detach the run meanwhile). */
static FL_EXT_ALWAYS_INLINE PyObject *served(RunObject *r, LaunchObject *L, PyObject *const *args, size_t nargsf,
                                             PyObject *kwnames) {
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (kwnames || nargs < RUN_LEADING) return to_stock(r, L, "run_form", args, nargsf, kwnames);
  fl_PlanObject *plan = (fl_PlanObject *)L->plan;
  if (L->scratch_var) return to_stock(r, L, "scratch", args, nargsf, kwnames); /* its launcher allocates */
  size_t nk = nargs - RUN_LEADING, ncall = plan->args.ncall;
  PyObject *const *kargs = args + RUN_LEADING;
  int64_t g[3];
  uint64_t stream, fn;
  if (grid_word(args[0], &g[0]) || grid_word(args[1], &g[1]) || grid_word(args[2], &g[2]))
    return to_stock(r, L, "grid_form", args, nargsf, kwnames);
  if (!PyLong_CheckExact(args[3]) || !fl_ext_u64_of(args[3], &stream) || args[5] != r->packed ||
      (args[4] != r->function && /* kernel.function itself, as Triton's run passes it; else its value */
       (!PyLong_CheckExact(args[4]) || !fl_ext_u64_of(args[4], &fn) || fn != r->function_word)))
    return to_stock(r, L, "run_form", args, nargsf, kwnames);
  if (FL_EXT_UNLIKELY(nk < L->min_args)) {
    if (L->parse_first) return to_stock(r, L, "arg_count", args, nargsf, kwnames); /* it counts them */
    return PyErr_Format(PyExc_TypeError,
                        "compiled kernel run: takes at least %zu kernel arguments (up to its last non-constexpr "
                        "parameter) after the launcher's 9, got %zu",
                        L->min_args, nk);
  }
  if (nk > ncall || ncall > JIT_MAX_PARAMS) return to_stock(r, L, "arg_count", args, nargsf, kwnames);
  const char *why;
  int rc = fl_jit_compiled_gate((JitObject *)L->dispatcher, &stream, 1, &why, NULL); /* the call passes its own hooks */
  if (rc < 0) return NULL;
  if (rc > 0) return to_stock(r, L, why, args, nargsf, kwnames);
  PyObject *full[JIT_MAX_PARAMS];
  if (nk < ncall) { /* the trailing constexprs left out: positions the plan skips */
    for (size_t i = 0; i < ncall; i++) full[i] = i < nk ? kargs[i] : Py_None;
    kargs = full;
  }
  if (FL_EXT_UNLIKELY(args[7] != Py_None || args[8] != Py_None))
    return hooked(r, L, g, stream, args, nargsf, kargs, ncall);
  fl_error err;
  rc = fl_ext_plan_launch(plan, kargs, ncall, stream, g, &err);
  if (FL_EXT_LIKELY(rc == 0)) {
    L->fast++;
    Py_RETURN_NONE;
  }
  if (rc == -1 && err.backend_submitted) return fl_ext_raise_named(L->state, &err, plan->arg_names);
  if (rc == -2) PyErr_Clear();
  return to_stock(r, L, rc == -2 ? "argument_raised" : "argument_refused", args, nargsf, kwnames);
}

/* The first direct call of a lazy run: attach(kernel) makes the kernel's CompiledLaunch; one with a
 * plan serves this call and the rest, one without (or an error, reported as unraisable: the call is
 * Triton's either way) leaves every call to Triton's launcher. */
static FL_EXT_COLD void attach_now(RunObject *r) {
  PyObject *attach = r->attach, *kernel = r->kernel;
  r->attach = r->kernel = NULL;
  r->attaching = 1;
  PyObject *L = PyObject_CallOneArg(attach, kernel);
  r->attaching = 0;
  if (!L) PyErr_WriteUnraisable(attach);
  if (L && Py_TYPE(L) == fl_compiled_launch_type && ((LaunchObject *)L)->plan && !r->launch && !r->detached)
    r->launch = (LaunchObject *)Py_NewRef(L);
  Py_XDECREF(L);
  Py_DECREF(attach);
  Py_DECREF(kernel);
}

static PyObject *run_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  RunObject *r = (RunObject *)callable; /* held by the caller */
  LaunchObject *L;
  Py_BEGIN_CRITICAL_SECTION(r); /* its launch, attached once (free-threaded builds) */
  if (FL_EXT_UNLIKELY(!r->launch) && r->attach && !fl_ext_in_triton() && !r->attaching) attach_now(r);
  L = (LaunchObject *)Py_XNewRef(r->launch);
  Py_END_CRITICAL_SECTION();
  if (!L || fl_ext_in_triton()) {
    Py_XDECREF(L);
    return to_stock(r, NULL, NULL, args, nargsf, kwnames);
  }
  PyObject *res;
  Py_BEGIN_CRITICAL_SECTION(L);
  res = served(r, L, args, nargsf, kwnames);
  Py_END_CRITICAL_SECTION();
  Py_DECREF(L);
  return res;
}

static PyObject *run_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kernel", "stock", "launch", "attach", NULL};
  PyObject *kernel, *stock, *launch = Py_None, *attach = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$OO:CompiledRun", kwlist, &kernel, &stock, &launch, &attach))
    return NULL;
  if (launch != Py_None && (Py_TYPE(launch) != fl_compiled_launch_type || !((LaunchObject *)launch)->plan ||
                            ((LaunchObject *)launch)->kernel != kernel))
    return PyErr_Format(PyExc_TypeError, "CompiledRun: launch must be the kernel's CompiledLaunch, with a plan");
  if ((launch == Py_None) == (attach == Py_None) || (attach != Py_None && !PyCallable_Check(attach)))
    return PyErr_Format(PyExc_TypeError, "CompiledRun: give launch, or a callable attach (the first call attaches)");
  if (!PyCallable_Check(stock)) return PyErr_Format(PyExc_TypeError, "CompiledRun: stock is not callable");
  PyObject *function = PyObject_GetAttrString(kernel, "function");
  PyObject *packed = function ? PyObject_GetAttrString(kernel, "packed_metadata") : NULL;
  uint64_t word = 0;
  if (packed && (!PyLong_Check(function) || !fl_ext_u64_of(function, &word))) {
    PyErr_Format(PyExc_TypeError, "CompiledRun: the kernel's function is not a handle (int)");
    Py_CLEAR(packed);
  }
  RunObject *self = packed ? (RunObject *)type->tp_alloc(type, 0) : NULL;
  if (!self) {
    Py_XDECREF(function);
    Py_XDECREF(packed);
    return NULL;
  }
  self->vectorcall = run_vectorcall;
  if (launch != Py_None) {
    self->launch = (LaunchObject *)Py_NewRef(launch);
  } else {
    self->attach = Py_NewRef(attach);
    self->kernel = Py_NewRef(kernel);
  }
  self->stock = Py_NewRef(stock);
  self->function = function;
  self->packed = packed;
  self->function_word = word;
  return (PyObject *)self;
}

static PyObject *run_detach_unlocked(PyObject *op, PyObject *unused) {
  (void)unused;
  RunObject *self = (RunObject *)op;
  LaunchObject *L = self->launch;
  PyObject *attach = self->attach, *kernel = self->kernel;
  self->detached = 1;
  self->launch = NULL;
  self->attach = self->kernel = NULL;
  Py_XDECREF(L);
  Py_XDECREF(attach);
  Py_XDECREF(kernel);
  Py_RETURN_NONE;
}

static int run_traverse(PyObject *op, visitproc visit, void *arg) {
  RunObject *self = (RunObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->launch);
  Py_VISIT(self->attach);
  Py_VISIT(self->kernel);
  Py_VISIT(self->stock);
  Py_VISIT(self->function);
  Py_VISIT(self->packed);
  return 0;
}

static int run_clear(PyObject *op) {
  RunObject *self = (RunObject *)op;
  Py_CLEAR(self->launch);
  Py_CLEAR(self->attach);
  Py_CLEAR(self->kernel);
  Py_CLEAR(self->stock);
  Py_CLEAR(self->function);
  Py_CLEAR(self->packed);
  return 0;
}

static void run_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  run_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *run_get_launch(PyObject *op, void *closure) {
  (void)closure;
  PyObject *L = (PyObject *)((RunObject *)op)->launch;
  return Py_NewRef(L ? L : Py_None);
}

static PyMemberDef run_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(RunObject, vectorcall), Py_READONLY, NULL},
    {"stock", Py_T_OBJECT_EX, offsetof(RunObject, stock), Py_READONLY, "Triton's launcher"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef run_getset[] = {
    {"launch", run_get_launch, NULL, "the kernel's CompiledLaunch (None before a lazy run's first call, and once "
     "detached)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

FL_EXT_METHOD_LOCKED(run_detach, run_detach_unlocked)

static PyMethodDef run_methods[] = {
    {"detach", run_detach, METH_NOARGS, "detach(): every call Triton's launcher from now on"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot run_slots[] = {
    {Py_tp_new, run_new},
    {Py_tp_dealloc, run_dealloc},
    {Py_tp_traverse, run_traverse},
    {Py_tp_clear, run_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, run_members},
    {Py_tp_getset, run_getset},
    {Py_tp_methods, run_methods},
    {Py_tp_doc, "CompiledRun(kernel, stock, *, launch=None, attach=None)\n--\n\nA CompiledKernel's launcher while "
                "fastlaunch serves it: compiled.run(gx, gy, gz, stream, function, packed_metadata, launch_metadata, "
                "enter, exit, *args) launched through the kernel's plan (its CompiledLaunch, given or made by "
                "attach(kernel) at the first call made outside Triton's own run), or by Triton's launcher (stock)."},
    {0, NULL},
};

static PyType_Spec run_spec = {
    .name = "fastlaunch._C.CompiledRun",
    .basicsize = sizeof(RunObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = run_slots,
};

/* ---- RunProperty: CompiledKernel.run while fastlaunch serves Triton ----
 * From Triton 3.7 on `run` is a Python property over the instance's `_run` (the launcher, loaded at
 * first use), read on every `compiled.run(...)` call in front of the launcher. While served, the
 * class's `run` is this C descriptor: the instance's `_run` read from its dict (Triton's launcher, or
 * fastlaunch's CompiledRun in its place), and the property's own getter when there is none yet (it
 * loads the kernel, as before). Setting and deleting are the property's. */
typedef struct {
  PyObject_HEAD
  PyObject *prop; /* Triton's property */
  PyObject *name; /* the instance attribute it reads ("_run") */
} PropObject;

static PyObject *prop_get(PyObject *op, PyObject *obj, PyObject *type) {
  PropObject *p = (PropObject *)op;
  if (obj && obj != Py_None) {
    PyObject **dictptr = _PyObject_GetDictPtr(obj);
    PyObject *dict = dictptr ? *dictptr : NULL, *v = NULL;
    if (dict) {
      Py_INCREF(dict);
      int r = PyDict_GetItemRef(dict, p->name, &v);
      Py_DECREF(dict);
      if (r < 0) return NULL;
      if (v && v != Py_None) return v;
      Py_XDECREF(v);
    }
  }
  PyObject *prop = Py_NewRef(p->prop);
  PyObject *res = Py_TYPE(prop)->tp_descr_get ? Py_TYPE(prop)->tp_descr_get(prop, obj, type) : Py_NewRef(prop);
  Py_DECREF(prop);
  return res;
}

static int prop_set(PyObject *op, PyObject *obj, PyObject *value) {
  PropObject *p = (PropObject *)op;
  descrsetfunc set = Py_TYPE(p->prop)->tp_descr_set;
  if (!set) {
    PyErr_Format(PyExc_AttributeError, "property of '%.80s' object has no setter", Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *prop = Py_NewRef(p->prop);
  int r = set(prop, obj, value);
  Py_DECREF(prop);
  return r;
}

static PyObject *prop_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"prop", "name", NULL};
  PyObject *prop, *name;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OU:RunProperty", kwlist, &prop, &name)) return NULL;
  if (!Py_TYPE(prop)->tp_descr_get) return PyErr_Format(PyExc_TypeError, "RunProperty: prop is not a descriptor");
  PropObject *self = (PropObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->prop = Py_NewRef(prop);
  self->name = Py_NewRef(name);
  PyUnicode_InternInPlace(&self->name);
  return (PyObject *)self;
}

static int prop_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((PropObject *)op)->prop);
  return 0;
}

static int prop_clear(PyObject *op) {
  Py_CLEAR(((PropObject *)op)->prop);
  Py_CLEAR(((PropObject *)op)->name);
  return 0;
}

static void prop_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  prop_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyMemberDef prop_members[] = {
    {"stock", Py_T_OBJECT_EX, offsetof(PropObject, prop), Py_READONLY, "Triton's property"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot prop_slots[] = {
    {Py_tp_new, prop_new},
    {Py_tp_dealloc, prop_dealloc},
    {Py_tp_traverse, prop_traverse},
    {Py_tp_clear, prop_clear},
    {Py_tp_descr_get, prop_get},
    {Py_tp_descr_set, prop_set},
    {Py_tp_members, prop_members},
    {Py_tp_doc, "RunProperty(prop, name)\n--\n\nCompiledKernel.run while fastlaunch serves Triton: the instance's "
                "attribute `name` read in C when set, else Triton's property `prop`."},
    {0, NULL},
};

static PyType_Spec prop_spec = {
    .name = "fastlaunch._C.RunProperty",
    .basicsize = sizeof(PropObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = prop_slots,
};

int fl_ext_add_compiled_run_type(PyObject *module, fl_ext_state *st) {
  (void)st;
  PyType_Spec *specs[] = {&run_spec, &prop_spec};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, specs[i], NULL);
    if (!type || PyModule_AddType(module, type) < 0) {
      Py_XDECREF(type);
      return -1;
    }
    Py_DECREF(type); /* the module holds it */
  }
  return 0;
}
