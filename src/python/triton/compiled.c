/* compiled.c: `compiled[grid](*args, stream=None)` on a Triton CompiledKernel (what `kernel[grid]`
 * or `warmup` returned, cached and called again: Triton's launcher with no JIT in between).
 *
 * CompiledSubscript is the class's __getitem__ while fastlaunch serves Triton. It hands out a
 * CompiledCall of the kernel's CompiledLaunch (made once per kernel by the policy, kept in the
 * kernel's __dict__): the plan launching every parameter in order (constexprs passed and skipped,
 * as Triton's launcher skips them), and the JitDispatcher of the kernel's JITFunction, whose gates
 * (knob changes, launch hooks) and device and stream sources the call uses as Triton's runner reads
 * them. With launch hooks set, the call makes Triton's launch metadata (the kernel's own
 * launch_metadata) and calls the hooks as Triton's launcher does, around the plan's launch.
 * Whatever the plan cannot take goes to Triton's own runner before anything is submitted: more
 * arguments than parameters, a keyword, a grid that is not three ints in [0, 2^31), a value the plan
 * refuses. Depends on the JIT layer; nothing depends on it. */
#include "compiled_base.h"


/* CompiledCall: a JitCallObject (jit_base.h) whose target is the kernel's CompiledLaunch. */
typedef JitCallObject CallObject;
#define CALL_LAUNCH(callable) ((LaunchObject *)((CallObject *)(callable))->target)

PyTypeObject *fl_compiled_launch_type;
static PyTypeObject *call_type; /* set once, at the module's init */
static PyObject *str_launch_attr;           /* "_fastlaunch_launch", interned */

/* Triton's runner for the call: compiled.__getitem__(grid)(*args, **kwargs) as Triton defines it. */
static FL_EXT_COLD PyObject *stock(LaunchObject *L, PyObject *grid, const char *why, PyObject *const *args,
                                   size_t nargsf, PyObject *kwnames) {
  L->stock++;
  fl_ext_count_reason(L->stock_counts, why, NULL);
  PyObject *kernel = Py_NewRef(L->kernel), *getitem = Py_NewRef(L->stock_getitem);
  PyObject *pair[2] = {kernel, Py_NewRef(grid)};
  fl_ext_triton_enter();
  PyObject *runner = PyObject_Vectorcall(getitem, pair, 2, NULL);
  PyObject *res = runner ? PyObject_Vectorcall(runner, args, nargsf, kwnames) : NULL;
  fl_ext_triton_leave();
  Py_XDECREF(runner);
  Py_DECREF(pair[1]);
  Py_DECREF(getitem);
  Py_DECREF(kernel);
  return res;
}

static inline int grid_items(PyObject *const *items, int64_t g[3]) {
  for (int i = 0; i < 3; i++) {
    uint64_t w;
    if (!PyLong_CheckExact(items[i]) || !fl_ext_int_word(items[i], &w) || w > INT32_MAX) return 1;
    g[i] = (int64_t)w;
  }
  return 0;
}

/* The grid as Triton's launcher takes it: its first three items, ints in [0, 2^31). 0, or 1. A list's
 * items are read while it is held (another thread may change it: free-threaded builds). */
static inline int grid_of(PyObject *grid, int64_t g[3]) {
  if (PyTuple_CheckExact(grid) && PyTuple_GET_SIZE(grid) >= 3) return grid_items(&PyTuple_GET_ITEM(grid, 0), g);
  if (!PyList_CheckExact(grid)) return 1;
  int r;
  Py_BEGIN_CRITICAL_SECTION(grid);
  r = PyList_GET_SIZE(grid) < 3 || grid_items(PySequence_Fast_ITEMS(grid), g);
  Py_END_CRITICAL_SECTION();
  return r;
}

/* Triton's runner for a compiled[grid] call (fl_compiled_hooked's to_triton). */
static FL_EXT_COLD PyObject *stock_of_call(void *ctx, const char *why) {
  const fl_compiled_hooked_call *c = ctx;
  return stock(c->L, c->grid, why, c->args, c->nargs, c->kwnames);
}

