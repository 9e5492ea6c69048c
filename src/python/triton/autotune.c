/* autotune.c: the dispatcher of Triton's Autotuner, `kernel[grid](*args, **kwargs)` over
 * `@triton.autotune`.
 *
 * AutotuneDispatcher sits in an Autotuner's call slot (its instance attribute `run`; the class's
 * __getitem__ is jit.c's JitSubscript, which hands out a JitCall for it too). A call computes in C
 * what Triton's Autotuner.run computes its cache key from: the values of the parameters named in
 * `key`, and the dtype of every named argument that has one, in the order Triton reads them. The
 * C key is finer than Triton's (an int's and a float's type, a str's identity), so a key bound to
 * a config is one whose Triton key is the same tuple. A bound key launches the config Triton chose
 * for it: the config's keywords are appended and the inner kernel's dispatcher (jit.c) runs the
 * call; an inner that is not a JITFunction (a Heuristics) is called as Autotuner.run calls it.
 * The attributes Autotuner.run leaves behind are kept as it leaves them: `best_config` is the
 * config it ran (written when it differs from the one this dispatcher last wrote or a call through
 * Triton's run may have changed it; code that assigns best_config itself between calls is not
 * seen), `nargs` is None after a call that returned.
 * A config with a pre_hook has it called as Autotuner.run calls it, with `nargs` set meanwhile.
 * Triton's Autotuner.run serves everything else before anything is submitted: a key not bound yet
 * (it benchmarks or reads its cache; the policy binds the config it picked), warmup, an argument
 * whose kind the key does not know, a keyword a config also sets, and what
 * the policy (fastlaunch.triton_jit) names when a watched dict changes (the tuner's cache, knobs). */
#include "autotune_base.h"


static void entry_release(at_entry *e) {
  PyMem_Free(e->key);
  Py_XDECREF(e->config);
  Py_XDECREF(e->refusal);
  Py_XDECREF(e->names);
  Py_XDECREF(e->values);
  Py_XDECREF(e->kw_out);
  Py_XDECREF(e->kw_in);
  Py_XDECREF(e->keep);
  Py_XDECREF(e->pre_hook);
  memset(e, 0, sizeof *e);
}

/* Empties the table first, then releases what it held: a __del__ those releases run may call this
 * dispatcher again and must find an empty table, not a half-released one. */
static void table_clear(AutotuneObject *self) {
  size_t n = self->count;
  self->gen++;
  self->count = 0;
  self->last_best = NULL;
  if (!n) return;
  at_entry *old = PyMem_Malloc(n * sizeof *old);
  if (!old) { /* no memory for the copy: each entry taken out of the table before its release */
    for (size_t i = 0; i < n; i++) {
      at_entry e = self->entries[i];
      memset(&self->entries[i], 0, sizeof e);
      entry_release(&e);
    }
    return;
  }
  memcpy(old, self->entries, n * sizeof *old);
  memset(self->entries, 0, n * sizeof *old);
  for (size_t i = 0; i < n; i++) entry_release(&old[i]);
  PyMem_Free(old);
}

/* ---- Triton's path ---- */
static void count_stock(AutotuneObject *self, const char *reason, PyObject *reason_obj) {
  self->t.stock++;
  fl_ext_count_reason(self->t.stock_counts, reason, reason_obj);
}

/* Autotuner.run(*args, **kwargs) (grid= and warmup= among the keywords, or added for the
 * kernel[grid] form). */
