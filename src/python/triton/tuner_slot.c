/* tuner_slot.c: the class-level `run` of Triton's kernel classes while fastlaunch serves Triton's
 * JIT, so that a kernel's `run` called directly (`fn.run(...)`, `tuner.run(...)`: FlagGems' LibEntry,
 * Autotuner subclasses that call `self.fn.run` themselves) is served from its first call, as
 * `kernel[grid]` is, and an Autotuner subclass that overrides `run` and calls
 * `super().run(*args, **kwargs)` (fla's CachedAutotuner) reaches the dispatcher from its own Python,
 * without another Python frame. Two types:
 *
 * RunSlot, `JITFunction.run` and `Heuristics.run`: a plain (non-method) descriptor. Read through an
 * instance that has no run of its own yet (`fn.run`), it calls the policy's attach, which puts the
 * kernel's dispatcher (or Triton's bound run, for a kernel fastlaunch leaves alone) in the
 * instance's dict, where every later `fn.run` finds it without reaching the slot; it hands that out.
 * Called through the class (`JITFunction.run(fn, ...)`) it is Triton's own run.
 *
 * TunerSlot, `Autotuner.run`:
 *
 * `super().run` is an attribute access: the slot binds itself to the instance as a BoundSlot,
 * which CPython's call with `*args, **kwargs` calls through tp_call with the tuple and the dict it
 * built; the dispatcher reads that dict in place (fl_at_call_dict).
 *
 * A method descriptor on the class: `super().run(...)` calls it with the instance first. An
 * instance the policy (fastlaunch.triton_jit) admitted holds its AutotuneDispatcher in its dict
 * under `_fastlaunch_run`: the call goes there (the run() form: grid= and warmup= among the
 * keywords). Every other instance, and every other way of reaching it, calls Triton's own
 * Autotuner.run, which the slot keeps. A method descriptor is called the same way whether it was
 * read through the instance or the class, so an instance with no run of its own yet is attached
 * (the policy's attach) on either: a plain Autotuner's dispatcher then sits in its dict as `run`,
 * where `tuner.run` finds it from then on.
 * Above autotune.c: the dispatcher is called through its vectorcall, or its dict form. */
#include "autotune_base.h"

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *stock;  /* Triton's own run (the function) */
  PyObject *attach; /* the policy's attach(instance), or None */
  PyObject *key;    /* "_fastlaunch_run" */
  PyObject *run;    /* "run" */
} SlotObject;

/* An instance's own `run` (a new reference), or NULL: none (no error), or an error set. */
static PyObject *own_run(PyObject *obj, PyObject *name) {
  PyObject **dictptr = _PyObject_GetDictPtr(obj);
  PyObject *d = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, name) : NULL;
  return Py_XNewRef(d);
}

/* Calls the policy's attach on an instance with no run of its own. An error there is fastlaunch's,
 * never the caller's: it is reported as unraisable and the call stays Triton's. */
static void attach(SlotObject *slot, PyObject *obj) {
  if (slot->attach == Py_None) return;
  PyObject *fn = Py_NewRef(slot->attach), *r = PyObject_CallOneArg(fn, obj);
  Py_DECREF(fn);
  if (!r) PyErr_WriteUnraisable(slot->attach);
  Py_XDECREF(r);
}

/* An admitted subclass instance's dispatcher, `_fastlaunch_run` (a new reference); NULL with no
 * error for any other instance, or with an error set. */
static PyObject *dispatcher_of(SlotObject *slot, PyObject *obj) {
  PyObject *d = own_run(obj, slot->key);
  if (d && Py_TYPE(d) != slot->state->autotune_type) Py_CLEAR(d);
  return d;
}

/* dispatcher_of, attaching an instance met for the first time (no run of its own yet: `tuner.run(...)`
 * before any `tuner[grid]`): then a plain Autotuner's dispatcher, just put in its dict as `run`, is
 * called too. An instance attached before keeps `Autotuner.run(tuner, ...)` Triton's. */
static PyObject *dispatcher_attached(SlotObject *slot, PyObject *obj) {
  PyObject *d = dispatcher_of(slot, obj);
  if (d || PyErr_Occurred()) return d;
  PyObject *mine = own_run(obj, slot->run);
  if (mine || PyErr_Occurred()) {
    Py_XDECREF(mine);
    return NULL;
  }
  attach(slot, obj);
  d = dispatcher_of(slot, obj);
  if (d || PyErr_Occurred()) return d;
  mine = own_run(obj, slot->run);
  if (mine && Py_TYPE(mine) == slot->state->autotune_type) return mine;
  Py_XDECREF(mine);
  return NULL;
}

