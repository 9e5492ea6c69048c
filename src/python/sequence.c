/* sequence.c: the launch sequence (sequence.h says its steps, their order per Triton version, its
 * contract and the forms that use it), with its two kinds of Python code: Triton's launch hooks
 * (triton.knobs.runtime.launch_enter_hook and launch_exit_hook, or a compiled.run call's own) called
 * as Triton's runner and launcher call them, and the global scratch Triton's launcher allocates for a
 * kernel whose metadata asks for it. Only ever on a call with hooks or scratch, never on the
 * steady-state path. */
#include "call_args.h"
#include "sequence.h"

/* ---- launch hooks ---- */
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
    fl_ext_triton_enter();
    res = PyObject_Vectorcall(run, full, 9 + (nargs < FL_EXT_HOOK_MAX_ARGS ? nargs : FL_EXT_HOOK_MAX_ARGS), NULL);
    fl_ext_triton_leave();
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

/* ---- global scratch ---- */
/* The buffer's address as Triton's launcher reads its scratch pointers (extractPointer): None is 0,
 * an int is itself, anything else its data_ptr(), which must give an int; with Triton's errors.
 * (Its device check, cuPointerGetAttribute, is the driver's own: a buffer an allocator made in host
 * memory is the allocator's bug, launched here as given.) 0, or -1 with an exception. */
static int buffer_address(fl_ext_state *st, PyObject *obj, uint64_t *addr) {
  *addr = 0;
  if (obj == Py_None) return 0;
  int where, index;
  if (FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack(obj, addr, &where, &index)) return 0; /* a tensor: its data_ptr(), read in C */
  PyObject *ptr = PyLong_Check(obj) ? Py_NewRef(obj) : NULL;
  if (!ptr) {
    ptr = PyObject_CallMethodNoArgs(obj, st->str_data_ptr);
    if (!ptr) {
      PyErr_SetString(PyExc_TypeError, "Pointer argument must be either uint64 or have data_ptr method");
      return -1;
    }
    if (!PyLong_Check(ptr)) {
      Py_DECREF(ptr);
      PyErr_SetString(PyExc_TypeError, "data_ptr method of Pointer object must return 64-bit int");
      return -1;
    }
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *addr = v;
  return 0;
}

void fl_ext_scratch_ints_clear(fl_ext_scratch_ints *ints) {
  Py_CLEAR(ints->size); /* ints: releasing one runs no code */
  Py_CLEAR(ints->stream);
}

/* The int for v: the one kept when it has that value, else a new one kept instead. New reference, or NULL. */
static PyObject *kept_int(PyObject **kept, uint64_t *kept_v, uint64_t v) {
  if (*kept && *kept_v == v) return Py_NewRef(*kept);
  PyObject *o = PyLong_FromUnsignedLongLong(v);
  if (o) {
    Py_XSETREF(*kept, Py_NewRef(o));
    *kept_v = v;
  }
  return o;
}

int fl_ext_scratch_alloc(fl_ext_state *st, const fl_ext_scratch_ref *sc, const int64_t g[3], uint64_t stream,
                         PyObject *stream_obj, PyObject **buf, uint64_t *addr) {
  *buf = NULL;
  fl_ext_scratch_ints *ints = sc->ints;
  unsigned __int128 total = (unsigned __int128)(uint64_t)g[0] * (uint64_t)g[1] * (uint64_t)g[2] * sc->ctas * sc->size;
  if (total > UINT64_MAX) return PyErr_SetString(PyExc_OverflowError, "global scratch size exceeds 64 bits"), -1;
  PyObject *alloc = NULL;
  if (PyContextVar_Get(sc->var, NULL, &alloc) < 0) return -1;
  if (!alloc) return PyErr_SetString(PyExc_RuntimeError, "no allocator"), -1;
  PyObject *sz = kept_int(&ints->size, &ints->size_v, (uint64_t)total);
  PyObject *al = sz ? PyLong_FromUnsignedLongLong(sc->align) : NULL; /* a power of two up to 256: a cached int */
  PyObject *so = al ? (stream_obj ? Py_NewRef(stream_obj) : kept_int(&ints->stream, &ints->stream_v, stream)) : NULL;
  if (so) {
    PyObject *argv[3] = {sz, al, so};
    *buf = PyObject_Vectorcall(alloc, argv, 3, NULL);
  }
  Py_XDECREF(sz);
  Py_XDECREF(al);
  Py_XDECREF(so);
  Py_DECREF(alloc);
  if (*buf && buffer_address(st, *buf, addr) == 0) return 0;
  Py_CLEAR(*buf);
  return -1;
}

/* ---- the sequence ---- */

/* The buffer's address in the first trailing pointer, none in the rest. */
static void place_scratch(fl_seq *s, uint64_t addr) {
  size_t first = s->n - s->scratch->nhidden;
  for (size_t i = first; i < s->n; i++) {
    if (s->words) s->words[i] = i == first ? addr : 0;
    else s->values[i] = i == first ? fl_ptr((const void *)(uintptr_t)addr) : fl_none();
  }
}

/* Step 5: 0 launched; 1 refused before the boundary (err); -1 with the error raised (submitted). */
static int submit(fl_seq *s, fl_error *err) {
  fl_status st = s->words ? fl_launch_words(s->plan->plan, s->stream, s->words, s->n, s->g, err)
                          : fl_launch(s->plan->plan, s->stream, s->values, s->n, s->g, err);
  if (st == FL_OK) return 0;
  if (!err->backend_submitted) return 1;
  fl_ext_raise_named(s->plan->state, err, s->plan->arg_names);
  return -1;
}

int fl_seq_run(fl_seq *s, fl_error *err) {
  err->backend_submitted = false;
  if (s->hooks && s->scratch) {
    snprintf(err->reason, sizeof err->reason, "launch_hooks_with_scratch");
    err->stable = false;
    return FL_SEQ_REFUSED;
  }
  int r = s->check || s->scratch ? s->read(s, FL_SEQ_CHECK, err) : 0; /* 1 */
  if (r != 0) return r == 1 ? FL_SEQ_REFUSED : r == -2 ? FL_SEQ_ARG_RAISED : FL_SEQ_RAISED;
  PyObject *buf = NULL, *kernel = NULL;
  uint64_t addr = 0;
  if (s->scratch && fl_ext_scratch_alloc(s->plan->state, s->scratch, s->g, s->stream, s->stream_obj, &buf, &addr) < 0)
    return FL_SEQ_RAISED; /* 2 */
  fl_ext_hooks h;
  if (s->hooks) { /* 3: the kernel held from here on (a hook may drop the form's hold) */
    kernel = Py_NewRef(s->kernel);
    if ((s->given ? fl_ext_hooks_given(s->given, s->stream_obj, &h)
                  : fl_ext_hooks_enter(s->plan->state, kernel, s->grid, s->stream, s->stream_obj, s->args, s->nargs, &h)) < 0) {
      Py_DECREF(kernel);
      return FL_SEQ_RAISED;
    }
  }
  r = s->read(s, FL_SEQ_READ, err); /* 4: after every call into Python above */
  if (r == 0) {
    if (s->scratch) place_scratch(s, addr);
    r = submit(s, err); /* 5 */
  }
  Py_XDECREF(buf); /* dropped once the launch returns, as the launchers drop theirs */
  int out;
  if (r == 0) {
    out = s->hooks && fl_ext_hooks_exit(&h) < 0 ? FL_SEQ_EXIT_RAISED : FL_SEQ_LAUNCHED; /* 6 */
  } else if (r == -1) {
    if (s->hooks) fl_ext_hooks_release(&h); /* exit not called, as in Triton */
    out = FL_SEQ_RAISED;
  } else if (s->hooks) { /* refused after enter: the kernel's launcher, told enter ran, reads the values itself */
    if (r == -2) {
      PyErr_Clear();
      snprintf(err->reason, sizeof err->reason, "argument_raised");
    }
    s->result = fl_ext_hooks_hand_back(&h, kernel, s->g, s->args, s->nargs);
    out = s->result ? FL_SEQ_HANDED : FL_SEQ_RAISED;
  } else if (s->scratch) {
    snprintf(err->reason, sizeof err->reason, "args_changed_by_allocator");
    err->stable = false;
    out = r == -2 ? FL_SEQ_ARG_RAISED_LATE : FL_SEQ_LATE;
  } else {
    out = r == -2 ? FL_SEQ_ARG_RAISED : FL_SEQ_REFUSED;
  }
  Py_XDECREF(kernel);
  return out;
}

/* A plan's positional call, read for the sequence. */
typedef struct {
  PyObject *const *full;
  size_t nfull;
  const int64_t *grid;
  int resolved;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS]; /* the descriptors' maps (their values point here) */
} plan_call;

