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
 * Anything else goes to Triton's own run before anything is submitted: a miss (Triton compiles,
 * launches, and the policy binds the variant it used under the key), warmup, pre-run hooks, launch
 * hooks, an argument of a kind the key does not know, and whatever the Python policy names when
 * the things it watches change (knobs, the environment, the active driver, the kernel's globals).
 * The policy (fastlaunch.triton_jit) owns those decisions; this file only applies them. */
#include "jit_base.h"

static Py_ssize_t ident_index(PyObject *names, PyObject *key) {
  Py_ssize_t n = PyTuple_GET_SIZE(names);
  for (Py_ssize_t i = 0; i < n; i++)
    if (PyTuple_GET_ITEM(names, i) == key) return i;
  return -1;
}

static Py_ssize_t equal_index(PyObject *names, PyObject *key) {
  Py_ssize_t n = PyTuple_GET_SIZE(names);
  for (Py_ssize_t i = 0; i < n; i++) {
    int eq = PyUnicode_Compare(PyTuple_GET_ITEM(names, i), key);
    if (eq == 0) return i;
    if (eq == -1 && PyErr_Occurred()) PyErr_Clear();
  }
  return -1;
}

Py_ssize_t fl_ext_name_index(PyObject *names, PyObject *key) {
  Py_ssize_t i = ident_index(names, key);
  return i >= 0 ? i : equal_index(names, key);
}

/* A keyword: its parameter index (*param) or option index (*option), -1 for the other. Names are
 * compared by identity first (the policy interns them, as the compiler interns keyword names). */
static void keyword_index(JitObject *self, PyObject *key, Py_ssize_t *param, Py_ssize_t *option) {
  *option = -1;
  *param = ident_index(self->param_names, key);
  if (*param >= 0) return;
  *option = ident_index(self->option_names, key);
  if (*option >= 0) return;
  *param = equal_index(self->param_names, key);
  if (*param < 0) *option = equal_index(self->option_names, key);
}

/* 0 bound; 1 not bindable here (b->why); kwnames/kwvals exclude grid= and warmup=. */
static int bind_call(JitObject *self, jit_bound *b, PyObject *const *args, size_t nargs, PyObject *kwnames,
                     PyObject *const *kwvals, Py_ssize_t nkw) {
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  if ((Py_ssize_t)nargs > np) return b->why = "args_count", 1;
  memcpy(b->vals, args, nargs * sizeof(PyObject *));
  for (Py_ssize_t i = (Py_ssize_t)nargs; i < np; i++) b->vals[i] = NULL;
  for (Py_ssize_t i = 0; i < np; i++) b->src[i] = (int16_t)(i < (Py_ssize_t)nargs ? i : -1);
  b->nopts = 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    Py_ssize_t i, j;
    keyword_index(self, PyTuple_GET_ITEM(kwnames, k), &i, &j);
    if (i >= 0) {
      if (b->vals[i]) return b->why = "args_repeated", 1;
      b->vals[i] = kwvals[k];
      b->src[i] = (int16_t)(nargs + (size_t)k);
      continue;
    }
    if (j < 0) return b->why = "unknown_keyword", 1;
    for (Py_ssize_t o = 0; o < b->nopts; o++)
      if (b->opt_index[o] == j) return b->why = "args_repeated", 1;
    /* Kept in option order, so the key does not depend on the keywords' order. */
    Py_ssize_t at = b->nopts++;
    while (at > 0 && b->opt_index[at - 1] > j) {
      b->opt_index[at] = b->opt_index[at - 1];
      b->opt_vals[at] = b->opt_vals[at - 1];
      b->opt_src[at] = b->opt_src[at - 1];
      at--;
    }
    b->opt_index[at] = j;
    b->opt_vals[at] = kwvals[k];
    b->opt_src[at] = (int16_t)(nargs + (size_t)k);
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    if (b->vals[i]) continue;
    PyObject *d = PyTuple_GET_ITEM(self->defaults, i); /* (default,) or () */
    if (PyTuple_GET_SIZE(d) != 1) return b->why = "args_missing", 1;
    b->vals[i] = PyTuple_GET_ITEM(d, 0);
  }
  return 0;
}

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

/* ---- the grid ---- */

/* An int variable of a grid program: 0, or 1 when the value is not an int that fits. */
static int grid_var(PyObject *v, int64_t *out) {
  if (!v || !PyLong_Check(v)) return 1;
  uint64_t w;
  if (fl_ext_int_word(v, &w)) { /* an exact int within int64 */
    *out = (int64_t)w;
    return 0;
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 1;
  }
  *out = x;
  return 0;
}