static PyObject *slot_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SlotObject *slot = (SlotObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs >= 1) {
    PyObject *d = dispatcher_attached(slot, args[0]);
    if (d) {
      PyObject *r = PyObject_Vectorcall(d, args + 1, nargs - 1, kwnames);
      Py_DECREF(d);
      return r;
    }
    if (PyErr_Occurred()) return NULL;
  }
  return PyObject_Vectorcall(slot->stock, args, nargsf, kwnames);
}

/* ---- BoundSlot: the slot bound to an instance (attribute access: `super().run`, `tuner.run`) ---- */
typedef struct {
  PyObject_HEAD
  SlotObject *slot;
  PyObject *self;
} BoundObject;

static PyObject *bound_call(PyObject *op, PyObject *args, PyObject *kwargs) {
  BoundObject *b = (BoundObject *)op;
  PyObject *obj = b->self, *r;
  Py_INCREF(obj);
  PyObject *d = dispatcher_attached(b->slot, obj);
  if (d) {
    r = fl_at_call_dict(d, ((PyTupleObject *)args)->ob_item, (size_t)PyTuple_GET_SIZE(args), kwargs);
    Py_DECREF(d);
  } else if (PyErr_Occurred()) {
    r = NULL;
  } else {
    PyObject *m = PyMethod_New(b->slot->stock, obj);
    r = m ? PyObject_Call(m, args, kwargs) : NULL;
    Py_XDECREF(m);
  }
  Py_DECREF(obj);
  return r;
}

static int bound_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((BoundObject *)op)->slot);
  Py_VISIT(((BoundObject *)op)->self);
  return 0;
}

static int bound_clear(PyObject *op) {
  Py_CLEAR(((BoundObject *)op)->slot);
  Py_CLEAR(((BoundObject *)op)->self);
  return 0;
}

static void bound_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  bound_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *bound_repr(PyObject *op) {
  return PyUnicode_FromFormat("<bound fastlaunch TunerSlot of %R>", ((BoundObject *)op)->self);
}

static PyMemberDef bound_members[] = {
    {"__self__", Py_T_OBJECT_EX, offsetof(BoundObject, self), Py_READONLY, "the instance"},
    {"__func__", Py_T_OBJECT_EX, offsetof(BoundObject, slot), Py_READONLY, "the TunerSlot"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot bound_slots[] = {
    {Py_tp_dealloc, bound_dealloc},
    {Py_tp_traverse, bound_traverse},
    {Py_tp_clear, bound_clear},
    {Py_tp_call, bound_call},
    {Py_tp_repr, bound_repr},
    {Py_tp_members, bound_members},
    {Py_tp_doc, "Autotuner.run bound to an instance while fastlaunch serves Triton's JIT."},
    {0, NULL},
};

/* No vectorcall, on purpose: CPython's call with **kwargs then hands tp_call its dict. */
static PyType_Spec bound_spec = {
    .name = "fastlaunch._C.BoundTunerSlot",
    .basicsize = sizeof(BoundObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = bound_slots,
};

static PyObject *slot_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) return Py_NewRef(self);
  SlotObject *slot = (SlotObject *)self;
  PyTypeObject *tp = slot->state->tuner_bound_type;
  BoundObject *b = PyObject_GC_New(BoundObject, tp);
  if (!b) return NULL; /* (PyObject_GC_New holds the heap type for the instance) */
  b->slot = (SlotObject *)Py_NewRef(self);
  b->self = Py_NewRef(obj);
  PyObject_GC_Track(b);
  return (PyObject *)b;
}

/* TunerSlot(stock, attach=None) and RunSlot(stock, attach=None): one constructor, one layout. */
static PyObject *slot_make(PyTypeObject *type, PyObject *args, PyObject *kwds, const char *format,
                           vectorcallfunc call) {
  static char *kwlist[] = {"stock", "attach", NULL};
  PyObject *stock, *attach_fn = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, format, kwlist, &stock, &attach_fn)) return NULL;
  if (!PyCallable_Check(stock)) return PyErr_Format(PyExc_TypeError, "%s(stock): stock is not callable", type->tp_name);
  if (attach_fn != Py_None && !PyCallable_Check(attach_fn))
    return PyErr_Format(PyExc_TypeError, "%s(attach): attach is neither None nor callable", type->tp_name);
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  SlotObject *self = (SlotObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = call;
  self->state = st;
  self->stock = Py_NewRef(stock);
  self->attach = Py_NewRef(attach_fn);
  self->key = PyUnicode_InternFromString("_fastlaunch_run");
  self->run = PyUnicode_InternFromString("run");
  if (!self->key || !self->run) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static PyObject *slot_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  return slot_make(type, args, kwds, "O|O:TunerSlot", slot_vectorcall);
}