/* The kernel's global scratch, as its launcher allocates it. */
static fl_ext_scratch_ref scratch_of(LaunchObject *L) {
  return (fl_ext_scratch_ref){L->scratch_var, L->scratch_size, L->scratch_align, L->scratch_ctas, L->nhidden,
                              &L->scratch_ints};
}

PyObject *fl_compiled_hooked(const fl_compiled_hooked_call *c) {
  LaunchObject *L = c->L;
  fl_PlanObject *plan = (fl_PlanObject *)L->plan;
  fl_ext_scratch_ref sc = scratch_of(L);
  fl_seq s = {.plan = plan, .stream = c->stream, .stream_obj = c->stream_obj, .check = L->parse_first, .hooks = 1,
              .scratch = L->scratch_var ? &sc : NULL, /* refused by the sequence: Triton allocates before enter */
              .kernel = L->kernel, .grid = c->grid, .given = c->given, .args = c->args, .nargs = c->nargs};
  fl_error err;
  int rc = fl_seq_plan(&s, c->full, c->nfull, c->g, &err);
  switch (rc) {
  case FL_SEQ_LAUNCHED:
  case FL_SEQ_EXIT_RAISED: /* launched: the exit hook's exception, as Triton's launcher raises it */
    L->fast++;
    L->hooked++;
    return rc == FL_SEQ_LAUNCHED ? Py_NewRef(Py_None) : NULL;
  case FL_SEQ_ARG_RAISED:
    PyErr_Clear(); /* Triton's launcher reads the argument itself and raises */
    return c->to_triton(c->ctx ? c->ctx : (void *)c, "argument_raised");
  case FL_SEQ_REFUSED: /* by the launcher's format (or hooks with scratch), before any hook: Triton's whole call */
    return c->to_triton(c->ctx ? c->ctx : (void *)c, err.reason);
  case FL_SEQ_HANDED: /* refused after enter: Triton's launcher, told enter ran */
    L->stock++;
    fl_ext_count_reason(L->stock_counts, err.reason, NULL);
    return s.result;
  default:
    return NULL;
  }
}

/* A launch of a kernel with global scratch, through the launch sequence (sequence.h: the values
 * read and checked, the allocator, read again, the launch). 0 launched; 1 refused before the
 * allocator (Triton's call); 2 refused after it (Triton's, which allocates again); -1 with an
 * exception (the allocator's own, Triton's NullAllocator error among them; or submitted). `args`
 * holds the user's nargs positions (trailing constexprs filled). */
static FL_EXT_COLD int scratch_launch(LaunchObject *L, const int64_t g[3], uint64_t stream, PyObject *stream_obj,
                          PyObject *const *args, size_t nargs) {
  size_t nfull = nargs + L->nhidden;
  if (nfull > JIT_MAX_PARAMS + 2) return 1;
  PyObject *full[JIT_MAX_PARAMS + 2];
  for (size_t i = 0; i < nargs; i++) full[i] = args[i];
  for (size_t h = 0; h < L->nhidden; h++) full[nargs + h] = Py_None; /* the buffer's address comes after */
  fl_ext_scratch_ref sc = scratch_of(L);
  fl_seq s = {.plan = (fl_PlanObject *)L->plan, .stream = stream, .stream_obj = stream_obj, .scratch = &sc};
  fl_error err;
  switch (fl_seq_plan(&s, full, nfull, g, &err)) {
  case FL_SEQ_LAUNCHED:
    L->fast++;
    return 0;
  case FL_SEQ_ARG_RAISED: /* Triton's launcher reads the argument itself and raises */
    PyErr_Clear();
    return 1;
  case FL_SEQ_REFUSED:
    return 1;
  case FL_SEQ_ARG_RAISED_LATE:
    PyErr_Clear();
    return 2;
  case FL_SEQ_LATE:
    return 2;
  default:
    return -1;
  }
}

