/* entry.c: FinalizedLaunch, the object installed into a generated call slot. Its vectorcall makes
 * every steady-state decision, in C and only here (a profiler or debug flag, launch hooks, the
 * launcher the plan was built from, the call's keywords), then launches the plan; anything else
 * goes back to the bound launch (bind.py, the promotion policy) through its entry_fallback method. */
#include "call_args.h"
#include "sequence.h"
#include "watch.h"

/* The entry skips its two lookups (a flag in a module's or a dict's entries, the autotuner's
 * launchers) while none of the dicts they read changed (watch.h): dict watchers on 3.12+, version
 * tags before. The profiler's and the debug mode's flags, two launch hooks' names, two more. */
#define FL_ENTRY_CACHED_FLAGS 6

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  fl_PlanObject *plan;
  PyObject *bound;         /* the bound launch: decides what to do when the entry cannot launch */
  PyObject *autotuner;     /* may be None: then no launcher check */
  PyObject *launcher_attr; /* the autotuner attribute holding its launchers */
  PyObject *launcher;      /* the launcher the plan was built from */
  PyObject *hook_lists;    /* tuple of lists: any non-empty list sends the call back */
  PyObject *flags;         /* tuple of (object or dict, name, reason): any true flag sends it back */
  unsigned long long calls;
  unsigned long long fallbacks;
  /* Steady: every flag was off and the launchers were found; valid while `watch` sees no change
   * in the flags' module dicts and the autotuner's dict, and that dict is still the instance's. */
  int steady; /* read and written as relaxed atomics (free-threaded builds: read without a lock) */
  fl_ext_watch watch;
  PyObject *autotuner_dict; /* borrowed (compared, never read): `watch` holds it while steady */
  /* Where the autotuner keeps its instance dict (the slot stays put for the object's life, which
   * the entry holds): a replaced __dict__ shows there. */
  PyObject **dict_slot;
  /* The autotuner's launchers list, held. A list the autotuner no longer has is kept in `retired` on
   * free-threaded builds (another thread may be reading it without a lock) until the entry goes. */
  PyObject *launchers_seen;
  PyObject *retired;
  /* The dicts the first flags are read from (borrowed: the flags tuple holds the modules and dicts,
   * and a module's dict is the same object for the module's life): a module's dict, a dict itself,
   * NULL for a flag on another object (read with getattr). */
  PyObject *flag_dict[FL_ENTRY_CACHED_FLAGS];
  /* grid_args: the call positions of the grid's three values (Inductor's FixedGrid: a template
   * kernel's launcher takes its grid as its last arguments, the plan skips them); -1: the plan's. */
  Py_ssize_t grid_pos[3];
  /* Global scratch (scratch=): the allocator's ContextVar, read per call and called as the launcher
   * calls it; the plan's last nhidden arguments are the launcher's trailing pointers, the first of
   * them the buffer's address. NULL: none. */
  PyObject *scratch_var;
  unsigned long long scratch_size, scratch_align;
  unsigned scratch_ctas;
  Py_ssize_t nhidden;
  fl_ext_scratch_ints scratch_ints;
} EntryObject;

/* Hands the call to the bound launch: bound.entry_fallback(reason, stable, args, kwargs). The
 * reason is `reason_str` (decoded leniently: it may be cut inside a character) or, when given,
 * `reason_given`. */
static Py_NO_INLINE PyObject *fallback_obj(EntryObject *self, const char *reason_str, PyObject *reason_given, bool stable,
                                           PyObject *const *args, size_t nargs, PyObject *kwnames) {
  FL_EXT_COUNT(self->fallbacks);
  PyObject *tuple = NULL, *kwargs = NULL, *reason_obj = NULL, *result = NULL;
  tuple = PyTuple_New((Py_ssize_t)nargs);
  if (!tuple) goto done;
  for (size_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, Py_NewRef(args[i]));
  kwargs = PyDict_New();
  if (!kwargs) goto done;
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++)
      if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, k), args[nargs + (size_t)k]) < 0) goto done;
  }
  reason_obj = reason_given ? Py_NewRef(reason_given)
                            : PyUnicode_DecodeUTF8(reason_str, (Py_ssize_t)strlen(reason_str), "replace");
  if (!reason_obj) goto done;
  result = PyObject_CallMethodObjArgs(self->bound, self->state->str_fallback, reason_obj, stable ? Py_True : Py_False,
                                      tuple, kwargs, NULL);
