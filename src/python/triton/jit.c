/* jit.c: the dispatcher of Triton's JIT, `kernel[grid](*args, **kwargs)`.
 *
 * Three types. JitDispatcher sits in a JITFunction's call slot (its instance attribute `run`, so
 * Triton's Autotuner, which calls `fn.run(...)`, reaches it too). JitSubscript replaces the class's
 * __getitem__, so `kernel[grid]` hands out a JitCall (one reused object per kernel, no allocation
 * while the caller drops it before the next subscript) instead of a Python lambda. A call that has
 * the form of the kernel's last fast call (the same keyword names tuple and positional count: the
 * same call site, nearly always) is checked against that call's entry by the memo (jit_key.c) and
 * launches from there; any other call, or one whose key differs, takes the full path:
 *   1. binds the arguments to the kernel's parameters (positional, keywords, defaults) and reads
 *      the launch options given as keywords;
 *   2. computes the key: per parameter what Triton specializes on (tensor dtype and 16-byte
 *      alignment, int == 1, int % 16, int width class, float, bool, None, tuples of those, the
 *      value of a constexpr), the options, the current device. It is never coarser than Triton's
 *      key: it holds every fact Triton's is made of, so a finer key only costs a miss;
 *   3. finds the plan bound under that key, reads the stream as Triton's driver does, computes the
 *      grid (a tuple; a grid program compiled from the callable's code; or the callable called
 *      with the bound arguments, as Triton calls it) and launches.
 * Pre-run hooks are called where Triton's run calls them, after the device and the stream, with the
 * call's arguments and the keywords Triton adds (jit_stock.c); launch hooks around the launch
 * (the launch sequence, sequence.c). Anything else goes to Triton's own run before anything is
 * submitted: a miss (Triton compiles, launches, and the policy binds the variant it used under the key; its pre-run
 * hooks, already called, are not called again), warmup, an argument of a kind the key does not
 * know, and whatever the Python policy names when the things it watches change (knobs, the
 * environment, the active driver, the kernel's globals).
 * The policy (fastlaunch.triton_jit) owns those decisions; this file only applies them. */
#include "jit_base.h"
#include "jit_call_grid.h"

/* ---- device and stream, as Triton's driver reads them ---- */
/* Through the driver's Python callables (no C function registered for this driver). */
static FL_EXT_COLD int device_of_driver(JitObject *self, int32_t *device) {
  PyObject *fn = Py_NewRef(self->device_fn); /* its call may revalidate, which replaces it */
  PyObject *r = PyObject_CallNoArgs(fn);
  Py_DECREF(fn);
  if (!r) return -1;
  long d = PyLong_Check(r) ? PyLong_AsLong(r) : -1;
  Py_DECREF(r);
  if (d < 0 || d > INT32_MAX) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "fastlaunch: the driver's current device is not an index");
    return -1;
  }
  *device = (int32_t)d;
  return 0;
}

static FL_EXT_COLD int stream_of_driver(JitObject *self, int32_t device, uint64_t *stream) {
  PyObject *dev = PyLong_FromLong(device);
  if (!dev) return -1;
  PyObject *fn = Py_NewRef(self->stream_fn);
  PyObject *r = PyObject_CallOneArg(fn, dev);
  Py_DECREF(fn);
  Py_DECREF(dev);
  if (!r) return -1;
  fl_error err;
  int rc = fl_ext_u64_of(r, stream) ? 0 : fl_ext_parse_stream(r, stream, &err);
  Py_DECREF(r);
  if (rc < 0) PyErr_Format(PyExc_RuntimeError, "fastlaunch: the driver's current stream: %s", err.reason);
  return rc;
}

static inline int current_device(JitObject *self, int32_t *device) {
  if (self->device_fn) return device_of_driver(self, device);
  if (self->c_device && self->c_device(device) == 0) return 0;
  PyErr_SetString(PyExc_RuntimeError, "fastlaunch: torch's current device could not be read");
  return -1;
}

