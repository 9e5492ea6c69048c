/* jit_stock.c: the JIT dispatcher's cold side, below the call (jit.c): Triton's own run (a call
 * handed back, counted by reason, and a miss bound by the policy), and what a call needs once
 * Python code has run in it: the grid callable called with Triton's mapping, what it wrote there,
 * the grid Triton gets if the call goes there after all, and the settings read again. Depends on
 * jit_table.c (revalidation). */
#include "jit_base.h"

/* The mapping Triton passes a grid callable: every parameter by name. */
static PyObject *bound_args_dict(JitObject *self, PyObject *const *pv) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->param_names); i++)
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(self->param_names, i), pv[i]) < 0) {
      Py_DECREF(d);
      return NULL;
    }
  return d;
}

/* ---- Triton's own run ---- */

/* Calls stock_run(*args, **kwargs) adding grid= and warmup=False unless the call had them. */
static PyObject *call_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames,
                            int has_grid) {
  if (has_grid) {
    PyObject *run = Py_NewRef(self->stock_run);
    fl_ext_triton_enter();
    PyObject *r = PyObject_Vectorcall(run, args, nargs, kwnames);
    fl_ext_triton_leave();
    Py_DECREF(run);
    return r;
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject **stack = PyMem_Malloc((nargs + (size_t)nkw + 2) * sizeof(PyObject *));
  PyObject *names = PyTuple_New(nkw + 2);
  PyObject *result = NULL;
  if (!stack || !names) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < nargs + (size_t)nkw; i++) stack[i] = args[i];
  for (Py_ssize_t k = 0; k < nkw; k++) PyTuple_SET_ITEM(names, k, Py_NewRef(PyTuple_GET_ITEM(kwnames, k)));
  PyTuple_SET_ITEM(names, nkw, Py_NewRef(self->state->str_grid));
  PyTuple_SET_ITEM(names, nkw + 1, Py_NewRef(self->state->str_warmup));
  stack[nargs + (size_t)nkw] = grid;
  stack[nargs + (size_t)nkw + 1] = Py_False;
  PyObject *run = Py_NewRef(self->stock_run);
  fl_ext_triton_enter();
  result = PyObject_Vectorcall(run, stack, nargs, names);
  fl_ext_triton_leave();
  Py_DECREF(run);
done:
  PyMem_Free(stack);
  Py_XDECREF(names);
  return result;
}

/* Triton's run for a call whose pre-run hooks fastlaunch already called: the kernel's hook list is
 * emptied in place for the call (Triton reads it there) and given back after, with any hook added
 * meanwhile kept after the others. */
static FL_EXT_COLD PyObject *call_stock_hooks_ran(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                                  PyObject *kwnames, int has_grid) {
  PyObject *hooks = Py_NewRef(self->pre_run_hooks);
  PyObject *saved = PyList_GetSlice(hooks, 0, PyList_GET_SIZE(hooks));
  if (!saved || PyList_SetSlice(hooks, 0, PyList_GET_SIZE(hooks), NULL) < 0) {
    Py_XDECREF(saved);
    Py_DECREF(hooks);
    return NULL; /* nothing called: the list is as it was */
  }
  PyObject *r = call_stock(self, grid, args, nargs, kwnames, has_grid);
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (PyList_SetSlice(hooks, 0, 0, saved) < 0) PyErr_WriteUnraisable(hooks);
  PyErr_Restore(et, ev, tb);
  Py_DECREF(saved);
  Py_DECREF(hooks);
  return r;
}

FL_EXT_COLD PyObject *fl_jit_call_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                        PyObject *kwnames, int has_grid) {
  if (self->pre_ran && self->pre_ran == self->depth) return call_stock_hooks_ran(self, grid, args, nargs, kwnames, has_grid);
  return call_stock(self, grid, args, nargs, kwnames, has_grid);
}

