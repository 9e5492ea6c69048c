/* jit_base.h: the types shared by the files of Triton's JIT dispatcher (named after no .c file: it is
 * below all of them), in layers, each calling only into
 * the ones before it (tests/python/test_tree.py checks it):
 *   jit_grid.c      a grid that is a value, read as Triton reads it
 *   jit_key.c       the key of a call, the memo of the last fast call's form, a call's binding
 *   jit_table.c     a variant's entry, the table, revalidation, torch's C shim
 *   jit_stock.c     Triton's own run for a call handed back; the grid callable called, replayed
 *   jit_launch.c    an entry's launch: its values in order; its read in the launch sequence (sequence.h)
 *   jit.c           a call: bind, key, table, device, stream, grid, launch, or Triton's run
 *   jit_types.c     the JitDispatcher type: construction, binding variants, counts
 *   autotune_key.c  the Autotuner's key and table (autotune_base.h; they include ext.h only)
 *   autotune.c      the AutotuneDispatcher, over the JIT's
 *   heuristics.c    the HeuristicsDispatcher, over either
 *   tuner_slot.c    Autotuner.run for subclasses' super().run (calls a dispatcher by vectorcall)
 *   jit_subscript.c JitCall (kernel[grid]) and JitSubscript (the class's __getitem__)
 * and beside them the kept compiled kernels (compiled_base.h: compiled.c, compiled_run.c), all in
 * src/python/triton/ over the extension's base in src/python/ (ext.h, call_args.h, sequence.h,
 * watch.h: values, plans, the launch sequence with its hooks and scratch, descriptors).
 * Private to src/python. */
#ifndef FL_JIT_H
#define FL_JIT_H

#include "ext.h"
#include "grid_shape.h"
#include "sequence.h"
#include "watch.h"

#define JIT_MAX_KEY 512     /* key words; a longer key (hundreds of arguments) goes to Triton */
#define JIT_MAX_PARAMS 256  /* parameters bound on the stack */
#define JIT_MAX_OPTIONS 32  /* option keywords */
#define JIT_MAX_GRID_VARS 16
#define JIT_MAX_LAZY 4      /* tensor-likes per call whose data_ptr() waits for the table (jit_values) */

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
  K_DEVICE,     /* | device << 8, first */
  K_DESC        /* | rank << 8, then its base's dtype object's address and the block shape's sizes */
};

/* A descriptor's launch values as the key pass reads them (jit_key.c): its map, shape, strides, then
 * its base's address and its padding and TF32 flags (the decomposed form's). */
#define JIT_DESC_VALUES(rank) (4 + 2 * (size_t)(rank))

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
  /* The dtype objects of tensors read through data_ptr() (their addresses are in the key), held
   * until the call is done with the key: no other object can take an address while it is held. */
  PyObject *held[JIT_MAX_PARAMS];
  size_t nheld;
  size_t nquiet;       /* of those, read with no Python code run (a descriptor over a tensor the door read) */
  /* Tensor-likes whose data_ptr() is not read yet (the first JIT_MAX_LAZY of a call): the table is
   * searched for either alignment first, so a call Triton's run serves has not read it (Triton's run
   * reads it itself). Per one: its key word (the alignment bit 0 until read), its value, the object. */
  uint16_t lazy_word[JIT_MAX_LAZY], lazy_value[JIT_MAX_LAZY];
  PyObject *lazy_obj[JIT_MAX_LAZY]; /* borrowed: the call's arguments */
  size_t nlazy;
  /* Tensor descriptors' values (their maps' values point here: the struct is never copied). */
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  size_t ntmaps;
} jit_values;

static inline int key_push(jit_key *k, uint64_t w) {
  if (FL_EXT_UNLIKELY(k->n >= JIT_MAX_KEY)) return -1;
  k->words[k->n++] = w;
  return 0;
}

/* The key of one value, shared by the full path (fl_jit_make_key) and the memo, both in jit_key.c, so
 * that both compute the same words. */

