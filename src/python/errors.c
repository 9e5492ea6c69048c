/* errors.c: the module state of a type, the two error types, and raising them from an fl_error. */
#include "ext.h"

#include <stdarg.h>

fl_ext_state *fl_ext_state_from_type(PyTypeObject *type) {
  /* The types are made with PyType_FromModuleAndSpec and cannot be subclassed, so the type's own
   * module is the extension. */
  return (fl_ext_state *)PyType_GetModuleState(type);
}

/* ---- errors ---- */

static int set_reason_attrs(PyObject *exc, PyObject *reason, const char *code, long index, const char *name);

/* __init__(self, reason, /, *, backend_submitted=False, stable=...) for both error types (their
 * tp_init); the default of `stable` comes from the class attribute _default_stable. */
static int error_init(PyObject *self, PyObject *args, PyObject *kwds) {
  PyObject *reason, *submitted = Py_False, *stable = NULL;
  static char *kwlist[] = {"", "backend_submitted", "stable", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:__init__", kwlist, &reason, &submitted, &stable)) return -1;
  PyObject *base_args = PyTuple_Pack(1, reason);
  if (!base_args) return -1;
  int r = ((PyTypeObject *)PyExc_RuntimeError)->tp_init(self, base_args, NULL);
  Py_DECREF(base_args);
  if (r < 0) return -1;
  if (!stable) {
    stable = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_default_stable");
    if (!stable) return -1;
  } else {
    Py_INCREF(stable);
  }
  int is_stable = PyObject_IsTrue(stable), is_submitted = PyObject_IsTrue(submitted);
  Py_DECREF(stable);
  if (is_stable < 0 || is_submitted < 0) return -1;
  /* Raised from Python with a code: code is its first part; index and name unknown. */
  const char *text = PyUnicode_Check(reason) ? PyUnicode_AsUTF8(reason) : NULL;
  if (!text) PyErr_Clear();
  char code[48] = "";
  if (text) snprintf(code, sizeof code, "%.*s", (int)strcspn(text, ":"), text);
  if (set_reason_attrs(self, reason, code, -1, NULL) < 0 ||
      PyObject_SetAttrString(self, "backend_submitted", is_submitted ? Py_True : Py_False) < 0 ||
      PyObject_SetAttrString(self, "stable", is_stable ? Py_True : Py_False) < 0)
    return -1;
  return 0;
}

/* Instances of a heap type hold a reference to it: visited and released here, the rest is
 * RuntimeError's. */
static int error_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self));
  return ((PyTypeObject *)PyExc_RuntimeError)->tp_traverse(self, visit, arg);
}

static void error_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  ((PyTypeObject *)PyExc_RuntimeError)->tp_dealloc(self);
  Py_DECREF(tp);
}

static PyObject *make_error_type(PyObject *module, PyType_Spec *spec, bool default_stable) {
  PyObject *type = PyType_FromModuleAndSpec(module, spec, PyExc_RuntimeError);
  if (type && PyObject_SetAttrString(type, "_default_stable", default_stable ? Py_True : Py_False) < 0) Py_CLEAR(type);
  return type;
}

#define ERROR_SLOTS(doc)                                                                                       \
  {                                                                                                            \
    {Py_tp_init, error_init}, {Py_tp_traverse, error_traverse}, {Py_tp_dealloc, error_dealloc},              \
        {Py_tp_doc, (void *)(doc)}, {0, NULL},                                                                 \
  }

static PyType_Slot error_slots[] = ERROR_SLOTS(
    "FastLaunchError(reason, /, *, backend_submitted=False, stable=None)\n--\n\n"
    "A launch through fastlaunch failed.\n\nreason: a short stable code (code: its first part; index and name: "
    "the argument it is about, or None); backend_submitted: the launch may have been submitted (never retry it); "
    "stable: the same launcher would fail the same way again.");
static PyType_Slot unavailable_slots[] = ERROR_SLOTS(
    "FastLaunchPlanUnavailable(reason, /, *, backend_submitted=False, stable=None)\n--\n\n"
    "No plan can be built for this launcher (reason says why); stable refusals are negative-cached.");