/* The call's positional arguments as a new tuple, or NULL with an exception. */
static PyObject *args_tuple(PyObject *const *args, size_t nargs) {
  PyObject *pos = PyTuple_New((Py_ssize_t)nargs);
  for (size_t i = 0; pos && i < nargs; i++) PyTuple_SET_ITEM(pos, (Py_ssize_t)i, Py_NewRef(args[i]));
  return pos;
}

PyObject *fl_jit_kwargs_dict(PyObject *kwnames, PyObject *const *kwvals, Py_ssize_t nkw) {
  PyObject *kwargs = PyDict_New();
  for (Py_ssize_t k = 0; kwargs && k < nkw; k++)
    if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, k), kwvals[k]) < 0) Py_CLEAR(kwargs);
  return kwargs;
}

/* Triton's own choice asked for by the policy's check(device, args, kwargs, kernel), with the call's
 * keywords less grid= and warmup= (its run adds its own to them). */
FL_EXT_COLD int fl_jit_check(JitObject *self, jit_entry *const *cands, size_t ncand, int32_t device, const jit_kw *kw,
                             PyObject *const *args, size_t nargs, PyObject *kwnames, const jit_key *k, int unread,
                             PyObject **res, size_t *idx) {
  PyObject *check = Py_NewRef(self->check), *kernels = PyTuple_New((Py_ssize_t)ncand); /* the check runs Python code */
  for (size_t i = 0; kernels && i < ncand; i++) PyTuple_SET_ITEM(kernels, (Py_ssize_t)i, Py_NewRef(cands[i]->kernel));
  PyObject *pos = kernels ? args_tuple(args, nargs) : NULL;
  PyObject *kwargs = pos ? fl_jit_kwargs_dict(kw->kwnames, kw->kwvals, kw->nkw) : NULL;
  PyObject *dev = kwargs ? PyLong_FromLong(device) : NULL, *r = NULL;
  if (dev) r = PyObject_CallFunctionObjArgs(check, dev, pos, kwargs, kernels, unread ? Py_True : Py_False, NULL);
  Py_XDECREF(pos);
  Py_XDECREF(kwargs);
  Py_XDECREF(dev);
  Py_XDECREF(kernels);
  Py_DECREF(check);
  if (!r) return -1;
  if (PyLong_CheckExact(r)) { /* the index of the candidate whose kernel Triton would run */
    Py_ssize_t i = PyLong_AsSsize_t(r);
    Py_DECREF(r);
    if (i == -1 && unread && !PyErr_Occurred()) return 2; /* none of them: their pointers are needed */
    if (i < 0 || (size_t)i >= ncand) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "fastlaunch: the check chose no candidate");
      return -1;
    }
    *idx = (size_t)i;
    self->checked++;
    return 0;
  }
  /* "reason": Triton's call (the policy handed the kernel back, or forgot what it bound); ("reason",):
   * Triton compiles for it, and what its run returns is bound under the key. */
  int rebind = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 1;
  PyObject *reason = rebind ? PyTuple_GET_ITEM(r, 0) : r;
  if (!PyUnicode_Check(reason)) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_TypeError, "fastlaunch: the check returned neither an index, a reason nor (reason,)");
    return -1;
  }
  *res = fl_jit_stock(self, kw->grid, args, nargs, kwnames, kw->has_grid, NULL, reason, rebind ? k : NULL);
  Py_DECREF(r);
  return 1;
}

FL_EXT_COLD int fl_jit_pre_run(JitObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames,
                               PyObject *const *kwvals, Py_ssize_t nkw) {
  PyObject *kwargs = fl_jit_kwargs_dict(kwnames, kwvals, nkw), *hooks = NULL;
  int rc = -1;
  if (!kwargs) return -1;
  PyObject *policy = Py_NewRef(self->policy);
  PyObject *known = PyObject_CallMethod(policy, "pre_run_kwargs", "O", kwargs);
  Py_DECREF(policy);
  int t = known ? PyObject_IsTrue(known) : -1;
  Py_XDECREF(known);
  if (t <= 0) {
    rc = t < 0 ? -1 : 1;
    goto done;
  }
  self->pre_ran = self->depth;
  self->pre_run++;
  /* As Triton's `for hook in self.pre_run_hooks` walks it: the list as it is at each step. */
  hooks = Py_NewRef(self->pre_run_hooks);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hooks); i++) {
    PyObject *h = Py_NewRef(PyList_GET_ITEM(hooks, i));
    PyObject *r = PyObject_VectorcallDict(h, args, nargs, kwargs);
    Py_DECREF(h);
    if (!r) goto done;
    Py_DECREF(r);
  }
  rc = 0;
