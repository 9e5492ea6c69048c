/* heuristics.c: the dispatcher of Triton's Heuristics, `kernel[grid](*args, **kwargs)` over
 * `@triton.heuristics({...})`.
 *
 * HeuristicsDispatcher sits in a Heuristics' call slot (its instance attribute `run`). Triton's
 * Heuristics.run computes, for each value in order, `kwargs[name] = fn({**dict(zip(arg_names,
 * args)), **kwargs})` and calls `self.fn.run(*args, **kwargs)`. This does the same in C: each value
 * in the form the policy (fastlaunch.triton_jit) read from the function's code, when the call's
 * arguments let it hold:
 *   - a constant;
 *   - `args[name] is None` / `is not None`, read from the argument;
 *   - integer arithmetic and comparisons over int arguments (`%`, `//`, `triton.cdiv`,
 *     `triton.next_power_of_2`, min, max): a grid program (src/grid.c) over the arguments' values,
 *     its result an int or, for a comparison, a bool;
 *   - anything else, or an argument that is absent, not an exact int, or out of int64 range, or an
 *     evaluation that overflows: the function itself, called with the mapping Triton gives it
 *     (a new dict per call, the values computed so far in it), once, as Triton calls it; its
 *     exceptions propagate as Triton's would.
 * Then the inner kernel runs with the values as keywords: a JitDispatcher or AutotuneDispatcher
 * in the kernel[grid] form, anything else (a subclass's run) as Triton calls it. Triton's own run
 * serves warmup, more values or keywords than fit here, and what the policy names (a changed
 * `values` dict, a function's changed globals), before anything was computed. Depends on jit.c and
 * autotune.c (the inner dispatchers' entries); jit_subscript.c hands it kernel[grid] calls. */
#include "tuner_base.h"

#define H_MAX 16      /* values served here; a Heuristics with more is Triton's */
#define H_MAX_VARS 8  /* arguments one program reads */
#define H_MAX_KW 64   /* keywords of the inner call */
#define H_MAX_ARGS 256
#define H_FORMS 4     /* call forms remembered (call sites: keyword names and positional count) */

enum { H_CALL, H_CONST, H_NONE_TEST, H_PROGRAM };
enum { SRC_ABSENT = -1 }; /* a source: >= 0 a keyword's position, -1 absent, -2 - j positional j */

typedef struct {
  int kind;
  PyObject *name;         /* the value's keyword */
  PyObject *fn;           /* the heuristic, called whenever its C form does not hold */
  PyObject *value;        /* H_CONST: the value */
  int negate;             /* H_NONE_TEST: `is not None` */
  fl_grid_program *prog;  /* H_PROGRAM */
  int as_bool;            /* H_PROGRAM: the result is a comparison's bool */
  size_t nvars;           /* H_NONE_TEST: 1 (its argument); H_PROGRAM: the program's variables */
  PyObject *vars[H_MAX_VARS];
  PyObject *last;         /* H_PROGRAM: the last int result, reused while the value repeats */
} heur;

/* A call's form: its keyword names (a strong reference: the identity is the key), its positional
 * count and whether the grid came apart (kernel[grid]) or as grid= among the keywords (run()).
 * The keyword list is Triton's kwargs dict in order: grid and warmup first in the kernel[grid]
 * form (KernelInterface passes them first), the call's keywords, then each value not among them. */
typedef struct {
  PyObject *in;
  size_t nargs;
  int apart;
  Py_ssize_t nkw;               /* the keyword list's length */
  PyObject *kw_names[H_MAX_KW]; /* borrowed from `in`, the dispatcher's names and the state */
  int16_t kw_in[H_MAX_KW];      /* the call's keyword feeding each position, -1 (grid, warmup, a value's own) */
  int16_t slot[H_MAX];          /* each value's position */
  int16_t var[H_MAX][H_MAX_VARS];
  Py_ssize_t grid_at, warmup_at; /* the positions of grid and warmup */
  PyObject *out;                /* the inner call's kwnames */
  int16_t out_kw[H_MAX_KW];     /* the keyword-list position of each */
} h_form;