done:
  Py_XDECREF(tuple);
  Py_XDECREF(kwargs);
  Py_XDECREF(reason_obj);
  return result;
}

static PyObject *fallback(EntryObject *self, const char *reason, bool stable, PyObject *const *args, size_t nargs,
                          PyObject *kwnames) {
  return fallback_obj(self, reason, NULL, stable, args, nargs, kwnames);
}

/* Holds `launchers` (a new reference, taken) as the list the entry checks. The one it replaces is
 * released, or on free-threaded builds kept in `retired`: a call in another thread may be reading it.
 * 0, or -1 with an exception. */
static int set_launchers(EntryObject *self, PyObject *launchers) {
  PyObject *old = self->launchers_seen;
  if (old == launchers) return Py_DECREF(launchers), 0;
#ifdef Py_GIL_DISABLED
  if (old && ((!self->retired && !(self->retired = PyList_New(0))) || PyList_Append(self->retired, old) < 0))
    return Py_DECREF(launchers), -1;
#endif
  FL_EXT_STORE(self->launchers_seen, launchers);
  Py_XDECREF(old);
  return 0;
}

/* Whether `launchers` is a list holding exactly `launcher`: its size and first item read as CPython's
 * own lock-free list reads read them (a list's items are freed late on free-threaded builds). */
static inline int launchers_same(PyObject *launchers, PyObject *launcher) {
  if (!launchers || !PyList_Check(launchers) || FL_EXT_LOAD(((PyVarObject *)launchers)->ob_size) != 1) return 0;
  PyObject **items = FL_EXT_LOAD(((PyListObject *)launchers)->ob_item);
  return items && FL_EXT_LOAD(items[0]) == launcher;
}

/* CPython 3.13.0 sends no dict-watcher event for an attribute stored in an object's inline values
 * (python/cpython#125608, fixed in 3.13.1): there the autotuner is given a plain dict of the same
 * contents, once, as `obj.__dict__ = dict(vars(obj))` does, so that `autotuner.launchers = [...]`
 * reaches the watch. Elsewhere nothing is done. A refusal (no settable dict) leaves it as it is. */
static void plain_dict_on_3_13_0(PyObject *obj) {
#if PY_VERSION_HEX >= 0x030D0000 /* built for 3.13 or later: Py_Version says which release runs it */
  if (Py_Version >= 0x030D0100) return;
  PyObject *d = PyObject_GenericGetDict(obj, NULL);
  PyObject *copy = d ? PyDict_Copy(d) : NULL;
  if (!copy || PyObject_SetAttrString(obj, "__dict__", copy) < 0) PyErr_Clear();
  Py_XDECREF(copy);
  Py_XDECREF(d);
#else
  (void)obj;
#endif
}

/* Steps 1 and 2 the full way: every flag looked up, the autotuner's launchers read from its dict.
 * Returns 0 (go on: launchers, if any, in self->launchers_seen), 1 with *why set (a flag is on:
 * its reason), 2 (the launchers changed) or -1 with an exception. When every flag is off in a way
 * only a change of its module's dict can undo, and the launchers were found in the instance dict,
 * the entry becomes steady: those dicts are watched and later calls skip this while none changes. */