/* A constexpr's value (or a launch option's): 1 or 2 words into w. */
static inline int const_words(PyObject *v, uint64_t w[2]) {
  if (v == Py_None) return w[0] = K_NONE, 1;
  if (PyBool_Check(v)) return w[0] = K_CONST_BOOL | (uint64_t)(v == Py_True) << 8, 1;
  if (PyLong_CheckExact(v)) {
    uint64_t mag;
    int neg;
    if (fl_ext_int_digits(v, &mag, &neg) && mag <= (uint64_t)INT64_MAX) {
      w[0] = K_CONST_INT;
      w[1] = neg ? (uint64_t)(-(int64_t)mag) : mag;
      return 2;
    }
  } else if (PyFloat_CheckExact(v)) {
    double d = PyFloat_AS_DOUBLE(v);
    w[0] = K_CONST_FLOAT;
    memcpy(&w[1], &d, sizeof d);
    return 2;
  }
  w[0] = K_CONST_OBJ;
  w[1] = (uint64_t)(uintptr_t)v;
  return 2;
}

/* The key word of an int within int64: Triton's width class (i32 for -2^31 <= v < 2^31, else i64),
 * == 1, % 16 == 0 (two's complement keeps the low bits of a negative multiple of 16 zero). */
static inline uint64_t int_key(int64_t v) {
  uint64_t wide = (uint64_t)v + 0x80000000ull >= 0x100000000ull;
  return K_INT | wide << 8 | (uint64_t)(v == 1) << 12 | (uint64_t)(((uint64_t)v & 15) == 0) << 13;
}

/* An exact int's key word (width class i32/i64/u64, == 1, % 16 == 0) and launch value; 0 past
 * what Triton takes (it raises its own error). */
static inline int int_words(PyObject *v, uint64_t w[1], fl_value *x) {
  uint64_t mag;
  int neg;
  if (!fl_ext_int_digits(v, &mag, &neg)) return 0;
  if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) {
    if (neg) return 0;
    *x = fl_uint(mag); /* u64: never 1 */
    w[0] = K_INT | 2ull << 8 | (uint64_t)((mag & 15) == 0) << 13;
    return 1;
  }
  int64_t s = neg ? (int64_t)(0 - mag) : (int64_t)mag; /* -2^63 included */
  *x = fl_int(s);
  w[0] = int_key(s);
  return 1;
}

/* A tensor's key word: its dtype and whether its pointer is 16-byte aligned. */
static inline uint64_t tensor_word(uint64_t p, int dtype) {
  return K_TENSOR | (uint64_t)(unsigned)dtype << 8 | (uint64_t)((p & 15) == 0) << 7;
}

/* A tensor's key word, its pointer and where it lives, through the tensor door; 0 for anything the
 * door does not take (not a tensor, or no door). */
static inline int tensor_words(fl_ext_state *st, PyObject *v, uint64_t w[1], fl_value *x, int *where, int *index) {
  if (FL_EXT_UNLIKELY(FL_EXT_LOAD(st->door_state) == 0)) fl_ext_door_load(st);
  uint64_t p;
  int dtype;
  if (!FL_EXT_DOOR(st) || !FL_EXT_DOOR(st)->unpack_typed(v, &p, where, index, &dtype)) return 0;
  x->type = FL_VALUE_PTR;
  x->v.p = p;
  w[0] = tensor_word(p, dtype);
  return 1;
}

/* A runtime value that is one value (not a tuple): 1 word into w, its launch value in *x and, for
 * a tensor, where it lives (*where, *index; 0 and -1 for the rest). 0: not a value read here (an
 * int past what Triton takes, a tensor the door does not take, another type). */