typedef struct {
  PyObject_HEAD
  fl_tuner_head t;        /* tuner: the Heuristics; inner: the inner kernel's run */
  int inner_kind;         /* 1 a JitDispatcher, 2 an AutotuneDispatcher, 0 anything else */
  size_t nh;
  heur h[H_MAX];
  h_form forms[H_FORMS];
  size_t nforms, next_form;
  int busy;               /* a value's function is running (a nested call changes nothing) */
  unsigned long long in_c, called;
} HeurObject;

/* ---- the values ---- */

static void heur_clear(heur *h) {
  Py_CLEAR(h->name);
  Py_CLEAR(h->fn);
  Py_CLEAR(h->value);
  Py_CLEAR(h->last);
  for (size_t v = 0; v < h->nvars; v++) Py_CLEAR(h->vars[v]);
  fl_grid_program_free(h->prog);
  memset(h, 0, sizeof *h);
}

static void forms_clear(HeurObject *self) {
  for (size_t i = 0; i < self->nforms; i++) {
    Py_CLEAR(self->forms[i].in);
    Py_CLEAR(self->forms[i].out);
  }
  self->nforms = self->next_form = 0;
}

/* One value's spec from the policy: (name, fn, ("call",) | ("const", v) | ("none", arg, negate) |
 * ("program", expr, (arg, ...), as_bool)). 0, or -1 with an exception. */
static int heur_set(heur *h, PyObject *spec) {
  PyObject *form;
  if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(spec, 0)) ||
      !PyTuple_Check(form = PyTuple_GET_ITEM(spec, 2)) || PyTuple_GET_SIZE(form) < 1)
    return PyErr_SetString(PyExc_TypeError, "heuristics spec: expected (name, fn, (kind, ...))"), -1;
  h->name = Py_NewRef(PyTuple_GET_ITEM(spec, 0));
  h->fn = Py_NewRef(PyTuple_GET_ITEM(spec, 1));
  const char *kind = PyUnicode_Check(PyTuple_GET_ITEM(form, 0)) ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(form, 0)) : "";
  Py_ssize_t n = PyTuple_GET_SIZE(form);
  if (!kind) return -1;
  if (strcmp(kind, "const") == 0 && n == 2) {
    h->kind = H_CONST;
    h->value = Py_NewRef(PyTuple_GET_ITEM(form, 1));
  } else if (strcmp(kind, "none") == 0 && n == 3 && PyUnicode_Check(PyTuple_GET_ITEM(form, 1))) {
    h->kind = H_NONE_TEST;
    h->nvars = 1;
    h->vars[0] = Py_NewRef(PyTuple_GET_ITEM(form, 1));
    h->negate = PyObject_IsTrue(PyTuple_GET_ITEM(form, 2));
  } else if (strcmp(kind, "program") == 0 && n == 4 && PyUnicode_Check(PyTuple_GET_ITEM(form, 1)) &&
             PyTuple_Check(PyTuple_GET_ITEM(form, 2)) && PyTuple_GET_SIZE(PyTuple_GET_ITEM(form, 2)) <= H_MAX_VARS) {
    fl_error err;
    const char *expr = PyUnicode_AsUTF8(PyTuple_GET_ITEM(form, 1));
    if (!expr) return -1;
    if (fl_grid_program_compile(expr, NULL, 0, &h->prog, &err) != FL_OK) {
      h->kind = H_CALL; /* the function is called instead: nothing is lost */
      return 0;
    }
    h->kind = H_PROGRAM;
    h->as_bool = PyObject_IsTrue(PyTuple_GET_ITEM(form, 3));
    PyObject *vars = PyTuple_GET_ITEM(form, 2);
    for (Py_ssize_t v = 0; v < PyTuple_GET_SIZE(vars); v++) h->vars[h->nvars++] = Py_NewRef(PyTuple_GET_ITEM(vars, v));
    if (fl_grid_program_nvars(h->prog) > h->nvars) h->kind = H_CALL;
  } else {
    h->kind = H_CALL;
  }
  return 0;
}

