/* jit_types.c: the JitDispatcher type: construction, binding a variant under its key (the policy's
 * _insert), clearing, counts, GC. Above the call (jit.c, its vectorcall), the table (jit_table.c)
 * and the memo (jit_key.c); JitCall and JitSubscript, above the autotuner, are jit_subscript.c. */
#include "jit_base.h"
/* ---- JitDispatcher: construction and the policy's methods ---- */
static PyObject *jit_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"fn", "stock_run", "policy", "param_names", "param_const", "defaults", "option_names",
                           "pre_run_hooks", NULL};
  PyObject *fn, *stock_run, *policy, *names, *consts, *defaults, *options, *pre;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO$O!O!O!O!O!:JitDispatcher", kwlist, &fn, &stock_run, &policy,
                                   &PyTuple_Type, &names, &PyTuple_Type, &consts, &PyTuple_Type, &defaults,
                                   &PyTuple_Type, &options, &PyList_Type, &pre))
    return NULL;
  Py_ssize_t np = PyTuple_GET_SIZE(names);
  if (np > JIT_MAX_PARAMS || PyTuple_GET_SIZE(consts) != np || PyTuple_GET_SIZE(defaults) != np ||
      PyTuple_GET_SIZE(options) > JIT_MAX_OPTIONS) {
    PyErr_Format(PyExc_ValueError, "param_names, param_const, defaults: one entry per parameter (at most %d); "
                 "option_names: at most %d", JIT_MAX_PARAMS, JIT_MAX_OPTIONS);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) return PyErr_Format(PyExc_TypeError, "param_names[%zd]: a str", i);
    PyObject *d = PyTuple_GET_ITEM(defaults, i);
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) > 1)
      return PyErr_Format(PyExc_TypeError, "defaults[%zd]: (default,) or () for none", i);
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(options); i++)
    if (!PyUnicode_Check(PyTuple_GET_ITEM(options, i))) return PyErr_Format(PyExc_TypeError, "option_names[%zd]: a str", i);
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  JitObject *self = (JitObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = fl_jit_vectorcall;
  self->state = st;
  self->fn = Py_NewRef(fn);
  self->stock_run = Py_NewRef(stock_run);
  self->policy = Py_NewRef(policy);
  self->param_names = Py_NewRef(names);
  self->defaults = Py_NewRef(defaults);
  self->option_names = Py_NewRef(options);
  self->pre_run_hooks = Py_NewRef(pre);
  self->hook_lists = PyTuple_New(0);
  self->stock_counts = PyDict_New();
  self->stock_reason = PyUnicode_FromString("not_validated");
  self->param_const = PyMem_Calloc((size_t)(np ? np : 1), 1);
  FL_EXT_STORE(self->watch.force, 1); /* revalidated at the first call */
  if (!self->hook_lists || !self->stock_counts || !self->stock_reason || !self->param_const ||
      fl_jit_memo_init(&self->memo, np) < 0) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    int t = PyObject_IsTrue(PyTuple_GET_ITEM(consts, i));
    if (t < 0) {
      Py_DECREF(self);
      return NULL;
    }
    self->param_const[i] = (uint8_t)t;
  }
  return (PyObject *)self;
}

/* _insert(key, kernel, plan_or_None, positions, grid_spec_or_None, keep, refusal_or_None, scratch=None):
 * scratch (ContextVar, bytes per CTA, alignment, num_ctas, trailing pointers), whose positions are (-1, -1). */