static inline int value_words(fl_ext_state *st, PyObject *v, uint64_t w[1], fl_value *x, int *where, int *index) {
  *where = 0;
  *index = -1;
  if (v == Py_None) return w[0] = K_NONE, *x = fl_none(), 1;
  if (PyBool_Check(v)) return w[0] = K_BOOL, *x = fl_bool(v == Py_True), 1;
  if (PyLong_CheckExact(v)) return int_words(v, w, x);
  if (PyFloat_CheckExact(v)) return w[0] = K_FLOAT, *x = fl_float(PyFloat_AS_DOUBLE(v)), 1;
  if (PyTuple_Check(v)) return 0;
  if (tensor_words(st, v, w, x, where, index)) return 1;
  *where = 0;
  *index = -1;
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

typedef struct jit_entry {
  struct jit_entry *next; /* in the dispatcher's graveyard, once cleared while a call was in flight */
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
  int32_t *param_abi;   /* per parameter: its runtime argument, or -1; NULL: no memo (tuples) */
  /* A grid program compiled from one grid callable's code, or none. */
  PyObject *grid_code, *grid_globals;
  fl_grid_program *grid_prog[3]; /* NULL for a dimension whose value is constant: grid_const */
  int64_t grid_const[3];
  /* One source and dimension 0 one of the shapes (grid_shape.h), 1 and 2 constant: Triton's
   * common `lambda META: (triton.cdiv(n, META["BLOCK"]),)`, computed inline. */
  bool grid_shaped;
  bool grid_global;     /* a source is a global: its lookup can run a colliding key's __eq__ */
  fl__grid_shape grid_shape;
  size_t ngrid_src;
  grid_source *grid_src;
  PyObject *grid_tried; /* the code of the callable grid last traced for it and not compiled, or NULL */
  uint8_t grid_learned; /* grid programs learned after binding (a call site alternating lambdas stops at 4) */
  /* Global scratch (sequence.c): the allocator's ContextVar, bytes per CTA, alignment, num_ctas; the
   * plan's last nhidden runtime arguments are the launcher's trailing pointers (positions -1). */
  PyObject *scratch_var;
  uint64_t scratch_size, scratch_align;
  unsigned scratch_ctas, nhidden;
  fl_ext_scratch_ints scratch_ints;
} jit_entry;

/* The last fast call's form (jit_key.c): while calls come with the same keyword names (the tuple
 * a call site passes, or one of the same str objects) and positional count, each parameter's value is
 * found at a known place and its key words at a known offset of the entry the last call found (the
 * entry's key fixes how many words each value has). A call's values are checked kind by kind in
 * tight loops (the tensors through the door at once, then the ints, the constexprs and options, the
 * rest), each against its words of the entry's key, and written in the entry's argument order: no
 * binding, hash or table. The lists are sized for the kernel's parameters when it is made. */
typedef struct {
  int16_t src;   /* its index in args */
  uint16_t abi;  /* its runtime argument, or JIT_MAX_PARAMS: none (the int 1, specialized away) */
  uint16_t koff; /* its key word */
} jit_memo_int;

typedef struct {
  PyObject *dflt; /* its default (borrowed from the kernel's defaults), when src < 0 */
  PyObject *same; /* the last call's object: the same object has the same words (borrowed: in `ref`,
                   * or an object whose address is in the entry's key, which the entry keeps alive) */
  PyObject *ref;  /* a strong reference to `same` where it is an exact int or float */
  int16_t src;
  uint16_t koff;  /* its first key word (a launch option's value: after the option's word) */
  uint8_t n;      /* its key words, 1 or 2 */
} jit_memo_const;

typedef struct {
  PyObject *dflt;
  int16_t src;
  int16_t abi;   /* its runtime argument, or -1 */
  uint16_t koff;
} jit_memo_value; /* any other runtime value (None, bool, float, a default, an int past int64) */

typedef struct {
  PyObject *dflt;
  int16_t src;
  int16_t param;
} jit_memo_grid; /* a parameter the entry's grid program reads */

typedef struct {
  PyObject *dflt;
  int16_t src;
  uint16_t abi;  /* its map's runtime argument (its shape and strides follow) */
  uint16_t koff; /* its K_DESC word */
  uint8_t rank;
  int8_t dtype;  /* the door's code of its base's dtype (the dtype object in the key is torch's one) */
  fl_ext_tmap_seen seen; /* the descriptor it last read in full (met again: read in part) */
} jit_memo_desc; /* a tensor descriptor (tensor_maps.c reads it) */

typedef struct {
  jit_entry *entry;  /* NULL: none */
  PyObject *kwnames; /* strong (so no other tuple takes its address), or NULL for none */
  size_t nargs;
  uint32_t nt, ni, nc, nv, ng;
  uint32_t *t_src, *t_abi; /* the tensors: their places in args and runtime arguments (the door's */
  uint16_t *t_koff;        /* pos and out) and key words */
  jit_memo_int *ints;
  jit_memo_const *consts;  /* the constexprs, then the launch options given */
  jit_memo_value *vals;
  jit_memo_grid grid[JIT_MAX_GRID_VARS];
  uint32_t nd;
  unsigned desc_version;   /* the descriptor class's version tag when its reads were found plain */
  jit_memo_desc desc[FL_EXT_MAX_TMAPS];
  void *block;             /* one allocation holding the lists */
} jit_memo;

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
  PyObject *hook_lists;   /* tuple of lists: Triton's hook chains' calls */
  int hooks_plain;        /* a launch hook is a plain callable (set while it is) */
  PyObject *stock_reason; /* str while every call goes to Triton, else NULL */
  PyObject *check;        /* the policy's check(device, args, kwargs, kernel) while every call is checked
                           * against Triton's own choice (triton_check.py), else NULL */
  PyObject *device_fn, *stream_fn; /* the driver's callables, or NULL where a C function reads them */
  int32_t (*c_device)(int32_t *);  /* torch's shim, or a driver's registered C equivalent */
  int32_t (*c_stream)(int32_t, void **);
  fl_ext_watch watch;     /* the policy's watched dicts */
  PyObject *spare_call;   /* the JitCall handed out by kernel[grid] while nobody else holds it */
  PyObject *stock_counts; /* dict reason -> count */
  unsigned long long fast, stock;
  unsigned long long memo_fast; /* fast calls the memo took */
  unsigned long long hooked;    /* fast calls with launch hooks called around them */
  unsigned long long grid_calls; /* grid callables called (no grid program for their code) */
  jit_entry **slots;
  size_t cap, count;
  uint64_t gen;           /* counts clearings of the table: an entry held across Python code is checked by it */
  size_t depth;           /* calls of this dispatcher in flight (nested ones included) */
  size_t pre_ran;         /* the depth of the call whose pre-run hooks were called (0: none): its
                           * hand-back to Triton leaves them uncalled */
  unsigned long long pre_run; /* calls whose pre-run hooks fastlaunch called */
  unsigned long long checked; /* calls Triton's own choice was asked for and agreed */
  jit_entry *graveyard;   /* entries cleared while depth > 0: freed when the outermost call returns */
  jit_memo memo;
  PyObject *weakrefs;
} JitObject;