static inline int current_stream(JitObject *self, int32_t device, uint64_t *stream) {
  if (self->stream_fn) return stream_of_driver(self, device, stream);
  void *s = NULL;
  if (self->c_stream && self->c_stream(device, &s) == 0) {
    *stream = (uint64_t)(uintptr_t)s;
    return 0;
  }
  PyErr_SetString(PyExc_RuntimeError, "fastlaunch: torch's current CUDA stream could not be read");
  return -1;
}

/* ---- the call ---- */

#define STOCK(reason, miss) fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, reason, NULL, miss)

/* Launches a call the memo matched: 0 with *res (the result, or NULL with an exception); 1 when
 * the grid is a callable to call, which the full path does (nothing was run). The only Python code
 * that can run here is a global's __eq__ in the grid's lookup (grid_source_value). */
static FL_EXT_ALWAYS_INLINE int memo_launch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs, PyObject *kwnames,
                       uint64_t stream, PyObject **pv, fl_value *values, uint64_t *words,
                       fl_tensor_map_value *tmaps, PyObject **res) {
  PyObject *grid = kw->grid;
  jit_entry *e = self->memo.entry;
  uint64_t gen = self->gen;
  int64_t g[3];
  fl_error err;
  int r = call_grid(e, pv, grid, g);
  if (r > 0) return 1;
  if (FL_EXT_UNLIKELY(gen != self->gen)) return *res = STOCK("table_changed", NULL), 0;
  if (FL_EXT_UNLIKELY(e->grid_global) && fl_ext_watch_changed(&self->watch))
    return *res = STOCK("settings_changed", NULL), 0; /* Triton reads the hooks after the grid */
  if (r < 0) return *res = STOCK("grid_unreadable", NULL), 0;
  PyObject *kernel = Py_NewRef(e->kernel);
  if (FL_EXT_UNLIKELY(e->scratch_var != NULL)) { /* the allocator runs Python code: the entry stays readable (depth) */
    jit_reread rr = {.args = args, .nargs = nargs, .kwnames = kw->kwnames, .pv = pv, .tmaps = tmaps};
    if ((r = fl_jit_launch_scratch(self, e, values, words, stream, g, &rr, &err)) < 0) return Py_DECREF(kernel), *res = NULL, 0;
  } else {
    r = (words ? fl_launch_words(e->plan->plan, stream, words, e->nabi, g, &err)
               : fl_launch(e->plan->plan, stream, values, e->nabi, g, &err)) == FL_OK ? 0 : err.backend_submitted ? -1 : 1;
  }
  if (r == 0) {
    self->fast++;
    self->memo_fast++;
    return *res = kernel, 0;
  }
  Py_DECREF(kernel);
  *res = err.backend_submitted ? fl_ext_raise(self->state, &err) : STOCK(err.reason, NULL);
  return 0;
}

/* The tensor-likes' pointers, read only when the table has a variant for some alignment of them:
 * a call Triton's run serves from the start reads them there, as often as Triton alone does. 0
 * read; 1 with *res, the call served by Triton (a miss: bound afterwards, its pointers read then);
 * -1 with an exception (data_ptr()'s own, as Triton's binder raises it). */
static FL_EXT_COLD int lazy_pointers(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs,
                                     PyObject *kwnames, jit_key *k, jit_values *vals, PyObject **res) {
  /* Checked calls leave them unread (Triton's binder reads them first): checked() picks the variant. */
  if (fl_jit_find_lazy(self, k, vals)) return self->check ? 0 : fl_jit_read_lazy(k, vals);
  PyObject *grid = kw->grid;
  *res = STOCK("first_call_of_variant", NULL);
  if (*res && *res != Py_None) {
    if (fl_jit_read_lazy(k, vals) == 0) fl_jit_bind(self, *res, grid, args, nargs, kwnames, k);
    else PyErr_Clear(); /* not bound: the next call is Triton's again */
  }
  return 1;
}

/* Whether the kernel's launch metadata is given the grid: only its own launch_metadata function reads
 * it (Triton's CompiledKernel.launch_metadata), so only then is a callable grid called for it. */