/* A grid source's value (borrowed), NULL when it is not there. */
static FL_EXT_ALWAYS_INLINE PyObject *grid_source_value(const grid_source *s, const jit_entry *e, PyObject *const *pv,
                                          PyObject *closure) {
  if (s->kind == SRC_ARG) return pv[s->index];
  if (s->kind == SRC_CELL)
    return closure && s->index < PyTuple_GET_SIZE(closure) ? PyCell_GET(PyTuple_GET_ITEM(closure, s->index)) : NULL;
  /* Borrowed, on every launch (a strong reference costs this path 20 instructions): read at once,
   * under the GIL, while the module's dict holds it. The lookup can run a colliding key's __eq__,
   * which may clear the table: the entry is then in the graveyard (jit_table.c), still readable, and
   * the caller's generation check after the grid sends the call to Triton. */
  PyObject *v = PyDict_GetItemWithError(e->grid_globals, s->name);
  if (!v) PyErr_Clear();
  return v;
}

/* Whether `grid` is a function of the entry's grid code that Triton would call with its defaults
 * as they were when the code was compiled (none). */
static FL_EXT_ALWAYS_INLINE int grid_is_programs(const jit_entry *e, PyObject *grid) {
  return PyFunction_Check(grid) && e->grid_code && PyFunction_GET_CODE(grid) == e->grid_code &&
         PyFunction_GET_GLOBALS(grid) == e->grid_globals && !PyFunction_GET_DEFAULTS(grid) &&
         !PyFunction_GET_KW_DEFAULTS(grid);
}

/* Triton's common lambda read inline: one source that is an exact int, dimension 0 a shape, 1 and
 * 2 constant. 0 with the grid, or 1 (grid_program decides). */
static FL_EXT_ALWAYS_INLINE int grid_shaped(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t out[3]) {
  if (!e->grid_shaped || e->ngrid_src != 1 || !grid_is_programs(e, grid)) return 1;
  PyObject *v = grid_source_value(e->grid_src, e, pv, PyFunction_GET_CLOSURE(grid));
  uint64_t w;
  if (!v || !fl_ext_int_word(v, &w) || (int64_t)w > e->grid_shape.hi) return 1;
  out[0] = fl__grid_shape_apply(&e->grid_shape, (int64_t)w);
  out[1] = e->grid_const[1];
  out[2] = e->grid_const[2];
  return 0;
}

/* The grid from the entry's program when `grid` is a function of its code: 0, or 1 (not the
 * program's function, or a value it cannot compute: the callable is called instead). */
static int grid_program(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t out[3]) {
  if (!grid_is_programs(e, grid)) return 1;
  PyObject *closure = PyFunction_GET_CLOSURE(grid);
  int64_t vars[JIT_MAX_GRID_VARS];
  for (size_t i = 0; i < e->ngrid_src; i++)
    if (grid_var(grid_source_value(&e->grid_src[i], e, pv, closure), &vars[i])) return 1;
  if (e->grid_shaped && vars[0] <= e->grid_shape.hi) {
    out[0] = fl__grid_shape_apply(&e->grid_shape, vars[0]);
    out[1] = e->grid_const[1];
    out[2] = e->grid_const[2];
    return 0;
  }
  for (int d = 0; d < 3; d++) {
    fl_error err;
    if (!e->grid_prog[d]) out[d] = e->grid_const[d];
    else if (fl_grid_program_eval(e->grid_prog[d], vars, e->ngrid_src, &out[d], &err) != FL_OK) return 1;
  }
  return 0;
}

/* ---- the call ---- */



/* Launches through the entry's plan with the values the key pass read: 0 launched; 1 refused
 * before the boundary (err); -1 with an exception (after the boundary). No Python code runs here. */
static int launch_entry(JitObject *self, const jit_entry *e, const jit_values *vals, uint64_t stream,
                        const int64_t grid[3], fl_error *err) {
  fl_value values[JIT_MAX_PARAMS];
  const fl_ext_args *spec = &e->plan->args;
  for (size_t i = 0; i < e->nabi; i++) {
    int32_t at = vals->start[e->abi_param[i]] + (e->abi_member[i] > 0 ? e->abi_member[i] : 0);
    if (FL_EXT_UNLIKELY(vals->start[e->abi_param[i]] < 0 || (size_t)at >= vals->n)) {
      snprintf(err->reason, sizeof err->reason, "arg_layout_changed:%zu", i);
      return 1;
    }
    int where = vals->where[at];
    if (FL_EXT_UNLIKELY(where && !fl_ext_memory_takes(spec, where, vals->index[at]))) {
      snprintf(err->reason, sizeof err->reason, "ptr_device_mismatch:%zu", i);
      return 1;
    }
    values[i] = vals->v[at];
  }
  if (fl_launch(e->plan->plan, stream, values, e->nabi, grid, err) == FL_OK) return 0;
  if (err->backend_submitted) {
    fl_ext_raise(self->state, err);
    return -1;
  }
  return 1;
}