/* The call obj[grid] hands out: JitCall (jit_subscript.c; its target a JitDispatcher or an
 * AutotuneDispatcher) and CompiledCall (compiled.c; its target the kernel's CompiledLaunch). */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *target;
  PyObject *grid;
} JitCallObject;

/* The head of a class's __getitem__ while fastlaunch serves it: JitSubscript (jit_subscript.c) and
 * CompiledSubscript (compiled.c). */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *stock_getitem; /* Triton's own __getitem__ */
  PyObject *attach;        /* the policy's: attach(kernel) */
} fl_getitem_head;

/* jit_subscript.c: both call types' and both heads' traversal and release, written once. */
int fl_grid_call_traverse(PyObject *op, visitproc visit, void *arg);
int fl_grid_call_clear(PyObject *op);
void fl_grid_call_dealloc(PyObject *op);
int fl_getitem_traverse(fl_getitem_head *h, visitproc visit, void *arg);
void fl_getitem_clear(fl_getitem_head *h);
/* Both heads' members (__vectorcalloffset__, stock_getitem): a type whose object starts with the head. */
extern PyMemberDef fl_getitem_members[];
/* A call type (JitCall, CompiledCall): the one spec, named `name` with `doc` (static strings). New
 * reference, or NULL. */
PyTypeObject *fl_grid_call_type(PyObject *module, const char *name, const char *doc);
/* __get__ of a class's __getitem__: bound to the instance, as a function is. */
PyObject *fl_getitem_bind(PyObject *self, PyObject *obj, PyObject *type);
/* A head's type called as `Name(stock_getitem, attach)` (`fmt` "OO:Name"): the new object, its
 * vectorcall `call`, or NULL. */
fl_getitem_head *fl_getitem_new(PyTypeObject *type, PyObject *args, PyObject *kwds, const char *fmt,
                                vectorcallfunc call);

/* A call bound to the kernel's parameters. */
typedef struct {
  PyObject *vals[JIT_MAX_PARAMS];   /* borrowed */
  PyObject *opt_vals[JIT_MAX_OPTIONS]; /* the options given, borrowed */
  Py_ssize_t opt_index[JIT_MAX_OPTIONS];
  Py_ssize_t nopts;
  const char *why;                  /* when the call cannot be bound here */
  /* Where each value came from (the memo's form): per parameter its index in the call's args
   * (positional, then keywords), -1 for a default; per option given likewise. */
  int16_t src[JIT_MAX_PARAMS];
  int16_t opt_src[JIT_MAX_OPTIONS];
} jit_bound;