/* policy.revalidate() -> (stock reason or None, watched dicts, inner run, value specs, or None
 * while the ones held stand). */
static int revalidate(HeurObject *self) {
  PyObject *r = PyObject_CallMethod(self->t.policy, "revalidate", NULL);
  if (!r) return -1;
  PyObject *specs = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 4 ? PyTuple_GET_ITEM(r, 3) : NULL;
  if (!specs || (specs != Py_None && !PyTuple_Check(specs))) {
    Py_DECREF(r);
    return PyErr_SetString(PyExc_TypeError, "revalidate(): expected (reason, watched, inner, specs)"), -1;
  }
  PyObject *reason = PyTuple_GET_ITEM(r, 0), *inner = PyTuple_GET_ITEM(r, 2);
  int rc = 0;
  if (specs != Py_None || inner != self->t.inner) forms_clear(self); /* the forms hold value slots and names */
  if (specs != Py_None) {
    for (size_t i = 0; i < self->nh; i++) heur_clear(&self->h[i]);
    self->nh = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    if (n > H_MAX && reason == Py_None) reason = self->t.state->str_heuristics_count;
    for (Py_ssize_t i = 0; i < n && n <= H_MAX && rc == 0; i++) {
      rc = heur_set(&self->h[i], PyTuple_GET_ITEM(specs, i));
      self->nh = (size_t)i + 1;
    }
  }
  PyObject *old_reason = self->t.stock_reason, *old_inner = self->t.inner;
  self->t.stock_reason = reason == Py_None ? NULL : Py_NewRef(reason);
  self->t.inner = Py_NewRef(inner);
  self->inner_kind = Py_TYPE(inner) == self->t.state->jit_type ? 1 : Py_TYPE(inner) == self->t.state->autotune_type ? 2 : 0;
  if (rc == 0) rc = fl_ext_watch_set(&self->t.watch, self->t.state, PyTuple_GET_ITEM(r, 1));
  Py_XDECREF(old_reason); /* last: the inner and its kind agree before any __del__ runs */
  Py_XDECREF(old_inner);
  Py_DECREF(r);
  return rc;
}

/* ---- a call's form ---- */

static Py_ssize_t kw_find(const h_form *f, PyObject *name) {
  for (Py_ssize_t p = 0; p < f->nkw; p++)
    if (f->kw_names[p] == name || PyUnicode_Compare(f->kw_names[p], name) == 0) return p;
  if (PyErr_Occurred()) PyErr_Clear();
  return -1;
}

/* Where the mapping Triton builds for value i finds `name`: a keyword's position (the values come
 * later in the list than the keywords, and a value's own name is only there once it is computed),
 * a positional argument's index, or absent. */
static int16_t source_of(const HeurObject *self, const h_form *f, PyObject *name) {
  Py_ssize_t p = kw_find(f, name);
  if (p >= 0) return (int16_t)p;
  Py_ssize_t np = PyTuple_GET_SIZE(self->t.arg_names);
  for (Py_ssize_t j = 0; j < np && (size_t)j < f->nargs; j++)
    if (PyUnicode_Compare(PyTuple_GET_ITEM(self->t.arg_names, j), name) == 0) return (int16_t)(-2 - j);
  if (PyErr_Occurred()) PyErr_Clear();
  return SRC_ABSENT;
}