static PyObject *call_stock(AutotuneObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                            PyObject *kwnames) {
  self->last_best = NULL;
  self->nargs_dirty = 1;
  if (!grid) return PyObject_Vectorcall(self->t.stock_run, args, nargs, kwnames);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *names = PyTuple_New(nkw + 2);
  PyObject **argv = PyMem_Malloc((nargs + (size_t)nkw + 2) * sizeof(PyObject *));
  PyObject *r = NULL;
  if (names && argv) {
    memcpy(argv, args, (nargs + (size_t)nkw) * sizeof(PyObject *));
    for (Py_ssize_t i = 0; i < nkw; i++) PyTuple_SET_ITEM(names, i, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
    PyTuple_SET_ITEM(names, nkw, Py_NewRef(self->t.state->str_grid));
    PyTuple_SET_ITEM(names, nkw + 1, Py_NewRef(self->t.state->str_warmup));
    argv[nargs + (size_t)nkw] = grid;
    argv[nargs + (size_t)nkw + 1] = Py_False;
    r = PyObject_Vectorcall(self->t.stock_run, argv, nargs, names);
  } else {
    PyErr_NoMemory();
  }
  Py_XDECREF(names);
  PyMem_Free(argv);
  return r;
}

static PyObject *stock(AutotuneObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames,
                       const char *reason, PyObject *reason_obj, const at_key *miss) {
  count_stock(self, reason, reason_obj);
  PyObject *res = call_stock(self, grid, args, nargs, kwnames);
  if (!res || !miss) return res;
  /* After a miss Triton has the key's config: the policy binds it (or says why not). */
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *key = PyBytes_FromStringAndSize((const char *)miss->words, (Py_ssize_t)(miss->n * sizeof(uint64_t)));
  PyObject *pos = PyTuple_New((Py_ssize_t)nargs), *kw = PyDict_New(), *r = NULL;
  if (key && pos && kw) {
    for (size_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(pos, (Py_ssize_t)i, Py_NewRef(args[i]));
    int ok = 1;
    for (Py_ssize_t i = 0; i < nkw && ok; i++)
      ok = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + (size_t)i]) == 0;
    if (ok) r = PyObject_CallMethod(self->t.policy, "bind", "OOO", key, pos, kw);
  }
  if (!r) PyErr_WriteUnraisable(self->t.policy); /* the launch happened: its result stands */
  Py_XDECREF(r);
  Py_XDECREF(key);
  Py_XDECREF(pos);
  Py_XDECREF(kw);
  return res;
}

/* policy.revalidate() -> (stock reason or None, watched dicts, inner run). The fields are stored
 * together (the inner and whether it is a JitDispatcher never disagree), the old references
 * released last. */
static int revalidate(AutotuneObject *self) {
  PyObject *r = PyObject_CallMethod(self->t.policy, "revalidate", NULL);
  if (!r) return -1;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3) {
    Py_DECREF(r);
    return PyErr_SetString(PyExc_TypeError, "revalidate(): expected (reason, watched, inner)"), -1;
  }
  PyObject *reason = PyTuple_GET_ITEM(r, 0), *inner = PyTuple_GET_ITEM(r, 2);
  PyObject *old_reason = self->t.stock_reason, *old_inner = self->t.inner;
  self->t.stock_reason = reason == Py_None ? NULL : Py_NewRef(reason);
  self->t.inner = Py_NewRef(inner);
  self->inner_is_jit = Py_TYPE(inner) == self->t.state->jit_type;
  self->last_best = NULL;
  int rc = fl_ext_watch_set(&self->t.watch, self->t.state, PyTuple_GET_ITEM(r, 1));
  Py_XDECREF(old_reason);
  Py_XDECREF(old_inner);
  Py_DECREF(r);
  return rc;
}

/* ---- the call ---- */

/* The kwnames of the inner call (a new reference): the call's, the config's (`names`, the entry's,
 * held by the caller), and grid=/warmup= when the inner is called as Autotuner.run calls it and the
 * call came as kernel[grid]. Cached in the entry, unless the allocation's GC pass changed the table. */
static PyObject *inner_kwnames(AutotuneObject *self, at_entry *e, PyObject *names, PyObject *kwnames, int with_grid) {
  int form = with_grid ? 1 : 0;
  if (e->kw_out && e->kw_form == form && fl_ext_same_names(e->kw_in, kwnames)) return Py_NewRef(e->kw_out);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nc = PyTuple_GET_SIZE(names);
  uint64_t gen = self->gen;
  PyObject *out = PyTuple_New(nkw + nc + (with_grid ? 2 : 0));
  if (!out) return NULL;
  for (Py_ssize_t i = 0; i < nkw; i++) PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
  for (Py_ssize_t i = 0; i < nc; i++) PyTuple_SET_ITEM(out, nkw + i, Py_NewRef(PyTuple_GET_ITEM(names, i)));
  if (with_grid) {
    PyTuple_SET_ITEM(out, nkw + nc, Py_NewRef(self->t.state->str_grid));
    PyTuple_SET_ITEM(out, nkw + nc + 1, Py_NewRef(self->t.state->str_warmup));
  }
  if (gen != self->gen) return out; /* the entry is not the table's any more */
  PyObject *old_out = e->kw_out, *old_in = e->kw_in;
  e->kw_out = Py_NewRef(out);
  e->kw_in = Py_XNewRef(kwnames); /* held: a **kwargs call's new tuple has the same names */
  e->kw_form = form;
  Py_XDECREF(old_out);
  Py_XDECREF(old_in);
  return out;
}

