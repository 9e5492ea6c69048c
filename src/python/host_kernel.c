/* host_kernel.c: HostKernel, a C kernel function in a shared object, kept loaded while in use. */
#include "ext.h"

typedef struct {
  PyObject_HEAD
  fl_host_lib *lib;
  void *fn;
  PyObject *path;
  PyObject *symbol;
} HostKernelObject;

static PyObject *host_kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"path", "symbol", NULL};
  PyObject *path, *symbol;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&U:HostKernel", kwlist, PyUnicode_FSConverter, &path, &symbol))
    return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  HostKernelObject *self = NULL;
  fl_host_lib *lib = NULL;
  void *fn = NULL;
  fl_error err;
  const char *sym = PyUnicode_AsUTF8(symbol);
  if (!sym || !st) goto error;
  if (fl_host_lib_open(PyBytes_AS_STRING(path), &lib, &err) != FL_OK ||
      fl_host_lib_symbol(lib, sym, &fn, &err) != FL_OK) {
    fl_ext_raise_unavailable(st, &err);
    goto error;
  }
  self = (HostKernelObject *)type->tp_alloc(type, 0);
  if (!self) goto error;
  self->lib = lib;
  self->fn = fn;
  self->path = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path));
  self->symbol = Py_NewRef(symbol);
  Py_DECREF(path);
  if (!self->path) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
error:
  if (lib) fl_host_lib_release(lib);
  Py_DECREF(path);
  return NULL;
}

static void host_kernel_dealloc(PyObject *op) {
  HostKernelObject *self = (HostKernelObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->path);
  Py_CLEAR(self->symbol);
  if (self->lib) fl_host_lib_release(self->lib);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static int host_kernel_traverse(PyObject *op, visitproc visit, void *arg) {
  HostKernelObject *self = (HostKernelObject *)op;
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static PyObject *host_kernel_address(PyObject *op, void *closure) {
  HostKernelObject *self = (HostKernelObject *)op;
  (void)closure;
  return PyLong_FromVoidPtr(self->fn);
}

static PyObject *host_kernel_repr(PyObject *op) {
  HostKernelObject *self = (HostKernelObject *)op;
  return PyUnicode_FromFormat("<fastlaunch HostKernel %U in %U>", self->symbol, self->path);
}

/* Hands the kernel to a plan: the plan takes its own reference to the library. */
int fl_ext_host_kernel_take(PyObject *obj, PyTypeObject *type, void **fn, fl_host_lib **lib) {
  if (!PyObject_TypeCheck(obj, type)) return 0;
  HostKernelObject *self = (HostKernelObject *)obj;
  fl_host_lib_retain(self->lib);
  *fn = self->fn;
  *lib = self->lib;
  return 1;
}

static PyMemberDef host_kernel_members[] = {
    {"path", Py_T_OBJECT_EX, offsetof(HostKernelObject, path), Py_READONLY, "the shared object"},
    {"symbol", Py_T_OBJECT_EX, offsetof(HostKernelObject, symbol), Py_READONLY, "the kernel function's name"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef host_kernel_getset[] = {
    {"address", host_kernel_address, NULL, "the function's address", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot host_kernel_slots[] = {
    {Py_tp_new, host_kernel_new},
    {Py_tp_dealloc, host_kernel_dealloc},
    {Py_tp_traverse, host_kernel_traverse},
    {Py_tp_repr, host_kernel_repr},
    {Py_tp_members, host_kernel_members},
    {Py_tp_getset, host_kernel_getset},
    {Py_tp_doc, "HostKernel(path, symbol)\n--\n\nA host-backend kernel `void f(const void *args, const "
                "fl_host_program *p)` loaded from a shared object."},
    {0, NULL},
};

static PyType_Spec host_kernel_spec = {
    .name = "fastlaunch._C.HostKernel",
    .basicsize = sizeof(HostKernelObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = host_kernel_slots,
};

int fl_ext_add_host_kernel_type(PyObject *module, fl_ext_state *st) {
  st->host_kernel_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &host_kernel_spec, NULL);
  if (!st->host_kernel_type) return -1;
  return PyModule_AddType(module, st->host_kernel_type);
}