/* Builds the form of a call: 0, 1 (not servable here: Triton's run), -1 with an exception. */
static int form_build(HeurObject *self, h_form *f, PyObject *kwnames, size_t nargs, int apart) {
  Py_ssize_t nin = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  f->nargs = nargs;
  f->apart = apart;
  f->nkw = 0;
  f->grid_at = f->warmup_at = -1;
  if (nin + 2 + (Py_ssize_t)self->nh > H_MAX_KW) return 1;
  if (apart) {
    f->grid_at = f->nkw, f->kw_in[f->nkw] = -1, f->kw_names[f->nkw++] = self->t.state->str_grid;
    f->warmup_at = f->nkw, f->kw_in[f->nkw] = -1, f->kw_names[f->nkw++] = self->t.state->str_warmup;
  }
  for (Py_ssize_t k = 0; k < nin; k++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    if (PyUnicode_Compare(name, self->t.state->str_grid) == 0) f->grid_at = f->nkw;
    else if (PyUnicode_Compare(name, self->t.state->str_warmup) == 0) f->warmup_at = f->nkw;
    if (PyErr_Occurred()) return -1;
    f->kw_in[f->nkw] = (int16_t)k;
    f->kw_names[f->nkw++] = name;
  }
  for (size_t i = 0; i < self->nh; i++) {
    /* The value's inputs are read before it joins the list (its own name is found where it was). */
    for (size_t v = 0; v < self->h[i].nvars; v++) f->var[i][v] = source_of(self, f, self->h[i].vars[v]);
    Py_ssize_t p = kw_find(f, self->h[i].name);
    if (p < 0) p = f->nkw, f->kw_in[f->nkw] = -1, f->kw_names[f->nkw++] = self->h[i].name;
    f->slot[i] = (int16_t)p;
  }
  if (f->grid_at < 0) return 1; /* Triton's run says what is missing */
  /* The inner call's keywords: the list, without grid and warmup when it is a dispatcher's
   * kernel[grid] entry. */
  int direct = self->inner_kind != 0;
  Py_ssize_t nout = 0;
  for (Py_ssize_t p = 0; p < f->nkw; p++)
    if (!direct || (p != f->grid_at && p != f->warmup_at)) f->out_kw[nout++] = (int16_t)p;
  f->out = PyTuple_New(nout);
  if (!f->out) return -1;
  for (Py_ssize_t q = 0; q < nout; q++) PyTuple_SET_ITEM(f->out, q, Py_NewRef(f->kw_names[f->out_kw[q]]));
  f->in = Py_XNewRef(kwnames);
  return 0;
}

/* The form of this call: remembered, or built (and remembered in place of the oldest). NULL with
 * *why or an exception. */
static h_form *form_of(HeurObject *self, PyObject *kwnames, size_t nargs, int apart, const char **why) {
  for (size_t i = 0; i < self->nforms; i++) {
    h_form *f = &self->forms[i];
    if (f->nargs == nargs && f->apart == apart && f->out && fl_ext_same_names(f->in, kwnames)) return f;
  }
  if (self->busy) return *why = "reentrant", NULL;
  size_t at = self->nforms < H_FORMS ? self->nforms++ : (self->next_form++ % H_FORMS);
  h_form *f = &self->forms[at];
  Py_CLEAR(f->in);
  Py_CLEAR(f->out);
  int r = form_build(self, f, kwnames, nargs, apart);
  if (r == 0) return f;
  Py_CLEAR(f->out);
  f->nargs = (size_t)-1; /* matches no call */
  *why = r > 0 ? "call_form" : NULL;
  return NULL;
}

/* ---- the call ---- */

/* The mapping Triton passes a value's function: the positional arguments by name, then the keyword
 * list as it stands (a value not computed yet is not in it). */
static PyObject *mapping(HeurObject *self, const h_form *f, PyObject *const *args, PyObject *const *kw) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  Py_ssize_t np = PyTuple_GET_SIZE(self->t.arg_names);
  for (Py_ssize_t j = 0; j < np && (size_t)j < f->nargs; j++)
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(self->t.arg_names, j), args[j]) < 0) goto fail;
  for (Py_ssize_t p = 0; p < f->nkw; p++)
    if (kw[p] && PyDict_SetItem(d, f->kw_names[p], kw[p]) < 0) goto fail;
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

static inline PyObject *src_value(int16_t s, PyObject *const *args, PyObject *const *kw) {
  return s >= 0 ? kw[s] : s == SRC_ABSENT ? NULL : args[-2 - s];
}