static FL_EXT_COLD int metadata_reads_grid(JitObject *self) {
  PyObject *f = PyObject_GetAttr(self->fn, self->state->str_launch_metadata);
  if (!f) PyErr_Clear();
  int reads = !f || f != Py_None;
  Py_XDECREF(f);
  return reads;
}

/* The grid of a call the full path found entry e for: 0 read; -1 not read here (Triton's path reads
 * it); 2 with an exception (the callable's). A callable not e's grid program is traced (later calls
 * compute it in C) or called (*computed, its answer; *meta, the mapping it got; *changed, whether it
 * wrote that); *python when Python code ran. With hooks set, a callable grid is called when the
 * kernel's launch_metadata reads it (Triton gives it the callable's answer). */
static FL_EXT_COLD int found_grid(JitObject *self, jit_entry *e, PyObject *const *pv, PyObject *grid, int hooked,
                                  int64_t g[3], PyObject **computed, PyObject **meta, int *changed, int *python) {
  int call = hooked && PyCallable_Check(grid) && metadata_reads_grid(self);
  int r = call ? 1 : call_grid(e, pv, grid, g);
  if (r > 0 && !call && fl_jit_learn_grid(self, e, grid, pv)) *python = 1, r = call_grid(e, pv, grid, g);
  if (r <= 0) return r;
  *python = 1;
  r = fl_jit_called_grid(self, pv, grid, g, computed, meta);
  if (!*computed) return 2;
  *changed = fl_jit_meta_changed(self, *meta, pv);
  return r;
}

_Static_assert(JIT_MAX_PARAMS <= FL_EXT_HOOK_MAX_ARGS, "a hooked call passes every bound parameter");

/* A call with launch hooks set, its entry found and its grid computed (the grid object as Triton's
 * run gives it to launch_metadata), through the launch sequence (jit_launch.c's
 * fl_jit_launch_hooked). The kernel, as Triton's run returns it, or NULL; *whole the reason where the
 * whole call is Triton's (nothing ran). */
static FL_EXT_COLD PyObject *hooked_launch(JitObject *self, jit_entry *e, jit_bound *b, const jit_values *vals,
                                           PyObject *grid, uint64_t stream, const int64_t g[3], fl_error *err,
                                           int *whole) {
  PyObject *kernel = Py_NewRef(e->kernel); /* Python code runs from here on: the entry may be cleared */
  /* A callable grid computed in C: the kernel's metadata does not read it (found_grid), given as ints. */
  PyObject *given = PyCallable_Check(grid) ? Py_BuildValue("(LLL)", (long long)g[0], (long long)g[1], (long long)g[2])
                                           : Py_NewRef(grid);
  PyObject *handed = NULL;
  int r = given ? fl_jit_launch_hooked(self, e, b, vals, kernel, given, stream, g, &handed, err) : -1;
  Py_XDECREF(given);
  *whole = r > 0;
  if ((r == 0 && !handed) || r == -2) { /* launched (-2: its exit hook's exception, as Triton's launcher raises it) */
    self->fast++;
    self->hooked++;
    if (r == 0) return kernel;
  }
  if (r == 0) { /* refused after enter: handed to Triton's launcher, told enter ran */
    fl_jit_count_stock(self, err->reason, NULL);
    Py_DECREF(handed);
    return kernel;
  }
  Py_DECREF(kernel);
  return NULL;
}

/* Triton's run from its launch on, for a call whose device, stream and grid were read here and that
 * is handed back after Python code ran (sequence.c's fl_ext_launcher_tail): the kernel's launcher
 * with them, never read again. The arguments are the binding's, or the mapping's values where the
 * grid callable wrote it (Triton launches what it wrote). The grid given to launch_metadata is the
 * callable's answer (`grid` a callable computed in C: its ints). The kernel, as Triton's run returns
 * it, or NULL. */