static PyObject *call_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  CallObject *call = (CallObject *)callable; /* held by the caller, with its launch and grid */
  LaunchObject *L = (LaunchObject *)call->target;
  fl_ext_state *st = L->state;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  uint64_t stream = 0;
  int have_stream = 0, hooked;
  int64_t g[3];
  if (FL_EXT_UNLIKELY(!L->plan)) return stock(L, call->grid, "plan_unavailable", args, nargsf, kwnames);
  if (FL_EXT_UNLIKELY(nargs < L->min_args)) { /* Triton's launcher would read past its arguments */
    if (L->parse_first) return stock(L, call->grid, "arg_count", args, nargsf, kwnames); /* it counts them */
    return PyErr_Format(PyExc_TypeError,
                        "compiled kernel: takes at least %zu positional arguments (up to its last "
                        "non-constexpr parameter), got %zu",
                        L->min_args, nargs);
  }
  if (kwnames) {
    PyObject *v = args[nargs];
    if (PyTuple_GET_SIZE(kwnames) != 1 || !fl_ext_name_is(PyTuple_GET_ITEM(kwnames, 0), st->str_stream) ||
        (v != Py_None && !(PyLong_CheckExact(v) && fl_ext_u64_of(v, &stream))))
      return stock(L, call->grid, "keywords", args, nargsf, kwnames);
    have_stream = v != Py_None;
  }
  fl_PlanObject *plan = (fl_PlanObject *)L->plan;
  size_t ncall = plan->args.ncall - L->nhidden; /* the launcher's trailing pointers are not the caller's */
  if (nargs > ncall) return stock(L, call->grid, "arg_count", args, nargsf, kwnames);
  if (grid_of(call->grid, g)) return stock(L, call->grid, "grid_form", args, nargsf, kwnames);
  const char *why;
  int rc = fl_jit_compiled_gate((JitObject *)L->dispatcher, &stream, have_stream, &why, &hooked);
  if (rc < 0) return NULL;
  if (rc > 0) return stock(L, call->grid, why, args, nargsf, kwnames);
  if (FL_EXT_UNLIKELY(hooked) && (!FL_EXT_STATE_OBJ(st->launch_knobs) || nargs > FL_EXT_HOOK_MAX_ARGS))
    return stock(L, call->grid, "launch_hooks", args, nargsf, kwnames);
  PyObject *full[JIT_MAX_PARAMS];
  PyObject *const *given = args;
  size_t ngiven = nargs;
  if (nargs < ncall) { /* the trailing constexprs left out: positions the plan skips */
    if (ncall > JIT_MAX_PARAMS) return stock(L, call->grid, "arg_count", args, nargsf, kwnames);
    for (size_t i = 0; i < ncall; i++) full[i] = i < nargs ? args[i] : Py_None;
    args = full;
    nargs = ncall;
  }
  if (FL_EXT_UNLIKELY(L->scratch_var) && !hooked) {
    int r = scratch_launch(L, g, stream, have_stream ? given[ngiven] : NULL, args, nargs);
    if (r == 0) Py_RETURN_NONE;
    if (r < 0) return NULL;
    return stock(L, call->grid, r == 1 ? "argument_refused" : "launch_refused", given, nargsf, kwnames);
  }
  if (FL_EXT_UNLIKELY(hooked)) {
    fl_compiled_hooked_call c = {.L = L, .grid = call->grid, .g = g, .stream = stream,
                                 .stream_obj = have_stream ? given[ngiven] : NULL, .args = given, .nargs = ngiven,
                                 .kwnames = kwnames, .full = args, .nfull = nargs, .to_triton = stock_of_call};
    return fl_compiled_hooked(&c);
  }
  fl_error err;
  rc = fl_ext_plan_launch(plan, args, nargs, stream, g, &err);
  if (FL_EXT_LIKELY(rc == 0)) {
    L->fast++;
    Py_RETURN_NONE;
  }
  if (rc == -1 && err.backend_submitted) return fl_ext_raise_named(st, &err, plan->arg_names);
  /* Refused before the boundary: Triton's launcher reads the arguments itself and decides. */
  if (rc == -2) PyErr_Clear();
  return stock(L, call->grid, rc == -2 ? "argument_raised" : "argument_refused", given, nargsf, kwnames);
}

