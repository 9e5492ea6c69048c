/* jit_subscript.c: the top of Triton's JIT dispatcher. JitSubscript, the __getitem__ fastlaunch
 * gives a JITFunction class, so that kernel[grid] hands out a JitCall to the kernel's dispatcher
 * (a JitDispatcher, jit.c, or an AutotuneDispatcher, autotune.c) without a Python frame. Depends on
 * both; nothing below depends on it. */
#include "jit_base.h"

#include <string.h>

/* ---- JitCall, and what CompiledCall and CompiledSubscript share with it and JitSubscript ---- */
int fl_grid_call_traverse(PyObject *op, visitproc visit, void *arg) {
  JitCallObject *self = (JitCallObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->target);
  Py_VISIT(self->grid);
  return 0;
}

int fl_grid_call_clear(PyObject *op) {
  JitCallObject *self = (JitCallObject *)op;
  Py_CLEAR(self->target);
  Py_CLEAR(self->grid);
  return 0;
}

void fl_grid_call_dealloc(PyObject *op) { fl_ext_gc_dealloc(op, fl_grid_call_clear); }

PyMemberDef fl_getitem_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(fl_getitem_head, vectorcall), Py_READONLY, NULL},
    {"stock_getitem", Py_T_OBJECT_EX, offsetof(fl_getitem_head, stock_getitem), Py_READONLY, "Triton's own __getitem__"},
    {NULL, 0, 0, 0, NULL},
};

int fl_getitem_traverse(fl_getitem_head *h, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(h));
  Py_VISIT(h->stock_getitem);
  Py_VISIT(h->attach);
  return 0;
}

void fl_getitem_clear(fl_getitem_head *h) {
  Py_CLEAR(h->stock_getitem);
  Py_CLEAR(h->attach);
}

fl_getitem_head *fl_getitem_new(PyTypeObject *type, PyObject *args, PyObject *kwds, const char *fmt,
                                vectorcallfunc call) {
  static char *kwlist[] = {"stock_getitem", "attach", NULL};
  PyObject *stock_getitem, *attach;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist, &stock_getitem, &attach)) return NULL;
  fl_getitem_head *h = (fl_getitem_head *)type->tp_alloc(type, 0);
  if (!h) return NULL;
  h->vectorcall = call;
  h->stock_getitem = Py_NewRef(stock_getitem);
  h->attach = Py_NewRef(attach);
  return h;
}

PyObject *fl_getitem_bind(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

static PyMemberDef grid_call_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(JitCallObject, vectorcall), Py_READONLY, NULL},
    {"grid", Py_T_OBJECT_EX, offsetof(JitCallObject, grid), Py_READONLY, "the grid of obj[grid]"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject *fl_grid_call_type(PyObject *module, const char *name, const char *doc) {
  PyType_Slot slots[] = {
      {Py_tp_dealloc, fl_grid_call_dealloc}, {Py_tp_traverse, fl_grid_call_traverse},
      {Py_tp_clear, fl_grid_call_clear},     {Py_tp_call, PyVectorcall_Call},
      {Py_tp_members, grid_call_members},    {Py_tp_doc, (void *)doc},
      {0, NULL},
  };
  PyType_Spec spec = {
      .name = name,
      .basicsize = sizeof(JitCallObject),
      .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
               Py_TPFLAGS_DISALLOW_INSTANTIATION,
      .slots = slots,
  };
  return (PyTypeObject *)PyType_FromModuleAndSpec(module, &spec, NULL);
}

/* kernel[grid] on an autotuned kernel. */
static PyObject *autotune_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  /* The caller holds `call` through the call, so its grid stays (see fl_jit_call_vectorcall). */
  JitCallObject *call = (JitCallObject *)callable;
  return fl_ext_autotune_call(call->target, call->grid, args, nargsf, kwnames);
}

/* kernel[grid] on a kernel under @triton.heuristics. */
static PyObject *heuristics_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                            PyObject *kwnames) {
  JitCallObject *call = (JitCallObject *)callable;
  return fl_ext_heuristics_call(call->target, call->grid, args, nargsf, kwnames);
}