static FL_EXT_COLD PyObject *launch_tail(JitObject *self, PyObject *kernel, PyObject *grid, const int64_t g[3],
                                         uint64_t stream, PyObject *meta, PyObject *const *bound) {
  PyObject *vals[FL_EXT_HOOK_MAX_ARGS];
  PyObject *const *args = bound;
  size_t n = (size_t)PyTuple_GET_SIZE(self->param_names);
  Py_INCREF(kernel); /* Python code runs from here on: the entry may be cleared */
  if (meta) { /* held by the caller through the call */
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    n = 0;
    while (PyDict_Next(meta, &pos, &k, &v))
      if (n < FL_EXT_HOOK_MAX_ARGS) vals[n++] = v;
    if ((size_t)PyDict_GET_SIZE(meta) > FL_EXT_HOOK_MAX_ARGS) {
      Py_DECREF(kernel);
      return PyErr_Format(PyExc_RuntimeError, "fastlaunch: a grid callable's mapping of more than %d values",
                          FL_EXT_HOOK_MAX_ARGS);
    }
    for (size_t i = 0; i < n; i++) Py_INCREF(vals[i]); /* the launcher's own code may change the mapping */
    args = vals;
  }
  PyObject *given = PyCallable_Check(grid) ? Py_BuildValue("(LLL)", (long long)g[0], (long long)g[1], (long long)g[2])
                                           : Py_NewRef(grid);
  PyObject *ran = given ? fl_ext_launcher_tail(self->state, kernel, given, g, stream, args, n) : NULL;
  Py_XDECREF(given);
  if (meta)
    for (size_t i = 0; i < n; i++) Py_DECREF(vals[i]);
  if (!ran) {
    Py_DECREF(kernel);
    return NULL;
  }
  Py_DECREF(ran);
  return kernel;
}

/* After the grid (r: found_grid's): what the callable changed. Triton read the settings and checked
 * the globals before its grid (a reason to go to Triton found now is the next call's, not this one's)
 * and reads the hooks after it: revalidated for the hooks. A call whose table was cleared, whose
 * mapping the callable wrote or whose hooks changed goes on as Triton's run goes on from its launch
 * (launch_tail: the launcher with what was read); where the grid could not be read here, to Triton's
 * run with the callable's answer (replayed, not called again). 0: launch here; 1: handed back (*res);
 * -1 with an exception. */
static FL_EXT_COLD int after_grid(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs, PyObject *kwnames,
                                  jit_entry *e, jit_bound *b, uint64_t gen, int r, int python, int hooked, int changed,
                                  PyObject *computed, PyObject *meta, const int64_t g[3], uint64_t stream,
                                  PyObject **res) {
  PyObject *grid = kw->grid;
  const char *why = NULL;
  if (gen == self->gen && python && fl_ext_watch_changed(&self->watch) && fl_jit_revalidate(self) < 0) return -1;
  if (gen != self->gen) why = "table_changed"; /* the callable (or a global's __eq__, or a knob) cleared it */
  else if (changed) why = "grid_wrote_mapping";
  else if (fl_jit_hooked(self) != hooked) why = "launch_hooks_changed"; /* set or cleared by the grid */
  else if (r < 0) why = "grid_unreadable";
  if (!why) return 0;
  if (r == 0) {
    fl_jit_count_stock(self, why, NULL);
    *res = launch_tail(self, e->kernel, computed ? computed : grid, g, stream, changed ? meta : NULL, b->vals);
    return 1;
  }
  PyObject *replay = computed ? fl_jit_replay_grid(self, computed, meta, changed) : Py_NewRef(grid);
  if (replay) *res = fl_jit_stock(self, replay, args, nargs, kwnames, kw->has_grid, why, NULL, NULL);
  Py_XDECREF(replay);
  return 1;
}

/* Every call checked (self->check set): Triton's own choice for the call, then what its binder's Python
 * code changed (the table cleared, a setting). 0: launch e here; 1: the call is done (*res, or NULL
 * with an exception). */