/* A kept compiled kernel's calls in a critical section on its CompiledLaunch (free-threaded builds). */
FL_EXT_VECTORCALL_LOCKED(call_vectorcall, call_vectorcall_unlocked, CALL_LAUNCH)

static PyObject *new_call(LaunchObject *L, PyObject *grid) {
  CallObject *call = PyObject_GC_New(CallObject, call_type);
  if (!call) return NULL;
  call->vectorcall = call_vectorcall;
  call->target = Py_NewRef((PyObject *)L);
  call->grid = Py_NewRef(grid);
  PyObject_GC_Track(call);
  return (PyObject *)call;
}

/* The launch's CompiledCall with this grid: its spare one when nobody else holds it (the old grid
 * released last: its __del__ may subscript the same kernel, and must find the spare held). */
static PyObject *call_for_unlocked(LaunchObject *L, PyObject *grid) {
  PyObject *spare = L->spare;
  if (spare && Py_REFCNT(spare) == 1) {
    CallObject *c = (CallObject *)spare;
    PyObject *old = c->grid;
    Py_INCREF(spare);
    c->grid = Py_NewRef(grid);
    Py_DECREF(old);
    return spare;
  }
  PyObject *call = new_call(L, grid);
  if (call && !L->spare) L->spare = Py_NewRef(call); /* read again: the allocation may run a GC pass */
  return call;
}

static PyObject *call_for(LaunchObject *L, PyObject *grid) {
  PyObject *result;
  Py_BEGIN_CRITICAL_SECTION(L);
  result = call_for_unlocked(L, grid);
  Py_END_CRITICAL_SECTION();
  return result;
}

/* ---- CompiledSubscript: the class's __getitem__ ---- */
/* attach(kernel) -> its CompiledLaunch (kept in the kernel's __dict__), or None. */
typedef fl_getitem_head SubscriptObject;

/* The kernel's CompiledLaunch (a new reference), made by attach the first time; NULL with an
 * exception, or Py_None: Triton's. */
static PyObject *launch_of(SubscriptObject *sub, PyObject *kernel) {
  PyObject **dictptr = _PyObject_GetDictPtr(kernel);
  PyObject *dict = dictptr ? *dictptr : NULL, *found = NULL;
  if (dict) {
    Py_INCREF(dict);
    int r = PyDict_GetItemRef(dict, str_launch_attr, &found);
    Py_DECREF(dict);
    if (r < 0) return NULL;
    if (found && Py_TYPE(found) == fl_compiled_launch_type && ((LaunchObject *)found)->kernel == kernel) return found;
    Py_CLEAR(found);
  }
  PyObject *attach = Py_NewRef(sub->attach);
  found = PyObject_CallOneArg(attach, kernel);
  Py_DECREF(attach);
  if (found && found != Py_None && Py_TYPE(found) != fl_compiled_launch_type) {
    Py_DECREF(found);
    return PyErr_Format(PyExc_TypeError, "CompiledSubscript: attach() returned %.80s, not a CompiledLaunch or None",
                        Py_TYPE(found)->tp_name);
  }
  return found;
}

static PyObject *subscript_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SubscriptObject *sub = (SubscriptObject *)callable;
  if (PyVectorcall_NARGS(nargsf) != 2 || kwnames) return PyObject_Vectorcall(sub->stock_getitem, args, nargsf, kwnames);
  Py_INCREF(sub); /* attach, or a release, may give the class its own __getitem__ back */
  PyObject *res = NULL, *launch = launch_of(sub, args[0]);
  if (launch == Py_None) {
    res = PyObject_Vectorcall(sub->stock_getitem, args, 2, NULL);
  } else if (launch) {
    res = call_for((LaunchObject *)launch, args[1]);
  }
  Py_XDECREF(launch);
  Py_DECREF(sub);
  return res;
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  return (PyObject *)fl_getitem_new(type, args, kwds, "OO:CompiledSubscript", subscript_vectorcall);
}

static int subscript_traverse(PyObject *op, visitproc visit, void *arg) {
  return fl_getitem_traverse((SubscriptObject *)op, visit, arg);
}

static int subscript_clear(PyObject *op) {
  fl_getitem_clear((SubscriptObject *)op);
  return 0;
}