static PyObject *jit_insert_unlocked(PyObject *op, PyObject *args) {
  JitObject *self = (JitObject *)op;
  PyObject *key, *kernel, *plan, *positions, *grid_spec, *keep, *refusal, *scratch = Py_None;
  if (!PyArg_ParseTuple(args, "O!OOO!OO!O|O:_insert", &PyBytes_Type, &key, &kernel, &plan, &PyTuple_Type, &positions,
                        &grid_spec, &PyTuple_Type, &keep, &refusal, &scratch))
    return NULL;
  PyObject *var = NULL;
  unsigned long long ssize = 0, salign = 0;
  unsigned sctas = 0;
  Py_ssize_t nhidden = 0;
  if (scratch != Py_None &&
      (!PyArg_ParseTuple(scratch, "OKKIn:_insert scratch", &var, &ssize, &salign, &sctas, &nhidden) ||
       !PyContextVar_CheckExact(var) || nhidden < 1 || nhidden > PyTuple_GET_SIZE(positions) || plan == Py_None)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "scratch: (ContextVar, size, align, num_ctas, nhidden)");
    return NULL;
  }
  Py_ssize_t nbytes = PyBytes_GET_SIZE(key);
  if (nbytes % 8 || nbytes == 0 || nbytes > JIT_MAX_KEY * 8) return PyErr_Format(PyExc_ValueError, "key: not a key");
  if (plan != Py_None && !PyObject_TypeCheck(plan, self->state->plan_type))
    return PyErr_Format(PyExc_TypeError, "plan: a fastlaunch Plan or None");
  if (plan != Py_None && (((fl_PlanObject *)plan)->args.nruntime != (size_t)PyTuple_GET_SIZE(positions) ||
                          fl_plan_grid_mode(((fl_PlanObject *)plan)->plan) != FL_GRID_CALLER ||
                          PyTuple_GET_SIZE(positions) > JIT_MAX_PARAMS))
    return PyErr_Format(PyExc_ValueError, "plan: one runtime argument per position and the caller's grid");
  jit_key k;
  k.n = (size_t)nbytes / 8;
  memcpy(k.words, PyBytes_AS_STRING(key), (size_t)nbytes);
  uint64_t h = key_hash(&k);
  if (table_find(self, &k, h)) Py_RETURN_FALSE; /* bound already (a re-entrant call) */
  jit_entry *e = PyMem_Calloc(1, sizeof *e);
  if (!e) return PyErr_NoMemory();
  e->hash = h;
  e->nkey = k.n;
  e->key = PyMem_Malloc((size_t)nbytes);
  e->nabi = (size_t)PyTuple_GET_SIZE(positions);
  e->abi_param = PyMem_Calloc(e->nabi ? e->nabi : 1, sizeof(int32_t));
  e->abi_member = PyMem_Calloc(e->nabi ? e->nabi : 1, sizeof(int32_t));
  if (!e->key || !e->abi_param || !e->abi_member) {
    fl_jit_entry_free(e);
    return PyErr_NoMemory();
  }
  memcpy(e->key, k.words, (size_t)nbytes);
  e->kernel = Py_NewRef(kernel);
  e->keep = Py_NewRef(keep);
  e->refusal = refusal == Py_None ? NULL : Py_NewRef(refusal);
  e->plan = plan == Py_None ? NULL : (fl_PlanObject *)Py_NewRef(plan);
  if (!e->plan && !e->refusal) e->refusal = PyUnicode_FromString("refused");
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  e->scratch_var = Py_XNewRef(var);
  e->scratch_size = ssize, e->scratch_align = salign, e->scratch_ctas = sctas, e->nhidden = (unsigned)nhidden;
  for (size_t i = 0; i < e->nabi; i++) {
    int p, m;
    int hidden = i >= e->nabi - (size_t)nhidden && nhidden > 0; /* the launcher's trailing pointers: (-1, -1) */
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(positions, (Py_ssize_t)i), "ii:position", &p, &m) ||
        (hidden ? p != -1 : (p < 0 || p >= np))) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "positions[%zu]: parameter out of range", i);
      fl_jit_entry_free(e);
      return NULL;
    }
    e->abi_param[i] = p;
    e->abi_member[i] = m;
  }
  if (e->plan && fl_jit_memo_entry(e, np, self->param_const) < 0) {
    fl_jit_entry_free(e);
    return NULL;
  }
  if (grid_spec != Py_None && fl_jit_entry_grid(self->state, e, grid_spec, np) < 0) {
    fl_jit_entry_free(e);
    return NULL;
  }
  if (table_find(self, &k, h)) { /* bound meanwhile (a position's __index__ can run code that calls in) */
    fl_jit_entry_free(e);
    Py_RETURN_FALSE;
  }
  if (fl_jit_table_put(self, e) < 0) {
    fl_jit_entry_free(e);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
  }
  Py_RETURN_TRUE;
}

static PyObject *jit_clear_method_unlocked(PyObject *op, PyObject *unused) {
  JitObject *self = (JitObject *)op;
  (void)unused;
  fl_jit_table_clear(self);
  Py_RETURN_NONE;
}

/* Forces revalidation at the next call (the policy changed something it decides on). */
static PyObject *jit_invalidate_unlocked(PyObject *op, PyObject *unused) {
  JitObject *self = (JitObject *)op;
  (void)unused;
  FL_EXT_STORE(self->watch.force, 1); /* read by fl_ext_watch_changed as an atomic */
  Py_RETURN_NONE;
}

static PyObject *jit_get_counts_unlocked(PyObject *op, void *closure) {
  JitObject *self = (JitObject *)op;
  (void)closure;
  PyObject *reasons = PyDict_Copy(self->stock_counts); /* a snapshot: the counts go on */
  if (!reasons) return NULL;
  return Py_BuildValue("{sKsKsNsnsKsKsKsKsK}", "fast", self->fast, "stock", self->stock, "stock_reasons", reasons,
                       "variants", (Py_ssize_t)self->count, "grid_calls", self->grid_calls, "memo",
                       self->memo_fast, "hooked", self->hooked, "pre_run", self->pre_run, "checked", self->checked);
}

static PyObject *jit_get_fn(PyObject *op, void *closure) {
  JitObject *self = (JitObject *)op;
  (void)closure;
  return Py_NewRef(self->fn);
}