/* Splits the keywords: grid= and warmup= (the run() form) from the rest. */
typedef struct {
  PyObject *grid;
  int warmup;
  int has_grid;
  PyObject *kwnames; /* the others, or NULL; a new tuple when grid/warmup were removed */
  PyObject *const *kwvals; /* their values: args + nargs, or `kept` when grid/warmup were removed */
  PyObject *kept[JIT_MAX_PARAMS + JIT_MAX_OPTIONS];
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

/* jit.c: the call's arguments bound to the kernel's parameters and options: 0; 1 not bindable here
 * (b->why). kwnames and kwvals hold no grid= or warmup=. */
int fl_jit_bind_call(JitObject *self, jit_bound *b, PyObject *const *args, size_t nargs, PyObject *kwnames,
                     PyObject *const *kwvals, Py_ssize_t nkw);
/* jit_key.c */
int fl_jit_make_key(JitObject *self, jit_bound *b, int32_t device, jit_key *k, jit_values *vals);
/* The launch values again, as Triton's launcher reads them after the grid (data_ptr() called again
 * on a tensor the door declines; its failure is the launcher's TypeError): 0; 1 (the values no
 * longer have the key's layout: Triton decides); -1 with an exception. `first` is the key pass's. */
int fl_jit_launch_values(JitObject *self, jit_bound *b, const jit_values *first, jit_values *out);
/* The entry bound under the key for some alignment of the unread tensor-likes, or NULL. */
jit_entry *fl_jit_find_lazy(JitObject *self, jit_key *k, const jit_values *vals);
/* Their data_ptr() read now (as Triton's binder reads it: its exception is the call's), each value
 * and alignment bit set. 0, or -1 with an exception. */
int fl_jit_read_lazy(jit_key *k, jit_values *vals);
void fl_jit_values_release(jit_values *vals);
int fl_jit_memo_init(jit_memo *m, Py_ssize_t nparams);
void fl_jit_memo_free(jit_memo *m);
void fl_jit_memo_clear(JitObject *self);
void fl_jit_memo_set(JitObject *self, jit_entry *e, const jit_bound *b, size_t nargs, PyObject *kwnames);
int fl_jit_memo_entry(jit_entry *e, Py_ssize_t nparams, const uint8_t *param_const);
/* The descriptors of a call the memo matched (tensor_maps.c reads each into its map in tmaps and its
 * values): 0, or 1 (the full path decides). */
int fl_jit_memo_descs(JitObject *self, PyObject *const *args, fl_value *values, fl_tensor_map_value *tmaps);
/* jit_table.c */
void fl_jit_entry_free(jit_entry *e);
void fl_jit_table_clear(JitObject *self);
void fl_jit_bury(JitObject *self); /* frees the graveyard (no call in flight) */
int fl_jit_table_put(JitObject *self, jit_entry *e);
FL_EXT_COLD int fl_jit_revalidate(JitObject *self);
/* A grid program from (code, globals, (e0, e1, e2), sources) into e's grid fields. 0, or -1. */
int fl_jit_entry_grid(fl_ext_state *st, jit_entry *e, PyObject *spec, Py_ssize_t nparams);
/* The same for an entry already bound, replacing its grid program whole. 0, or -1. */
int fl_jit_entry_learn_grid(fl_ext_state *st, jit_entry *e, PyObject *spec, Py_ssize_t nparams);
extern PyMethodDef fl_ext_jit_methods[];
/* jit_stock.c */
FL_EXT_COLD PyObject *fl_jit_call_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                        PyObject *kwnames, int has_grid);
FL_EXT_COLD void fl_jit_count_stock(JitObject *self, const char *reason, PyObject *reason_obj);
FL_EXT_COLD PyObject *fl_jit_stock(JitObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                                   PyObject *kwnames, int has_grid, const char *reason, PyObject *reason_obj,
                                   const jit_key *miss);
/* After Triton's run served a miss: the policy binds the variant it used under the key. */
FL_EXT_COLD void fl_jit_bind(JitObject *self, PyObject *kernel, PyObject *grid, PyObject *const *args, size_t nargs,
                             PyObject *kwnames, const jit_key *miss);
FL_EXT_COLD int fl_jit_called_grid(JitObject *self, PyObject *const *pv, PyObject *grid, int64_t g[3],
                                   PyObject **computed, PyObject **meta);
