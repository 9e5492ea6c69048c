/* jit.c: the dispatcher of Triton's JIT, `kernel[grid](*args, **kwargs)`.
 *
 * Three types. JitDispatcher sits in a JITFunction's call slot (its instance attribute `run`, so
 * Triton's Autotuner, which calls `fn.run(...)`, reaches it too). JitSubscript replaces the class's
 * __getitem__, so `kernel[grid]` hands out a JitCall (one reused object per kernel, no allocation
 * while the caller drops it before the next subscript) instead of a Python lambda. A call:
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
#include "ext.h"
#include "watch.h"

#include <dlfcn.h>

#define JIT_MAX_KEY 512     /* key words; a longer key (hundreds of arguments) goes to Triton */
#define JIT_MAX_PARAMS 256  /* parameters bound on the stack */
#define JIT_MAX_OPTIONS 32  /* option keywords */
#define JIT_MAX_GRID_VARS 16

/* ---- the key ---- */
enum {
  K_TENSOR = 1, /* | dtype << 8 | aligned << 7 */
  K_TENSOR_OBJ, /* then the dtype object's address (no tensor door: the slow path) */
  K_INT,        /* | width class << 8 | (v == 1) << 12 | (v % 16 == 0) << 13 */
  K_BOOL,
  K_FLOAT,
  K_NONE,
  K_TUPLE,      /* | length << 8, then the members */
  K_CONST_INT,  /* then the value */
  K_CONST_BOOL, /* | value << 8 */
  K_CONST_FLOAT,/* then the bits */
  K_CONST_OBJ,  /* then the address (the policy keeps the object alive with the entry) */
  K_OPTION,     /* | option index << 8, then the option's value as a constexpr */
  K_DEVICE      /* | device << 8, first */
};

typedef struct {
  uint64_t words[JIT_MAX_KEY];
  size_t n;
} jit_key;

/* The launch values the key pass reads on its way (so no argument is read twice): one per runtime
 * value in parameter order, tuple members flattened; where a tensor lives, to refuse one from
 * memory the plan's backend does not read. */
typedef struct {
  fl_value v[JIT_MAX_PARAMS];
  int8_t where[JIT_MAX_PARAMS]; /* FL_TENSOR_* for tensors, 0 for the rest */
  int16_t index[JIT_MAX_PARAMS];
  int32_t start[JIT_MAX_PARAMS]; /* per parameter: its first value, -1 for a constexpr */
  size_t n;
} jit_values;

static inline int key_push(jit_key *k, uint64_t w) {
  if (FL_EXT_UNLIKELY(k->n >= JIT_MAX_KEY)) return -1;
  k->words[k->n++] = w;
  return 0;
}

/* The table compares whole keys: the hash only spreads them, a multiply at the end. */
static uint64_t key_hash(const jit_key *k) {
  uint64_t h = k->n;
  for (size_t i = 0; i < k->n; i++) h = ((h << 7) | (h >> 57)) ^ k->words[i];
  h *= 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 32);
}

/* ---- entries: one per bound variant ---- */
enum { SRC_ARG, SRC_CELL, SRC_GLOBAL };
typedef struct {
  int kind;
  Py_ssize_t index; /* parameter or closure cell */
  PyObject *name;   /* a global's name */
} grid_source;

typedef struct {
  uint64_t hash;
  size_t nkey;
  uint64_t *key;
  fl_PlanObject *plan;  /* NULL: refused, calls go to Triton with `refusal` */
  PyObject *kernel;     /* the CompiledKernel, what a call returns */
  PyObject *refusal;
  PyObject *keep;       /* objects whose addresses are in the key */
  size_t nabi;
  int32_t *abi_param;   /* per runtime argument: its parameter */
  int32_t *abi_member;  /* and its tuple member, or -1 */
  /* A grid program compiled from one grid callable's code, or none. */
  PyObject *grid_code, *grid_globals;
  fl_grid_program *grid_prog[3]; /* NULL for a dimension whose value is constant: grid_const */
  int64_t grid_const[3];
  size_t ngrid_src;
  grid_source *grid_src;
} jit_entry;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *fn;           /* the JITFunction */
  PyObject *stock_run;    /* Triton's own run, bound to fn */
  PyObject *policy;       /* revalidate() and bind(...) */
  PyObject *param_names;  /* tuple of str */
  uint8_t *param_const;   /* per parameter: a constexpr */
  PyObject *defaults;     /* tuple: per parameter (default,) or () for none */
  PyObject *option_names; /* tuple of str: keywords that are launch options */
  PyObject *pre_run_hooks;/* list */
  PyObject *hook_lists;   /* tuple of lists */
  PyObject *stock_reason; /* str while every call goes to Triton, else NULL */
  PyObject *device_fn, *stream_fn; /* the driver's callables, or NULL where a C function reads them */
  int32_t (*c_device)(int32_t *);  /* torch's shim, or a driver's registered C equivalent */
  int32_t (*c_stream)(int32_t, void **);
  fl_ext_watch watch;     /* the policy's watched dicts */
  PyObject *spare_call;   /* the JitCall handed out by kernel[grid] while nobody else holds it */
  PyObject *stock_counts; /* dict reason -> count */
  unsigned long long fast, stock;
  unsigned long long grid_calls; /* grid callables called (no grid program for their code) */
  jit_entry **slots;
  size_t cap, count;
  PyObject *weakrefs;
} JitObject;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *target; /* a JitDispatcher or an AutotuneDispatcher */
  PyObject *grid;
} JitCallObject;

/* torch's C shim (AOTI), found once torch is loaded: the current device and CUDA stream without a
 * Python call. */
typedef int32_t (*aoti_device_fn)(int32_t *);
typedef int32_t (*aoti_stream_fn)(int32_t, void **);
static aoti_device_fn aoti_device;
static aoti_stream_fn aoti_stream;

