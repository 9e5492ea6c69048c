/* jit_table.c: the JIT dispatcher's data below the call: a bound variant's entry, the table of
 * entries by key, revalidation (the policy says what holds after a watched dict changed: the stock
 * reason, the device and stream sources, the hook lists) and torch's C shim found once. Depends on
 * jit_key.c (the memo), watch.c and the core's grid programs; the call (jit.c) and the types above
 * it depend on this file, never the other way. */
#include "jit_base.h"

#include <dlfcn.h>

/* torch's C shim (AOTI), found once torch is loaded: the current device and CUDA stream without a
 * Python call. */
typedef int32_t (*aoti_device_fn)(int32_t *);
typedef int32_t (*aoti_stream_fn)(int32_t, void **);
static aoti_device_fn aoti_device;
static aoti_stream_fn aoti_stream;

static void entry_grid_free(jit_entry *e);

void fl_jit_entry_free(jit_entry *e) {
  if (!e) return;
  Py_XDECREF(e->plan);
  Py_XDECREF(e->kernel);
  Py_XDECREF(e->refusal);
  Py_XDECREF(e->keep);
  Py_XDECREF(e->grid_tried);
  Py_XDECREF(e->scratch_var);
  fl_ext_scratch_ints_clear(&e->scratch_ints);
  entry_grid_free(e);
  PyMem_Free(e->abi_param);
  PyMem_Free(e->abi_member);
  PyMem_Free(e->param_abi);
  PyMem_Free(e->key);
  PyMem_Free(e);
}

/* Clears the table. While a call of this dispatcher is in flight (it may hold an entry across Python
 * code: a stream function, a grid callable, a __del__), the entries go to the graveyard instead,
 * freed when the outermost call returns: an entry a call holds is never freed under it, and the
 * generation tells the call that its entry is no longer the table's. */
void fl_jit_table_clear(JitObject *self) {
  jit_entry **slots = self->slots;
  size_t cap = self->cap;
  fl_jit_memo_clear(self);
  self->gen++;
  self->slots = NULL;
  self->cap = self->count = 0;
  for (size_t i = 0; i < cap; i++) {
    jit_entry *e = slots[i];
    if (!e) continue;
    if (self->depth) {
      e->next = self->graveyard;
      self->graveyard = e;
    } else {
      fl_jit_entry_free(e); /* its releases may run code that calls this dispatcher: the table is empty */
    }
  }
  PyMem_Free(slots);
}

void fl_jit_bury(JitObject *self) {
  while (self->graveyard) { /* a release may run code that calls in and clears again: taken one by one */
    jit_entry *e = self->graveyard;
    self->graveyard = e->next;
    fl_jit_entry_free(e);
  }
}