/* Where a dispatcher keeps its spare JitCall; NULL for anything that is not a dispatcher. */
static inline PyObject **spare_of(const fl_ext_state *st, PyObject *run) {
  PyTypeObject *t = Py_TYPE(run);
  if (t == st->jit_type) return &((JitObject *)run)->spare_call;
  if (t == st->autotune_type) return fl_ext_autotune_spare(run);
  if (t == st->heuristics_type) return fl_ext_heuristics_spare(run);
  return NULL;
}

/* A JitCall of a dispatcher: its vectorcall is the target's kind's, chosen once here. */
static PyObject *new_call(fl_ext_state *st, PyObject *target, PyObject *grid) {
  JitCallObject *call = PyObject_GC_New(JitCallObject, st->jit_call_type);
  if (!call) return NULL;
  call->vectorcall = Py_TYPE(target) == st->jit_type        ? fl_jit_call_vectorcall
                     : Py_TYPE(target) == st->autotune_type ? autotune_call_vectorcall
                                                            : heuristics_call_vectorcall;
  call->target = Py_NewRef(target);
  call->grid = Py_NewRef(grid);
  PyObject_GC_Track(call);
  return (PyObject *)call;
}

/* ---- JitSubscript: the class's __getitem__ ---- */
typedef struct {
  fl_getitem_head h;       /* attach(kernel): installs a dispatcher, or marks the kernel stock */
  fl_ext_state *state;
  /* The last kernel served, its instance dict, the dispatcher found there and the dict's stamp
   * then: while the stamp holds, kernel[grid] on that kernel skips the lookup of `run`. */
  PyObject *last_kernel, *last_dict, *last_run;
  PyObject **last_dictptr; /* where last_kernel keeps its dict (within the object, which is held) */
  uint64_t last_stamp;
} SubscriptObject;

/* The dispatcher in kernel.__dict__["run"] (a new reference), NULL when there is none (or with an
 * exception). The last kernel's is remembered while its dict is the same and unchanged. */
static inline PyObject *subscript_run(SubscriptObject *sub, PyObject *kernel) {
  if (kernel == sub->last_kernel && *sub->last_dictptr == sub->last_dict &&
      fl_ext_dict_stamp(sub->last_dict) == sub->last_stamp)
    return Py_NewRef(sub->last_run);
  PyObject **dictptr = _PyObject_GetDictPtr(kernel);
  PyObject *dict = dictptr ? *dictptr : NULL;
  if (!dict) return NULL;
  PyObject *run;
  if (PyDict_GetItemRef(dict, sub->state->str_run, &run) <= 0) return NULL; /* missing, or an error */
  if (!spare_of(sub->state, run)) return run;
  if (fl_ext_watch_dict(sub->state, dict) < 0) {
    PyErr_Clear(); /* not remembered: looked up again next time */
    return run;
  }
  /* All fields first, the old references last: their release may run code that subscripts (or
   * replaces the kernel's run: the caller holds its own reference to this one). */
  PyObject *old_kernel = sub->last_kernel, *old_dict = sub->last_dict, *old_run = sub->last_run;
  sub->last_kernel = Py_NewRef(kernel);
  sub->last_dict = Py_NewRef(dict);
  sub->last_run = Py_NewRef(run);
  sub->last_dictptr = dictptr;
  sub->last_stamp = fl_ext_dict_stamp(dict);
  Py_XDECREF(old_kernel);
  Py_XDECREF(old_dict);
  Py_XDECREF(old_run);
  return run;
}

/* The spare JitCall handed out again with another grid. Taken first, the old grid released last:
 * its __del__ may subscript the same kernel, and must then find the spare held (and make another). */
static inline PyObject *reuse(PyObject *spare, PyObject *grid) {
  JitCallObject *call = (JitCallObject *)spare;
  PyObject *old = call->grid;
  Py_INCREF(spare);
  call->grid = Py_NewRef(grid);
  Py_DECREF(old);
  return spare;
}

/* The JitCall of a dispatcher (its spare one when nobody holds that), or Triton's __getitem__ for
 * anything else in `run`. */