static FL_EXT_COLD int checked(JitObject *self, jit_entry **e, int32_t device, jit_kw *kw, PyObject *const *args,
                               size_t nargs, PyObject *kwnames, jit_key *k, jit_values *vals, PyObject **res) {
  PyObject *grid = kw->grid, *why_obj;
  const char *why;
  uint64_t gen = self->gen;
  /* Tensor-likes not read yet stay so (Triton's binder reads them, then its launcher): the variants
   * bound for each alignment of theirs are the candidates, and Triton's choice picks one. */
  jit_entry *cands[1u << JIT_MAX_LAZY];
  size_t nc = 0;
  for (unsigned m = 0; vals->nlazy && m < 1u << vals->nlazy; m++) {
    for (size_t i = 0; i < vals->nlazy; i++)
      k->words[vals->lazy_word[i]] = K_TENSOR_OBJ | (uint64_t)((m >> i) & 1) << 7;
    jit_entry *c = table_find(self, k, key_hash(k));
    if (c) cands[nc++] = c;
  }
  if (!vals->nlazy) cands[nc++] = *e;
  size_t idx = 0;
  int r = fl_jit_check(self, cands, nc, device, kw, args, nargs, kwnames, vals->nlazy ? NULL : k, vals->nlazy > 0, res, &idx);
  if (r == 2) { /* Triton chose none of them: the pointers read now, as a miss would read them */
    if (fl_jit_read_lazy(k, vals) < 0) return *res = NULL, 1;
    if (!(cands[0] = table_find(self, k, key_hash(k)))) return *res = STOCK("first_call_of_variant", k), 1;
    r = fl_jit_check(self, cands, 1, device, kw, args, nargs, kwnames, k, 0, res, &idx); /* its variant */
  }
  if (r) return r < 0 ? (*res = NULL, 1) : 1;
  *e = cands[idx];
  if (!(*e)->plan) /* Triton chose a variant fastlaunch refused: Triton's, as any call of it is */
    return *res = fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, (*e)->refusal, NULL), 1;
  if (gen == self->gen && (r = fl_jit_settled(self, &why, &why_obj)) != 0) {
    *res = r > 0 ? fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL) : NULL;
    return 1;
  }
  if (gen != self->gen) /* it cleared the table, or a revalidation did */
    return *res = STOCK("table_changed", NULL), 1;
  return 0;
}

/* The full path: bind, key, table; then the memo holds what a fast call found. Triton's order from
 * the binding on: the arguments read (the key; data_ptr() and dtype of a tensor the door declines),
 * then the grid (the callable called with the mapping), then the hooks and the launch values read
 * again (the tensors' pointers as the launcher reads them: a grid callable may have moved a
 * tensor's storage), then the launch. Whatever Python code ran in between may have cleared the
 * table (the entry stays readable in the graveyard; the generation says so), changed a setting
 * (revalidated) or written the mapping: each sends the call to Triton, with the grid it would have
 * computed. */