/* A grid program from (code, globals, (e0, e1, e2), sources). 0, or -1 with an exception. */
int fl_jit_entry_grid(fl_ext_state *st, jit_entry *e, PyObject *spec, Py_ssize_t nparams) {
  PyObject *code, *globals, *exprs, *sources;
  /* Into locals first: the entry holds only what it took a reference to (it is freed on failure). */
  if (!PyArg_ParseTuple(spec, "OO!O!O!:grid", &code, &PyDict_Type, &globals, &PyTuple_Type, &exprs, &PyTuple_Type,
                        &sources))
    return -1;
  e->grid_code = Py_NewRef(code);
  e->grid_globals = Py_NewRef(globals);
  Py_ssize_t ns = PyTuple_GET_SIZE(sources);
  if (PyTuple_GET_SIZE(exprs) != 3 || ns > JIT_MAX_GRID_VARS)
    return PyErr_Format(PyExc_ValueError, "grid: three expressions over at most %d variables", JIT_MAX_GRID_VARS), -1;
  e->grid_src = PyMem_Calloc((size_t)(ns ? ns : 1), sizeof *e->grid_src);
  if (!e->grid_src) return PyErr_NoMemory(), -1;
  e->ngrid_src = (size_t)ns;
  for (Py_ssize_t i = 0; i < ns; i++) {
    const char *kind;
    PyObject *what;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sources, i), "sO:grid source", &kind, &what)) return -1;
    grid_source *s = &e->grid_src[i];
    if (!strcmp(kind, "global") && PyUnicode_Check(what)) {
      s->kind = SRC_GLOBAL;
      s->name = Py_NewRef(what);
      e->grid_global = true;
      continue;
    }
    s->index = PyLong_Check(what) ? PyLong_AsSsize_t(what) : -1;
    s->kind = !strcmp(kind, "arg") ? SRC_ARG : !strcmp(kind, "cell") ? SRC_CELL : -1;
    if (s->kind < 0 || s->index < 0 || (s->kind == SRC_ARG && s->index >= nparams)) {
      PyErr_Clear();
      return PyErr_Format(PyExc_ValueError, "grid source %zd: ('arg', parameter), ('cell', i) or ('global', name)", i), -1;
    }
  }
  for (int d = 0; d < 3; d++) {
    PyObject *x = PyTuple_GET_ITEM(exprs, d);
    const char *text = PyUnicode_Check(x) ? PyUnicode_AsUTF8(x) : NULL;
    fl_error err;
    if (!text) return PyErr_Format(PyExc_TypeError, "grid expression %d: a str", d), -1;
    if (fl_grid_program_compile(text, NULL, 0, &e->grid_prog[d], &err) != FL_OK) {
      fl_ext_raise_reason_unavailable(st, "%s", err.reason);
      return -1;
    }
    if (fl_grid_program_nvars(e->grid_prog[d]) > (size_t)ns)
      return PyErr_Format(PyExc_ValueError, "grid expression %d reads a variable past its sources", d), -1;
    if (fl_grid_program_is_constant(e->grid_prog[d]) &&
        fl_grid_program_eval(e->grid_prog[d], NULL, 0, &e->grid_const[d], &err) == FL_OK) {
      fl_grid_program_free(e->grid_prog[d]);
      e->grid_prog[d] = NULL;
    }
  }
  e->grid_shaped = ns == 1 && !e->grid_prog[1] && !e->grid_prog[2] &&
                   fl__grid_program_shape(e->grid_prog[0], &e->grid_shape) && e->grid_shape.var == 0;
  return 0;
}

/* The grid fields of an entry, released (the entry keeps the rest). */
static void entry_grid_free(jit_entry *e) {
  Py_CLEAR(e->grid_code);
  Py_CLEAR(e->grid_globals);
  for (int d = 0; d < 3; d++) fl_grid_program_free(e->grid_prog[d]), e->grid_prog[d] = NULL;
  for (size_t i = 0; i < e->ngrid_src; i++) Py_XDECREF(e->grid_src[i].name);
  PyMem_Free(e->grid_src);
  e->grid_src = NULL;
  e->ngrid_src = 0;
  e->grid_shaped = e->grid_global = false;
}

/* A grid program learned after the entry was bound (its first call had no callable grid, or another
 * one): built aside, then moved into the entry whole. 0, or -1 with an exception (the entry as it was). */