static PyObject *spare_or_new(SubscriptObject *sub, PyObject *run, PyObject *kernel, PyObject *grid) {
  PyObject **spare_at;
  if (!run || !(spare_at = spare_of(sub->state, run))) {
    PyObject *args[2] = {kernel, grid};
    return PyObject_Vectorcall(sub->h.stock_getitem, args, 2, NULL);
  }
  PyObject *spare = *spare_at;
  if (spare && Py_REFCNT(spare) == 1) return reuse(spare, grid); /* nobody holds the last one */
  PyObject *call = new_call(sub->state, run, grid);
  if (call && !*spare_at) *spare_at = Py_NewRef(call); /* read again: the allocation may run a GC pass */
  return call;
}

/* kernel[grid] on a kernel other than the last one (or the last one's dict changed, or its spare
 * JitCall is held): finds the dispatcher, attaching one the first time. The JitSubscript is held
 * throughout: `_attach`, or any code a release runs, may call disable(), which drops the class's. */
static FL_EXT_COLD PyObject *subscript_call_slow(SubscriptObject *sub, PyObject *kernel, PyObject *grid) {
  Py_INCREF(sub);
  PyObject *res = NULL, *run = subscript_run(sub, kernel);
  if (!run) {
    if (PyErr_Occurred()) goto done;
    PyObject *r = PyObject_CallOneArg(sub->h.attach, kernel); /* once per kernel */
    if (!r) goto done;
    Py_DECREF(r);
    run = subscript_run(sub, kernel);
    if (!run && PyErr_Occurred()) goto done;
  }
  res = spare_or_new(sub, run, kernel, grid);
done:
  Py_XDECREF(run);
  Py_DECREF(sub);
  return res;
}

/* kernel[grid]: the JitCall of the kernel's dispatcher. The last kernel's, while its dict is the
 * same and unchanged and nobody holds its spare JitCall, without a call (last_run is a dispatcher:
 * subscript_run remembers nothing else). */
static inline PyObject *subscript_call(SubscriptObject *sub, PyObject *kernel, PyObject *grid) {
  if (kernel == sub->last_kernel && *sub->last_dictptr == sub->last_dict &&
      fl_ext_dict_stamp(sub->last_dict) == sub->last_stamp) {
    PyObject *run = sub->last_run;
    PyObject *spare = *spare_of(sub->state, run);
    if (spare && Py_REFCNT(spare) == 1) return reuse(spare, grid);
  }
  return subscript_call_slow(sub, kernel, grid);
}

#ifdef Py_GIL_DISABLED
/* Free-threaded builds: the class's JitSubscript is one object for every kernel and thread, so what it
 * remembers with the GIL (the last kernel, and its dispatcher's spare JitCall) is remembered per
 * thread instead: no lock, and the same calls, releases and reuse in each thread as with the GIL. The
 * cache is allocated at a thread's first kernel[grid] and owned by a capsule in the thread's state
 * dict, which frees it when the thread state is cleared: by the thread itself when it ends (its
 * pointer reset, so a later thread state of the same OS thread makes a new one), or at interpreter
 * shutdown by the finalizing thread for a daemon thread (whose pointer is left: that thread runs no
 * Python code again, and may already have exited, its thread-local storage gone with it). */
typedef struct {
  PyObject *sub, *kernel, *dict, *run, *spare; /* held */
  PyObject **dictptr;
  uint64_t stamp;
  unsigned long owner; /* the OS thread's ident */
} thread_cache;
static _Thread_local thread_cache *tcache; /* NULL until this thread's first kernel[grid] remembered */
#define TCACHE_NAME "fastlaunch.subscript_cache"

static void tcache_release(PyObject *capsule) {
  thread_cache *c = PyCapsule_GetPointer(capsule, TCACHE_NAME);
  if (!c) return PyErr_Clear();
  if (c->owner == PyThread_get_thread_ident() && tcache == c) tcache = NULL;
  PyObject *old[5] = {c->sub, c->kernel, c->dict, c->run, c->spare};
  PyMem_RawFree(c);
  for (int i = 0; i < 5; i++) Py_XDECREF(old[i]); /* last: a release may run code that subscripts again */
}

/* This thread's cache, made and registered now if it has none; NULL when it cannot be (no thread-state
 * dict, no memory): nothing is remembered then, and no exception is left. */