static void entry_free(jit_entry *e) {
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
  PyMem_Free(e->key);
  PyMem_Free(e);
}

static void table_clear(JitObject *self) {
  jit_entry **slots = self->slots;
  size_t cap = self->cap;
  self->slots = NULL;
  self->cap = self->count = 0;
  for (size_t i = 0; i < cap; i++) entry_free(slots[i]);
  PyMem_Free(slots);
}

static jit_entry *table_find(const JitObject *self, const jit_key *k, uint64_t h) {
  if (!self->cap) return NULL;
  for (size_t i = h & (self->cap - 1);; i = (i + 1) & (self->cap - 1)) {
    jit_entry *e = self->slots[i];
    if (!e) return NULL;
    if (e->hash == h && e->nkey == k->n && memcmp(e->key, k->words, k->n * sizeof(uint64_t)) == 0) return e;
  }
}

static int table_put(JitObject *self, jit_entry *e) {
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

/* ---- the key of one value ---- */

/* A constexpr's value (or a launch option's). */
static int key_const(jit_key *k, PyObject *v) {
  if (v == Py_None) return key_push(k, K_NONE);
  if (PyBool_Check(v)) return key_push(k, K_CONST_BOOL | (uint64_t)(v == Py_True) << 8);
  if (PyLong_CheckExact(v)) {
    uint64_t mag;
    int neg;
    if (fl_ext_int_digits(v, &mag, &neg) && mag <= (uint64_t)INT64_MAX) {
      if (key_push(k, K_CONST_INT) < 0) return -1;
      return key_push(k, neg ? (uint64_t)(-(int64_t)mag) : mag);
    }
  } else if (PyFloat_CheckExact(v)) {
    double d = PyFloat_AS_DOUBLE(v);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (key_push(k, K_CONST_FLOAT) < 0) return -1;
    return key_push(k, bits);
  }
  if (key_push(k, K_CONST_OBJ) < 0) return -1;
  return key_push(k, (uint64_t)(uintptr_t)v);
}

static inline int value_push(jit_values *vals, fl_value v, int where, int index) {
  if (FL_EXT_UNLIKELY(vals->n >= JIT_MAX_PARAMS)) return -1;
  vals->v[vals->n] = v;
  vals->where[vals->n] = (int8_t)where;
  vals->index[vals->n++] = (int16_t)index;
  return 0;
}

/* A runtime value: its key words and its launch value. 0, -1 (the key is full), or 1 (not a kind
 * the key knows: Triton decides). */
static int key_value(fl_ext_state *st, jit_key *k, jit_values *vals, PyObject *v, int depth) {
  if (v == Py_None) return key_push(k, K_NONE) | value_push(vals, fl_none(), 0, -1);
  if (PyBool_Check(v)) return key_push(k, K_BOOL) | value_push(vals, fl_bool(v == Py_True), 0, -1);
  if (PyLong_CheckExact(v)) {
    uint64_t mag;
    int neg;
    if (!fl_ext_int_digits(v, &mag, &neg)) return 1; /* past 64 bits: Triton raises its own error */
    uint64_t cls; /* Triton's classes: i32, i64, u64 */
    fl_value x;
    if (neg) {
      if (mag > (uint64_t)INT64_MAX + 1) return 1;
      cls = mag <= 0x80000000ull ? 0 : 1;
      x = fl_int(mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag);
    } else {
      cls = mag < 0x80000000ull ? 0 : mag <= (uint64_t)INT64_MAX ? 1 : 2;
      x = cls == 2 ? fl_uint(mag) : fl_int((int64_t)mag);
    }
    return key_push(k, K_INT | cls << 8 | (uint64_t)(!neg && mag == 1) << 12 | (uint64_t)((mag & 15) == 0) << 13) |
           value_push(vals, x, 0, -1);
  }
  if (PyFloat_CheckExact(v)) return key_push(k, K_FLOAT) | value_push(vals, fl_float(PyFloat_AS_DOUBLE(v)), 0, -1);
  if (PyTuple_Check(v)) {
    Py_ssize_t n = PyTuple_GET_SIZE(v);
    if (depth > 0) return 1; /* nested tuples: Triton's */
    if (key_push(k, K_TUPLE | (uint64_t)n << 8) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
      int r = key_value(st, k, vals, PyTuple_GET_ITEM(v, i), depth + 1);
      if (r) return r;
    }
    return 0;
  }
  if (FL_EXT_UNLIKELY(st->door_state == 0)) fl_ext_door_load(st);
  uint64_t p;
  int where, index, dtype;
  if (st->door && st->door->unpack_typed(v, &p, &where, &index, &dtype)) {
    fl_value x;
    x.type = FL_VALUE_PTR;
    x.v.p = p;
    return key_push(k, K_TENSOR | (uint64_t)(unsigned)dtype << 8 | (uint64_t)((p & 15) == 0) << 7) |
           value_push(vals, x, where, index);
  }
  return 1;
}

/* The slow path for tensors the door does not take (no door built, a subclass): dtype and
 * data_ptr() as Triton reads them. 0, 1 (not a tensor), -1 with an exception. */
static int key_tensor_slow(jit_key *k, jit_values *vals, PyObject *v) {
  PyObject *dtype = PyObject_GetAttrString(v, "dtype");
  if (!dtype) {
    PyErr_Clear();
    return 1;
  }
  PyObject *ptr = PyObject_CallMethod(v, "data_ptr", NULL);
  uint64_t p = 0;
  int ok = ptr && PyLong_Check(ptr);
  if (ok) p = PyLong_AsUnsignedLongLongMask(ptr);
  Py_XDECREF(ptr);
  if (!ok) {
    Py_DECREF(dtype);
    PyErr_Clear();
    return 1;
  }
  uint64_t addr = (uint64_t)(uintptr_t)dtype;
  Py_DECREF(dtype); /* torch's dtypes are module-level objects; the policy keeps them with the entry */
  fl_value x;
  x.type = FL_VALUE_PTR;
  x.v.p = p;
  /* Where it lives is not known here: as for a plan's data_ptr() path, no memory check. */
  if (key_push(k, K_TENSOR_OBJ | (uint64_t)((p & 15) == 0) << 7) < 0 || key_push(k, addr) < 0 ||
      value_push(vals, x, 0, -1) < 0)
    return -1;
  return 0;
}

/* ---- binding a call ---- */
typedef struct {
  PyObject *vals[JIT_MAX_PARAMS];   /* borrowed */
  PyObject *opt_vals[JIT_MAX_OPTIONS]; /* the options given, borrowed */
  Py_ssize_t opt_index[JIT_MAX_OPTIONS];
  Py_ssize_t nopts;
  const char *why;                  /* when the call cannot be bound here */
} jit_bound;

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
  b->nopts = 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    Py_ssize_t i, j;
    keyword_index(self, PyTuple_GET_ITEM(kwnames, k), &i, &j);
    if (i >= 0) {
      if (b->vals[i]) return b->why = "args_repeated", 1;
      b->vals[i] = kwvals[k];
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
      at--;
    }
    b->opt_index[at] = j;
    b->opt_vals[at] = kwvals[k];
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    if (b->vals[i]) continue;
    PyObject *d = PyTuple_GET_ITEM(self->defaults, i); /* (default,) or () */
    if (PyTuple_GET_SIZE(d) != 1) return b->why = "args_missing", 1;
    b->vals[i] = PyTuple_GET_ITEM(d, 0);
  }
  return 0;
}

