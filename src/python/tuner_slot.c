/* tuner_slot.c: TunerSlot, what `Autotuner.run` is while fastlaunch serves Triton's JIT, so that an
 * Autotuner subclass that overrides `run` and calls `super().run(*args, **kwargs)` (fla's
 * CachedAutotuner, and the same pattern elsewhere) reaches fastlaunch's dispatcher from its own
 * Python, without another Python frame.
 *
 * `super().run` is an attribute access: the slot binds itself to the instance as a BoundSlot,
 * which CPython's call with `*args, **kwargs` calls through tp_call with the tuple and the dict it
 * built; the dispatcher reads that dict in place (fl_at_call_dict).
 *
 * A method descriptor on the class: `super().run(...)` calls it with the instance first. An
 * instance the policy (fastlaunch.triton_jit) admitted holds its AutotuneDispatcher in its dict
 * under `_fastlaunch_run`: the call goes there (the run() form: grid= and warmup= among the
 * keywords). Every other instance, and every other way of reaching it, calls Triton's own
 * Autotuner.run, which the slot keeps. Above autotune.c: the dispatcher is called through its
 * vectorcall, or its dict form. */
#include "autotune_base.h"

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *stock; /* Triton's Autotuner.run (the function) */
  PyObject *key;   /* "_fastlaunch_run" */
} SlotObject;

/* The admitted instance's dispatcher (borrowed), or NULL (with an error set if reading it failed). */
static PyObject *dispatcher_of(SlotObject *slot, PyObject *obj) {
  PyObject **dictptr = _PyObject_GetDictPtr(obj);
  PyObject *d = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, slot->key) : NULL;
  return d && Py_TYPE(d) == slot->state->autotune_type ? d : NULL;
}

static PyObject *slot_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SlotObject *slot = (SlotObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs >= 1) {
    PyObject *d = dispatcher_of(slot, args[0]);
    if (d) {
      Py_INCREF(d);
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
  PyObject *d = dispatcher_of(b->slot, obj);
  if (d) {
    Py_INCREF(d);
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

static PyObject *slot_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"stock", NULL};
  PyObject *stock;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:TunerSlot", kwlist, &stock)) return NULL;
  if (!PyCallable_Check(stock)) return PyErr_Format(PyExc_TypeError, "TunerSlot(stock): stock is not callable");
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  SlotObject *self = (SlotObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = slot_vectorcall;
  self->state = st;
  self->stock = Py_NewRef(stock);
  self->key = PyUnicode_InternFromString("_fastlaunch_run");
  if (!self->key) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static int slot_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((SlotObject *)op)->stock);
  return 0;
}

static int slot_clear(PyObject *op) {
  Py_CLEAR(((SlotObject *)op)->stock);
  return 0;
}

static void slot_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  slot_clear(op);
  Py_CLEAR(((SlotObject *)op)->key);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyMemberDef slot_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(SlotObject, vectorcall), Py_READONLY, NULL},
    {"stock", Py_T_OBJECT_EX, offsetof(SlotObject, stock), Py_READONLY, "Triton's own Autotuner.run"},
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
    {Py_tp_doc, "TunerSlot(stock)\n--\n\nAutotuner.run while fastlaunch serves Triton's JIT: an admitted "
                "instance's dispatcher, or Triton's own run."},
    {0, NULL},
};

static PyType_Spec slot_spec = {
    .name = "fastlaunch._C.TunerSlot",
    .basicsize = sizeof(SlotObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = slot_slots,
};

int fl_ext_add_tuner_slot_type(PyObject *module, fl_ext_state *st) {
  st->tuner_bound_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &bound_spec, NULL);
  if (!st->tuner_bound_type) return -1;
  PyTypeObject *t = (PyTypeObject *)PyType_FromModuleAndSpec(module, &slot_spec, NULL);
  if (!t) return -1;
  int rc = PyModule_AddType(module, t);
  Py_DECREF(t);
  return rc;
}