static Py_NO_INLINE int entry_refresh(EntryObject *self, PyObject **why) {
  FL_EXT_STORE(self->steady, 0);
  bool can_steady = PyTuple_GET_SIZE(self->flags) <= FL_ENTRY_CACHED_FLAGS;
  /* 1. Flags such as the profiler's: while one is set, the stock path records what it must. A flag
   * on a module is read straight from the module's dict (the common case: the profiler's flag), a
   * flag on a dict from its entries (a launcher's globals: its launch hooks); a missing attribute
   * or key counts as off. */
  for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(self->flags); f++) {
    PyObject *spec = PyTuple_GET_ITEM(self->flags, f);
    PyObject *owner = PyTuple_GET_ITEM(spec, 0), *name = PyTuple_GET_ITEM(spec, 1);
    int on;
    PyObject *mdict = f < FL_ENTRY_CACHED_FLAGS ? self->flag_dict[f] : NULL;
    if (!mdict && PyModule_CheckExact(owner)) mdict = PyModule_GetDict(owner);
    if (!mdict && PyDict_CheckExact(owner)) mdict = owner;
    if (mdict) {
      PyObject *value;
      if (PyDict_GetItemRef(mdict, name, &value) < 0) return -1;
      on = value ? (value == Py_True ? 1 : value == Py_False ? 0 : PyObject_IsTrue(value)) : 0;
      /* Only a missing flag or an immutable false value (False, None, an int 0: the debug mode's
       * active count) stays off while the dict is unchanged: another object's truth may change in
       * place, an immutable one only through the dict. */
      if (!(!value || (on == 0 && (value == Py_False || value == Py_None || PyLong_CheckExact(value)))))
        can_steady = false;
      Py_XDECREF(value);
    } else {
      can_steady = false;
      PyObject *value = PyObject_GetAttr(owner, name);
      if (!value) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        on = 0;
      } else {
        on = PyObject_IsTrue(value);
        Py_DECREF(value);
      }
    }
    if (on < 0) return -1;
    if (on) return *why = PyTuple_GET_ITEM(spec, 2), 1;
  }
  /* 2. The autotuner still has exactly the launcher the plan was built from. The launchers live in
   * the instance dict; reading it there skips the type's attribute machinery. Checked before the
   * hooks, so a call with hooks never runs a launcher the autotuner no longer has. */
  PyObject *adict = NULL;
  if (self->autotuner != Py_None) {
    if (!self->dict_slot) plain_dict_on_3_13_0(self->autotuner); /* the first refresh */
    PyObject **dictptr = _PyObject_GetDictPtr(self->autotuner); /* materializes a lazy dict */
    FL_EXT_STORE(self->dict_slot, dictptr);
    adict = dictptr ? FL_EXT_LOAD(*dictptr) : NULL;
    PyObject *launchers = NULL;
    if (adict && PyDict_GetItemRef(adict, self->launcher_attr, &launchers) < 0) PyErr_Clear();
    if (!launchers) return 2;
    if (set_launchers(self, launchers) < 0) return -1;
  }
  FL_EXT_STORE(self->autotuner_dict, adict);
  if (!can_steady) return 0;
  PyObject *dicts = PyTuple_New(PyTuple_GET_SIZE(self->flags) + (adict != NULL));
  if (!dicts) return -1;
  Py_ssize_t n = 0;
  for (; n < PyTuple_GET_SIZE(self->flags); n++) PyTuple_SET_ITEM(dicts, n, Py_NewRef(self->flag_dict[n]));
  if (adict) PyTuple_SET_ITEM(dicts, n, Py_NewRef(adict));
  int rc = fl_ext_watch_set(&self->watch, self->state, dicts); /* holds the dicts: no address reused */
  Py_DECREF(dicts);
  if (rc < 0) return -1;
  FL_EXT_STORE(self->steady, 1);
  return 0;
}

/* entry_refresh in a critical section on the entry (free-threaded builds: one thread at a time). */
static Py_NO_INLINE int entry_refresh_locked(EntryObject *self, PyObject **why) {
  int r;
  Py_BEGIN_CRITICAL_SECTION(self);
  r = entry_refresh(self, why);
  Py_END_CRITICAL_SECTION();
  return r;
}