/* 0 with the key and the launch values made; 1 with b->why; -1 with an exception. */
static int make_key(JitObject *self, jit_bound *b, int32_t device, jit_key *k, jit_values *vals) {
  k->n = 0;
  vals->n = 0;
  key_push(k, K_DEVICE | (uint64_t)(uint32_t)device << 8);
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  for (Py_ssize_t i = 0; i < np; i++) {
    if (self->param_const[i]) {
      vals->start[i] = -1;
      if (key_const(k, b->vals[i]) < 0) return b->why = "key_too_long", 1;
      continue;
    }
    vals->start[i] = (int32_t)vals->n;
    int r = key_value(self->state, k, vals, b->vals[i], 0);
    if (r == 1) {
      /* Not a value the door or the exact types take: a tensor another way, or Triton's. */
      if (PyTuple_Check(b->vals[i])) return b->why = "arg_type", 1;
      r = key_tensor_slow(k, vals, b->vals[i]);
      if (r == 1) return b->why = "arg_type", 1;
      if (r < 0) return PyErr_Occurred() ? -1 : (b->why = "key_too_long", 1);
    }
    if (r < 0) return b->why = "key_too_long", 1;
  }
  for (Py_ssize_t o = 0; o < b->nopts; o++)
    if (key_push(k, K_OPTION | (uint64_t)b->opt_index[o] << 8) < 0 || key_const(k, b->opt_vals[o]) < 0)
      return b->why = "key_too_long", 1;
  return 0;
}

/* ---- device and stream, as Triton's driver reads them ---- */
static int current_device(JitObject *self, int32_t *device) {
  if (!self->device_fn) {
    if (self->c_device && self->c_device(device) == 0) return 0;
    PyErr_SetString(PyExc_RuntimeError, "fastlaunch: torch's current device could not be read");
    return -1;
  }
  PyObject *r = PyObject_CallNoArgs(self->device_fn);
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

static int current_stream(JitObject *self, int32_t device, uint64_t *stream) {
  if (!self->stream_fn) {
    void *s = NULL;
    if (self->c_stream && self->c_stream(device, &s) == 0) {
      *stream = (uint64_t)(uintptr_t)s;
      return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "fastlaunch: torch's current CUDA stream could not be read");
    return -1;
  }
  PyObject *dev = PyLong_FromLong(device);
  if (!dev) return -1;
  PyObject *r = PyObject_CallOneArg(self->stream_fn, dev);
  Py_DECREF(dev);
  if (!r) return -1;
  fl_error err;
  int rc = fl_ext_u64_of(r, stream) ? 0 : fl_ext_parse_stream(r, stream, &err);
  Py_DECREF(r);
  if (rc < 0) PyErr_Format(PyExc_RuntimeError, "fastlaunch: the driver's current stream: %s", err.reason);
  return rc;
}

/* ---- the grid ---- */

/* An int variable of a grid program: 0, or 1 when the value is not an int that fits. */
static int grid_var(PyObject *v, int64_t *out) {
  if (!v || !PyLong_Check(v)) return 1;
  uint64_t mag;
  int neg;
  if (PyLong_CheckExact(v) && fl_ext_int_digits(v, &mag, &neg) && mag <= (uint64_t)INT64_MAX) {
    *out = neg ? -(int64_t)mag : (int64_t)mag;
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

/* The grid from the entry's program when `grid` is a function of its code: 0, or 1 (not the
 * program's function, or a value it cannot compute: the callable is called instead). */
static int grid_program(const jit_entry *e, const jit_bound *b, PyObject *grid, int64_t out[3]) {
  if (!e->grid_code || !PyFunction_Check(grid) || PyFunction_GET_CODE(grid) != e->grid_code ||
      PyFunction_GET_GLOBALS(grid) != e->grid_globals || PyFunction_GET_DEFAULTS(grid) ||
      PyFunction_GET_KW_DEFAULTS(grid))
    return 1;
  int64_t vars[JIT_MAX_GRID_VARS];
  PyObject *closure = PyFunction_GET_CLOSURE(grid);
  for (size_t i = 0; i < e->ngrid_src; i++) {
    const grid_source *s = &e->grid_src[i];
    PyObject *v = NULL;
    if (s->kind == SRC_ARG) {
      v = b->vals[s->index];
    } else if (s->kind == SRC_CELL) {
      if (!closure || s->index >= PyTuple_GET_SIZE(closure)) return 1;
      v = PyCell_GET(PyTuple_GET_ITEM(closure, s->index));
    } else {
      v = PyDict_GetItemWithError(e->grid_globals, s->name);
      if (!v) PyErr_Clear();
    }
    if (grid_var(v, &vars[i])) return 1;
  }
  for (int d = 0; d < 3; d++) {
    fl_error err;
    if (!e->grid_prog[d]) out[d] = e->grid_const[d];
    else if (fl_grid_program_eval(e->grid_prog[d], vars, e->ngrid_src, &out[d], &err) != FL_OK) return 1;
  }
  return 0;
}

/* The mapping Triton passes a grid callable: every parameter by name. */
static PyObject *bound_args_dict(JitObject *self, const jit_bound *b) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->param_names); i++)
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(self->param_names, i), b->vals[i]) < 0) {
      Py_DECREF(d);
      return NULL;
    }
  return d;
}