/* What Autotuner.run leaves behind: best_config is the config; nargs None (after a return) or the
 * named positional arguments (after an exception). */
static int leave_attrs(AutotuneObject *self, at_entry *e, PyObject *const *args, size_t nargs, int raised) {
  if (raised) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < nargs && (Py_ssize_t)i < PyTuple_GET_SIZE(self->t.arg_names); i++) /* zip's length */
      if (PyDict_SetItem(d, PyTuple_GET_ITEM(self->t.arg_names, (Py_ssize_t)i), args[i]) < 0) Py_CLEAR(d);
    if (!d || PyObject_SetAttrString(self->t.tuner, "nargs", d) < 0) PyErr_Clear();
    Py_XDECREF(d);
    self->nargs_dirty = 1;
    PyErr_Restore(et, ev, tb);
    return 0;
  }
  if (self->last_best != e->config) {
    if (PyObject_SetAttrString(self->t.tuner, "best_config", e->config) < 0) return -1;
    self->last_best = e->config;
  }
  if (self->nargs_dirty) {
    if (PyObject_SetAttrString(self->t.tuner, "nargs", Py_None) < 0) return -1;
    self->nargs_dirty = 0;
  }
  return 0;
}

static int keyword_clash(const at_entry *e, PyObject *kwnames) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++)
    if (fl_ext_name_index(e->names, PyTuple_GET_ITEM(kwnames, i)) >= 0) return 1;
  return 0;
}

/* grid: the kernel[grid] form's grid, or NULL for the run() form (grid= and warmup= are among
 * the keywords, and go to the inner run as they came). */
static inline PyObject *at_dispatch_key(AutotuneObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                        PyObject *kwnames, int warmup, at_key *kp) {
#define STOCK(reason, miss) stock(self, grid, args, nargs, kwnames, reason, NULL, miss)
  if (warmup) return STOCK("warmup", NULL);
  if (FL_EXT_UNLIKELY(fl_ext_watch_changed(&self->t.watch)) && revalidate(self) < 0) return NULL;
  if (self->t.stock_reason) return stock(self, grid, args, nargs, kwnames, NULL, self->t.stock_reason, NULL);
  at_key *k = kp;
  const char *why = NULL;
  if (fl_at_make_key(self, args, nargs, kwnames, k, &why)) return STOCK(why, NULL);
  uint64_t h = fl_at_key_hash(k);
  at_entry *e = fl_at_table_find(self, k, h);
  if (!e) return STOCK("first_call_of_key", k);
  if (!e->config) return stock(self, grid, args, nargs, kwnames, NULL, e->refusal, NULL);
  /* From here on Python code can run (an allocation's GC pass, the attributes' setters, the inner
   * call), and may clear the table or revalidate: what the call needs from the entry and the
   * dispatcher is taken now, with strong references. */
  PyObject *inner = Py_NewRef(self->t.inner);
  int inner_is_jit = self->inner_is_jit;
  int with_grid = grid && !inner_is_jit;
  /* The entry's inner kwnames for these names were made after this check passed. */
  int known = e->kw_out && e->kw_form == with_grid && fl_ext_same_names(e->kw_in, kwnames);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nc = PyTuple_GET_SIZE(e->values);
  if ((!known && keyword_clash(e, kwnames)) || nkw + nc + 2 > AT_MAX_KW || nargs > 256) {
    Py_DECREF(inner);
    return STOCK(nargs > 256 ? "positional_args" : nkw + nc + 2 > AT_MAX_KW ? "keywords" : "keyword_set_by_config", NULL);
  }
  PyObject *config = Py_NewRef(e->config), *values = Py_NewRef(e->values), *enames = Py_NewRef(e->names);
  PyObject *pre_hook = Py_XNewRef(e->pre_hook);
  PyObject *res = NULL, *names = inner_kwnames(self, e, enames, kwnames, with_grid);
  if (!names) goto done;
  PyObject *argv[AT_MAX_KW + 1 + 256];
  memcpy(argv, args, (nargs + (size_t)nkw) * sizeof(PyObject *));
  for (Py_ssize_t i = 0; i < nc; i++) argv[nargs + (size_t)(nkw + i)] = PyTuple_GET_ITEM(values, i);
  if (with_grid) {
    argv[nargs + (size_t)(nkw + nc)] = grid;
    argv[nargs + (size_t)(nkw + nc) + 1] = Py_False;
  }
  at_entry held = {.config = config};
  if (leave_attrs(self, &held, args, nargs, 0) < 0) goto done;
  if (pre_hook && fl_at_config_pre_hook(self, pre_hook, grid, args, nargs, kwnames, enames, values) < 0) goto done;
  res = inner_is_jit && grid ? fl_ext_jit_run_grid(inner, grid, argv, nargs, names)
                             : PyObject_Vectorcall(inner, argv, nargs, names);
  if (!res) {
    leave_attrs(self, &held, args, nargs, 1);
  } else {
    self->t.fast++;
    if (pre_hook && leave_attrs(self, &held, args, nargs, 0) < 0) PyErr_WriteUnraisable(self->t.tuner); /* launched */
  }
done:
  Py_XDECREF(pre_hook);
  Py_DECREF(inner);
  Py_DECREF(config);
  Py_DECREF(values);
  Py_DECREF(enames);
  Py_XDECREF(names);
  return res;
#undef STOCK
}