static int slot_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((SlotObject *)op)->stock);
  Py_VISIT(((SlotObject *)op)->attach);
  return 0;
}

static int slot_clear(PyObject *op) {
  Py_CLEAR(((SlotObject *)op)->stock);
  Py_CLEAR(((SlotObject *)op)->attach);
  return 0;
}

static void slot_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  slot_clear(op);
  Py_CLEAR(((SlotObject *)op)->key);
  Py_CLEAR(((SlotObject *)op)->run);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyMemberDef slot_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(SlotObject, vectorcall), Py_READONLY, NULL},
    {"stock", Py_T_OBJECT_EX, offsetof(SlotObject, stock), Py_READONLY, "Triton's own run"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot slot_slots[] = {
    {Py_tp_new, slot_new},
    {Py_tp_dealloc, slot_dealloc},
    {Py_tp_traverse, slot_traverse},
    {Py_tp_clear, slot_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, slot_get},
    {Py_tp_members, slot_members},
    {Py_tp_doc, "TunerSlot(stock, attach=None)\n--\n\nAutotuner.run while fastlaunch serves Triton's JIT: an "
                "admitted instance's dispatcher (an instance met first attached), or Triton's own run."},
    {0, NULL},
};

static PyType_Spec slot_spec = {
    .name = "fastlaunch._C.TunerSlot",
    .basicsize = sizeof(SlotObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = slot_slots,
};

/* ---- RunSlot: JITFunction.run and Heuristics.run ---- */

/* Called through the class (`JITFunction.run(fn, ...)`): Triton's own run. */
static PyObject *run_slot_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  PyObject *stock = Py_NewRef(((SlotObject *)callable)->stock);
  fl_ext_triton_enter();
  PyObject *r = PyObject_Vectorcall(stock, args, nargsf, kwnames);
  fl_ext_triton_leave();
  Py_DECREF(stock);
  return r;
}

/* Read through an instance with no run of its own (its dict shadows the slot once it has one): the
 * instance attached, then what attach put there, or Triton's run bound to it. */
static PyObject *run_slot_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) return Py_NewRef(self);
  SlotObject *slot = (SlotObject *)self;
  PyObject *mine = own_run(obj, slot->run);
  if (!mine && !PyErr_Occurred()) {
    attach(slot, obj);
    mine = own_run(obj, slot->run);
  }
  if (mine || PyErr_Occurred()) return mine;
  return PyMethod_New(slot->stock, obj);
}

static PyObject *run_slot_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  return slot_make(type, args, kwds, "O|O:RunSlot", run_slot_vectorcall);
}

static PyType_Slot run_slot_slots[] = {
    {Py_tp_new, run_slot_new},
    {Py_tp_dealloc, slot_dealloc},
    {Py_tp_traverse, slot_traverse},
    {Py_tp_clear, slot_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, run_slot_get},
    {Py_tp_members, slot_members},
    {Py_tp_doc, "RunSlot(stock, attach=None)\n--\n\nJITFunction.run or Heuristics.run while fastlaunch serves "
                "Triton's JIT: read through an instance, that instance attached and its dispatcher handed out; "
                "called through the class, Triton's own run."},
    {0, NULL},
};

/* Not a method descriptor, on purpose: `fn.run(...)` then reads it through the instance (attach),
 * and only a call through the class calls it directly. */
static PyType_Spec run_slot_spec = {
    .name = "fastlaunch._C.RunSlot",
    .basicsize = sizeof(SlotObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = run_slot_slots,
};

int fl_ext_add_tuner_slot_type(PyObject *module, fl_ext_state *st) {
  PyTypeObject *r = (PyTypeObject *)PyType_FromModuleAndSpec(module, &run_slot_spec, NULL);
  if (!r) return -1;
  int rc_run = PyModule_AddType(module, r);
  Py_DECREF(r);
  if (rc_run < 0) return -1;
  st->tuner_bound_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &bound_spec, NULL);
  if (!st->tuner_bound_type) return -1;
  PyTypeObject *t = (PyTypeObject *)PyType_FromModuleAndSpec(module, &slot_spec, NULL);
  if (!t) return -1;
  int rc = PyModule_AddType(module, t);
  Py_DECREF(t);
  return rc;
}