/* ---- Triton's own run ---- */

/* Calls stock_run(*args, **kwargs) adding grid= and warmup=False unless the call had them. */
static PyObject *call_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames,
                            int has_grid) {
  if (has_grid) return PyObject_Vectorcall(self->stock_run, args, nargs, kwnames);
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
  result = PyObject_Vectorcall(self->stock_run, stack, nargs, names);
done:
  PyMem_Free(stack);
  Py_XDECREF(names);
  return result;
}

void fl_ext_count_reason(PyObject *counts, const char *reason, PyObject *reason_obj) {
  PyObject *key = reason_obj ? Py_NewRef(reason_obj) : PyUnicode_FromString(reason);
  if (!key) {
    PyErr_Clear();
    return;
  }
  PyObject *n = PyDict_GetItemWithError(counts, key);
  PyObject *m = PyLong_FromLong(n ? PyLong_AsLong(n) + 1 : 1);
  if (!m || PyDict_SetItem(counts, key, m) < 0) PyErr_Clear();
  Py_XDECREF(m);
  Py_DECREF(key);
}

static void count_stock(JitObject *self, const char *reason, PyObject *reason_obj) {
  self->stock++;
  fl_ext_count_reason(self->stock_counts, reason, reason_obj);
}

/* Triton runs the call; after a miss the policy binds what Triton used under the key. */
static PyObject *stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames,
                       int has_grid, const char *reason, PyObject *reason_obj, const jit_key *miss) {
  count_stock(self, reason, reason_obj);
  PyObject *kernel = call_stock(self, grid, args, nargs, kwnames, has_grid);
  if (!kernel || !miss || kernel == Py_None) return kernel;
  PyObject *key = PyBytes_FromStringAndSize((const char *)miss->words, (Py_ssize_t)(miss->n * sizeof(uint64_t)));
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *pos = PyTuple_New((Py_ssize_t)nargs), *kw = PyDict_New();
  PyObject *r = NULL;
  if (key && pos && kw) {
    for (size_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(pos, (Py_ssize_t)i, Py_NewRef(args[i]));
    int ok = 1;
    for (Py_ssize_t k = 0; k < nkw && ok; k++)
      ok = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, k), args[nargs + (size_t)k]) == 0;
    if (ok) r = PyObject_CallMethod(self->policy, "bind", "OOOOO", key, kernel, pos, kw, grid);
  }
  /* The launch happened: whatever binding did, the call's result stands. */
  if (!r) PyErr_WriteUnraisable(self->policy);
  Py_XDECREF(r);
  Py_XDECREF(key);
  Py_XDECREF(pos);
  Py_XDECREF(kw);
  return kernel;
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
static int revalidate(JitObject *self) {
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

/* ---- the call ---- */

/* Splits the keywords: grid= and warmup= (the run() form) from the rest. */
typedef struct {
  PyObject *grid;
  int warmup;
  int has_grid;
  PyObject *kwnames; /* the others, or NULL; a new tuple when grid/warmup were removed */
  PyObject *kwvals[JIT_MAX_PARAMS + JIT_MAX_OPTIONS];
  Py_ssize_t nkw;
} jit_kw;

static const char *jit_dispatch_checks(JitObject *self) {
  if (PyList_GET_SIZE(self->pre_run_hooks) > 0) return "pre_run_hooks";
  for (Py_ssize_t h = 0; h < PyTuple_GET_SIZE(self->hook_lists); h++)
    if (PyList_GET_SIZE(PyTuple_GET_ITEM(self->hook_lists, h)) > 0) return "launch_hooks";
  return NULL;
}

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
    if (FL_EXT_UNLIKELY(where && spec->memory != FL_MEMORY_ANY &&
                        (where != (int)spec->memory || (spec->device >= 0 && vals->index[at] != spec->device)))) {
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

static PyObject *jit_dispatch(JitObject *self, jit_kw *kw, PyObject *const *args, size_t nargs, PyObject *kwnames) {
  PyObject *grid = kw->grid;
#define STOCK(reason, miss) stock(self, grid, args, nargs, kwnames, kw->has_grid, reason, NULL, miss)
  if (kw->warmup) return STOCK("warmup", NULL);
  if (FL_EXT_UNLIKELY(fl_ext_watch_changed(&self->watch)) && revalidate(self) < 0) return NULL;
  if (self->stock_reason) return stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, self->stock_reason, NULL);
  const char *why = jit_dispatch_checks(self);
  if (why) return STOCK(why, NULL);
  jit_bound b;
  if (bind_call(self, &b, args, nargs, kw->kwnames, kw->kwvals, kw->nkw)) return STOCK(b.why, NULL);
  int32_t device;
  if (current_device(self, &device) < 0) return NULL;
  jit_key k;
  jit_values vals;
  int r = make_key(self, &b, device, &k, &vals);
  if (r < 0) return NULL;
  if (r > 0) return STOCK(b.why, NULL);
  uint64_t h = key_hash(&k);
  jit_entry *e = table_find(self, &k, h);
  if (!e) return STOCK("first_call_of_variant", &k);
  if (!e->plan) return stock(self, grid, args, nargs, kwnames, kw->has_grid, NULL, e->refusal, NULL);
  uint64_t stream;
  if (current_stream(self, device, &stream) < 0) return NULL;
  int64_t g[3];
  fl_error err;
  PyObject *computed = NULL;
  if (PyTuple_Check(grid)) {
    if (fl_ext_parse_grid(grid, g, &err) < 0) return STOCK("grid_unreadable", NULL);
  } else if (grid_program(e, &b, grid, g)) {
    /* Any other callable: called once, with the mapping Triton passes; its answer is what Triton
     * gets too if the call goes there after all. */
    self->grid_calls++;
    PyObject *meta = bound_args_dict(self, &b);
    computed = meta ? PyObject_CallOneArg(grid, meta) : NULL;
    Py_XDECREF(meta);
    if (!computed) return NULL;
    grid = computed;
    e = table_find(self, &k, h); /* the callable may have changed the table */
    if (!e || !e->plan || fl_ext_parse_grid(computed, g, &err) < 0) {
      PyObject *res = STOCK(e ? "grid_unreadable" : "table_changed", NULL);
      Py_DECREF(computed);
      return res;
    }
  }
  PyObject *kernel = Py_NewRef(e->kernel);
  r = launch_entry(self, e, &vals, stream, g, &err);
  if (r == 0) {
    self->fast++;
    Py_XDECREF(computed);
    return kernel;
  }
  Py_DECREF(kernel);
  PyObject *res = r < 0 ? NULL : STOCK(err.reason, NULL);
  Py_XDECREF(computed);
  return res;
#undef STOCK
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
      kw->kwvals[kw->nkw++] = v;
    }
  }
  if (kw->nkw == n) {
    kw->kwnames = kwnames;
    return 0;
  }
  kw->kwnames = PyTuple_New(kw->nkw);
  if (!kw->kwnames) return -1;
  for (Py_ssize_t k = 0; k < kw->nkw; k++) PyTuple_SET_ITEM(kw->kwnames, k, Py_NewRef(others[k]));
  return 0;
}