static FL_EXT_COLD PyObject *full_dispatch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs,
                                           PyObject *kwnames, int32_t device, uint64_t stream, int hooked) {
  PyObject *grid = kw->grid;
  jit_bound b;
  if (fl_jit_bind_call(self, &b, args, nargs, kw->kwnames, kw->kwvals, kw->nkw)) return STOCK(b.why, NULL);
  jit_key k;
  jit_values vals, again; /* as the key read them; as the launch reads them after Python code ran */
  PyObject *res = NULL, *computed = NULL, *meta = NULL, *why_obj = NULL;
  const char *why = NULL;
  again.nheld = 0;
  int r = fl_jit_make_key(self, &b, device, &k, &vals);
  if (r != 0) {
    if (r > 0) res = STOCK(b.why, NULL);
    goto done;
  }
  int python = vals.nheld > vals.nquiet; /* a tensor-like's attributes were read */
  if (python && (r = fl_jit_settled(self, &why, &why_obj)) != 0) {
    if (r > 0) res = fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
    goto done;
  }
  if (vals.nlazy && (r = lazy_pointers(self, kw, args, nargs, kwnames, &k, &vals, &res)) != 0) goto done;
  jit_entry *e = table_find(self, &k, key_hash(&k));
  if (!e || (!e->plan && !vals.nlazy)) { /* a miss (Triton compiles; the policy binds), or a variant refused */
    res = e ? fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, e->refusal, NULL)
            : STOCK("first_call_of_variant", &k);
    goto done;
  }
  uint64_t gen = self->gen;
  if (FL_EXT_UNLIKELY(self->check != NULL)) { /* Triton's own choice first (its binder: Python code) */
    if (checked(self, &e, device, kw, args, nargs, kwnames, &k, &vals, &res)) goto done;
    python = 1; /* the values read again after the grid, as Triton's launcher reads them */
  }
  int64_t g[3];
  fl_error err;
  int changed = 0;
  if ((r = found_grid(self, e, b.vals, grid, hooked, g, &computed, &meta, &changed, &python)) > 1) goto done;
  if ((r = after_grid(self, kw, args, nargs, kwnames, e, &b, gen, r, python, hooked, changed, computed, meta, g, stream,
                      &res)) != 0)
    goto done;
  if (computed) grid = computed; /* readable and the mapping untouched: what Triton gets if the plan refuses */
  if (hooked) {
    int whole;
    res = hooked_launch(self, e, &b, &vals, grid, stream, g, &err, &whole);
    if (whole) res = STOCK(err.reason, NULL);
    goto done;
  }
  const jit_values *launch = &vals;
  if (python) { /* the launcher's read of the values, after the grid */
    r = fl_jit_launch_values(self, &b, &vals, &again);
    if (r < 0) goto done;
    if (r > 0) {
      res = STOCK("arg_layout_changed", NULL);
      goto done;
    }
    launch = &again; /* a data_ptr() that cleared the table: launched, as Triton's launcher does (the
                      * entry is in the graveyard, and the memo is not set to it) */
  }
  PyObject *kernel = Py_NewRef(e->kernel);
  r = fl_jit_launch_entry(self, e, &b, launch, stream, g, &err);
  if (r == 0) {
    self->fast++;
    if (kw->kwvals == args + nargs && gen == self->gen) fl_jit_memo_set(self, e, &b, nargs, kw->kwnames);
    res = kernel;
    goto done;
  }
  if (r > 0 && python) { /* refused after Python ran (the grid callable may have switched the device or
                          * stream): Triton's run from its launch on, with the stream and grid read */
    fl_jit_count_stock(self, err.reason, NULL);
    res = launch_tail(self, kernel, grid, g, stream, NULL, b.vals);
  } else if (r > 0) {
    res = STOCK(err.reason, NULL);
  }
  Py_DECREF(kernel);
done:
  fl_jit_values_release(&vals);
  fl_jit_values_release(&again);
  Py_XDECREF(computed);
  Py_XDECREF(meta);
  return res;
}

static FL_EXT_ALWAYS_INLINE PyObject *dispatch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs,
                                               PyObject *kwnames) {
  PyObject *grid = kw->grid;
  if (kw->warmup) return STOCK("warmup", NULL);
  if (FL_EXT_UNLIKELY(fl_ext_watch_changed(&self->watch)) && fl_jit_revalidate(self) < 0) return NULL;
  if (self->stock_reason) return fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, self->stock_reason, NULL);
  const char *why;
  /* The device and the stream first, as Triton's run reads them (the hooks are read later). */
  int32_t device;
  uint64_t stream;
  if (current_device(self, &device) < 0 || current_stream(self, device, &stream) < 0) return NULL;
  if (FL_EXT_UNLIKELY(self->device_fn || self->stream_fn)) { /* Python code ran */
    PyObject *why_obj;
    int s = fl_jit_settled(self, &why, &why_obj);
    if (s < 0) return NULL;
    if (s > 0) return fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
  }
  if (FL_EXT_UNLIKELY(PyList_GET_SIZE(self->pre_run_hooks) > 0)) { /* then the pre-run hooks, before the binding */
    int r = fl_jit_pre_run(self, args, nargs, kw->kwnames, kw->kwvals, kw->nkw);
    if (r < 0) return NULL;
    if (r > 0) return STOCK("pre_run_hooks", NULL);
    PyObject *why_obj; /* Python code ran: what Triton reads after the hooks, read again */
    int s = fl_jit_settled(self, &why, &why_obj);
    if (s < 0) return NULL;
    if (s > 0) return fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
  }
  int hooked = fl_jit_hooked(self);
  if (FL_EXT_UNLIKELY(hooked) && !FL_EXT_STATE_OBJ(self->state->launch_knobs)) return STOCK("launch_hooks", NULL);
  if (!hooked && !self->check && kw->kwvals == args + nargs) { /* the keywords' values follow the positional ones: the memo's form */
    PyObject *pv[JIT_MAX_PARAMS];
    fl_value values[JIT_MAX_PARAMS];
    uint64_t words_at[JIT_MAX_PARAMS + 1], *words = NULL; /* in words when the plan takes them */
    fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS]; /* the descriptors' maps (their values point here) */
    const jit_entry *me = self->memo.entry;
    if (me && me->plan->args.words) words = words_at;
    PyObject *res;
    if (jit_memo_match(self, args, nargs, kw->kwnames, device, pv, values, words) == 0 &&
        (FL_EXT_LIKELY(!self->memo.nd) || fl_jit_memo_descs(self, args, values, tmaps) == 0) &&
        memo_launch(self, kw, args, nargs, kwnames, stream, pv, values, words, tmaps, &res) == 0)
      return res;
  }
  return full_dispatch(self, kw, args, nargs, kwnames, device, stream, hooked);
}
#undef STOCK

