/* tuner_slot.c: TunerSlot, what `Autotuner.run` is while fastlaunch serves Triton's JIT, so that an
 * Autotuner subclass that overrides `run` and calls `super().run(*args, **kwargs)` (fla's
 * CachedAutotuner, and the same pattern elsewhere) reaches fastlaunch's dispatcher from its own
 * Python, without another Python frame.
 *
 * A method descriptor on the class: `super().run(...)` calls it with the instance first. An
 * instance the policy (fastlaunch.triton_jit) admitted holds its AutotuneDispatcher in its dict
 * under `_fastlaunch_run`: the call goes there (the run() form: grid= and warmup= among the
 * keywords). Every other instance, and every other way of reaching it, calls Triton's own
 * Autotuner.run, which the slot keeps. Depends on the C API and ext.h only: the dispatcher is
 * called through its vectorcall. */
#include "ext.h"

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *stock; /* Triton's Autotuner.run (the function) */
  PyObject *key;   /* "_fastlaunch_run" */
} SlotObject;

static PyObject *slot_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SlotObject *slot = (SlotObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs >= 1) {
    PyObject **dictptr = _PyObject_GetDictPtr(args[0]);
    PyObject *d = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, slot->key) : NULL; /* borrowed */
    if (d && Py_TYPE(d) == slot->state->autotune_type) {
      Py_INCREF(d);
      PyObject *r = PyObject_Vectorcall(d, args + 1, nargs - 1, kwnames);
      Py_DECREF(d);
      return r;
    }
    if (!d && PyErr_Occurred()) return NULL;
  }
  return PyObject_Vectorcall(slot->stock, args, nargsf, kwnames);
}

/* autotuner.run (3.10, 3.11 and plain attribute access): a bound method over the slot. */
static PyObject *slot_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
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
  PyTypeObject *t = (PyTypeObject *)PyType_FromModuleAndSpec(module, &slot_spec, NULL);
  (void)st;
  if (!t) return -1;
  int rc = PyModule_AddType(module, t);
  Py_DECREF(t);
  return rc;
}
