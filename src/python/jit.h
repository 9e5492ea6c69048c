/* jit.h: the types shared by the three files of Triton's JIT dispatcher: jit.c (a call: key, table,
 * device, stream, grid, launch), jit_types.c (the JitDispatcher and JitCall types, binding variants,
 * revalidation) and jit_subscript.c (the class's __getitem__). Private to src/python. */
#ifndef FL_JIT_H
#define FL_JIT_H

#include "ext.h"
#include "watch.h"

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
static inline uint64_t key_hash(const jit_key *k) {
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

/* A call bound to the kernel's parameters. */
typedef struct {
  PyObject *vals[JIT_MAX_PARAMS];   /* borrowed */
  PyObject *opt_vals[JIT_MAX_OPTIONS]; /* the options given, borrowed */
  Py_ssize_t opt_index[JIT_MAX_OPTIONS];
  Py_ssize_t nopts;
  const char *why;                  /* when the call cannot be bound here */
} jit_bound;

/* Splits the keywords: grid= and warmup= (the run() form) from the rest. */
typedef struct {
  PyObject *grid;
  int warmup;
  int has_grid;
  PyObject *kwnames; /* the others, or NULL; a new tuple when grid/warmup were removed */
  PyObject *kwvals[JIT_MAX_PARAMS + JIT_MAX_OPTIONS];
  Py_ssize_t nkw;
} jit_kw;

/* The variant bound under a key, or NULL (open addressing; the hash only spreads keys). */
static inline jit_entry *table_find(const JitObject *self, const jit_key *k, uint64_t h) {
  if (!self->cap) return NULL;
  for (size_t i = h & (self->cap - 1);; i = (i + 1) & (self->cap - 1)) {
    jit_entry *e = self->slots[i];
    if (!e) return NULL;
    if (e->hash == h && e->nkey == k->n && memcmp(e->key, k->words, k->n * sizeof(uint64_t)) == 0) return e;
  }
}

/* jit.c */
PyObject *fl_jit_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *fl_jit_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* jit_types.c */
void fl_jit_entry_free(jit_entry *e);
void fl_jit_table_clear(JitObject *self);
int fl_jit_table_put(JitObject *self, jit_entry *e);
int fl_jit_revalidate(JitObject *self);
PyObject *fl_jit_new_call(fl_ext_state *st, PyObject *target, PyObject *grid);
/* jit_subscript.c */
extern PyType_Spec fl_jit_subscript_spec;

#endif