/* The gates of a compiled kernel's call (compiled.c), as this dispatcher keeps them for its kernel:
 * changes seen, Triton's reasons, then the device and the stream unless the call passed one.
 * Pre-run hooks are not the launcher's: Triton's runner never calls them. Launch hooks set are the
 * caller's to call (*hooked; NULL: a call that passes its own). 0 with the stream; 1 with *why
 * (Triton's call); -1 with an exception. */
static int compiled_gates_closed(JitObject *self, const char **why, int *hooked) {
  if (fl_ext_watch_changed(&self->watch) && fl_jit_revalidate(self) < 0) return -1;
  if (self->stock_reason) return *why = "stock_reason", 1;
  if (hooked) *hooked = fl_jit_hooked(self);
  return 0;
}

static int compiled_gate_unlocked(JitObject *self, uint64_t *stream, int have_stream, const char **why, int *hooked) {
  *why = NULL;
  int rc = compiled_gates_closed(self, why, hooked);
  if (rc || have_stream) return rc;
  int32_t device;
  if (current_device(self, &device) < 0 || current_stream(self, device, stream) < 0) return -1;
  if (FL_EXT_UNLIKELY(self->device_fn || self->stream_fn)) return compiled_gates_closed(self, why, hooked); /* Python ran */
  return 0;
}

/* A kept compiled kernel's call reads the dispatcher's gates, sources and hooks, which its revalidation
 * replaces and releases: in a critical section on the dispatcher, as its own calls are (free-threaded
 * builds; nested in the caller's on its CompiledLaunch). */
int fl_jit_compiled_gate(JitObject *self, uint64_t *stream, int have_stream, const char **why, int *hooked) {
  int rc;
  Py_BEGIN_CRITICAL_SECTION(self);
  rc = compiled_gate_unlocked(self, stream, have_stream, why, hooked);
  Py_END_CRITICAL_SECTION();
  return rc;
}

/* Frees the entries cleared while calls were in flight, once the outermost has returned (the
 * releases may run a __del__: the call's exception, if any, is kept aside meanwhile). */
static FL_EXT_COLD void bury(JitObject *self) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  fl_jit_bury(self);
  PyErr_Restore(et, ev, tb);
}

/* A call, counted in flight while it runs: the table it reads is never freed under it. */
static FL_EXT_ALWAYS_INLINE PyObject *jit_dispatch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs,
                                                   PyObject *kwnames) {
  self->depth++;
  size_t pre_ran = self->pre_ran; /* an outer call's, kept across this one */
  PyObject *res = dispatch(self, kw, args, nargs, kwnames);
  self->pre_ran = pre_ran;
  if (--self->depth == 0 && FL_EXT_UNLIKELY(self->graveyard != NULL)) bury(self);
  return res;
}