#define STOCK(reason, miss) fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, reason, NULL, miss)

/* An exact tuple of 1-3 exact ints (a grid the caller computed, most often): 0, or what
 * fl_jit_read_grid says of any other. */
static FL_EXT_ALWAYS_INLINE int tuple_grid(PyObject *grid, int64_t g[3]) {
  Py_ssize_t n = PyTuple_GET_SIZE(grid);
  if (FL_EXT_UNLIKELY(n < 1 || n > 3)) return fl_jit_read_grid(grid, g);
  for (Py_ssize_t d = 0; d < 3; d++) {
    uint64_t w = 1;
    if (d < n && FL_EXT_UNLIKELY(!fl_ext_int_word(PyTuple_GET_ITEM(grid, d), &w))) return fl_jit_read_grid(grid, g);
    g[d] = (int64_t)w;
  }
  return 0;
}

/* The grid of a call to entry e, as Triton's run takes it: 0; 1 (a callable that is not e's grid
 * program: the full path calls it); -1 (not read here: Triton's path reads it, or raises). */
static FL_EXT_ALWAYS_INLINE int call_grid(const jit_entry *e, PyObject *const *pv, PyObject *grid, int64_t g[3]) {
  int r;
  if (grid_shaped(e, pv, grid, g) == 0) r = 0;
  else if (PyTuple_CheckExact(grid)) r = tuple_grid(grid, g) ? -1 : 0;
  else if (PyCallable_Check(grid)) r = grid_program(e, pv, grid, g);
  else r = fl_jit_read_grid(grid, g) ? -1 : 0; /* a list, a range, a numpy array, ... */
  if (r == 0 && FL_EXT_UNLIKELY((g[1] | g[2]) != 1) && fl_jit_grid_product_wraps(g)) return -1;
  return r;
}

/* Launches a call the memo matched: 0 with *res (the result, or NULL with an exception); 1 when
 * the grid is a callable to call, which the full path does (nothing was run). The only Python code
 * that can run here is a global's __eq__ in the grid's lookup (grid_source_value). */