/* A call; the key holds the dtypes it is made of until the call is done. */
static PyObject *at_dispatch(AutotuneObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                             PyObject *kwnames, int warmup) {
  at_key k;
  k.nheld = 0;
  PyObject *res = at_dispatch_key(self, grid, args, nargs, kwnames, warmup, &k);
  fl_at_key_release(&k);
  return res;
}

PyObject *fl_ext_autotune_call(PyObject *dispatcher, PyObject *grid, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
  PyObject *result;
  Py_BEGIN_CRITICAL_SECTION(dispatcher); /* kernel[grid], or Heuristics' call into this dispatcher */
  result = at_dispatch((AutotuneObject *)dispatcher, grid, args, PyVectorcall_NARGS(nargsf), kwnames, 0);
  Py_END_CRITICAL_SECTION();
  return result;
}

PyObject **fl_ext_autotune_spare(PyObject *dispatcher) { return &((AutotuneObject *)dispatcher)->t.spare_call; }

/* The run() form's kwnames without grid= and warmup= (at grid_at and warmup_at), remembered by
 * their names: a subclass's super().run(*args, **kwargs) builds a new tuple each call. */
static PyObject *stripped_names(AutotuneObject *self, PyObject *kwnames, Py_ssize_t grid_at, Py_ssize_t warmup_at) {
  if (self->strip_out && fl_ext_same_names(self->strip_in, kwnames)) return self->strip_out;
  Py_ssize_t n = PyTuple_GET_SIZE(kwnames), j = 0;
  PyObject *out = PyTuple_New(n - 2);
  if (!out) return NULL;
  for (Py_ssize_t i = 0; i < n; i++)
    if (i != grid_at && i != warmup_at) PyTuple_SET_ITEM(out, j++, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
  Py_XSETREF(self->strip_in, Py_NewRef(kwnames));
  Py_XSETREF(self->strip_out, out);
  return out;
}

/* run(*args, grid=..., warmup=..., **kwargs): Triton's signature. Over a JitDispatcher, a call with
 * grid= and warmup=False takes the kernel[grid] form, which the inner JIT's memo serves. */
static PyObject *at_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  AutotuneObject *self = (AutotuneObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, grid_at = -1, warmup_at = -1;
  int warmup = 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, i);
    if (fl_ext_name_is(name, self->t.state->str_grid)) {
      grid_at = i;
    } else if (fl_ext_name_is(name, self->t.state->str_warmup)) {
      warmup_at = i;
      warmup = PyObject_IsTrue(args[nargs + (size_t)i]);
      if (warmup < 0) return NULL;
    }
  }
  if (PyErr_Occurred()) return NULL;
  if (self->inner_is_jit && grid_at >= 0 && warmup_at >= 0 && !warmup && nargs <= 256 && nkw <= AT_MAX_KW) {
    PyObject *names = stripped_names(self, kwnames, grid_at, warmup_at);
    if (!names) return NULL;
    PyObject *argv[256 + AT_MAX_KW], *grid = args[nargs + (size_t)grid_at];
    memcpy(argv, args, nargs * sizeof(PyObject *));
    for (Py_ssize_t i = 0, j = 0; i < nkw; i++)
      if (i != grid_at && i != warmup_at) argv[nargs + (size_t)j++] = args[nargs + (size_t)i];
    Py_INCREF(names);
    PyObject *r = at_dispatch(self, grid, argv, nargs, names, 0);
    Py_DECREF(names);
    return r;
  }
  /* grid= and warmup= are keywords here: not parameters, so not in the key; the inner run gets them. */
  return at_dispatch(self, NULL, args, nargs, kwnames, warmup);
}