static int plan_read(fl_seq *s, int pass, fl_error *err) {
  (void)pass; /* both read and check every value, as the launcher's format does */
  plan_call *c = s->call;
  int rc = fl_ext_collect_checked(s->plan->state, s->plan, c->full, c->nfull, s->values, c->tmaps, err);
  if (rc != 0) return rc == -2 ? -2 : 1;
  if (!c->resolved) { /* the grid once, from the first read */
    uint32_t gu[3];
    if (fl_plan_resolve_grid(s->plan->plan, s->values, s->n, c->grid, gu, err) != FL_OK) return 1;
    for (int d = 0; d < 3; d++) s->g[d] = gu[d];
    c->resolved = 1;
  }
  return 0;
}

int fl_seq_plan(fl_seq *s, PyObject *const *full, size_t nfull, const int64_t *grid, fl_error *err) {
  plan_call c = {.full = full, .nfull = nfull, .grid = grid};
  fl_ext_values home;
  s->n = s->plan->args.nruntime;
  s->values = fl_ext_values_get(&home, s->n);
  if (!s->values) return FL_SEQ_RAISED;
  s->words = NULL;
  s->read = plan_read;
  s->call = &c;
  if (grid) /* the grid given (checked at the first read); else resolved there */
    for (int d = 0; d < 3; d++) s->g[d] = grid[d];
  int rc = fl_seq_run(s, err);
  fl_ext_values_put(&home);
  return rc;
}