static thread_cache *tcache_get(void) {
  if (tcache) return tcache;
  PyObject *d = PyThreadState_GetDict();
  thread_cache *c = d ? PyMem_RawCalloc(1, sizeof *c) : NULL;
  PyObject *cap = c ? PyCapsule_New(c, TCACHE_NAME, tcache_release) : NULL;
  if (!cap) {
    PyMem_RawFree(c);
    PyErr_Clear();
    return NULL;
  }
  c->owner = PyThread_get_thread_ident();
  tcache = c;
  if (PyDict_SetItemString(d, TCACHE_NAME, cap) < 0) PyErr_Clear(); /* then the capsule's release frees it */
  Py_DECREF(cap);
  return tcache;
}

/* The dispatcher in kernel.__dict__["run"] (a new reference), remembered in this thread's cache when
 * it is one; NULL when there is none (or with an exception). */
static PyObject *run_of(SubscriptObject *sub, PyObject *kernel) {
  PyObject **dictptr = _PyObject_GetDictPtr(kernel);
  PyObject *dict = dictptr ? PyObject_GenericGetDict(kernel, NULL) : NULL, *run = NULL;
  if (!dict) return NULL;
  int found = PyDict_GetItemRef(dict, sub->state->str_run, &run);
  int watched = found > 0 && spare_of(sub->state, run) ? fl_ext_watch_dict(sub->state, dict) : -1;
  if (watched < 0 && found > 0) PyErr_Clear(); /* not remembered: looked up again next time */
  if (watched == 0) {
    thread_cache *c = tcache_get();
    if (c) { /* the new ones first, the old ones released last (their release may run code) */
      PyObject *old[4] = {c->sub, c->kernel, c->dict, c->run};
      c->sub = Py_NewRef(sub), c->kernel = Py_NewRef(kernel), c->dict = Py_NewRef(dict), c->run = Py_NewRef(run);
      c->dictptr = dictptr, c->stamp = fl_ext_dict_stamp(dict);
      for (int i = 0; i < 4; i++) Py_XDECREF(old[i]);
    }
  }
  Py_DECREF(dict);
  return run;
}

/* This thread's spare JitCall for `run` with this grid, when nobody else holds it; else a new one,
 * kept as the spare (when the thread has a cache: the allocation may have run code that released it). */
static PyObject *thread_call(fl_ext_state *st, PyObject *run, PyObject *grid) {
  thread_cache *c = tcache;
  PyObject *spare = c ? c->spare : NULL;
  if (spare && ((JitCallObject *)spare)->target == run && Py_REFCNT(spare) == 1) return reuse(spare, grid);
  Py_INCREF(run); /* borrowed (from the cache, on the fast path): the allocation may release it */
  PyObject *call = new_call(st, run, grid);
  if (call && (c = tcache) != NULL) {
    spare = c->spare;
    c->spare = Py_NewRef(call);
    Py_XDECREF(spare); /* released last: its grid's __del__ may subscript again */
  }
  Py_DECREF(run);
  return call;
}

static PyObject *subscript_call_locked(SubscriptObject *sub, PyObject *kernel, PyObject *grid) {
  thread_cache *c = tcache;
  if (c && kernel == c->kernel && sub == (SubscriptObject *)c->sub && FL_EXT_LOAD(*c->dictptr) == c->dict &&
      fl_ext_dict_stamp(c->dict) == c->stamp)
    return thread_call(sub->state, c->run, grid);
  Py_INCREF(sub); /* _attach, or a release, may call disable(), which drops the class's */
  PyObject *res = NULL, *run = run_of(sub, kernel);
  if (!run && !PyErr_Occurred()) {
    PyObject *r = PyObject_CallOneArg(sub->h.attach, kernel); /* once per kernel */
    Py_XDECREF(r);
    if (r) run = run_of(sub, kernel);
  }
  if (run && spare_of(sub->state, run)) {
    res = thread_call(sub->state, run, grid);
  } else if (run || !PyErr_Occurred()) {
    PyObject *args[2] = {kernel, grid};
    res = PyObject_Vectorcall(sub->h.stock_getitem, args, 2, NULL);
  }
  Py_XDECREF(run);
  Py_DECREF(sub);
  return res;
}
#else
#define subscript_call_locked subscript_call /* the GIL: the last kernel and the spare JitCall as they are */
#endif

static PyObject *subscript_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SubscriptObject *sub = (SubscriptObject *)callable;
  if (PyVectorcall_NARGS(nargsf) != 2 || kwnames) return PyObject_Vectorcall(sub->h.stock_getitem, args, nargsf, kwnames);
  return subscript_call_locked(sub, args[0], args[1]);
}