/* A program's value, 0; 1 when its form does not hold for these arguments. */
static int program_value(heur *h, const int16_t *var, PyObject *const *args, PyObject *const *kw, PyObject **out) {
  int64_t vars[H_MAX_VARS], r;
  for (size_t v = 0; v < h->nvars; v++) {
    PyObject *x = src_value(var[v], args, kw);
    int overflow = 0;
    if (!x || !PyLong_CheckExact(x)) return 1; /* a bool or a subclass: Python's own arithmetic */
    vars[v] = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow) return 1;
  }
  fl_error err;
  if (fl_grid_program_eval(h->prog, vars, h->nvars, &r, &err) != FL_OK) return 1; /* Python's big ints, or its error */
  if (h->as_bool) return *out = Py_NewRef(r ? Py_True : Py_False), 0;
  if (!h->last || PyLong_AsLongLong(h->last) != r) {
    PyObject *o = PyLong_FromLongLong(r);
    if (!o) return *out = NULL, 0;
    Py_XSETREF(h->last, o);
  }
  return *out = Py_NewRef(h->last), 0;
}

/* Value i for this call (a new reference), or NULL with the exception its function raised. */
static PyObject *value_of(HeurObject *self, heur *h, const h_form *f, size_t i, PyObject *const *args,
                          PyObject *const *kw) {
  PyObject *v;
  if (h->kind == H_CONST) {
    self->in_c++;
    return Py_NewRef(h->value);
  }
  if (h->kind == H_NONE_TEST && (v = src_value(f->var[i][0], args, kw))) {
    self->in_c++;
    return Py_NewRef((v == Py_None) != h->negate ? Py_True : Py_False);
  }
  if (h->kind == H_PROGRAM && program_value(h, f->var[i], args, kw, &v) == 0) {
    self->in_c += v != NULL;
    return v;
  }
  self->called++;
  PyObject *d = mapping(self, f, args, kw);
  if (!d) return NULL;
  v = PyObject_CallOneArg(h->fn, d);
  Py_DECREF(d);
  return v;
}

/* Triton's Heuristics.run(*args, **kwargs); in the kernel[grid] form with grid= and warmup=False
 * first among the keywords, as KernelInterface passes them. */