/* Reads grid= and warmup= out of the keywords (the run() form). 0, or -1 with an exception. */
static int split_keywords(JitObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames, jit_kw *kw) {
  kw->has_grid = 0;
  kw->warmup = 0;
  kw->nkw = 0;
  kw->kwnames = NULL;
  Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (n > JIT_MAX_PARAMS + JIT_MAX_OPTIONS) return 1;
  PyObject *others[JIT_MAX_PARAMS + JIT_MAX_OPTIONS];
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, k), *v = args[nargs + (size_t)k];
    if (PyUnicode_Check(key) && PyUnicode_Compare(key, self->state->str_grid) == 0) {
      kw->grid = v;
      kw->has_grid = 1;
    } else if (PyUnicode_Check(key) && PyUnicode_Compare(key, self->state->str_warmup) == 0) {
      int t = PyObject_IsTrue(v);
      if (t < 0) return -1;
      kw->warmup = t;
    } else {
      others[kw->nkw] = key;
      kw->kept[kw->nkw++] = v;
    }
  }
  if (kw->nkw == n) {
    kw->kwnames = kwnames;
    kw->kwvals = args + nargs;
    return 0;
  }
  kw->kwvals = kw->kept;
  kw->kwnames = PyTuple_New(kw->nkw);
  if (!kw->kwnames) return -1;
  for (Py_ssize_t k = 0; k < kw->nkw; k++) PyTuple_SET_ITEM(kw->kwnames, k, Py_NewRef(others[k]));
  return 0;
}

/* run(*args, grid, warmup, **kwargs): Triton's signature. */
PyObject *fl_jit_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  JitObject *self = (JitObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  jit_kw kw;
  int r = split_keywords(self, args, nargs, kwnames, &kw);
  if (r < 0) return NULL;
  if (r > 0 || !kw.has_grid) {
    if (kw.kwnames && kw.kwnames != kwnames) Py_DECREF(kw.kwnames);
    fl_jit_count_stock(self, r > 0 ? "keywords" : "no_grid", NULL);
    return PyObject_Vectorcall(self->stock_run, args, nargs, kwnames); /* Triton says what is wrong */
  }
  PyObject *res = jit_dispatch(self, &kw, args, nargs, kwnames);
  if (kw.kwnames && kw.kwnames != kwnames) Py_DECREF(kw.kwnames);
  return res;
}

/* kernel[grid](*args, **kwargs), the grid given apart. */
static FL_EXT_ALWAYS_INLINE PyObject *run_grid(PyObject *jit, PyObject *grid, PyObject *const *args, size_t nargs,
                                               PyObject *kwnames) {
  JitObject *self = (JitObject *)jit;
  jit_kw kw;
  kw.grid = grid;
  kw.has_grid = 0;
  kw.warmup = 0;
  kw.kwnames = kwnames;
  kw.nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (kw.nkw > JIT_MAX_PARAMS + JIT_MAX_OPTIONS) {
    fl_jit_count_stock(self, "keywords", NULL);
    return fl_jit_call_stock(self, grid, args, nargs, kwnames, 0);
  }
  kw.kwvals = args + nargs;
  return jit_dispatch(self, &kw, args, nargs, kwnames);
}

PyObject *fl_ext_jit_run_grid(PyObject *jit, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames) {
  PyObject *result;
  Py_BEGIN_CRITICAL_SECTION(jit); /* an Autotuner's or Heuristics' call into the JIT's dispatcher */
  result = run_grid(jit, grid, args, nargs, kwnames);
  Py_END_CRITICAL_SECTION();
  return result;
}

PyObject *fl_jit_call_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  /* The caller holds `call` through the call, so its grid stays: kernel[grid] reuses a JitCall
   * (and replaces its grid) only while nobody but its dispatcher holds it. */
  JitCallObject *call = (JitCallObject *)callable;
  return run_grid(call->target, call->grid, args, PyVectorcall_NARGS(nargsf), kwnames);
}