static void subscript_dealloc(PyObject *op) { fl_ext_gc_dealloc(op, subscript_clear); }

static PyType_Slot subscript_slots[] = {
    {Py_tp_new, subscript_new},
    {Py_tp_dealloc, subscript_dealloc},
    {Py_tp_traverse, subscript_traverse},
    {Py_tp_clear, subscript_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, fl_getitem_bind},
    {Py_tp_members, fl_getitem_members},
    {Py_tp_doc, "CompiledSubscript(stock_getitem, attach)\n--\n\nCompiledKernel's __getitem__ while fastlaunch "
                "serves Triton: compiled[grid] hands out a CompiledCall."},
    {0, NULL},
};

static PyType_Spec subscript_spec = {
    .name = "fastlaunch._C.CompiledSubscript",
    .basicsize = sizeof(SubscriptObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = subscript_slots,
};

/* ---- CompiledLaunch ---- */
static PyObject *launch_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kernel", "dispatcher", "plan", "reason", "stock_getitem", "parse_first", "scratch", NULL};
  PyObject *kernel, *dispatcher, *plan, *reason, *stock_getitem, *scratch = Py_None;
  int parse_first = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO|$pO:CompiledLaunch", kwlist, &kernel, &dispatcher, &plan, &reason,
                                   &stock_getitem, &parse_first, &scratch))
    return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  if (plan != Py_None && (!PyObject_TypeCheck(plan, st->plan_type) || Py_TYPE(dispatcher) != st->jit_type))
    return PyErr_Format(PyExc_TypeError, "CompiledLaunch: a plan needs a Plan and its kernel's JitDispatcher");
  if (reason != Py_None && !PyUnicode_Check(reason))
    return PyErr_Format(PyExc_TypeError, "CompiledLaunch: reason must be a str or None");
  LaunchObject *self = (LaunchObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->state = st;
  self->kernel = Py_NewRef(kernel);
  self->dispatcher = plan == Py_None ? NULL : Py_NewRef(dispatcher);
  self->plan = plan == Py_None ? NULL : Py_NewRef(plan);
  self->reason = reason == Py_None ? NULL : Py_NewRef(reason);
  self->stock_getitem = Py_NewRef(stock_getitem);
  self->stock_counts = PyDict_New();
  if (!self->stock_counts) Py_CLEAR(self);
  if (self && self->plan) {
    const fl_ext_args *a = &((fl_PlanObject *)self->plan)->args;
    self->parse_first = parse_first;
    /* scratch=(allocator ContextVar, bytes per CTA, alignment, num_ctas, trailing pointers) */
    PyObject *var = NULL;
    if (scratch != Py_None &&
        (!PyArg_ParseTuple(scratch, "OKKIn:CompiledLaunch scratch", &var, &self->scratch_size, &self->scratch_align,
                           &self->scratch_ctas, &self->nhidden) ||
         !PyContextVar_CheckExact(var) || self->nhidden < 1 || self->nhidden > a->ncall)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "CompiledLaunch: scratch=(ContextVar, size, align, num_ctas, nhidden)");
      Py_DECREF(self);
      return NULL;
    }
    self->scratch_var = Py_XNewRef(var);
    self->min_args = a->ncall - self->nhidden;
    while (!parse_first && self->min_args > 0 && a->argmap && a->argmap[self->min_args - 1] < 0) self->min_args--;
    if (parse_first && self->scratch_var) self->min_args = a->ncall - self->nhidden;
  }
  return (PyObject *)self;
}

static int launch_traverse(PyObject *op, visitproc visit, void *arg) {
  LaunchObject *self = (LaunchObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->kernel);
  Py_VISIT(self->dispatcher);
  Py_VISIT(self->plan);
  Py_VISIT(self->reason);
  Py_VISIT(self->stock_getitem);
  Py_VISIT(self->spare);
  Py_VISIT(self->stock_counts);
  Py_VISIT(self->scratch_var);
  return 0;
}