FL_EXT_COLD int fl_jit_meta_changed(JitObject *self, PyObject *meta, PyObject *const *pv);
FL_EXT_COLD PyObject *fl_jit_replay_grid(JitObject *self, PyObject *answer, PyObject *meta, int changed);
FL_EXT_COLD int fl_jit_settled(JitObject *self, const char **why, PyObject **why_obj);
FL_EXT_COLD int fl_jit_learn_grid(JitObject *self, jit_entry *e, PyObject *grid, PyObject *const *pv);
/* The call's keywords as a new dict (Triton's run's **kwargs), or NULL with an exception. */
PyObject *fl_jit_kwargs_dict(PyObject *kwnames, PyObject *const *kwvals, Py_ssize_t nkw);
/* Every call checked (self->check set): Triton's own choice for the call asked for among the
 * candidates' kernels (jit_stock.c). 0: it is cands[*idx]'s; 1: the call is Triton's (*res, its
 * result or NULL); 2 (unread: the candidates are the variants bound for each alignment of tensor-likes
 * not read yet): none of them, their pointers are needed; -1 with an exception. k: the key to bind
 * what Triton compiles under (NULL: none). */
FL_EXT_COLD int fl_jit_check(JitObject *self, jit_entry *const *cands, size_t ncand, int32_t device, const jit_kw *kw,
                             PyObject *const *args, size_t nargs, PyObject *kwnames, const jit_key *k, int unread,
                             PyObject **res, size_t *idx);
/* Triton's pre-run hooks called as its run calls them (jit_stock.c). 0 called; 1 not (the policy
 * does not know what this Triton passes them: the call is Triton's); -1 with a hook's exception. */
FL_EXT_COLD int fl_jit_pre_run(JitObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames,
                               PyObject *const *kwvals, Py_ssize_t nkw);

/* Whether a launch hook is set (a plain callable, or a chain with calls): such a call is made with
 * the hooks called around the launch (sequence.c). */
static inline int fl_jit_hooked(const JitObject *self) {
  if (self->hooks_plain) return 1;
  for (Py_ssize_t h = 0; h < PyTuple_GET_SIZE(self->hook_lists); h++)
    if (PyList_GET_SIZE(PyTuple_GET_ITEM(self->hook_lists, h)) > 0) return 1;
  return 0;
}

/* jit_launch.c */
/* The JIT's call in the launch sequence (sequence.h): how the values are read again once Python code
 * ran (the allocator, the enter hook; Triton's launcher reads them after both): through the binding
 * the full path made (b, and the key pass's values), or else by matching the memo again (b NULL). */
typedef struct {
  JitObject *self;
  jit_entry *e;
  jit_bound *b;
  const jit_values *first;
  PyObject *const *args;
  size_t nargs;
  PyObject *kwnames, **pv;
  fl_tensor_map_value *tmaps;
} jit_reread;
/* Launches through the entry's plan with the values the key pass read: 0 launched; 1 refused before
 * the boundary (err); -1 with an exception (after the boundary, or the allocator's). */
int fl_jit_launch_entry(JitObject *self, jit_entry *e, jit_bound *b, const jit_values *vals, uint64_t stream,
                        const int64_t grid[3], fl_error *err);
/* An entry with global scratch through the sequence, its values (or the memo's words) read once
 * already; rr's self and e set here. As fl_jit_launch_entry; 1 also after the allocator. */
int fl_jit_launch_scratch(JitObject *self, jit_entry *e, fl_value *values, uint64_t *words, uint64_t stream,
                          const int64_t grid[3], jit_reread *rr, fl_error *err);
/* A call with launch hooks set, its entry found and its grid computed (`grid` the object given to
 * launch_metadata), through the sequence: enter, the values read again, the launch, exit. 0 launched,
 * or refused after enter and handed to the kernel's launcher (*handed its result, new); 1 refused
 * before anything ran (err: Triton's whole call); -1 with an exception; -2 launched, then the exit
 * hook's exception. */
int fl_jit_launch_hooked(JitObject *self, jit_entry *e, jit_bound *b, const jit_values *vals, PyObject *kernel,
                         PyObject *grid, uint64_t stream, const int64_t g[3], PyObject **handed, fl_error *err);