FL_EXT_VECTORCALL_LOCKED(at_vectorcall, at_vectorcall_unlocked, FL_EXT_SELF)

/* The run() form with its keywords in a dict: a subclass's super().run(*args, **kwargs) reaches
 * TunerSlot's bound form with the dict CPython built, read here in place (no kwnames tuple made per
 * call). The names without grid= and warmup= are compared with the last ones by identity; any other
 * shape of call takes the vectorcall's path. */
PyObject *fl_at_call_dict(PyObject *callable, PyObject *const *args, size_t nargs, PyObject *kwargs) {
  AutotuneObject *self = (AutotuneObject *)callable;
  Py_ssize_t nkw = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
  if (!self->inner_is_jit || nargs > 256 || nkw < 2 || nkw > AT_MAX_KW + 2)
    return PyObject_VectorcallDict(callable, args, nargs, kwargs);
  PyObject *argv[256 + AT_MAX_KW], *keys[AT_MAX_KW + 2], *grid = NULL, *warmup = NULL, *key, *value;
  memcpy(argv, args, nargs * sizeof(PyObject *));
  PyObject *names = self->strip_out;
  int same = names != NULL && PyTuple_GET_SIZE(names) == nkw - 2;
  Py_ssize_t pos = 0, j = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    if (!grid && fl_ext_name_is(key, self->t.state->str_grid)) {
      grid = value;
    } else if (!warmup && fl_ext_name_is(key, self->t.state->str_warmup)) {
      warmup = value;
    } else {
      if (j >= AT_MAX_KW) return PyObject_VectorcallDict(callable, args, nargs, kwargs);
      same = same && j < nkw - 2 && PyTuple_GET_ITEM(names, j) == key;
      keys[j] = key;
      argv[nargs + (size_t)j++] = value;
    }
  }
  if (PyErr_Occurred()) return NULL;
  /* warmup= a bool: nothing here runs Python code before the dispatch, so the names and the values
   * read above stay as they are; any other warmup (its __bool__ could change them) goes the
   * vectorcall's way. */
  if (!grid || warmup != Py_False) return PyObject_VectorcallDict(callable, args, nargs, kwargs);
  if (!same) {
    PyObject *out = PyTuple_New(j);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < j; i++) PyTuple_SET_ITEM(out, i, Py_NewRef(keys[i]));
    Py_CLEAR(self->strip_in); /* the vectorcall's form compares its own kwnames again */
    Py_XSETREF(self->strip_out, out);
    names = out;
  }
  Py_INCREF(names);
  Py_INCREF(kwargs); /* its values are the call's arguments, borrowed */
  PyObject *r = at_dispatch(self, grid, argv, nargs, names, 0);
  Py_DECREF(kwargs);
  Py_DECREF(names);
  return r;
}