static FL_EXT_ALWAYS_INLINE int memo_launch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs, PyObject *kwnames,
                       uint64_t stream, PyObject *const *pv, const fl_value *values, const uint64_t *words,
                       PyObject **res) {
  PyObject *grid = kw->grid;
  const jit_entry *e = self->memo.entry;
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
  if ((words ? fl_launch_words(e->plan->plan, stream, words, e->nabi, g, &err)
             : fl_launch(e->plan->plan, stream, values, e->nabi, g, &err)) == FL_OK) {
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
  if (fl_jit_find_lazy(self, k, vals)) return fl_jit_read_lazy(k, vals);
  PyObject *grid = kw->grid;
  *res = STOCK("first_call_of_variant", NULL);
  if (*res && *res != Py_None) {
    if (fl_jit_read_lazy(k, vals) == 0) fl_jit_bind(self, *res, grid, args, nargs, kwnames, k);
    else PyErr_Clear(); /* not bound: the next call is Triton's again */
  }
  return 1;
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
                                           PyObject *kwnames, int32_t device, uint64_t stream) {
  PyObject *grid = kw->grid;
  jit_bound b;
  if (bind_call(self, &b, args, nargs, kw->kwnames, kw->kwvals, kw->nkw)) return STOCK(b.why, NULL);
  jit_key k;
  jit_values vals, again;
  PyObject *res = NULL, *computed = NULL, *meta = NULL, *why_obj = NULL;
  const char *why = NULL;
  again.nheld = 0;
  int r = fl_jit_make_key(self, &b, device, &k, &vals);
  if (r != 0) {
    if (r > 0) res = STOCK(b.why, NULL);
    goto done;
  }
  int python = vals.nheld > 0; /* a tensor-like's attributes were read */
  if (python && (r = fl_jit_settled(self, &why, &why_obj)) != 0) {
    if (r > 0) res = fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
    goto done;
  }
  if (vals.nlazy && (r = lazy_pointers(self, kw, args, nargs, kwnames, &k, &vals, &res)) != 0) goto done;
  jit_entry *e = table_find(self, &k, key_hash(&k));
  if (!e || !e->plan) { /* a miss (Triton compiles; the policy binds), or a variant refused */
    res = e ? fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, e->refusal, NULL)
            : STOCK("first_call_of_variant", &k);
    goto done;
  }
  uint64_t gen = self->gen;
  int64_t g[3];
  fl_error err;
  int changed = 0;
  r = call_grid(e, b.vals, grid, g);
  if (r > 0 && fl_jit_learn_grid(self, e, grid, b.vals)) python = 1, r = call_grid(e, b.vals, grid, g);
  if (r > 0) {
    python = 1;
    r = fl_jit_called_grid(self, b.vals, grid, g, &computed, &meta);
    if (!computed) goto done;
    changed = fl_jit_meta_changed(self, meta, b.vals);
  }
  if (gen != self->gen) why = "table_changed"; /* the callable (or a global's __eq__) cleared it */
  else if (python && fl_jit_settled(self, &why, &why_obj) < 0) goto done;
  else if (changed) why = "grid_wrote_mapping";
  else if (r < 0) why = "grid_unreadable";
  if (why || why_obj) {
    PyObject *replay = computed ? fl_jit_replay_grid(self, computed, meta, changed) : Py_NewRef(grid);
    if (replay) res = fl_jit_stock(self, replay, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
    Py_XDECREF(replay);
    goto done;
  }
  if (computed) grid = computed; /* readable and the mapping untouched: what Triton gets if the plan refuses */
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
  r = launch_entry(self, e, launch, stream, g, &err);
  if (r == 0) {
    self->fast++;
    if (kw->kwvals == args + nargs && gen == self->gen) fl_jit_memo_set(self, e, &b, nargs, kw->kwnames);
    res = kernel;
    goto done;
  }
  Py_DECREF(kernel);
  if (r > 0) res = STOCK(err.reason, NULL);
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
  const char *why = fl_jit_dispatch_checks(self);
  if (why) return STOCK(why, NULL);
  /* The device and the stream first, as Triton's run reads them. */
  int32_t device;
  uint64_t stream;
  if (current_device(self, &device) < 0 || current_stream(self, device, &stream) < 0) return NULL;
  if (FL_EXT_UNLIKELY(self->device_fn || self->stream_fn)) { /* Python code ran */
    PyObject *why_obj;
    int s = fl_jit_settled(self, &why, &why_obj);
    if (s < 0) return NULL;
    if (s > 0) return fl_jit_stock(self, grid, args, nargs, kwnames, kw->has_grid, why, why_obj, NULL);
  }
  if (kw->kwvals == args + nargs) { /* the keywords' values follow the positional ones: the memo's form */
    PyObject *pv[JIT_MAX_PARAMS];
    fl_value values[JIT_MAX_PARAMS];
    uint64_t words_at[JIT_MAX_PARAMS + 1], *words = NULL; /* in words when the plan takes them */
    if (self->memo.entry && self->memo.entry->plan->args.words) words = words_at;
    PyObject *res;
    if (jit_memo_match(self, args, nargs, kw->kwnames, device, pv, values, words) == 0 &&
        memo_launch(self, kw, args, nargs, kwnames, stream, pv, values, words, &res) == 0)
      return res;
  }
  return full_dispatch(self, kw, args, nargs, kwnames, device, stream);
}
#undef STOCK

/* The gates of a compiled kernel's call (compiled.c), as this dispatcher keeps them for its kernel:
 * changes seen, Triton's reasons (a stock reason, launch hooks), then the device and the stream
 * unless the call passed one. Pre-run hooks are not the launcher's: Triton's runner never calls
 * them. 0 with the stream; 1 with *why (Triton's call); -1 with an exception. */
static int compiled_gates_closed(JitObject *self, const char **why) {
  if (fl_ext_watch_changed(&self->watch) && fl_jit_revalidate(self) < 0) return -1;
  if (self->stock_reason) return *why = "stock_reason", 1;
  for (Py_ssize_t h = 0; h < PyTuple_GET_SIZE(self->hook_lists); h++)
    if (PyList_GET_SIZE(PyTuple_GET_ITEM(self->hook_lists, h)) > 0) return *why = "launch_hooks", 1;
  return 0;
}

int fl_jit_compiled_gate(JitObject *self, uint64_t *stream, int have_stream, const char **why) {
  *why = NULL;
  int rc = compiled_gates_closed(self, why);
  if (rc || have_stream) return rc;
  int32_t device;
  if (current_device(self, &device) < 0 || current_stream(self, device, stream) < 0) return -1;
  if (FL_EXT_UNLIKELY(self->device_fn || self->stream_fn)) return compiled_gates_closed(self, why); /* Python ran */
  return 0;
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
  PyObject *res = dispatch(self, kw, args, nargs, kwnames);
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
PyObject *fl_jit_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
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
  return run_grid(jit, grid, args, nargs, kwnames);
}

PyObject *fl_jit_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  /* The caller holds `call` through the call, so its grid stays: kernel[grid] reuses a JitCall
   * (and replaces its grid) only while nobody but its dispatcher holds it. */
  JitCallObject *call = (JitCallObject *)callable;
  return run_grid(call->target, call->grid, args, PyVectorcall_NARGS(nargsf), kwnames);
}