static PyObject *subscript_get(PyObject *self, PyObject *obj, PyObject *type);

/* "__getitem__", interned once for the process (interned strings live as long). */
static PyObject *str_getitem;

/* kernel[grid] straight from the class's mapping slot (take_slot puts it there): the class's
 * __getitem__ is found as CPython's own slot function finds it, and a JitSubscript (recognised by
 * its descriptor function) is called directly, without the method-call machinery in between.
 * Anything else found there is called as CPython would call it. */
/* Whether tp's version tag stands for its attributes as they are: any change to tp or a base since
 * the tag was given invalidates it (3.12+: a tag of 0; before: a flag), and tags are not reused. */
static inline int tag_valid(PyTypeObject *tp) {
#if PY_VERSION_HEX >= 0x030C0000
  return FL_EXT_LOAD(tp->tp_version_tag) != 0;
#else
  return PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG);
#endif
}

/* The last class looked up and what __getitem__ was for it, under its version tag (borrowed: held
 * by a dict of its MRO for as long as the tag holds). */
static FL_EXT_TLS PyTypeObject *seen_type;
static FL_EXT_TLS unsigned int seen_tag;
static FL_EXT_TLS PyObject *seen_getitem;

/* kernel[grid] through a __getitem__ that is not seen_getitem, or when that is not a JitSubscript. */
static FL_EXT_COLD PyObject *subscript_slot_other(PyObject *kernel, PyObject *grid) {
  PyTypeObject *tp = Py_TYPE(kernel);
  PyObject *getitem;
  if (tp == seen_type && FL_EXT_LOAD(tp->tp_version_tag) == seen_tag && tag_valid(tp)) {
    getitem = seen_getitem;
  } else {
    getitem = _PyType_Lookup(tp, str_getitem); /* borrowed */
    seen_type = NULL;
    if (getitem && tag_valid(tp)) {
      seen_type = tp;
      seen_tag = FL_EXT_LOAD(tp->tp_version_tag);
      seen_getitem = getitem;
    }
  }
  PyObject *args[2] = {kernel, grid};
  if (!getitem)
    return PyErr_Format(PyExc_TypeError, "'%.200s' object is not subscriptable", tp->tp_name);
  if (Py_TYPE(getitem)->tp_descr_get == subscript_get) return subscript_call_locked((SubscriptObject *)getitem, kernel, grid);
  Py_INCREF(getitem);
  PyObject *res;
  descrgetfunc get = Py_TYPE(getitem)->tp_descr_get;
  if (PyType_HasFeature(Py_TYPE(getitem), Py_TPFLAGS_METHOD_DESCRIPTOR)) {
    res = PyObject_Vectorcall(getitem, args, 2, NULL);
  } else if (get) {
    PyObject *bound = get(getitem, kernel, (PyObject *)tp);
    res = bound ? PyObject_CallOneArg(bound, grid) : NULL;
    Py_XDECREF(bound);
  } else {
    res = PyObject_CallOneArg(getitem, grid);
  }
  Py_DECREF(getitem);
  return res;
}

static PyObject *subscript_slot(PyObject *kernel, PyObject *grid) {
  PyTypeObject *tp = Py_TYPE(kernel);
  if (FL_EXT_LIKELY(tp == seen_type && FL_EXT_LOAD(tp->tp_version_tag) == seen_tag && tag_valid(tp) &&
                    Py_TYPE(seen_getitem)->tp_descr_get == subscript_get))
    return subscript_call_locked((SubscriptObject *)seen_getitem, kernel, grid);
  return subscript_slot_other(kernel, grid);
}

/* sub.take_slot(cls): cls's __getitem__ is this JitSubscript; from now on cls's mapping slot calls
 * it directly (subscript_slot). CPython puts its own slot function back whenever cls.__getitem__
 * is assigned or deleted again (disable() does). Subclasses made later inherit the slot; earlier
 * ones keep CPython's and reach the JitSubscript through __getitem__. Returns whether it did. */