/* ---- construction and the policy's methods ---- */
static PyObject *at_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"autotuner", "stock_run", "policy", "arg_names", "key_params", "configs", NULL};
  PyObject *autotuner, *stock_run, *policy, *names, *keys, *configs;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO$O!O!O!:AutotuneDispatcher", kwlist, &autotuner, &stock_run,
                                   &policy, &PyTuple_Type, &names, &PyTuple_Type, &keys, &PyList_Type, &configs))
    return NULL;
  if (fl_tuner_check_names(names) < 0) return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  AutotuneObject *self = (AutotuneObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  if (fl_tuner_init(&self->t, st, at_vectorcall, autotuner, stock_run, policy, names) < 0) {
    Py_DECREF(self);
    return NULL;
  }
  self->configs = Py_NewRef(configs);
  self->nkeys = PyTuple_GET_SIZE(keys);
  self->key_params = PyMem_Calloc((size_t)(self->nkeys ? self->nkeys : 1), sizeof(Py_ssize_t));
  self->entries = PyMem_Calloc(AT_MAX_ENTRIES, sizeof(at_entry));
  self->nargs_dirty = 1;
  if (!self->key_params || !self->entries) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t j = 0; j < self->nkeys; j++) {
    Py_ssize_t p = PyLong_AsSsize_t(PyTuple_GET_ITEM(keys, j));
    if (p < 0 || p >= PyTuple_GET_SIZE(names)) {
      Py_DECREF(self);
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "key_params[%zd]: not an index into arg_names", j);
      return NULL;
    }
    self->key_params[j] = p;
  }
  return (PyObject *)self;
}

/* _insert(key bytes, config or None, names, values, keep, refusal or None) */
static PyObject *at_insert_unlocked(PyObject *op, PyObject *args) {
  AutotuneObject *self = (AutotuneObject *)op;
  PyObject *key, *config, *names, *values, *keep, *refusal;
  if (!PyArg_ParseTuple(args, "O!OO!O!O!O:_insert", &PyBytes_Type, &key, &config, &PyTuple_Type, &names, &PyTuple_Type,
                        &values, &PyTuple_Type, &keep, &refusal))
    return NULL;
  if (PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(values))
    return PyErr_Format(PyExc_ValueError, "_insert(): %zd names for %zd values", PyTuple_GET_SIZE(names),
                        PyTuple_GET_SIZE(values));
  Py_ssize_t nb = PyBytes_GET_SIZE(key);
  if (nb % 8 || nb / 8 > AT_MAX_KEY) return PyErr_Format(PyExc_ValueError, "_insert(): a key of %zd bytes", nb);
  at_key k;
  k.n = (size_t)nb / 8;
  memcpy(k.words, PyBytes_AS_STRING(key), (size_t)nb);
  /* The config's pre_hook read first (its getattr may run Python code, which may call in): an entry
   * is never seen half made. */
  PyObject *pre_hook = NULL;
  if (config != Py_None && fl_ext_optional_attr(config, self->t.state->str_pre_hook, &pre_hook) < 0) return NULL;
  if (pre_hook == Py_None) Py_CLEAR(pre_hook);
  uint64_t h = fl_at_key_hash(&k);
  at_entry *e = fl_at_table_find(self, &k, h);
  if (!e) {
    if (self->count >= AT_MAX_ENTRIES) return Py_XDECREF(pre_hook), Py_NewRef(Py_False); /* Triton keeps the others */
    e = &self->entries[self->count];
    e->key = PyMem_Malloc(k.n ? k.n * sizeof(uint64_t) : 1);
    if (!e->key) return Py_XDECREF(pre_hook), PyErr_NoMemory();
    memcpy(e->key, k.words, k.n * sizeof(uint64_t));
    e->nkey = k.n;
    e->hash = h;
    self->count++;
  }
  /* Every field stored, then the old ones released: a __del__ sees the entry whole. */
  PyObject *old[8] = {e->config, e->refusal, e->names, e->values, e->keep, e->kw_out, e->kw_in, e->pre_hook};
  e->pre_hook = pre_hook;
  e->config = config == Py_None ? NULL : Py_NewRef(config);
  e->refusal = refusal == Py_None ? NULL : Py_NewRef(refusal);
  e->names = Py_NewRef(names);
  e->values = Py_NewRef(values);
  e->keep = Py_NewRef(keep);
  e->kw_out = e->kw_in = NULL;
  self->gen++;
  if (!e->config && !e->refusal) e->refusal = PyUnicode_FromString("refused");
  for (int i = 0; i < 8; i++) Py_XDECREF(old[i]);
  Py_RETURN_TRUE;
}

static PyObject *at_clear_method_unlocked(PyObject *op, PyObject *unused) {
  AutotuneObject *self = (AutotuneObject *)op;
  (void)unused;
  table_clear(self);
  Py_RETURN_NONE;
}