/* jit.c: run(*args, grid=, warmup=, **kwargs), and a JitCall (kernel[grid]) of a JitDispatcher */
int fl_jit_compiled_gate(JitObject *self, uint64_t *stream, int have_stream, const char **why, int *hooked);
/* jit.c's, then jit_types.c's: the same in a critical section on the dispatcher (free-threaded builds). */
PyObject *fl_jit_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *fl_jit_call_vectorcall_unlocked(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *fl_jit_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *fl_jit_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* jit_grid.c */
int fl_jit_read_grid(PyObject *grid, int64_t g[3]);
int fl_jit_grid_product_wraps(const int64_t g[3]);

/* ---- the memo's match, inlined into the call (jit.c) ---- */

/* 0: the call is the memo entry's (its values in the entry's argument order in `words` when not
 * NULL (the entry's plan takes words; JIT_MAX_PARAMS + 1 of them), else in `values`; the objects
 * of the parameters the grid program reads in pv, borrowed); 1: the full path decides. */
static FL_EXT_ALWAYS_INLINE int jit_memo_match(JitObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames, int32_t device,
                                 PyObject **pv, fl_value *values, uint64_t *words) {
  jit_memo *m = &self->memo;
  const jit_entry *e = m->entry;
  if (!e || nargs != m->nargs || !fl_ext_same_names(kwnames, m->kwnames)) return 1;
  if (FL_EXT_UNLIKELY(kwnames != m->kwnames)) /* the newer tuple: a call site's is then the same next time */
    Py_SETREF(m->kwnames, Py_NewRef(kwnames));
  const uint64_t *key = e->key;
  if (key[0] != (K_DEVICE | (uint64_t)(uint32_t)device << 8)) return 1;
  const fl_ext_args *spec = &e->plan->args;
  fl_ext_state *st = self->state;
  uint64_t local[JIT_MAX_PARAMS + 1], *wv = words ? words : local;
  if (m->nt) { /* the tensors at once, from memory the plan reads, straight into their words */
    if (FL_EXT_UNLIKELY(!FL_EXT_DOOR(st))) {
      if (FL_EXT_LOAD(st->door_state) == 0) fl_ext_door_load(st);
      if (!FL_EXT_DOOR(st)) return 1;
    }
    int dt[JIT_MAX_PARAMS];
    if (FL_EXT_DOOR(st)->unpack_ptrs(args, m->t_src, m->nt, (int)spec->memory, spec->device, wv, m->t_abi, dt) != m->nt)
      return 1;
    for (uint32_t j = 0; j < m->nt; j++)
      if (key[m->t_koff[j]] != tensor_word(wv[m->t_abi[j]], dt[j])) return 1;
  }
  for (uint32_t j = 0; j < m->ni; j++) {
    const jit_memo_int *p = &m->ints[j];
    uint64_t w;
    if (!fl_ext_int_word(args[p->src], &w) || key[p->koff] != int_key((int64_t)w)) return 1;
    wv[p->abi] = w;
  }
  for (uint32_t j = 0; j < m->nc; j++) {
    const jit_memo_const *c = &m->consts[j];
    PyObject *v = c->src >= 0 ? args[c->src] : c->dflt;
    if (v == c->same) continue;
    uint64_t w[2];
    int n = const_words(v, w);
    if (n != c->n || key[c->koff] != w[0] || (n == 2 && key[c->koff + 1] != w[1])) return 1;
  }
  for (uint32_t j = 0; j < m->nv; j++) {
    const jit_memo_value *p = &m->vals[j];
    uint64_t w[1];
    fl_value x;
    int where, index;
    if (!value_words(st, p->src >= 0 ? args[p->src] : p->dflt, w, &x, &where, &index) || key[p->koff] != w[0])
      return 1;
    if (p->abi < 0) continue;
    if (where && !fl_ext_memory_takes(spec, where, index)) return 1; /* the full path says why */
    if (!words) values[p->abi] = x;
    else if (x.type == FL_VALUE_PTR || x.type == FL_VALUE_INT) words[p->abi] = x.v.u;
    else return 1; /* a value no word says (an int past int64): the full path, with fl_launch */
  }
  if (FL_EXT_UNLIKELY(m->nd) && words) return 1; /* descriptors: the caller reads them (fl_jit_memo_descs) */
  if (!words) {
    for (uint32_t j = 0; j < m->nt; j++) values[m->t_abi[j]] = (fl_value){.type = FL_VALUE_PTR, .v.p = wv[m->t_abi[j]]};
    for (uint32_t j = 0; j < m->ni; j++)
      if (m->ints[j].abi < JIT_MAX_PARAMS)
        values[m->ints[j].abi] = (fl_value){.type = FL_VALUE_INT, .v.u = wv[m->ints[j].abi]};
  }
  for (uint32_t j = 0; j < m->ng; j++) pv[m->grid[j].param] = m->grid[j].src >= 0 ? args[m->grid[j].src] : m->grid[j].dflt;
  return 0;
}

#endif