done:
  Py_XDECREF(hooks);
  Py_DECREF(kwargs);
  return rc;
}

FL_EXT_COLD void fl_ext_count_reason(PyObject *counts, const char *reason, PyObject *reason_obj) {
  PyObject *key = reason_obj ? Py_NewRef(reason_obj) : PyUnicode_FromString(reason);
  if (!key) {
    PyErr_Clear();
    return;
  }
  PyObject *n;
  if (PyDict_GetItemRef(counts, key, &n) < 0) PyErr_Clear();
  PyObject *m = PyLong_FromLong(n ? PyLong_AsLong(n) + 1 : 1);
  Py_XDECREF(n);
  if (!m || PyDict_SetItem(counts, key, m) < 0) PyErr_Clear();
  Py_XDECREF(m);
  Py_DECREF(key);
}

FL_EXT_COLD void fl_jit_count_stock(JitObject *self, const char *reason, PyObject *reason_obj) {
  self->stock++;
  fl_ext_count_reason(self->stock_counts, reason, reason_obj);
}

/* Triton runs the call; after a miss the policy binds what Triton used under the key. */
FL_EXT_COLD PyObject *fl_jit_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames,
                       int has_grid, const char *reason, PyObject *reason_obj, const jit_key *miss) {
  fl_jit_count_stock(self, reason, reason_obj);
  PyObject *kernel = fl_jit_call_stock(self, grid, args, nargs, kwnames, has_grid);
  if (kernel && miss && kernel != Py_None) fl_jit_bind(self, kernel, grid, args, nargs, kwnames, miss);
  return kernel;
}

FL_EXT_COLD void fl_jit_bind(JitObject *self, PyObject *kernel, PyObject *grid, PyObject *const *args, size_t nargs,
                             PyObject *kwnames, const jit_key *miss) {
  PyObject *key = PyBytes_FromStringAndSize((const char *)miss->words, (Py_ssize_t)(miss->n * sizeof(uint64_t)));
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *pos = args_tuple(args, nargs), *kw = pos ? fl_jit_kwargs_dict(kwnames, args + nargs, nkw) : NULL;
  PyObject *r = NULL;
  if (key && pos && kw) {
    PyObject *policy = Py_NewRef(self->policy);
    r = PyObject_CallMethod(policy, "bind", "OOOOO", key, kernel, pos, kw, grid);
    if (!r) PyErr_WriteUnraisable(policy); /* the launch happened: whatever binding did, the call's result stands */
    Py_DECREF(policy);
  } else {
    PyErr_WriteUnraisable(self->fn);
  }
  Py_XDECREF(r);
  Py_XDECREF(key);
  Py_XDECREF(pos);
  Py_XDECREF(kw);
}


/* Any other callable grid: called once, with the mapping Triton passes (*meta, a new reference,
 * for the caller to see what the callable wrote to it). *computed is the answer. 0 read; -1 not
 * read here; *computed NULL with an exception. */
FL_EXT_COLD int fl_jit_called_grid(JitObject *self, PyObject *const *pv, PyObject *grid, int64_t g[3],
                                   PyObject **computed, PyObject **meta) {
  self->grid_calls++;
  *meta = bound_args_dict(self, pv);
  *computed = *meta ? PyObject_CallOneArg(grid, *meta) : NULL;
  if (!*computed) return -1;
  if (fl_jit_read_grid(*computed, g) == 0 && ((g[1] | g[2]) == 1 || !fl_jit_grid_product_wraps(g))) return 0;
  return -1;
}