static PyType_Spec error_spec = {"fastlaunch._C.FastLaunchError", sizeof(PyBaseExceptionObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, error_slots};
static PyType_Spec unavailable_spec = {"fastlaunch._C.FastLaunchPlanUnavailable", sizeof(PyBaseExceptionObject), 0,
                                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                       unavailable_slots};

int fl_ext_add_errors(PyObject *module, fl_ext_state *st) {
  st->error_type = make_error_type(module, &error_spec, false);
  if (!st->error_type) return -1;
  st->unavailable_type = make_error_type(module, &unavailable_spec, true);
  if (!st->unavailable_type) return -1;
  if (PyModule_AddObjectRef(module, "FastLaunchError", st->error_type) < 0) return -1;
  if (PyModule_AddObjectRef(module, "FastLaunchPlanUnavailable", st->unavailable_type) < 0) return -1;
  return 0;
}

/* Sets reason (the stable code), code, index and name on an error. */
static int set_reason_attrs(PyObject *exc, PyObject *reason, const char *code, long index, const char *name) {
  PyObject *code_obj = PyUnicode_DecodeUTF8(code, (Py_ssize_t)strlen(code), "replace");
  PyObject *index_obj = index >= 0 ? PyLong_FromLong(index) : Py_NewRef(Py_None);
  PyObject *name_obj = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
  int r = code_obj && index_obj && name_obj && PyObject_SetAttrString(exc, "reason", reason) == 0 &&
                  PyObject_SetAttrString(exc, "code", code_obj) == 0 &&
                  PyObject_SetAttrString(exc, "index", index_obj) == 0 &&
                  PyObject_SetAttrString(exc, "name", name_obj) == 0
              ? 0
              : -1;
  Py_XDECREF(code_obj);
  Py_XDECREF(index_obj);
  Py_XDECREF(name_obj);
  return r;
}

static PyObject *raise_typed(PyObject *type, const char *reason, bool submitted, bool stable, PyObject *names) {
  /* Reasons are cut at a byte count and may end inside a character: decode leniently, so the
   * error raised is always this one (a UnicodeDecodeError would lose backend_submitted). */
  fl_ext_described d;
  fl_ext_describe(reason, names, &d);
  PyObject *text = PyUnicode_DecodeUTF8(d.message, (Py_ssize_t)strlen(d.message), "replace");
  PyObject *code = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
  PyObject *exc = text && code ? PyObject_CallOneArg(type, text) : NULL;
  Py_XDECREF(text);
  if (!exc || set_reason_attrs(exc, code, d.code, d.index, d.name) < 0 ||
      PyObject_SetAttrString(exc, "backend_submitted", submitted ? Py_True : Py_False) < 0 ||
      PyObject_SetAttrString(exc, "stable", stable ? Py_True : Py_False) < 0) {
    Py_XDECREF(code);
    Py_XDECREF(exc);
    return NULL;
  }
  Py_DECREF(code);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *fl_ext_raise_as(PyObject *type, const char *reason) {
  fl_ext_described d;
  fl_ext_describe(reason, NULL, &d);
  PyObject *text = PyUnicode_DecodeUTF8(d.message, (Py_ssize_t)strlen(d.message), "replace");
  PyObject *code = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
  PyObject *exc = text && code ? PyObject_CallOneArg(type, text) : NULL;
  if (exc && set_reason_attrs(exc, code, d.code, d.index, d.name) == 0) PyErr_SetObject(type, exc);
  Py_XDECREF(exc);
  Py_XDECREF(text);
  Py_XDECREF(code);
  return NULL;
}

PyObject *fl_ext_raise_named(fl_ext_state *st, const fl_error *err, PyObject *names) {
  return raise_typed(st->error_type, err->reason, err->backend_submitted, err->stable, names);
}

PyObject *fl_ext_raise(fl_ext_state *st, const fl_error *err) {
  return raise_typed(st->error_type, err->reason, err->backend_submitted, err->stable, NULL);
}

PyObject *fl_ext_raise_unavailable(fl_ext_state *st, const fl_error *err) {
  return raise_typed(st->unavailable_type, err->reason, false, err->stable, NULL);
}

/* Raises `type` with a reason formatted here (never submitted). */
static PyObject *raise_formatted(PyObject *type, bool stable, const char *fmt, va_list ap) {
  char reason[FL_REASON_MAX];
  vsnprintf(reason, sizeof reason, fmt, ap);
  return raise_typed(type, reason, false, stable, NULL);
}

PyObject *fl_ext_raise_reason(fl_ext_state *st, bool stable, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *r = raise_formatted(st->error_type, stable, fmt, ap);
  va_end(ap);
  return r;
}

PyObject *fl_ext_raise_reason_unavailable(fl_ext_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *r = raise_formatted(st->unavailable_type, true, fmt, ap);
  va_end(ap);
  return r;
}