/* The grid from the call's grid_args positions: exact non-negative ints (anything else: the stock
 * launcher, which reads them its own way). 1, or 0. */
static int grid_of_args(const EntryObject *self, PyObject *const *args, int64_t g[3]) {
  for (int d = 0; d < 3; d++) {
    uint64_t mag;
    int neg;
    PyObject *o = args[self->grid_pos[d]];
    if (!PyLong_CheckExact(o) || !fl_ext_int_digits(o, &mag, &neg) || neg || mag > (uint64_t)INT64_MAX) return 0;
    g[d] = (int64_t)mag;
  }
  return 1;
}

/* A launch with global scratch, through the launch sequence (sequence.h): every argument read and
 * checked, the grid resolved, then the allocator called (size: programs x num_ctas x bytes per CTA,
 * its alignment, the call's stream object), the values read again, the buffer's address in the
 * first trailing pointer, the plan launched; the buffer is dropped once the launch returns, as the
 * launcher drops it. Nothing is submitted before the allocator returns: what it raises propagates,
 * as from the stock launcher. */
static Py_NO_INLINE PyObject *entry_scratch(EntryObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames,
                                            uint64_t stream, PyObject *stream_obj, const int64_t *grid) {
  size_t nfull = nargs + (size_t)self->nhidden;
  if (!stream_obj || nfull > FL_EXT_STACK_VALUES) return fallback(self, "scratch_call", false, args, nargs, kwnames);
  PyObject *full[FL_EXT_STACK_VALUES];
  for (size_t i = 0; i < nfull; i++) full[i] = i < nargs ? args[i] : Py_None; /* the address comes after */
  fl_ext_scratch_ref sc = {self->scratch_var, self->scratch_size, self->scratch_align, self->scratch_ctas,
                           (size_t)self->nhidden, &self->scratch_ints};
  fl_seq s = {.plan = self->plan, .stream = stream, .stream_obj = stream_obj, .scratch = &sc};
  fl_error err;
  int rc = fl_seq_plan(&s, full, nfull, grid, &err);
  if (rc == FL_SEQ_LAUNCHED) {
    FL_EXT_COUNT(self->calls);
    Py_RETURN_NONE;
  }
  if (rc < 0) return NULL; /* the allocator's or an argument's exception, or a failed submit, raised */
  return fallback(self, err.reason, err.stable, args, nargs, kwnames);
}