/* Whether the grid callable changed its mapping: Triton launches the mapping's values, in its
 * order, after the grid. */
FL_EXT_COLD int fl_jit_meta_changed(JitObject *self, PyObject *meta, PyObject *const *pv) {
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names), pos = 0, i = 0;
  if (PyDict_GET_SIZE(meta) != np) return 1;
  PyObject *k, *v;
  while (PyDict_Next(meta, &pos, &k, &v)) {
    if (i >= np || k != PyTuple_GET_ITEM(self->param_names, i) || v != pv[i]) return 1;
    i++;
  }
  return 0;
}

/* The grid Triton's run gets when the call goes there after fastlaunch called the caller's grid
 * callable, which must not run twice: the answer itself; or, where Triton would not take it as it
 * is (a callable, which Triton would not call again; None, which Triton 3.5 to 3.8 refuse with an
 * AssertionError where the callable's None meets len()'s TypeError) or where the callable wrote to
 * its mapping (Triton launches what it wrote), the policy's callable answering it (and writing the
 * same to Triton's mapping). A new reference, or NULL with an exception. */
FL_EXT_COLD PyObject *fl_jit_replay_grid(JitObject *self, PyObject *answer, PyObject *meta, int changed) {
  if (!changed && answer != Py_None && !PyCallable_Check(answer)) return Py_NewRef(answer);
  PyObject *policy = Py_NewRef(self->policy);
  PyObject *r = PyObject_CallMethod(policy, "answered_grid", "OO", answer, changed ? meta : Py_None);
  Py_DECREF(policy);
  return r;
}

/* After Python code ran in a call (the driver's stream function, a tensor-like's data_ptr or
 * dtype, the grid callable): what Triton reads after that point, read again. 0: still served; 1
 * with the reason the call goes to Triton (*why, or the policy's *why_obj, borrowed: count it at
 * once); -1 with an exception. */
FL_EXT_COLD int fl_jit_settled(JitObject *self, const char **why, PyObject **why_obj) {
  *why = NULL;
  *why_obj = NULL;
  if (fl_ext_watch_changed(&self->watch) && fl_jit_revalidate(self) < 0) return -1;
  if (self->stock_reason) return *why_obj = self->stock_reason, 1;
  return 0;
}


/* A callable grid whose code is not the entry's grid program (its first call had a tuple, or another
 * lambda): traced now by the policy, so later calls compute it in C; a code that does not trace is
 * not tried again, and an entry learns at most 4 times (a call site alternating lambdas calls them).
 * 1 when the policy was asked (Python code ran), else 0. */
FL_EXT_COLD int fl_jit_learn_grid(JitObject *self, jit_entry *e, PyObject *grid, PyObject *const *pv) {
  /* Not under another call of this dispatcher: an outer one may be reading the entry's program. */
  if (!PyFunction_Check(grid) || self->depth > 1 || e->grid_learned >= 4 || PyFunction_GET_CODE(grid) == e->grid_code ||
      PyFunction_GET_CODE(grid) == e->grid_tried)
    return 0;
  e->grid_learned++;
  PyObject *code = Py_NewRef(PyFunction_GET_CODE(grid)), *meta = bound_args_dict(self, pv), *spec = NULL;
  PyObject *policy = Py_NewRef(self->policy);
  if (meta) spec = PyObject_CallMethod(policy, "learn_grid", "OO", grid, meta);
  Py_DECREF(policy);
  Py_XDECREF(meta);
  if (spec && spec != Py_None && fl_jit_entry_learn_grid(self->state, e, spec, PyTuple_GET_SIZE(self->param_names)) == 0) {
    Py_DECREF(code);
    if (self->memo.entry == e) fl_jit_memo_clear(self); /* the memo's grid values were the old program's */
  } else {
    PyErr_Clear(); /* not compiled: the callable is called per launch, and not traced again */
    Py_XSETREF(e->grid_tried, code);
  }
  Py_XDECREF(spec);
  return 1;
}