static int jit_traverse(PyObject *op, visitproc visit, void *arg) {
  JitObject *self = (JitObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->watch.dicts);
  Py_VISIT(self->watch.keyed);
  Py_VISIT(self->fn);
  Py_VISIT(self->stock_run);
  Py_VISIT(self->policy);
  Py_VISIT(self->defaults);
  Py_VISIT(self->pre_run_hooks);
  Py_VISIT(self->hook_lists);
  Py_VISIT(self->spare_call);
  Py_VISIT(self->device_fn);
  Py_VISIT(self->stream_fn);
  Py_VISIT(self->check);
  Py_VISIT(self->memo.kwnames);
  for (size_t i = 0; i < self->cap; i++) {
    jit_entry *e = self->slots[i];
    if (!e) continue;
    Py_VISIT(e->plan);
    Py_VISIT(e->kernel);
    Py_VISIT(e->keep);
    Py_VISIT(e->grid_globals);
  }
  return 0;
}

static int jit_clear(PyObject *op) {
  JitObject *self = (JitObject *)op;
  Py_CLEAR(self->watch.dicts); /* the version arrays go with the object */
  Py_CLEAR(self->watch.keyed);
  FL_EXT_STORE(self->watch.force, 1);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->stock_run);
  Py_CLEAR(self->policy);
  Py_CLEAR(self->defaults);
  Py_CLEAR(self->pre_run_hooks);
  Py_CLEAR(self->hook_lists);
  Py_CLEAR(self->spare_call);
  Py_CLEAR(self->device_fn);
  Py_CLEAR(self->stream_fn);
  Py_CLEAR(self->check);
  fl_jit_table_clear(self);
  return 0;
}

static void jit_dealloc(PyObject *op) {
  JitObject *self = (JitObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  jit_clear((PyObject *)self);
  fl_jit_bury(self); /* nothing is in flight: the caller of a call holds the dispatcher */
  Py_CLEAR(self->param_names);
  Py_CLEAR(self->option_names);
  fl_ext_watch_free(&self->watch);
  Py_CLEAR(self->stock_reason);
  Py_CLEAR(self->stock_counts);
  PyMem_Free(self->param_const);
  fl_jit_memo_free(&self->memo);
  tp->tp_free(self);
  Py_DECREF(tp);
}

/* A dispatcher's calls in a critical section on it (free-threaded builds; ext.h). */
#define JIT_CALL_TARGET(callable) (((JitCallObject *)(callable))->target)
FL_EXT_VECTORCALL_LOCKED(jit_vectorcall_locked, fl_jit_vectorcall_unlocked, FL_EXT_SELF)
FL_EXT_VECTORCALL_LOCKED(jit_call_vectorcall_locked, fl_jit_call_vectorcall_unlocked, JIT_CALL_TARGET)
PyObject *fl_jit_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  return jit_vectorcall_locked(callable, args, nargsf, kwnames);
}
PyObject *fl_jit_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  return jit_call_vectorcall_locked(callable, args, nargsf, kwnames);
}

FL_EXT_METHOD_LOCKED(jit_insert, jit_insert_unlocked)
FL_EXT_METHOD_LOCKED(jit_clear_method, jit_clear_method_unlocked)
FL_EXT_METHOD_LOCKED(jit_invalidate, jit_invalidate_unlocked)
FL_EXT_GETTER_LOCKED(jit_get_counts, jit_get_counts_unlocked)

static PyMethodDef jit_methods[] = {
    {"_insert", jit_insert, METH_VARARGS,
     "_insert(key, kernel, plan, positions, grid, keep, refusal): binds a variant under a key"},
    {"clear", jit_clear_method, METH_NOARGS, "clear(): forgets every bound variant"},
    {"invalidate", jit_invalidate, METH_NOARGS,
     "invalidate(): asks the policy to revalidate at the next call"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef jit_getset[] = {
    {"counts", jit_get_counts, NULL, "fast and stock calls, stock reasons, bound variants, fast calls the memo took",
     NULL},
    {"fn", jit_get_fn, NULL, "the JITFunction", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef jit_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(JitObject, vectorcall), Py_READONLY, NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(JitObject, weakrefs), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot jit_slots[] = {
    {Py_tp_new, jit_new},
    {Py_tp_dealloc, jit_dealloc},
    {Py_tp_traverse, jit_traverse},
    {Py_tp_clear, jit_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, jit_methods},
    {Py_tp_getset, jit_getset},
    {Py_tp_members, jit_members},
    {Py_tp_doc, "JitDispatcher(fn, stock_run, policy, *, param_names, param_const, defaults, option_names, "
                "pre_run_hooks)\n--\n\nThe call slot of a Triton JITFunction (its run)."},
    {0, NULL},
};

static PyType_Spec jit_spec = {
    .name = "fastlaunch._C.JitDispatcher",
    .basicsize = sizeof(JitObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = jit_slots,
};

int fl_ext_add_jit_types(PyObject *module, fl_ext_state *st) {
  if (fl_ext_watch_init(st) < 0) return -1;
  st->str_warmup = PyUnicode_InternFromString("warmup");
  st->str_run = PyUnicode_InternFromString("run");
  if (!st->str_warmup || !st->str_run) return -1;
  st->jit_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &jit_spec, NULL);
  if (!st->jit_type || PyModule_AddType(module, st->jit_type) < 0) return -1;
  return PyModule_AddFunctions(module, fl_ext_jit_methods);
}