static PyObject *entry_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  EntryObject *self = (EntryObject *)callable;
  fl_ext_state *st = self->state;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  /* 1 and 2 (entry_refresh): the flags and the autotuner's launchers, skipped while the entry is
   * steady and none of the dicts they came from changed (nor the autotuner's dict was replaced). */
  PyObject **slot = FL_EXT_LOAD(self->dict_slot);
  if (FL_EXT_UNLIKELY(!FL_EXT_LOAD(self->steady) || fl_ext_watch_changed(&self->watch) ||
                      (slot && FL_EXT_LOAD(*slot) != FL_EXT_LOAD(self->autotuner_dict)))) {
    PyObject *why = NULL;
    int r = entry_refresh_locked(self, &why);
    if (r < 0) return NULL;
    if (r == 1) return fallback_obj(self, NULL, why, false, args, nargs, kwnames);
    if (r == 2) return fallback(self, "launcher_changed", false, args, nargs, kwnames);
  }
  if (self->autotuner != Py_None && !launchers_same(FL_EXT_LOAD(self->launchers_seen), self->launcher))
    return fallback(self, "launcher_changed", false, args, nargs, kwnames);
  /* 3. Keywords: only stream=. */
  uint64_t stream = 0;
  PyObject *stream_obj = NULL;
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k);
      if (key != st->str_stream) {
        int cmp = PyUnicode_Check(key) ? PyUnicode_Compare(key, st->str_stream) : 1;
        if (cmp == -1 && PyErr_Occurred()) return NULL;
        if (cmp != 0) return fallback(self, "runtime_kwargs", false, args, nargs, kwnames);
      }
      fl_error serr;
      stream_obj = args[nargs + (size_t)k];
      /* A stream handle is an exact int (0x7f...): read inline; anything else the full way. */
      if (fl_ext_u64_of(args[nargs + (size_t)k], &stream)) continue;
      if (fl_ext_parse_stream(args[nargs + (size_t)k], &stream, &serr) < 0)
        return fallback(self, serr.reason, false, args, nargs, kwnames);
    }
  }
  /* 4. Active launch hooks: this call goes through the stock launcher, the plan stays. */
  for (Py_ssize_t h = 0; h < PyTuple_GET_SIZE(self->hook_lists); h++) {
    PyObject *list = PyTuple_GET_ITEM(self->hook_lists, h);
    if (PyList_GET_SIZE(list) > 0) return fallback(self, "launch_hooks", false, args, nargs, kwnames);
  }
  if (nargs + (size_t)self->nhidden != self->plan->args.ncall)
    return fallback(self, "args_count", false, args, nargs, kwnames);
  int64_t gv[3];
  const int64_t *grid = NULL;
  if (self->grid_pos[0] >= 0) {
    if (!grid_of_args(self, args, gv)) return fallback(self, "grid_args", false, args, nargs, kwnames);
    grid = gv;
  }
  if (FL_EXT_UNLIKELY(self->scratch_var != NULL)) { /* the kept ints: one thread at a time */
    PyObject *result;
    Py_BEGIN_CRITICAL_SECTION(self);
    result = entry_scratch(self, args, nargs, kwnames, stream, stream_obj, grid);
    Py_END_CRITICAL_SECTION();
    return result;
  }
  fl_error err;
  int rc = fl_ext_plan_launch(self->plan, args, nargs, stream, grid, &err);
  if (rc == 0) {
    FL_EXT_COUNT(self->calls);
    Py_RETURN_NONE;
  }
  if (rc == -2) return NULL;
  /* After the boundary: raise, never replay. Before it: the stock launcher runs this call. */
  if (err.backend_submitted) return fl_ext_raise(st, &err);
  return fallback(self, err.reason, err.stable, args, nargs, kwnames);
}

/* grid_args=(three call positions) and scratch=(ContextVar, bytes per CTA, alignment, num_ctas,
 * trailing pointers) of FinalizedLaunch(...), checked against the plan. 0, or -1 with an exception. */
static int parse_extras(fl_PlanObject *plan, PyObject *grid_args, PyObject *scratch, Py_ssize_t pos[3], PyObject **var,
                        unsigned long long *size, unsigned long long *align, unsigned *ctas, Py_ssize_t *nhidden) {
  if (scratch != Py_None) {
    if (!PyTuple_Check(scratch) ||
        !PyArg_ParseTuple(scratch, "OKKIn:FinalizedLaunch scratch", var, size, align, ctas, nhidden) ||
        !PyContextVar_CheckExact(*var) || *nhidden < 1 || (size_t)*nhidden >= plan->args.ncall || *ctas < 1) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, "scratch: (ContextVar, bytes per CTA, alignment, num_ctas, trailing pointers >= 1)");
      return -1;
    }
  }
  if (grid_args == Py_None) return 0;
  size_t ncall = plan->args.ncall - (size_t)*nhidden;
  if (!PyTuple_Check(grid_args) || PyTuple_GET_SIZE(grid_args) != 3) goto bad;
  for (int d = 0; d < 3; d++) {
    pos[d] = PyLong_Check(PyTuple_GET_ITEM(grid_args, d)) ? PyLong_AsSsize_t(PyTuple_GET_ITEM(grid_args, d)) : -1;
    /* a position the plan skips: the grid is no kernel argument */
    if (pos[d] < 0 || (size_t)pos[d] >= ncall || !plan->args.argmap || plan->args.argmap[pos[d]] >= 0) goto bad;
  }
  return 0;
