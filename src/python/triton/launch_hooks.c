/* launch_hooks.c: Triton's launch hooks (triton.knobs.runtime.launch_enter_hook and
 * launch_exit_hook) called around a plan's launch as Triton's runner and launcher call them: the
 * kernel's own launch_metadata(grid, stream, *args), both hooks read, enter(metadata), the launch,
 * then exit(metadata). An error after enter leaves exit uncalled, as Triton's launcher does; a call
 * the plan refuses after enter goes to the kernel's launcher told enter was called (its enter None).
 * Used by the JIT dispatcher (jit.c) and a compiled kernel's call (compiled.c); only ever on a call
 * with hooks set, never on the steady-state path. */
#include "jit_base.h"

/* launch_knobs(knobs): where the hooks are read (triton.knobs.runtime: the policy gives the new object
 * when `triton.knobs.runtime` is replaced, which its watch sees before any hooked call), None to read
 * none. */
PyObject *fl_ext_set_launch_knobs(PyObject *module, PyObject *knobs) {
  fl_ext_state *st = PyModule_GetState(module);
  int rc;
  Py_BEGIN_CRITICAL_SECTION(module);
  rc = fl_ext_state_swap(st, &st->launch_knobs, knobs == Py_None ? NULL : knobs);
  Py_END_CRITICAL_SECTION();
  if (rc < 0) return NULL;
  Py_RETURN_NONE;
}

void fl_ext_hooks_release(fl_ext_hooks *h) {
  Py_CLEAR(h->md);
  Py_CLEAR(h->exit_hook);
  Py_CLEAR(h->stream);
}

static int call_hook(PyObject *hook, PyObject *md) {
  if (hook == Py_None) return 0;
  PyObject *r = PyObject_CallOneArg(hook, md);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

/* The metadata made (kernel.launch_metadata(grid, stream, *args)) and the hooks read after it, as
 * Triton's run does: h filled, *enter a new reference. 0, or -1 with an exception (h released). */
static int hooks_read(fl_ext_state *st, PyObject *kernel, PyObject *grid, uint64_t stream, PyObject *stream_obj,
                      PyObject *const *args, size_t nargs, fl_ext_hooks *h, PyObject **enter) {
  h->md = h->exit_hook = NULL;
  *enter = NULL;
  h->stream = stream_obj ? Py_NewRef(stream_obj) : PyLong_FromUnsignedLongLong(stream);
  PyObject *holder = FL_EXT_STATE_OBJ(st->launch_knobs); /* read once: another thread may set it */
  if (!h->stream || nargs > FL_EXT_HOOK_MAX_ARGS || !holder) {
    if (h->stream) /* the callers hand such a call to Triton first */
      PyErr_SetString(PyExc_RuntimeError, "fastlaunch: launch hooks: more arguments than a hooked call takes, or no knobs");
    fl_ext_hooks_release(h);
    return -1;
  }
  /* A spare slot before the kernel: the callee may use it (PY_VECTORCALL_ARGUMENTS_OFFSET). */
  PyObject *margs[4 + FL_EXT_HOOK_MAX_ARGS] = {NULL, kernel, grid, h->stream};
  for (size_t i = 0; i < nargs; i++) margs[4 + i] = args[i];
  PyObject *knobs = Py_NewRef(holder); /* held across the metadata's Python code */
  h->md = PyObject_VectorcallMethod(st->str_launch_metadata, margs + 1, (3 + nargs) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                    NULL);
  if (h->md) *enter = PyObject_GetAttr(knobs, st->str_launch_enter_hook); /* then the hooks, as Triton's run reads them */
  if (*enter) h->exit_hook = PyObject_GetAttr(knobs, st->str_launch_exit_hook);
  Py_DECREF(knobs);
  if (h->exit_hook) return 0;
  Py_CLEAR(*enter);
  fl_ext_hooks_release(h);
  return -1;
}

int fl_ext_hooks_enter(fl_ext_state *st, PyObject *kernel, PyObject *grid, uint64_t stream, PyObject *stream_obj,
                       PyObject *const *args, size_t nargs, fl_ext_hooks *h) {
  PyObject *enter;
  if (hooks_read(st, kernel, grid, stream, stream_obj, args, nargs, h, &enter) < 0) return -1;
  int rc = call_hook(enter, h->md);
  Py_DECREF(enter);
  if (rc < 0) fl_ext_hooks_release(h);
  return rc;
}

int fl_ext_hooks_given(const fl_ext_given_hooks *given, PyObject *stream_obj, fl_ext_hooks *h) {
  h->md = Py_NewRef(given->md);
  h->exit_hook = Py_NewRef(given->exit);
  h->stream = Py_NewRef(stream_obj);
  PyObject *enter = Py_NewRef(given->enter);
  int rc = call_hook(enter, h->md);
  Py_DECREF(enter);
  if (rc < 0) fl_ext_hooks_release(h);
  return rc;
}

int fl_ext_hooks_exit(fl_ext_hooks *h) {
  int rc = call_hook(h->exit_hook, h->md);
  fl_ext_hooks_release(h);
  return rc;
}

/* kernel.run(g0, g1, g2, stream, function, packed_metadata, metadata, enter, exit, *args): the
 * kernel's launcher (Triton's, fastlaunch's depth counted), h released. */
static PyObject *launcher_call(fl_ext_hooks *h, PyObject *enter, PyObject *kernel, const int64_t g[3],
                               PyObject *const *args, size_t nargs) {
  PyObject *res = NULL, *run = PyObject_GetAttrString(kernel, "run");
  PyObject *fn = run ? PyObject_GetAttrString(kernel, "function") : NULL;
  PyObject *packed = fn ? PyObject_GetAttrString(kernel, "packed_metadata") : NULL;
  PyObject *gx = packed ? PyLong_FromLongLong(g[0]) : NULL, *gy = gx ? PyLong_FromLongLong(g[1]) : NULL;
  PyObject *gz = gy ? PyLong_FromLongLong(g[2]) : NULL;
  if (gz) {
    PyObject *full[9 + FL_EXT_HOOK_MAX_ARGS] = {gx, gy, gz, h->stream, fn, packed, h->md, enter, h->exit_hook};
    for (size_t i = 0; i < nargs && i < FL_EXT_HOOK_MAX_ARGS; i++) full[9 + i] = args[i];
    fl_ext_triton_depth++;
    res = PyObject_Vectorcall(run, full, 9 + (nargs < FL_EXT_HOOK_MAX_ARGS ? nargs : FL_EXT_HOOK_MAX_ARGS), NULL);
    fl_ext_triton_depth--;
  }
  Py_XDECREF(gz);
  Py_XDECREF(gy);
  Py_XDECREF(gx);
  Py_XDECREF(packed);
  Py_XDECREF(fn);
  Py_XDECREF(run);
  fl_ext_hooks_release(h);
  return res;
}

PyObject *fl_ext_hooks_hand_back(fl_ext_hooks *h, PyObject *kernel, const int64_t g[3], PyObject *const *args,
                                 size_t nargs) {
  return launcher_call(h, Py_None, kernel, g, args, nargs); /* enter ran */
}

PyObject *fl_ext_launcher_tail(fl_ext_state *st, PyObject *kernel, PyObject *grid, const int64_t g[3], uint64_t stream,
                               PyObject *const *args, size_t nargs) {
  fl_ext_hooks h;
  PyObject *enter;
  if (hooks_read(st, kernel, grid, stream, NULL, args, nargs, &h, &enter) < 0) return NULL;
  PyObject *res = launcher_call(&h, enter, kernel, g, args, nargs);
  Py_DECREF(enter);
  return res;
}