/* run(*args, grid, warmup, **kwargs): Triton's signature. */
static PyObject *jit_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  JitObject *self = (JitObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  jit_kw kw;
  int r = split_keywords(self, args, nargs, kwnames, &kw);
  if (r < 0) return NULL;
  if (r > 0 || !kw.has_grid) {
    if (kw.kwnames && kw.kwnames != kwnames) Py_DECREF(kw.kwnames);
    count_stock(self, r > 0 ? "keywords" : "no_grid", NULL);
    return PyObject_Vectorcall(self->stock_run, args, nargs, kwnames); /* Triton says what is wrong */
  }
  PyObject *res = jit_dispatch(self, &kw, args, nargs, kwnames);
  if (kw.kwnames && kw.kwnames != kwnames) Py_DECREF(kw.kwnames);
  return res;
}

/* kernel[grid](*args, **kwargs), the grid given apart. */
PyObject *fl_ext_jit_run_grid(PyObject *jit, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames) {
  JitObject *self = (JitObject *)jit;
  jit_kw kw;
  kw.grid = grid;
  kw.has_grid = 0;
  kw.warmup = 0;
  kw.kwnames = kwnames;
  kw.nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (kw.nkw > JIT_MAX_PARAMS + JIT_MAX_OPTIONS) {
    count_stock(self, "keywords", NULL);
    return call_stock(self, grid, args, nargs, kwnames, 0);
  }
  for (Py_ssize_t k = 0; k < kw.nkw; k++) kw.kwvals[k] = args[nargs + (size_t)k];
  return jit_dispatch(self, &kw, args, nargs, kwnames);
}

static PyObject *jit_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  JitCallObject *call = (JitCallObject *)callable;
  Py_INCREF(call); /* the grid it holds stays alive through the call */
  PyObject *res = Py_TYPE(call->target) == call->state->jit_type
                      ? fl_ext_jit_run_grid(call->target, call->grid, args, PyVectorcall_NARGS(nargsf), kwnames)
                      : fl_ext_autotune_call(call->target, call->grid, args, nargsf, kwnames);
  Py_DECREF(call);
  return res;
}

/* ---- JitDispatcher: construction and the policy's methods ---- */
static PyObject *jit_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"fn", "stock_run", "policy", "param_names", "param_const", "defaults", "option_names",
                           "pre_run_hooks", NULL};
  PyObject *fn, *stock_run, *policy, *names, *consts, *defaults, *options, *pre;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO$O!O!O!O!O!:JitDispatcher", kwlist, &fn, &stock_run, &policy,
                                   &PyTuple_Type, &names, &PyTuple_Type, &consts, &PyTuple_Type, &defaults,
                                   &PyTuple_Type, &options, &PyList_Type, &pre))
    return NULL;
  Py_ssize_t np = PyTuple_GET_SIZE(names);
  if (np > JIT_MAX_PARAMS || PyTuple_GET_SIZE(consts) != np || PyTuple_GET_SIZE(defaults) != np ||
      PyTuple_GET_SIZE(options) > JIT_MAX_OPTIONS) {
    PyErr_Format(PyExc_ValueError, "param_names, param_const, defaults: one entry per parameter (at most %d); "
                 "option_names: at most %d", JIT_MAX_PARAMS, JIT_MAX_OPTIONS);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) return PyErr_Format(PyExc_TypeError, "param_names[%zd]: a str", i);
    PyObject *d = PyTuple_GET_ITEM(defaults, i);
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) > 1)
      return PyErr_Format(PyExc_TypeError, "defaults[%zd]: (default,) or () for none", i);
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(options); i++)
    if (!PyUnicode_Check(PyTuple_GET_ITEM(options, i))) return PyErr_Format(PyExc_TypeError, "option_names[%zd]: a str", i);
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  JitObject *self = (JitObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = jit_vectorcall;
  self->state = st;
  self->fn = Py_NewRef(fn);
  self->stock_run = Py_NewRef(stock_run);
  self->policy = Py_NewRef(policy);
  self->param_names = Py_NewRef(names);
  self->defaults = Py_NewRef(defaults);
  self->option_names = Py_NewRef(options);
  self->pre_run_hooks = Py_NewRef(pre);
  self->hook_lists = PyTuple_New(0);
  self->stock_counts = PyDict_New();
  self->stock_reason = PyUnicode_FromString("not_validated");
  self->param_const = PyMem_Calloc((size_t)(np ? np : 1), 1);
  self->watch.force = 1; /* revalidated at the first call */
  if (!self->hook_lists || !self->stock_counts || !self->stock_reason || !self->param_const) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < np; i++) self->param_const[i] = (uint8_t)PyObject_IsTrue(PyTuple_GET_ITEM(consts, i));
  return (PyObject *)self;
}