bad:
  PyErr_Clear();
  PyErr_Format(PyExc_ValueError, "grid_args: expected three call positions the plan ignores (0..%zu)", ncall - 1);
  return -1;
}

static PyObject *entry_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"bound", "plan", "autotuner", "launcher", "launcher_attr", "hook_lists", "flags",
                           "grid_args", "scratch", NULL};
  PyObject *bound, *plan, *autotuner = Py_None, *launcher = Py_None, *launcher_attr = NULL;
  PyObject *hook_lists = NULL, *flags = NULL, *grid_args = Py_None, *scratch = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$OOUO!O!OO:FinalizedLaunch", kwlist, &bound, &plan, &autotuner,
                                   &launcher, &launcher_attr, &PyTuple_Type, &hook_lists, &PyTuple_Type, &flags,
                                   &grid_args, &scratch))
    return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  if (!PyObject_TypeCheck(plan, st->plan_type)) {
    PyErr_Format(PyExc_TypeError, "plan: expected a fastlaunch Plan, got %.80s", Py_TYPE(plan)->tp_name);
    return NULL;
  }
  Py_ssize_t grid_pos[3] = {-1, -1, -1}, nhidden = 0;
  PyObject *var = NULL;
  unsigned long long ssize = 0, salign = 0;
  unsigned sctas = 0;
  if (parse_extras((fl_PlanObject *)plan, grid_args, scratch, grid_pos, &var, &ssize, &salign, &sctas, &nhidden) < 0)
    return NULL;
  if (((fl_PlanObject *)plan)->plan && fl_plan_grid_mode(((fl_PlanObject *)plan)->plan) == FL_GRID_CALLER &&
      grid_pos[0] < 0) {
    PyErr_SetString(PyExc_ValueError, "plan: a finalized entry needs a static grid, a grid program or grid_args");
    return NULL;
  }
  if (hook_lists) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hook_lists); i++)
      if (!PyList_Check(PyTuple_GET_ITEM(hook_lists, i))) {
        PyErr_Format(PyExc_TypeError, "hook_lists[%zd]: expected a list", i);
        return NULL;
      }
  }
  if (flags) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(flags); i++) {
      PyObject *f = PyTuple_GET_ITEM(flags, i);
      if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(f, 1)) ||
          !PyUnicode_Check(PyTuple_GET_ITEM(f, 2))) {
        PyErr_Format(PyExc_TypeError, "flags[%zd]: expected (object, attribute name, reason)", i);
        return NULL;
      }
    }
  }
  if (!PyObject_HasAttr(bound, st->str_fallback)) {
    PyErr_SetString(PyExc_TypeError, "bound: needs an entry_fallback(reason, stable, args, kwargs) method");
    return NULL;
  }
  EntryObject *self = (EntryObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = entry_vectorcall;
  self->state = st;
  self->plan = (fl_PlanObject *)Py_NewRef(plan);
  self->bound = Py_NewRef(bound);
  self->autotuner = Py_NewRef(autotuner);
  self->launcher = Py_NewRef(launcher);
  self->launcher_attr = launcher_attr ? Py_NewRef(launcher_attr) : PyUnicode_InternFromString("launchers");
  self->hook_lists = hook_lists ? Py_NewRef(hook_lists) : PyTuple_New(0);
  self->flags = flags ? Py_NewRef(flags) : PyTuple_New(0);
  memcpy(self->grid_pos, grid_pos, sizeof grid_pos);
  self->scratch_var = Py_XNewRef(var);
  self->scratch_size = ssize, self->scratch_align = salign, self->scratch_ctas = sctas, self->nhidden = nhidden;
  if (!self->launcher_attr || !self->hook_lists || !self->flags) {
    Py_DECREF(self);
    return NULL;
  }
  for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(self->flags) && f < FL_ENTRY_CACHED_FLAGS; f++) {
    PyObject *owner = PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->flags, f), 0);
    if (PyModule_CheckExact(owner)) self->flag_dict[f] = PyModule_GetDict(owner);
    else if (PyDict_CheckExact(owner)) self->flag_dict[f] = owner;
  }
  return (PyObject *)self;
}