static PyObject *at_invalidate_unlocked(PyObject *op, PyObject *unused) {
  AutotuneObject *self = (AutotuneObject *)op;
  (void)unused;
  FL_EXT_STORE(self->t.watch.force, 1);
  Py_RETURN_NONE;
}

static PyObject *at_get_counts_unlocked(PyObject *op, void *closure) {
  AutotuneObject *self = (AutotuneObject *)op;
  (void)closure;
  PyObject *reasons = PyDict_Copy(self->t.stock_counts);
  if (!reasons) return NULL;
  return Py_BuildValue("{sKsKsNsn}", "fast", self->t.fast, "stock", self->t.stock, "stock_reasons", reasons,
                       "variants", (Py_ssize_t)self->count);
}

static int at_traverse(PyObject *op, visitproc visit, void *arg) {
  AutotuneObject *self = (AutotuneObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->configs);
  for (size_t i = 0; i < self->count; i++) {
    Py_VISIT(self->entries[i].config);
    Py_VISIT(self->entries[i].values);
    Py_VISIT(self->entries[i].keep);
  }
  return fl_tuner_traverse(&self->t, visit, arg);
}

static int at_clear(PyObject *op) {
  AutotuneObject *self = (AutotuneObject *)op;
  fl_tuner_clear(&self->t);
  Py_CLEAR(self->configs);
  Py_CLEAR(self->strip_in);
  Py_CLEAR(self->kw_seen);
  Py_CLEAR(self->strip_out);
  if (self->entries) table_clear(self);
  return 0;
}

static void at_dealloc(PyObject *op) {
  AutotuneObject *self = (AutotuneObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (self->t.weakrefs) PyObject_ClearWeakRefs(op);
  at_clear(op);
  fl_tuner_free(&self->t);
  PyMem_Free(self->key_params);
  PyMem_Free(self->entries);
  tp->tp_free(self);
  Py_DECREF(tp);
}

FL_EXT_METHOD_LOCKED(at_insert, at_insert_unlocked)
FL_EXT_METHOD_LOCKED(at_clear_method, at_clear_method_unlocked)
FL_EXT_METHOD_LOCKED(at_invalidate, at_invalidate_unlocked)
FL_EXT_GETTER_LOCKED(at_get_counts, at_get_counts_unlocked)

static PyMethodDef at_methods[] = {
    {"_insert", at_insert, METH_VARARGS,
     "_insert(key, config, names, values, keep, refusal): binds a key to the config Triton chose"},
    {"clear", at_clear_method, METH_NOARGS, "clear(): forgets every bound key"},
    {"invalidate", at_invalidate, METH_NOARGS,
     "invalidate(): asks the policy to revalidate at the next call"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef at_getset[] = {
    {"counts", at_get_counts, NULL, "fast and stock calls, stock reasons, bound keys", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef at_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(AutotuneObject, t.vectorcall), Py_READONLY, NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(AutotuneObject, t.weakrefs), Py_READONLY, NULL},
    {"autotuner", Py_T_OBJECT_EX, offsetof(AutotuneObject, t.tuner), Py_READONLY, "the Autotuner it serves"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot at_slots[] = {
    {Py_tp_new, at_new},
    {Py_tp_dealloc, at_dealloc},
    {Py_tp_traverse, at_traverse},
    {Py_tp_clear, at_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, at_methods},
    {Py_tp_getset, at_getset},
    {Py_tp_members, at_members},
    {Py_tp_doc, "AutotuneDispatcher(autotuner, stock_run, policy, *, arg_names, key_params, configs)\n--\n\n"
                "An Autotuner's call slot"},
    {0, NULL},
};

static PyType_Spec at_spec = {
    .name = "fastlaunch._C.AutotuneDispatcher",
    .basicsize = sizeof(AutotuneObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = at_slots,
};

int fl_ext_add_autotune_type(PyObject *module, fl_ext_state *st) {
  st->str_dtype = PyUnicode_InternFromString("dtype");
  if (!st->str_dtype) return -1;
  st->autotune_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &at_spec, NULL);
  if (!st->autotune_type) return -1;
  return PyModule_AddType(module, st->autotune_type);
}