/* A grid program from (code, globals, (e0, e1, e2), sources). 0, or -1 with an exception. */
static int entry_grid(fl_ext_state *st, jit_entry *e, PyObject *spec, Py_ssize_t nparams) {
  PyObject *exprs, *sources;
  if (!PyArg_ParseTuple(spec, "OO!O!O!:grid", &e->grid_code, &PyDict_Type, &e->grid_globals, &PyTuple_Type, &exprs,
                        &PyTuple_Type, &sources))
    return -1;
  Py_INCREF(e->grid_code);
  Py_INCREF(e->grid_globals);
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
  return 0;
}

/* _insert(key, kernel, plan_or_None, positions, grid_spec_or_None, keep, refusal_or_None) */
static PyObject *jit_insert(PyObject *op, PyObject *args) {
  JitObject *self = (JitObject *)op;
  PyObject *key, *kernel, *plan, *positions, *grid_spec, *keep, *refusal;
  if (!PyArg_ParseTuple(args, "O!OOO!OO!O:_insert", &PyBytes_Type, &key, &kernel, &plan, &PyTuple_Type, &positions,
                        &grid_spec, &PyTuple_Type, &keep, &refusal))
    return NULL;
  Py_ssize_t nbytes = PyBytes_GET_SIZE(key);
  if (nbytes % 8 || nbytes == 0 || nbytes > JIT_MAX_KEY * 8) return PyErr_Format(PyExc_ValueError, "key: not a key");
  if (plan != Py_None && !PyObject_TypeCheck(plan, self->state->plan_type))
    return PyErr_Format(PyExc_TypeError, "plan: a fastlaunch Plan or None");
  if (plan != Py_None && (((fl_PlanObject *)plan)->args.nruntime != (size_t)PyTuple_GET_SIZE(positions) ||
                          fl_plan_grid_mode(((fl_PlanObject *)plan)->plan) != FL_GRID_CALLER ||
                          PyTuple_GET_SIZE(positions) > JIT_MAX_PARAMS))
    return PyErr_Format(PyExc_ValueError, "plan: one runtime argument per position and the caller's grid");
  jit_key k;
  k.n = (size_t)nbytes / 8;
  memcpy(k.words, PyBytes_AS_STRING(key), (size_t)nbytes);
  uint64_t h = key_hash(&k);
  if (table_find(self, &k, h)) Py_RETURN_FALSE; /* bound already (a re-entrant call) */
  jit_entry *e = PyMem_Calloc(1, sizeof *e);
  if (!e) return PyErr_NoMemory();
  e->hash = h;
  e->nkey = k.n;
  e->key = PyMem_Malloc((size_t)nbytes);
  e->nabi = (size_t)PyTuple_GET_SIZE(positions);
  e->abi_param = PyMem_Calloc(e->nabi ? e->nabi : 1, sizeof(int32_t));
  e->abi_member = PyMem_Calloc(e->nabi ? e->nabi : 1, sizeof(int32_t));
  if (!e->key || !e->abi_param || !e->abi_member) {
    entry_free(e);
    return PyErr_NoMemory();
  }
  memcpy(e->key, k.words, (size_t)nbytes);
  e->kernel = Py_NewRef(kernel);
  e->keep = Py_NewRef(keep);
  e->refusal = refusal == Py_None ? NULL : Py_NewRef(refusal);
  e->plan = plan == Py_None ? NULL : (fl_PlanObject *)Py_NewRef(plan);
  if (!e->plan && !e->refusal) e->refusal = PyUnicode_FromString("refused");
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  for (size_t i = 0; i < e->nabi; i++) {
    int p, m;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(positions, (Py_ssize_t)i), "ii:position", &p, &m) || p < 0 || p >= np) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "positions[%zu]: parameter out of range", i);
      entry_free(e);
      return NULL;
    }
    e->abi_param[i] = p;
    e->abi_member[i] = m;
  }
  if ((grid_spec != Py_None && entry_grid(self->state, e, grid_spec, np) < 0) || table_put(self, e) < 0) {
    entry_free(e);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
  }
  Py_RETURN_TRUE;
}

static PyObject *jit_clear_method(PyObject *op, PyObject *unused) {
  JitObject *self = (JitObject *)op;
  (void)unused;
  table_clear(self);
  Py_RETURN_NONE;
}

/* Forces revalidation at the next call (the policy changed something it decides on). */
static PyObject *jit_invalidate(PyObject *op, PyObject *unused) {
  JitObject *self = (JitObject *)op;
  (void)unused;
  self->watch.force = 1;
  Py_RETURN_NONE;
}

static PyObject *jit_get_counts(PyObject *op, void *closure) {
  JitObject *self = (JitObject *)op;
  (void)closure;
  PyObject *reasons = PyDict_Copy(self->stock_counts); /* a snapshot: the counts go on */
  if (!reasons) return NULL;
  return Py_BuildValue("{sKsKsNsnsK}", "fast", self->fast, "stock", self->stock, "stock_reasons", reasons,
                       "variants", (Py_ssize_t)self->count, "grid_calls", self->grid_calls);
}