static FL_EXT_COLD PyObject *stock(HeurObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                   PyObject *kwnames, const char *reason, PyObject *reason_obj) {
  self->t.stock++;
  fl_ext_count_reason(self->t.stock_counts, reason, reason_obj);
  if (!grid) return PyObject_Vectorcall(self->t.stock_run, args, nargs, kwnames);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *names = PyTuple_New(nkw + 2);
  PyObject **argv = PyMem_Malloc((nargs + (size_t)nkw + 2) * sizeof(PyObject *));
  PyObject *r = NULL;
  if (names && argv) {
    memcpy(argv, args, nargs * sizeof(PyObject *));
    argv[nargs] = grid;
    argv[nargs + 1] = Py_False;
    memcpy(argv + nargs + 2, args + nargs, (size_t)nkw * sizeof(PyObject *));
    PyTuple_SET_ITEM(names, 0, Py_NewRef(self->t.state->str_grid));
    PyTuple_SET_ITEM(names, 1, Py_NewRef(self->t.state->str_warmup));
    for (Py_ssize_t i = 0; i < nkw; i++) PyTuple_SET_ITEM(names, i + 2, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
    r = PyObject_Vectorcall(self->t.stock_run, argv, nargs, names);
  } else {
    PyErr_NoMemory();
  }
  Py_XDECREF(names);
  PyMem_Free(argv);
  return r;
}

/* The inner kernel's run with the values among the keywords. */
static PyObject *call_inner(HeurObject *self, const h_form *f, PyObject *const *args, size_t nargs,
                            PyObject *const *kw) {
  PyObject *argv[H_MAX_ARGS + H_MAX_KW];
  Py_ssize_t nout = PyTuple_GET_SIZE(f->out);
  memcpy(argv, args, nargs * sizeof(PyObject *));
  for (Py_ssize_t q = 0; q < nout; q++) argv[nargs + (size_t)q] = kw[f->out_kw[q]];
  PyObject *inner = Py_NewRef(self->t.inner), *out = Py_NewRef(f->out), *res;
  if (self->inner_kind == 1) res = fl_ext_jit_run_grid(inner, kw[f->grid_at], argv, nargs, out);
  else if (self->inner_kind == 2) res = fl_ext_autotune_call(inner, kw[f->grid_at], argv, nargs, out);
  else res = PyObject_Vectorcall(inner, argv, nargs, out);
  Py_DECREF(inner);
  Py_DECREF(out);
  return res;
}

/* grid: the kernel[grid] form's grid, or NULL for the run() form. While a value's function runs
 * (Python that may call this kernel again), the forms and values stay as they are: a nested call
 * that would change them goes to Triton. */
static PyObject *h_dispatch(HeurObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames) {
#define STOCK(reason) stock(self, grid, args, nargs, kwnames, reason, NULL)
  if (FL_EXT_UNLIKELY(fl_ext_watch_changed(&self->t.watch))) {
    if (self->busy) return STOCK("reentrant");
    /* Busy while the values and forms are replaced: a call from a __del__ their releases run (or
     * from the policy's Python) sees the watch still changed and goes to Triton. */
    self->busy++;
    int rc = revalidate(self);
    self->busy--;
    if (rc < 0) return NULL;
  }
  if (self->t.stock_reason) return stock(self, grid, args, nargs, kwnames, NULL, self->t.stock_reason);
  if (nargs > H_MAX_ARGS) return STOCK("positional_args");
  const char *why = NULL;
  h_form *f = form_of(self, kwnames, nargs, grid != NULL, &why);
  if (!f) return why ? STOCK(why) : NULL;
  PyObject *kw[H_MAX_KW], *held[H_MAX], *res = NULL;
  for (Py_ssize_t p = 0; p < f->nkw; p++) kw[p] = f->kw_in[p] >= 0 ? args[nargs + (size_t)f->kw_in[p]] : NULL;
  if (grid) kw[f->grid_at] = grid, kw[f->warmup_at] = Py_False;
  else if (f->warmup_at < 0 || kw[f->warmup_at] != Py_False) return STOCK("warmup");
  size_t nheld = 0;
  self->busy++;
  for (size_t i = 0; i < self->nh; i++) {
    PyObject *v = value_of(self, &self->h[i], f, i, args, kw);
    if (!v) goto done;
    kw[f->slot[i]] = held[nheld++] = v;
  }
  res = call_inner(self, f, args, nargs, kw);
  if (res) self->t.fast++;
done:
  self->busy--;
  while (nheld) Py_DECREF(held[--nheld]);
  return res;
#undef STOCK
}

PyObject *fl_ext_heuristics_call(PyObject *dispatcher, PyObject *grid, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
  PyObject *result;
  Py_BEGIN_CRITICAL_SECTION(dispatcher); /* kernel[grid] */
  result = h_dispatch((HeurObject *)dispatcher, grid, args, PyVectorcall_NARGS(nargsf), kwnames);
  Py_END_CRITICAL_SECTION();
  return result;
}

PyObject **fl_ext_heuristics_spare(PyObject *dispatcher) { return &((HeurObject *)dispatcher)->t.spare_call; }

/* run(*args, grid=..., warmup=..., **kwargs): Triton's signature. */
static PyObject *h_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  return h_dispatch((HeurObject *)callable, NULL, args, PyVectorcall_NARGS(nargsf), kwnames);
}

FL_EXT_VECTORCALL_LOCKED(h_vectorcall, h_vectorcall_unlocked, FL_EXT_SELF)

