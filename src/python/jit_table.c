/* jit_table.c: the JIT dispatcher's data below the call: a bound variant's entry, the table of
 * entries by key, revalidation (the policy says what holds after a watched dict changed: the stock
 * reason, the device and stream sources, the hook lists) and torch's C shim found once. Depends on
 * jit_key.c (the memo), watch.c and the core's grid programs; the call (jit.c) and the types above
 * it depend on this file, never the other way. */
#include "jit.h"

#include <dlfcn.h>

/* torch's C shim (AOTI), found once torch is loaded: the current device and CUDA stream without a
 * Python call. */
typedef int32_t (*aoti_device_fn)(int32_t *);
typedef int32_t (*aoti_stream_fn)(int32_t, void **);
static aoti_device_fn aoti_device;
static aoti_stream_fn aoti_stream;

void fl_jit_entry_free(jit_entry *e) {
  if (!e) return;
  Py_XDECREF(e->plan);
  Py_XDECREF(e->kernel);
  Py_XDECREF(e->refusal);
  Py_XDECREF(e->keep);
  Py_XDECREF(e->grid_code);
  Py_XDECREF(e->grid_globals);
  for (int d = 0; d < 3; d++) fl_grid_program_free(e->grid_prog[d]);
  for (size_t i = 0; i < e->ngrid_src; i++) Py_XDECREF(e->grid_src[i].name);
  PyMem_Free(e->grid_src);
  PyMem_Free(e->abi_param);
  PyMem_Free(e->abi_member);
  PyMem_Free(e->param_abi);
  PyMem_Free(e->key);
  PyMem_Free(e);
}

void fl_jit_table_clear(JitObject *self) {
  jit_entry **slots = self->slots;
  size_t cap = self->cap;
  fl_jit_memo_clear(self);
  self->gen++;
  self->slots = NULL;
  self->cap = self->count = 0;
  for (size_t i = 0; i < cap; i++) fl_jit_entry_free(slots[i]);
  PyMem_Free(slots);
}

int fl_jit_table_put(JitObject *self, jit_entry *e) {
  if ((self->count + 1) * 2 > self->cap) {
    size_t cap = self->cap ? self->cap * 2 : 16;
    jit_entry **slots = PyMem_Calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < self->cap; i++) {
      jit_entry *old = self->slots[i];
      if (!old) continue;
      size_t j = old->hash & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = old;
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->cap = cap;
  }
  size_t j = e->hash & (self->cap - 1);
  while (self->slots[j]) j = (j + 1) & (self->cap - 1);
  self->slots[j] = e;
  self->count++;
  return 0;
}

/* ---- revalidation: when a watched dict changed, the policy says what holds now ---- */
/* A source of the current device or stream: None for torch's C shim, a capsule holding a C function
 * of the shim's signature (registered by a driver that has one), or the driver's Python callable.
 * Returns the capsule's pointer (NULL for the other two, with *slot set for a callable); -1 in *bad. */
static void *set_source(PyObject **slot, PyObject *value, const char *capsule, int *bad) {
  Py_CLEAR(*slot);
  if (value == Py_None) return NULL;
  if (!PyCapsule_CheckExact(value)) {
    *slot = Py_NewRef(value);
    return NULL;
  }
  void *p = PyCapsule_GetPointer(value, capsule);
  if (!p) *bad = -1;
  return p;
}

/* policy.revalidate() -> (stock reason or None, device_fn, stream_fn, hook lists, watched dicts). */
FL_EXT_COLD int fl_jit_revalidate(JitObject *self) {
  PyObject *r = PyObject_CallMethod(self->policy, "revalidate", NULL);
  if (!r) return -1;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(r, 3)) ||
      !PyTuple_Check(PyTuple_GET_ITEM(r, 4))) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_TypeError, "revalidate(): expected (reason, device_fn, stream_fn, hook_lists, watched)");
    return -1;
  }
  PyObject *reason = PyTuple_GET_ITEM(r, 0);
  Py_XSETREF(self->stock_reason, reason == Py_None ? NULL : Py_NewRef(reason));
  int bad = 0;
  void *cdev = set_source(&self->device_fn, PyTuple_GET_ITEM(r, 1), "fastlaunch.current_device", &bad);
  void *cstream = set_source(&self->stream_fn, PyTuple_GET_ITEM(r, 2), "fastlaunch.current_stream", &bad);
  self->c_device = aoti_device;
  self->c_stream = aoti_stream;
  if (cdev) *(void **)&self->c_device = cdev;
  if (cstream) *(void **)&self->c_stream = cstream;
  Py_SETREF(self->hook_lists, Py_NewRef(PyTuple_GET_ITEM(r, 3)));
  PyObject *watched = Py_NewRef(PyTuple_GET_ITEM(r, 4));
  Py_DECREF(r);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->hook_lists) && !bad; i++)
    if (!PyList_Check(PyTuple_GET_ITEM(self->hook_lists, i))) bad = -1, PyErr_SetString(PyExc_TypeError, "hook lists");
  int rc = bad ? -1 : fl_ext_watch_set(&self->watch, self->state, watched);
  Py_DECREF(watched);
  return rc;
}


/* torch's C shim, looked for in the libraries torch has loaded. True when both functions exist. */
static PyObject *jit_find_torch_shim(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  if (!aoti_device || !aoti_stream) {
    void *cpu = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
    void *cuda = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (cpu) *(void **)&aoti_device = dlsym(cpu, "aoti_torch_get_current_device_index");
    if (cuda) *(void **)&aoti_stream = dlsym(cuda, "aoti_torch_get_current_cuda_stream");
    /* The handles stay open: the functions are used for the life of the process. */
  }
  return PyBool_FromLong(aoti_device && aoti_stream);
}

PyMethodDef fl_ext_jit_methods[] = {
    {"jit_torch_shim", jit_find_torch_shim, METH_NOARGS,
     "jit_torch_shim($module, /)\n--\n\n-> bool: torch's C shim for the current device and CUDA stream was found"},
    {NULL, NULL, 0, NULL},
};