static PyObject *jit_get_fn(PyObject *op, void *closure) {
  JitObject *self = (JitObject *)op;
  (void)closure;
  return Py_NewRef(self->fn);
}

static int jit_traverse(PyObject *op, visitproc visit, void *arg) {
  JitObject *self = (JitObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->watch.dicts);
  Py_VISIT(self->fn);
  Py_VISIT(self->stock_run);
  Py_VISIT(self->policy);
  Py_VISIT(self->defaults);
  Py_VISIT(self->pre_run_hooks);
  Py_VISIT(self->hook_lists);
  Py_VISIT(self->spare_call);
  Py_VISIT(self->device_fn);
  Py_VISIT(self->stream_fn);
  for (size_t i = 0; i < self->cap; i++) {
    jit_entry *e = self->slots[i];
    if (!e) continue;
    Py_VISIT(e->plan);
    Py_VISIT(e->kernel);
    Py_VISIT(e->keep);
    Py_VISIT(e->grid_globals);
  }
  return 0;
}

static int jit_clear(PyObject *op) {
  JitObject *self = (JitObject *)op;
  Py_CLEAR(self->watch.dicts); /* the version arrays go with the object */
  self->watch.force = 1;
  Py_CLEAR(self->fn);
  Py_CLEAR(self->stock_run);
  Py_CLEAR(self->policy);
  Py_CLEAR(self->defaults);
  Py_CLEAR(self->pre_run_hooks);
  Py_CLEAR(self->hook_lists);
  Py_CLEAR(self->spare_call);
  Py_CLEAR(self->device_fn);
  Py_CLEAR(self->stream_fn);
  table_clear(self);
  return 0;
}