/* ---- construction ---- */
static PyObject *h_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"heuristics", "stock_run", "policy", "arg_names", NULL};
  PyObject *heuristics, *stock_run, *policy, *names;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO$O!:HeuristicsDispatcher", kwlist, &heuristics, &stock_run, &policy,
                                   &PyTuple_Type, &names))
    return NULL;
  if (fl_tuner_check_names(names) < 0) return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  HeurObject *self = (HeurObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  if (fl_tuner_init(&self->t, st, h_vectorcall, heuristics, stock_run, policy, names) < 0) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static PyObject *h_invalidate_unlocked(PyObject *op, PyObject *unused) {
  (void)unused;
  FL_EXT_STORE(((HeurObject *)op)->t.watch.force, 1);
  Py_RETURN_NONE;
}

static PyObject *h_get_counts_unlocked(PyObject *op, void *closure) {
  HeurObject *self = (HeurObject *)op;
  (void)closure;
  PyObject *reasons = PyDict_Copy(self->t.stock_counts);
  if (!reasons) return NULL;
  return Py_BuildValue("{sKsKsNsKsK}", "fast", self->t.fast, "stock", self->t.stock, "stock_reasons", reasons,
                       "values_in_c", self->in_c, "values_called", self->called);
}

static int h_traverse(PyObject *op, visitproc visit, void *arg) {
  HeurObject *self = (HeurObject *)op;
  Py_VISIT(Py_TYPE(self));
  for (size_t i = 0; i < self->nh; i++) {
    Py_VISIT(self->h[i].fn);
    Py_VISIT(self->h[i].value);
  }
  return fl_tuner_traverse(&self->t, visit, arg);
}

static int h_clear(PyObject *op) {
  HeurObject *self = (HeurObject *)op;
  fl_tuner_clear(&self->t);
  forms_clear(self);
  for (size_t i = 0; i < self->nh; i++) heur_clear(&self->h[i]);
  self->nh = 0;
  return 0;
}

static void h_dealloc(PyObject *op) {
  HeurObject *self = (HeurObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (self->t.weakrefs) PyObject_ClearWeakRefs(op);
  h_clear(op);
  fl_tuner_free(&self->t);
  tp->tp_free(self);
  Py_DECREF(tp);
}

FL_EXT_METHOD_LOCKED(h_invalidate, h_invalidate_unlocked)
FL_EXT_GETTER_LOCKED(h_get_counts, h_get_counts_unlocked)

static PyMethodDef h_methods[] = {
    {"invalidate", h_invalidate, METH_NOARGS, "invalidate(): asks the policy to revalidate at the next call"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef h_getset[] = {
    {"counts", h_get_counts, NULL, "fast and stock calls, stock reasons, values computed in C and called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef h_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(HeurObject, t.vectorcall), Py_READONLY, NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(HeurObject, t.weakrefs), Py_READONLY, NULL},
    {"heuristics", Py_T_OBJECT_EX, offsetof(HeurObject, t.tuner), Py_READONLY, "the Heuristics it serves"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot h_slots[] = {
    {Py_tp_new, h_new},
    {Py_tp_dealloc, h_dealloc},
    {Py_tp_traverse, h_traverse},
    {Py_tp_clear, h_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, h_methods},
    {Py_tp_getset, h_getset},
    {Py_tp_members, h_members},
    {Py_tp_doc, "HeuristicsDispatcher(heuristics, stock_run, policy, *, arg_names)\n--\n\nA Heuristics' call slot"},
    {0, NULL},
};

static PyType_Spec h_spec = {
    .name = "fastlaunch._C.HeuristicsDispatcher",
    .basicsize = sizeof(HeurObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = h_slots,
};

int fl_ext_add_heuristics_type(PyObject *module, fl_ext_state *st) {
  st->str_heuristics_count = PyUnicode_InternFromString("heuristics_count");
  if (!st->str_heuristics_count) return -1;
  st->heuristics_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &h_spec, NULL);
  if (!st->heuristics_type) return -1;
  return PyModule_AddType(module, st->heuristics_type);
}