static PyObject *subscript_take_slot(PyObject *self, PyObject *cls) {
  if (!PyType_Check(cls)) return PyErr_Format(PyExc_TypeError, "take_slot: expected a class, got %.80s",
                                              Py_TYPE(cls)->tp_name);
  PyTypeObject *tp = (PyTypeObject *)cls;
  /* Only a heap type whose mapping methods are its own (a class statement's): a static type's
   * slots are shared and never changed here. Checked before its dict is read: a static builtin
   * type has no tp_dict from Python 3.12 on (the interpreter keeps it). */
  if (!PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE) || !tp->tp_dict ||
      tp->tp_as_mapping != &((PyHeapTypeObject *)tp)->as_mapping)
    Py_RETURN_FALSE;
  if (!str_getitem && !(str_getitem = PyUnicode_InternFromString("__getitem__"))) return NULL;
  PyObject *own = PyDict_GetItemWithError(tp->tp_dict, str_getitem); /* borrowed */
  if (!own && PyErr_Occurred()) return NULL;
  if (own != self) Py_RETURN_FALSE;
  /* A plain write, as CPython's own slot update is: on a free-threaded build the policy takes the
   * slot only while no other thread runs (triton_jit.enable), else kernel[grid] goes through
   * CPython's slot and __getitem__. */
  tp->tp_as_mapping->mp_subscript = subscript_slot;
  Py_RETURN_TRUE;
}

static PyMethodDef subscript_methods[] = {
    {"take_slot", subscript_take_slot, METH_O,
     "take_slot(cls): cls's mapping slot calls this JitSubscript directly (cls.__getitem__ must be it)."},
    {NULL, NULL, 0, NULL},
};


static PyObject *subscript_get(PyObject *self, PyObject *obj, PyObject *type) {
  return fl_getitem_bind(self, obj, type); /* a function of its own: JitSubscript is recognised by it */
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  fl_ext_state *st = fl_ext_state_from_type(type);
  SubscriptObject *self = st ? (SubscriptObject *)fl_getitem_new(type, args, kwds, "OO:JitSubscript", subscript_vectorcall)
                             : NULL;
  if (self) self->state = st;
  return (PyObject *)self;
}

static int subscript_traverse(PyObject *op, visitproc visit, void *arg) {
  SubscriptObject *self = (SubscriptObject *)op;
  Py_VISIT(self->last_kernel);
  Py_VISIT(self->last_dict);
  Py_VISIT(self->last_run);
  return fl_getitem_traverse(&self->h, visit, arg);
}

static int subscript_clear(PyObject *op) {
  SubscriptObject *self = (SubscriptObject *)op;
  fl_getitem_clear(&self->h);
  Py_CLEAR(self->last_kernel);
  Py_CLEAR(self->last_dict);
  Py_CLEAR(self->last_run);
  return 0;
}

static void subscript_dealloc(PyObject *op) { fl_ext_gc_dealloc(op, subscript_clear); }

_Static_assert(offsetof(SubscriptObject, h) == 0, "a JitSubscript starts with the head (fl_getitem_members)");

static PyType_Slot subscript_slots[] = {
    {Py_tp_new, subscript_new},
    {Py_tp_dealloc, subscript_dealloc},
    {Py_tp_traverse, subscript_traverse},
    {Py_tp_clear, subscript_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, subscript_get},
    {Py_tp_members, fl_getitem_members},
    {Py_tp_methods, subscript_methods},
    {Py_tp_doc, "JitSubscript(stock_getitem, attach)\n--\n\nA JITFunction class's __getitem__ that hands out "
                "fastlaunch's JitCall."},
    {0, NULL},
};

static PyType_Spec subscript_spec = {
    .name = "fastlaunch._C.JitSubscript",
    .basicsize = sizeof(SubscriptObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = subscript_slots,
};

/* JitCall and JitSubscript, registered after the dispatchers they hand calls to. */
int fl_ext_add_jit_call_types(PyObject *module, fl_ext_state *st) {
  st->jit_call_type = fl_grid_call_type(module, "fastlaunch._C.JitCall",
                                        "kernel[grid]: calling it launches the kernel as Triton's JIT would.");
  if (!st->jit_call_type || PyModule_AddType(module, st->jit_call_type) < 0) return -1;
  st->jit_subscript_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &subscript_spec, NULL);
  return !st->jit_subscript_type || PyModule_AddType(module, st->jit_subscript_type) < 0 ? -1 : 0;
}