static void jit_dealloc(PyObject *op) {
  JitObject *self = (JitObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  jit_clear((PyObject *)self);
  Py_CLEAR(self->param_names);
  Py_CLEAR(self->option_names);
  fl_ext_watch_free(&self->watch);
  Py_CLEAR(self->stock_reason);
  Py_CLEAR(self->stock_counts);
  PyMem_Free(self->param_const);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMethodDef jit_methods[] = {
    {"_insert", jit_insert, METH_VARARGS,
     "_insert(key, kernel, plan, positions, grid, keep, refusal): binds a variant under a key"},
    {"clear", jit_clear_method, METH_NOARGS, "clear(): forgets every bound variant"},
    {"invalidate", jit_invalidate, METH_NOARGS,
     "invalidate(): asks the policy to revalidate at the next call"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef jit_getset[] = {
    {"counts", jit_get_counts, NULL, "fast and stock calls, stock reasons, bound variants", NULL},
    {"fn", jit_get_fn, NULL, "the JITFunction", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef jit_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(JitObject, vectorcall), Py_READONLY, NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(JitObject, weakrefs), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot jit_slots[] = {
    {Py_tp_new, jit_new},
    {Py_tp_dealloc, jit_dealloc},
    {Py_tp_traverse, jit_traverse},
    {Py_tp_clear, jit_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, jit_methods},
    {Py_tp_getset, jit_getset},
    {Py_tp_members, jit_members},
    {Py_tp_doc, "JitDispatcher(fn, stock_run, policy, *, param_names, param_const, defaults, option_names, "
                "pre_run_hooks)\n--\n\nThe call slot of a Triton JITFunction (its run)."},
    {0, NULL},
};

static PyType_Spec jit_spec = {
    .name = "fastlaunch._C.JitDispatcher",
    .basicsize = sizeof(JitObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = jit_slots,
};

/* ---- JitCall ---- */
static int jit_call_traverse(PyObject *op, visitproc visit, void *arg) {
  JitCallObject *self = (JitCallObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->target);
  Py_VISIT(self->grid);
  return 0;
}

static int jit_call_clear(PyObject *op) {
  JitCallObject *self = (JitCallObject *)op;
  Py_CLEAR(self->target);
  Py_CLEAR(self->grid);
  return 0;
}

static void jit_call_dealloc(PyObject *op) {
  JitCallObject *self = (JitCallObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  jit_call_clear((PyObject *)self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMemberDef jit_call_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(JitCallObject, vectorcall), Py_READONLY, NULL},
    {"grid", Py_T_OBJECT_EX, offsetof(JitCallObject, grid), Py_READONLY, "the grid of kernel[grid]"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot jit_call_slots[] = {
    {Py_tp_dealloc, jit_call_dealloc},
    {Py_tp_traverse, jit_call_traverse},
    {Py_tp_clear, jit_call_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, jit_call_members},
    {Py_tp_doc, "kernel[grid]: calling it launches the kernel as Triton's JIT would."},
    {0, NULL},
};

static PyType_Spec jit_call_spec = {
    .name = "fastlaunch._C.JitCall",
    .basicsize = sizeof(JitCallObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = jit_call_slots,
};

static PyObject *new_call(fl_ext_state *st, PyObject *target, PyObject *grid) {
  JitCallObject *call = PyObject_GC_New(JitCallObject, st->jit_call_type);
  if (!call) return NULL;
  call->vectorcall = jit_call_vectorcall;
  call->state = st;
  call->target = Py_NewRef(target);
  call->grid = Py_NewRef(grid);
  PyObject_GC_Track(call);
  return (PyObject *)call;
}

/* ---- JitSubscript: the class's __getitem__ ---- */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *stock_getitem; /* Triton's own __getitem__ */
  PyObject *attach;        /* attach(kernel): installs a dispatcher, or marks the kernel stock */
  /* The last kernel served, its instance dict, the dispatcher found there and the dict's stamp
   * then: while the stamp holds, kernel[grid] on that kernel skips the lookup of `run`. */
  PyObject *last_kernel, *last_dict, *last_run;
  uint64_t last_stamp;
} SubscriptObject;

/* The dispatcher in kernel.__dict__["run"] (borrowed), NULL when there is none (or with an
 * exception). The last kernel's is remembered while its dict is unchanged. */
static PyObject *subscript_run(SubscriptObject *sub, PyObject *kernel) {
  PyObject **dictptr = _PyObject_GetDictPtr(kernel);
  PyObject *dict = dictptr ? *dictptr : NULL;
  if (!dict) return NULL;
  if (kernel == sub->last_kernel && dict == sub->last_dict && fl_ext_dict_stamp(dict) == sub->last_stamp)
    return sub->last_run;
  PyObject *run = PyDict_GetItemWithError(dict, sub->state->str_run);
  if (!run || (Py_TYPE(run) != sub->state->jit_type && Py_TYPE(run) != sub->state->autotune_type)) return run;
  if (fl_ext_watch_dict(sub->state, dict) < 0) {
    PyErr_Clear(); /* not remembered: looked up again next time */
    return run;
  }
  Py_XSETREF(sub->last_kernel, Py_NewRef(kernel));
  Py_XSETREF(sub->last_dict, Py_NewRef(dict));
  Py_XSETREF(sub->last_run, Py_NewRef(run));
  sub->last_stamp = fl_ext_dict_stamp(dict);
  return run;
}

static PyObject *subscript_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  SubscriptObject *sub = (SubscriptObject *)callable;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 2 || kwnames) return PyObject_Vectorcall(sub->stock_getitem, args, nargsf, kwnames);
  PyObject *kernel = args[0], *grid = args[1];
  PyObject *run = subscript_run(sub, kernel);
  if (!run) {
    if (PyErr_Occurred()) return NULL;
    PyObject *r = PyObject_CallOneArg(sub->attach, kernel); /* once per kernel */
    if (!r) return NULL;
    Py_DECREF(r);
    run = subscript_run(sub, kernel);
    if (!run && PyErr_Occurred()) return NULL;
  }
  PyObject **spare_at;
  if (run && Py_TYPE(run) == sub->state->jit_type) spare_at = &((JitObject *)run)->spare_call;
  else if (run && Py_TYPE(run) == sub->state->autotune_type) spare_at = fl_ext_autotune_spare(run);
  else return PyObject_Vectorcall(sub->stock_getitem, args, 2, NULL);
  PyObject *spare = *spare_at;
  if (spare && Py_REFCNT(spare) == 1) { /* nobody holds the last one: it is reused */
    Py_SETREF(((JitCallObject *)spare)->grid, Py_NewRef(grid));
    return Py_NewRef(spare);
  }
  PyObject *call = new_call(sub->state, run, grid);
  if (call && !spare) *spare_at = Py_NewRef(call);
  return call;
}

static PyObject *subscript_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"stock_getitem", "attach", NULL};
  PyObject *stock_getitem, *attach;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:JitSubscript", kwlist, &stock_getitem, &attach)) return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  SubscriptObject *self = (SubscriptObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = subscript_vectorcall;
  self->state = st;
  self->stock_getitem = Py_NewRef(stock_getitem);
  self->attach = Py_NewRef(attach);
  return (PyObject *)self;
}

static int subscript_traverse(PyObject *op, visitproc visit, void *arg) {
  SubscriptObject *self = (SubscriptObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->stock_getitem);
  Py_VISIT(self->attach);
  Py_VISIT(self->last_kernel);
  Py_VISIT(self->last_dict);
  Py_VISIT(self->last_run);
  return 0;
}

static int subscript_clear(PyObject *op) {
  SubscriptObject *self = (SubscriptObject *)op;
  Py_CLEAR(self->stock_getitem);
  Py_CLEAR(self->attach);
  Py_CLEAR(self->last_kernel);
  Py_CLEAR(self->last_dict);
  Py_CLEAR(self->last_run);
  return 0;
}

static void subscript_dealloc(PyObject *op) {
  SubscriptObject *self = (SubscriptObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  subscript_clear((PyObject *)self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMemberDef subscript_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(SubscriptObject, vectorcall), Py_READONLY, NULL},
    {"stock_getitem", Py_T_OBJECT_EX, offsetof(SubscriptObject, stock_getitem), Py_READONLY, "Triton's own __getitem__"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot subscript_slots[] = {
    {Py_tp_new, subscript_new},
    {Py_tp_dealloc, subscript_dealloc},
    {Py_tp_traverse, subscript_traverse},
    {Py_tp_clear, subscript_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, subscript_get},
    {Py_tp_members, subscript_members},
    {Py_tp_doc, "JitSubscript(stock_getitem, attach)\n--\n\nA JITFunction class's __getitem__ that hands out "
                "fastlaunch's JitCall."},
    {0, NULL},
};

static PyType_Spec subscript_spec = {
    .name = "fastlaunch._C.JitSubscript",
    .basicsize = sizeof(SubscriptObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = subscript_slots,
};

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

int fl_ext_add_jit_types(PyObject *module, fl_ext_state *st) {
  if (fl_ext_watch_init(st) < 0) return -1;
  st->str_warmup = PyUnicode_InternFromString("warmup");
  st->str_run = PyUnicode_InternFromString("run");
  if (!st->str_warmup || !st->str_run) return -1;
  st->jit_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &jit_spec, NULL);
  if (!st->jit_type || PyModule_AddType(module, st->jit_type) < 0) return -1;
  st->jit_call_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &jit_call_spec, NULL);
  if (!st->jit_call_type || PyModule_AddType(module, st->jit_call_type) < 0) return -1;
  st->jit_subscript_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &subscript_spec, NULL);
  if (!st->jit_subscript_type || PyModule_AddType(module, st->jit_subscript_type) < 0) return -1;
  return PyModule_AddFunctions(module, fl_ext_jit_methods);
}