int fl_jit_entry_learn_grid(fl_ext_state *st, jit_entry *e, PyObject *spec, Py_ssize_t nparams) {
  jit_entry tmp;
  memset(&tmp, 0, sizeof tmp);
  if (fl_jit_entry_grid(st, &tmp, spec, nparams) < 0) {
    entry_grid_free(&tmp);
    return -1;
  }
  entry_grid_free(e);
  e->grid_code = tmp.grid_code, e->grid_globals = tmp.grid_globals;
  memcpy(e->grid_prog, tmp.grid_prog, sizeof e->grid_prog);
  memcpy(e->grid_const, tmp.grid_const, sizeof e->grid_const);
  e->grid_shaped = tmp.grid_shaped, e->grid_global = tmp.grid_global, e->grid_shape = tmp.grid_shape;
  e->ngrid_src = tmp.ngrid_src, e->grid_src = tmp.grid_src;
  return 0;
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
 * Returns the capsule's pointer (NULL for the other two, with *fn a new reference for a callable);
 * -1 in *bad with an exception. */
static void *source_of(PyObject **fn, PyObject *value, const char *capsule, int *bad) {
  *fn = NULL;
  if (value == Py_None) return NULL;
  if (!PyCapsule_CheckExact(value)) {
    *fn = Py_NewRef(value);
    return NULL;
  }
  void *p = PyCapsule_GetPointer(value, capsule); /* the capsule lives in the policy's registry */
  if (!p) *bad = -1;
  return p;
}

/* policy.revalidate() -> (stock reason or None, device_fn, stream_fn, hook lists (None: a plain
 * callable hook is set), watched dicts).
 * The new state is taken whole (strong references), then stored field by field with no release in
 * between, and the old references are released last: a __del__ they run, which may call this
 * dispatcher again, sees either the old state or the new one, never half of each. */
FL_EXT_COLD int fl_jit_revalidate(JitObject *self) {
  PyObject *r = PyObject_CallMethod(self->policy, "revalidate", NULL);
  if (!r) return -1;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) < 5 || PyTuple_GET_SIZE(r) > 7 ||
      (!PyTuple_Check(PyTuple_GET_ITEM(r, 3)) && PyTuple_GET_ITEM(r, 3) != Py_None) || !PyTuple_Check(PyTuple_GET_ITEM(r, 4)) ||
      (PyTuple_GET_SIZE(r) == 7 && PyTuple_GET_ITEM(r, 6) != Py_None && !PyCallable_Check(PyTuple_GET_ITEM(r, 6)))) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_TypeError,
                    "revalidate(): expected (reason, device_fn, stream_fn, hook_lists, watched[, keyed[, check or None]])");
    return -1;
  }
  PyObject *reason = PyTuple_GET_ITEM(r, 0), *hooks = PyTuple_GET_ITEM(r, 3);
  int plain = hooks == Py_None; /* a hook that is a plain callable: set while it is */
  hooks = plain ? PyTuple_New(0) : Py_NewRef(hooks);
  int bad = !hooks;
  for (Py_ssize_t i = 0; !bad && i < PyTuple_GET_SIZE(hooks); i++)
    if (!PyList_Check(PyTuple_GET_ITEM(hooks, i))) {
      PyErr_SetString(PyExc_TypeError, "revalidate(): hook_lists: a tuple of lists");
      bad = 1;
    }
  PyObject *dev_fn = NULL, *stream_fn = NULL;
  void *cdev = bad ? NULL : source_of(&dev_fn, PyTuple_GET_ITEM(r, 1), "fastlaunch.current_device", &bad);
  void *cstream = bad ? NULL : source_of(&stream_fn, PyTuple_GET_ITEM(r, 2), "fastlaunch.current_stream", &bad);
  if (bad) {
    Py_XDECREF(dev_fn);
    Py_XDECREF(stream_fn);
    Py_XDECREF(hooks);
    Py_DECREF(r);
    return -1;
  }
  PyObject *check = PyTuple_GET_SIZE(r) == 7 ? PyTuple_GET_ITEM(r, 6) : Py_None;
  PyObject *old[5] = {self->stock_reason, self->device_fn, self->stream_fn, self->hook_lists, self->check};
  self->stock_reason = reason == Py_None ? NULL : Py_NewRef(reason);
  self->check = check == Py_None ? NULL : Py_NewRef(check);
  self->device_fn = dev_fn;
  self->stream_fn = stream_fn;
  self->c_device = aoti_device;
  self->c_stream = aoti_stream;
  if (cdev) *(void **)&self->c_device = cdev;
  if (cstream) *(void **)&self->c_stream = cstream;
  self->hook_lists = hooks;
  self->hooks_plain = plain;
  int rc = fl_ext_watch_set(&self->watch, self->state, PyTuple_GET_ITEM(r, 4));
  if (rc == 0 && PyTuple_GET_SIZE(r) >= 6) rc = fl_ext_watch_set_keyed(&self->watch, self->state, PyTuple_GET_ITEM(r, 5));
  for (int i = 0; i < 5; i++) Py_XDECREF(old[i]);
  Py_DECREF(r);
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
    {"watch_detector", fl_ext_watch_detector, METH_NOARGS,
     "watch_detector($module, /)\n--\n\n-> (detector, why): how the JIT sees a watched dict change (\"watcher\", "
     "\"version_tags\" or None: it cannot, and is off) and why the dict watcher is not in use (None when it is)"},
    {"jit_torch_shim", jit_find_torch_shim, METH_NOARGS,
     "jit_torch_shim($module, /)\n--\n\n-> bool: torch's C shim for the current device and CUDA stream was found"},
    {NULL, NULL, 0, NULL},
};