static int launch_clear(PyObject *op) {
  LaunchObject *self = (LaunchObject *)op;
  Py_CLEAR(self->kernel);
  Py_CLEAR(self->dispatcher);
  Py_CLEAR(self->plan);
  Py_CLEAR(self->reason);
  Py_CLEAR(self->stock_getitem);
  Py_CLEAR(self->spare);
  Py_CLEAR(self->stock_counts);
  Py_CLEAR(self->scratch_var);
  fl_ext_scratch_ints_clear(&self->scratch_ints);
  return 0;
}

static void launch_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  launch_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *launch_counts_unlocked(PyObject *op, PyObject *unused) {
  (void)unused;
  LaunchObject *self = (LaunchObject *)op;
  return Py_BuildValue("{s:K,s:K,s:K,s:N}", "fast", self->fast, "hooked", self->hooked, "stock", self->stock,
                       "stock_reasons", PyDict_Copy(self->stock_counts));
}

FL_EXT_METHOD_LOCKED(launch_counts, launch_counts_unlocked)

static PyMethodDef launch_methods[] = {
    {"counts", launch_counts, METH_NOARGS, "counts() -> {'fast': n, 'hooked': n (of fast, with launch hooks called), 'stock': n, "
     "'stock_reasons': {reason: n}}"},
    {NULL, NULL, 0, NULL},
};

static PyObject *launch_get_plan(PyObject *op, void *closure) {
  (void)closure;
  PyObject *p = ((LaunchObject *)op)->plan;
  return Py_NewRef(p ? p : Py_None);
}

static PyObject *launch_get_reason(PyObject *op, void *closure) {
  (void)closure;
  PyObject *r = ((LaunchObject *)op)->reason;
  return Py_NewRef(r ? r : Py_None);
}

static PyGetSetDef launch_getset[] = {
    {"plan", launch_get_plan, NULL, "the Plan (None: every call is Triton's)", NULL},
    {"reason", launch_get_reason, NULL, "why every call is Triton's, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot launch_slots[] = {
    {Py_tp_new, launch_new},
    {Py_tp_dealloc, launch_dealloc},
    {Py_tp_traverse, launch_traverse},
    {Py_tp_clear, launch_clear},
    {Py_tp_methods, launch_methods},
    {Py_tp_getset, launch_getset},
    {Py_tp_doc, "CompiledLaunch(kernel, dispatcher, plan, reason, stock_getitem)\n--\n\nHow a CompiledKernel's "
                "compiled[grid](...) calls launch: the plan and the JIT dispatcher whose gates they pass."},
    {0, NULL},
};

static PyType_Spec launch_spec = {
    .name = "fastlaunch._C.CompiledLaunch",
    .basicsize = sizeof(LaunchObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = launch_slots,
};

/* The three types; held by the module (the static pointers are for the call path). */
int fl_ext_add_compiled_types(PyObject *module, fl_ext_state *st) {
  if (!str_launch_attr && !(str_launch_attr = PyUnicode_InternFromString("_fastlaunch_launch"))) return -1;
  st->str_launch_metadata = PyUnicode_InternFromString("launch_metadata");
  st->str_launch_enter_hook = PyUnicode_InternFromString("launch_enter_hook");
  st->str_launch_exit_hook = PyUnicode_InternFromString("launch_exit_hook");
  if (!st->str_launch_metadata || !st->str_launch_enter_hook || !st->str_launch_exit_hook) return -1;
  PyType_Spec *specs[2] = {&subscript_spec, &launch_spec};
  PyTypeObject *types[3];
  for (int i = 0; i < 3; i++) {
    types[i] = i < 2 ? (PyTypeObject *)PyType_FromModuleAndSpec(module, specs[i], NULL)
                     : fl_grid_call_type(module, "fastlaunch._C.CompiledCall",
                                         "compiled[grid]: calling it launches the kernel as Triton's launcher would.");
    if (!types[i] || PyModule_AddType(module, types[i]) < 0) {
      Py_XDECREF(types[i]);
      return -1;
    }
    Py_DECREF(types[i]); /* the module holds it */
  }
  fl_compiled_launch_type = types[1];
  call_type = types[2];
  return 0;
}