static int entry_traverse(PyObject *op, visitproc visit, void *arg) {
  EntryObject *self = (EntryObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->watch.dicts);
  Py_VISIT(self->plan);
  Py_VISIT(self->bound);
  Py_VISIT(self->autotuner);
  Py_VISIT(self->launcher);
  Py_VISIT(self->hook_lists);
  Py_VISIT(self->flags);
  Py_VISIT(self->scratch_var);
  Py_VISIT(self->launchers_seen);
  Py_VISIT(self->retired);
  return 0;
}

static int entry_clear(PyObject *op) {
  EntryObject *self = (EntryObject *)op;
  Py_CLEAR(self->plan);
  Py_CLEAR(self->bound);
  Py_CLEAR(self->autotuner);
  Py_CLEAR(self->launcher);
  Py_CLEAR(self->hook_lists);
  Py_CLEAR(self->flags);
  Py_CLEAR(self->scratch_var);
  fl_ext_scratch_ints_clear(&self->scratch_ints);
  memset(self->flag_dict, 0, sizeof self->flag_dict);
  self->steady = 0;
  self->autotuner_dict = NULL;
  Py_CLEAR(self->launchers_seen);
  Py_CLEAR(self->retired);
  self->dict_slot = NULL;
  fl_ext_watch_free(&self->watch);
  Py_CLEAR(self->launcher_attr);
  return 0;
}

static void entry_dealloc(PyObject *op) {
  EntryObject *self = (EntryObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  entry_clear((PyObject *)self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyObject *entry_repr(PyObject *op) {
  EntryObject *self = (EntryObject *)op;
  return PyUnicode_FromFormat("<fastlaunch FinalizedLaunch %U calls=%llu fallbacks=%llu>",
                              self->plan ? self->plan->name : Py_None, self->calls, self->fallbacks);
}

static PyMemberDef entry_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(EntryObject, vectorcall), Py_READONLY, NULL},
    {"plan", Py_T_OBJECT_EX, offsetof(EntryObject, plan), Py_READONLY, "the plan it launches"},
    {"bound", Py_T_OBJECT_EX, offsetof(EntryObject, bound), Py_READONLY, "the bound launch it falls back to"},
    {"launcher", Py_T_OBJECT_EX, offsetof(EntryObject, launcher), Py_READONLY, "the launcher the plan was built from"},
    {"calls", Py_T_ULONGLONG, offsetof(EntryObject, calls), Py_READONLY, "launches that took the fast path"},
    {"fallbacks", Py_T_ULONGLONG, offsetof(EntryObject, fallbacks), Py_READONLY, "calls handed back to the bound launch"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot entry_slots[] = {
    {Py_tp_new, entry_new},
    {Py_tp_dealloc, entry_dealloc},
    {Py_tp_traverse, entry_traverse},
    {Py_tp_clear, entry_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, entry_repr},
    {Py_tp_members, entry_members},
    {Py_tp_doc, "FinalizedLaunch(bound, plan, *, autotuner=None, launcher=None, launcher_attr='launchers', "
                "hook_lists=(), flags=(), grid_args=None, scratch=None)\n--\n\nThe steady-state entry of a call slot: "
                "flags are (object or dict, name, reason); grid_args: three call positions (ignored by the plan) "
                "holding the grid; scratch: (allocator ContextVar, bytes per CTA, alignment, num_ctas, trailing "
                "pointers) for a kernel with global scratch."},
    {0, NULL},
};

static PyType_Spec entry_spec = {
    .name = "fastlaunch._C.FinalizedLaunch",
    .basicsize = sizeof(EntryObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = entry_slots,
};

int fl_ext_add_entry_type(PyObject *module, fl_ext_state *st) {
  st->entry_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &entry_spec, NULL);
  if (!st->entry_type) return -1;
  return PyModule_AddType(module, st->entry_type);
}
