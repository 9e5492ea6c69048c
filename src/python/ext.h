/* ext.h: the declarations shared by the files of the CPython extension fastlaunch._C.
 *
 * The extension is built in layers, each calling only the ones below it (no file calls a file of its
 * own layer or one above, except entry.c, which launches through plan_obj.c):
 *   1. errors.c    the module state of a type, the error types, raising from an fl_error
 *   2. convert.c   Python objects <-> the contract's values: launch arguments, streams, grids, kinds,
 *                  strings, targets, layouts (one policy for each, used by every caller);
 *                  door.c the tensor door's one-time load;
 *                  call_args.h above it: a call's arguments collected and a plan launched, inline
 *   3. host_kernel.c, plan_obj.c, entry.c: the types HostKernel, Plan, FinalizedLaunch; Triton's
 *      JIT dispatcher in its own layers, bottom up (jit_base.h): jit_grid.c, jit_key.c, jit_table.c,
 *      jit.c, jit_types.c (JitDispatcher), autotune.c (AutotuneDispatcher), heuristics.c
 *      (HeuristicsDispatcher), jit_subscript.c (JitCall, JitSubscript), tuner_slot.c (Autotuner.run
 *      for subclasses' super().run); messages.c the sentences of reason codes
 *   4. testing.c   hooks for tests and benchmarks (fault injection, grid_eval, Floor, loops), testing
 *      builds only
 *   5. module.c    the module: state, functions, the types and hooks registered
 * Nothing here names a backend: what differs between backends comes from fl_backend_info_get. */
#ifndef FL_EXT_H
#define FL_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Members as 3.12+ spells them (Py_T_*, Py_READONLY); structmember.h's names before. */
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_T_ULONGLONG T_ULONGLONG
#define Py_READONLY READONLY
#endif

#if PY_VERSION_HEX < 0x030D0000
/* PyDict_GetItemRef (3.13): a strong reference, or NULL for a missing key; -1 only with an error
 * set. Before 3.13, from PyDict_GetItemWithError, as CPython's pythoncapi-compat writes it. */
static inline int fl_ext_dict_get_ref(PyObject *d, PyObject *key, PyObject **out) {
  PyObject *v = PyDict_GetItemWithError(d, key);
  *out = Py_XNewRef(v);
  return v ? 1 : PyErr_Occurred() ? -1 : 0;
}
#define PyDict_GetItemRef fl_ext_dict_get_ref
#endif

#include "fastlaunch.h"
#include "fastlaunch_npu_queue.h"
#include "tensor_door.h"

/* Module state: everything the extension would otherwise keep in globals. */
typedef struct {
  PyObject *error_type;       /* FastLaunchError */
  PyObject *unavailable_type; /* FastLaunchPlanUnavailable */
  PyTypeObject *plan_type;
  PyTypeObject *entry_type;
  PyTypeObject *host_kernel_type;
  PyObject *str_data_ptr;
  PyObject *str_stream;
  PyObject *str_grid;
  PyObject *str_fallback;     /* the bound launch's method called when the entry cannot launch */
  PyObject *str_warmup;
  PyObject *str_run;
  PyObject *str_dtype;
  PyObject *str_pre_hook;     /* a Triton Config's */
  PyObject *str_block_shape;  /* a TensorDescriptor's: block_shape, base, shape, strides, padding,
                              * round_f32_to_tf32, and the padding that asks for NaN */
  PyObject *str_base, *str_shape, *str_strides, *str_padding, *str_round_tf32, *str_nan;
  /* Triton's JIT (jit.c): the dispatcher, the kernel[grid] object, the class's __getitem__. */
  PyTypeObject *jit_type;
  PyTypeObject *jit_call_type;
  PyTypeObject *jit_subscript_type;
  PyTypeObject *autotune_type; /* autotune.c: Triton's Autotuner's dispatcher */
  PyTypeObject *tuner_bound_type; /* tuner_slot.c: the slot bound to an instance */
  PyTypeObject *heuristics_type; /* heuristics.c: Triton's Heuristics' dispatcher */
  PyObject *str_heuristics_count;
  /* sequence.c's launch hooks: the kernel's launch_metadata, and where the hooks are read
   * (triton.knobs.runtime, set by the policy's enable(); NULL: a hooked call goes to Triton) */
  PyObject *str_launch_metadata, *str_launch_enter_hook, *str_launch_exit_hook;
  PyObject *launch_knobs;
  PyObject *tensor_desc_type; /* Triton's TensorDescriptor class (tensor_maps.c), or NULL: none read by the JIT */
  unsigned tensor_desc_plain; /* its version tag when its reads were last found to run no code (0: not known) */
  int dict_watcher;           /* 3.12+: the watcher id of the JIT's watched dicts */
  /* The tensor door (fastlaunch._tensor): loaded once, when torch is first seen; NULL: data_ptr(). */
  const fl_tensor_door *door;
  int door_state;             /* 0 not tried yet, 1 in use, -1 refused, -2 being built (door_why says why) */
#ifdef Py_GIL_DISABLED
  PyMutex door_lock;          /* one thread loads it */
#endif
  char door_why[512];
  /* torch_npu's task queue (fastlaunch._npu_queue): 0 not found yet (looked for again at each npu
   * plan), 1 installed, -1 installed but unusable (npu launches refused), -2 no shim built. */
  int npu_queue_state;
  char npu_queue_why[160];
  /* Objects the state held (launch_knobs, tensor_desc_type) and was given others for: kept on
   * free-threaded builds, where another thread may still be reading one (fl_ext_state_swap). */
  PyObject *retired;
} fl_ext_state;

/* An object of the state read by other threads without a lock (launch_knobs, tensor_desc_type). */
#define FL_EXT_STATE_OBJ(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
/* Replaces such an object (call in a critical section on the module): the old one kept in
 * st->retired on free-threaded builds, released with the GIL. 0, or -1 with an exception. */
static inline int fl_ext_state_swap(fl_ext_state *st, PyObject **slot, PyObject *value) {
  PyObject *old = *slot;
  if (old == value) return 0;
#ifndef Py_GIL_DISABLED
  (void)st;
#else
  if (old && ((!st->retired && !(st->retired = PyList_New(0))) || PyList_Append(st->retired, old) < 0)) return -1;
#endif
  __atomic_store_n(slot, Py_XNewRef(value), __ATOMIC_RELEASE);
  Py_XDECREF(old);
  return 0;
}

/* Python 3.10's headers have no Py_NO_INLINE (3.11 added it). */
#ifndef Py_NO_INLINE
#if defined(__GNUC__)
#define Py_NO_INLINE __attribute__((noinline))
#else
#define Py_NO_INLINE
#endif
#endif

#if defined(__GNUC__)
#define FL_EXT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FL_EXT_LIKELY(x) __builtin_expect(!!(x), 1)
#define FL_EXT_ALWAYS_INLINE inline __attribute__((always_inline))
#define FL_EXT_NOINLINE __attribute__((noinline))
#define FL_EXT_COLD __attribute__((cold, noinline))
#else
#define FL_EXT_UNLIKELY(x) (x)
#define FL_EXT_LIKELY(x) (x)
#define FL_EXT_ALWAYS_INLINE inline
#define FL_EXT_NOINLINE
#define FL_EXT_COLD
#endif

/* ---- free-threaded builds (3.13t: Py_GIL_DISABLED) ----
 * The extension declares Py_MOD_GIL_NOT_USED. What it shares between threads is guarded by CPython's
 * own means (docs/internals.md, "Threads without the GIL"):
 *   - a dispatcher's tables (the JIT's, the Autotuner's, Heuristics', a kept compiled kernel's) by a
 *     critical section on the dispatcher for the whole call and for every method that changes them:
 *     a call suspended inside Python code lets another thread in exactly where a callback could call
 *     back in, which the dispatchers already survive (issue 38);
 *   - FinalizedLaunch's steady path takes no lock: the fields it reads are read and written as
 *     relaxed atomics, its refresh runs in a critical section on the entry;
 *   - the statistics counters are atomic adds there, plain increments with the GIL;
 *   - the tensor door's one-time load is serialized by a mutex, its pointer published once.
 * With the GIL every one of these compiles to what it was: no lock, no atomic read-modify-write. */
#if PY_VERSION_HEX < 0x030D0000
#define Py_BEGIN_CRITICAL_SECTION(op) { (void)(op);
#define Py_END_CRITICAL_SECTION() }
#endif
#define FL_EXT_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define FL_EXT_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#ifdef Py_GIL_DISABLED
#define FL_EXT_COUNT(x) ((void)__atomic_fetch_add(&(x), 1, __ATOMIC_RELAXED))
#else
#define FL_EXT_COUNT(x) ((void)(x)++)
#endif
/* A vectorcall run in a critical section on the object `lock(callable)` names (no-op with the GIL). */
#define FL_EXT_VECTORCALL_LOCKED(name, inner, lock)                                                  \
  static PyObject *name(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) { \
    PyObject *result;                                                                                \
    Py_BEGIN_CRITICAL_SECTION(lock(callable));                                                       \
    result = inner(callable, args, nargsf, kwnames);                                                 \
    Py_END_CRITICAL_SECTION();                                                                       \
    return result;                                                                                   \
  }
#define FL_EXT_SELF(callable) (callable)
/* A METH_VARARGS, METH_NOARGS or METH_O method, and a getter, run in a critical section on self. */
#define FL_EXT_METHOD_LOCKED(name, inner)                                                            \
  static PyObject *name(PyObject *self, PyObject *arg) {                                             \
    PyObject *result;                                                                                \
    Py_BEGIN_CRITICAL_SECTION(self);                                                                 \
    result = inner(self, arg);                                                                       \
    Py_END_CRITICAL_SECTION();                                                                       \
    return result;                                                                                   \
  }
#define FL_EXT_GETTER_LOCKED(name, inner)                                                            \
  static PyObject *name(PyObject *self, void *closure) {                                             \
    PyObject *result;                                                                                \
    Py_BEGIN_CRITICAL_SECTION(self);                                                                 \
    result = inner(self, closure);                                                                   \
    Py_END_CRITICAL_SECTION();                                                                       \
    return result;                                                                                   \
  }
/* A one-entry cache of the process's (a static): per thread on free-threaded builds. */
#ifdef Py_GIL_DISABLED
#define FL_EXT_TLS _Thread_local
#else
#define FL_EXT_TLS
#endif
/* The tensor door: NULL until loaded, then the same pointer for the process's life. */
#define FL_EXT_DOOR(st) __atomic_load_n(&(st)->door, __ATOMIC_ACQUIRE)

/* Reads an exact int (never a subclass) whose magnitude fits 64 bits straight from its digits: the C
 * API's unsigned conversion of a multi-digit int goes through a byte-array path that costs about 200
 * instructions, and device pointers and stream handles (0x7f...) are such ints. Returns 1 with the
 * magnitude in *mag and the sign in *neg; 0 when the magnitude needs more than 64 bits. */
static inline int fl_ext_int_digits(PyObject *obj, uint64_t *mag, int *neg) {
  const PyLongObject *v = (const PyLongObject *)obj;
#if PY_VERSION_HEX >= 0x030C0000
  uintptr_t tag = v->long_value.lv_tag; /* digit count << 3 | sign (0 positive, 1 zero, 2 negative) */
  size_t nd = (size_t)(tag >> 3);
  const digit *d = v->long_value.ob_digit;
  *neg = (tag & 3) == 2;
#else
  Py_ssize_t size = Py_SIZE(v);
  size_t nd = (size_t)(size < 0 ? -size : size);
  const digit *d = v->ob_digit;
  *neg = size < 0;
#endif
  if (nd <= 2) { /* below 2^60: every pointer and stream handle, nearly every int */
    *mag = nd == 2 ? ((uint64_t)d[1] << PyLong_SHIFT) | d[0] : nd == 1 ? d[0] : 0;
    return 1;
  }
  uint64_t m = 0;
  for (size_t i = nd; i-- > 0;) {
    if (m >> (64 - PyLong_SHIFT)) return 0;
    m = (m << PyLong_SHIFT) | d[i];
  }
  *mag = m;
  return 1;
}

/* An exact int in [0, 2^64): 1 and *out; 0 otherwise (negative, larger, or not an exact int). */
static inline int fl_ext_u64_of(PyObject *obj, uint64_t *out) {
  int neg;
  if (!PyLong_CheckExact(obj) || !fl_ext_int_digits(obj, out, &neg)) return 0;
  return !neg || *out == 0;
}

/* An exact int within int64 as its two's complement word: 1 and *w; 0 otherwise. The compact ones
 * (at most one digit: below 2^30 in magnitude) without a branch on the sign. */
static FL_EXT_ALWAYS_INLINE int fl_ext_int_word(PyObject *obj, uint64_t *w) {
  if (!PyLong_CheckExact(obj)) return 0;
  const PyLongObject *v = (const PyLongObject *)obj;
#if PY_VERSION_HEX >= 0x030C0000
  uintptr_t tag = v->long_value.lv_tag;
  if (tag < (2 << 3)) { /* 0 or 1 digit; sign 0 positive, 1 zero, 2 negative (a zero's digit is 0) */
    *w = (uint64_t)((1 - (int64_t)(tag & 3)) * (int64_t)v->long_value.ob_digit[0]);
    return 1;
  }
#else
  Py_ssize_t size = Py_SIZE(v);
  if (size == 1 || size == -1) {
    *w = (uint64_t)(size * (Py_ssize_t)v->ob_digit[0]);
    return 1;
  }
#endif
  uint64_t mag;
  int neg;
  if (!fl_ext_int_digits(obj, &mag, &neg) || mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return 0;
  *w = neg ? 0 - mag : mag; /* -2^63 included */
  return 1;
}

/* ---- 1. errors.c ---- */
/* The state of the module that created `type` (the extension's types cannot be subclassed). */
fl_ext_state *fl_ext_state_from_type(PyTypeObject *type);
int fl_ext_add_errors(PyObject *module, fl_ext_state *st);
/* Raises FastLaunchError from an fl_error (reason, backend_submitted, stable). Returns NULL. */
/* A reason code read for people (messages.c): its code, the argument's index and name when it
 * names one (-1 / NULL otherwise), and the sentence, ending in the code in brackets. */
typedef struct fl_ext_described {
  char code[48];
  long index;
  const char *name; /* borrowed from the names tuple */
  char message[FL_REASON_MAX + 400];
} fl_ext_described;
void fl_ext_describe(const char *reason, PyObject *names, fl_ext_described *d);
/* Raises `type` (a ValueError, say) with the sentence for `reason` and reason, code, index and name
 * set on it as on fastlaunch's own errors. */
PyObject *fl_ext_raise_as(PyObject *type, const char *reason);
/* fl_ext_raise with the plan's argument names (a tuple, or NULL) for the message. */
PyObject *fl_ext_raise_named(fl_ext_state *st, const fl_error *err, PyObject *names);
FL_EXT_COLD PyObject *fl_ext_raise(fl_ext_state *st, const fl_error *err);
/* Raises FastLaunchError with a reason made here (not submitted). Returns NULL. */
PyObject *fl_ext_raise_reason(fl_ext_state *st, bool stable, const char *fmt, ...);
/* Raises FastLaunchPlanUnavailable from an fl_error (its reason and stability). Returns NULL. */
PyObject *fl_ext_raise_unavailable(fl_ext_state *st, const fl_error *err);
/* Raises a stable FastLaunchPlanUnavailable with a reason made here. Returns NULL. */
PyObject *fl_ext_raise_reason_unavailable(fl_ext_state *st, const char *fmt, ...);

/* ---- 2. convert.c ---- */
/* Packs larger argument lists than this through a heap array (rare: plans over 256 args). */
#define FL_EXT_STACK_VALUES 256
/* Tensor map arguments a plan made here may have (a call keeps their values on its stack). */
#define FL_EXT_MAX_TMAPS 8

/* How a call's positional arguments map onto a plan's runtime arguments. */
typedef struct {
  size_t nruntime;      /* runtime ABI arguments */
  size_t ncall;         /* positional arguments per call: nruntime plus the ignored ones */
  int32_t *argmap;      /* per positional argument: its ABI index, or -1 (ignored); NULL: identity */
  const fl_kind *kinds; /* the plan's kinds (at least nruntime) */
  fl_memory memory;     /* where the backend reads pointers: a tensor from elsewhere is refused */
  int device;           /* the plan's device index, or -1 */
  bool data_ptr_only;   /* never the tensor door (the benchmark's data_ptr() floor) */
  uint32_t nptr;        /* pointer arguments: how many, and their positions in the call */
  uint32_t *ptr_pos;    /* (fl_ext_args_index, one PyMem block with the three below; NULL: none) */
  uint32_t *ptr_k;      /* each pointer argument's runtime index */
  uint32_t nint;        /* the other runtime arguments: how many, their positions, their indices */
  uint32_t *int_pos;
  uint32_t *int_k;
  bool words;           /* launches through fl_launch_words when every argument reads as a word */
  uint8_t *tmap_index;  /* per runtime index: its place among the tensor maps (NULL: the plan has none) */
  uint8_t tmap_rank[FL_EXT_MAX_TMAPS]; /* each tensor map's rank: 2 x rank values follow its map */
  /* Per tensor map: the shape and strides fixed when the plan was made (Inductor's host-side TMA:
   * the call passes the tensor, the launcher builds TensorDescriptor(tensor, shape, strides, block)
   * with the defaults), rank 0 where the call passes a descriptor; NULL: none fixed. */
  fl_tensor_map_value *tmap_fixed;
} fl_ext_args;

/* ---- tensor_maps.c: tensor descriptors (Triton's TensorDescriptor) for FL_KIND_TMAP ---- */
/* tensor_maps=[(swizzle, elem_size, elem_type, block_shape, fp4_padded), ...] into metas (at most
 * FL_EXT_MAX_TMAPS). 0, or -1 with an exception naming the entry. */
int fl_ext_parse_tensor_maps(PyObject *obj, fl_tensor_map_meta *metas, size_t *n);
/* a->tmap_index and tmap_rank from the plan's kinds and metas. 0, or -1 with MemoryError. */
int fl_ext_args_tmaps(fl_ext_args *a, const fl_tensor_map_meta *metas, size_t n);
/* tensor_map_geometry=[None or (shape, strides), ...], one entry per tensor map, into a->tmap_fixed
 * (each rank the meta's, the innermost stride 1). 0, or -1 with an exception naming the entry. */
int fl_ext_args_tmap_geometry(fl_ext_args *a, PyObject *obj, const fl_tensor_map_meta *metas, size_t n);
/* A tensor map whose shape and strides are fixed (`fixed`), its base the call's tensor (through the
 * door, else data_ptr()) as TensorDescriptor takes it: 16-byte aligned, else refused
 * (tmap_base_unaligned: Inductor's launcher copies such a tensor first). Returns as fl_ext_extract_tmap. */
int fl_ext_tmap_of_tensor(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_tensor_map_value *t,
                          const fl_tensor_map_value *fixed, fl_error *err);
/* ---- sequence.c (sequence.h: the launch sequence, its hooks and global scratch) ---- */
/* The int objects a launch last gave its allocator (size and stream), kept by whoever holds the
 * launch's scratch: given again while their values do not change, so a steady launch makes none. */
typedef struct {
  PyObject *size, *stream;
  uint64_t size_v, stream_v;
} fl_ext_scratch_ints;
void fl_ext_scratch_ints_clear(fl_ext_scratch_ints *ints);

/* tensor_descriptor_type(cls): the class the JIT's key reads as a descriptor (None: none). */
PyObject *fl_ext_set_tensor_desc_type(PyObject *module, PyObject *cls);

/* Fills a->nptr, ptr_pos, ptr_k, nint, int_pos and int_k (one PyMem block at ptr_pos) from its
 * kinds and argmap. `words`: the plan takes fl_launch_words (a->words is set from it and from what
 * the extension can read that way). 0, or -1 with MemoryError. */
int fl_ext_args_index(fl_ext_args *a, bool words);

/* The same keyword names: the same tuple (a call site's), or one with the same str objects in
 * the same order (a call with **kwargs builds a new tuple each time from the dict's keys). The
 * memo's tuple is alive, so a str at one of its items' addresses is that str. */
/* Whether a keyword's name is `interned` (an interned str of the state): by identity, and by value
 * only when the name is not interned itself (two interned strs with one value are one object), so
 * the usual keyword costs a pointer compare. */
static inline int fl_ext_name_is(PyObject *name, PyObject *interned) {
  if (name == interned) return 1;
  if (PyUnicode_CheckExact(name) && PyUnicode_CHECK_INTERNED(name)) return 0;
  return PyUnicode_Check(name) && PyUnicode_Compare(name, interned) == 0;
}

static inline int fl_ext_same_names(PyObject *a, PyObject *b) {
  if (a == b) return 1;
  if (!a || !b || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return 0;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(a); i < n; i++)
    if (PyTuple_GET_ITEM(a, i) != PyTuple_GET_ITEM(b, i)) return 0;
  return 1;
}

/* Whether the plan reads a tensor living at (where, index): any memory, or its kind on its device. */
static inline int fl_ext_memory_takes(const fl_ext_args *spec, int where, int index) {
  return spec->memory == FL_MEMORY_ANY || (where == (int)spec->memory && (spec->device < 0 || index == spec->device));
}

/* One argument the full way (any kind, every check; the slow half of fl_ext_collect, call_args.h).
 * Returns as fl_ext_collect does. */
/* A tensor descriptor (Triton's TensorDescriptor: base, shape, strides, padding, round_f32_to_tf32)
 * read into *t, *out pointing at it, its shape and strides after it; with `decomposed`, also its
 * base's address, whether padding is "nan" and round_f32_to_tf32 into decomposed[0..2]. 0; -1 with err (tmap_expected, ...); -2 with an exception its
 * own code raised. */
int fl_ext_extract_tmap(fl_ext_state *st, PyObject *obj, size_t i, fl_value *out, fl_tensor_map_value *t,
                        fl_value *decomposed, fl_error *err);
/* The JIT memo's descriptors (tensor_maps.c). The class's version tag when a descriptor of it is read
 * with no Python code run (generic attribute lookup, none of the attributes a descriptor with code),
 * else 0. */
unsigned fl_ext_tmap_plain_class(fl_ext_state *st, PyTypeObject *type);
/* The door's dtype code of a descriptor's base: 0, or 1 (no base the door reads). */
int fl_ext_tmap_dtype(fl_ext_state *st, PyObject *desc, int *dtype);
/* A descriptor of a plain class read with no Python code run, its base a tensor of dtype code `dtype`
 * (wherever it lives: Triton's encode does not ask, nor does the full path) and its block shape
 * `block`: values into out[0 .. 2 rank], its map into *t. 0, or 1 (anything else: the full path
 * decides; no exception set). */
/* `seen` (or NULL): the descriptor last read in full and its dict, kept by the caller (zeroed at
 * first) as identities only (never dereferenced: compared with the call's, which holds them), with
 * its dict's stamp (watch.h's fl_ext_tmap_stamp: through 3.12 only), what the dict held then
 * (borrowed: the dict holds them while its stamp holds) and the map read. The same descriptor met
 * again, its dict unchanged, has only its base's pointer and dtype and its lists' items read again. */
typedef struct {
  PyObject *obj, *dict;
  uint64_t stamp;
  PyObject *a[4]; /* base, shape, strides, block_shape */
  fl_tensor_map_value t;
} fl_ext_tmap_seen;
int fl_ext_tmap_quiet(fl_ext_state *st, PyObject *obj, int dtype, const uint64_t *block, uint32_t rank, fl_value *out,
                      fl_tensor_map_value *t, fl_ext_tmap_seen *seen);
int fl_ext_extract(fl_ext_state *st, fl_kind kind, PyObject *obj, size_t i, fl_value *out, fl_error *err,
                   const fl_ext_args *spec);
/* Where a tensor the door declines lives, as torch says (`obj.device`): 0 with *where (FL_TENSOR_*)
 * and *index (-1 none); 1 no device attribute of torch's kind; 2 a meta tensor (no memory). */
int fl_ext_tensor_device(const fl_tensor_door *door, PyObject *obj, int *where, int *index);
/* door.c: loads the tensor door if torch is imported and it was not tried yet (once per process). */
FL_EXT_COLD void fl_ext_door_load(fl_ext_state *st);
/* Looks for torch_npu's task queue and installs it into the npu backend once found. */
void fl_ext_npu_queue_probe(fl_ext_state *st);
/* Reads a stream handle: None is 0, an int must be in [0, 2^64). Returns 0, or -1 with `err`
 * filled ("stream_invalid_type:<type>", "stream_out_of_range"); no Python exception. */
int fl_ext_parse_stream(PyObject *obj, uint64_t *stream, fl_error *err);
/* Reads a grid of 1 to 3 ints (missing dimensions are 1). Returns 0, or -1 with `err` filled. */
int fl_ext_parse_grid(PyObject *obj, int64_t grid[3], fl_error *err);
/* Reads a backend name (None: FL_BACKEND_DEFAULT). Returns 0, or -1 with ValueError listing the
 * backends' names. */
int fl_ext_parse_backend(PyObject *name, fl_backend_id *out);
/* Parses kind names or Triton signature entries ("*fp32", "i32", ...) with fl_kind_parse. The
 * array is PyMem-allocated. Returns 0, or -1 with an exception naming the argument: a stable
 * FastLaunchPlanUnavailable when `refusal` (building a plan), else ValueError. */
int fl_ext_parse_kinds(fl_ext_state *st, PyObject *seq, bool refusal, fl_kind **out, size_t *n);
/* Reads a sequence of str as UTF-8 pointers (NUL inside a string refused). The pointers live as
 * long as the str objects, which *keep (a tuple) holds: the caller releases it after use. `want`
 * 0 takes any length. Returns 0, or -1 with a Python exception naming `what`. */
int fl_ext_parse_strings(PyObject *seq, const char *what, size_t want, const char ***out, PyObject **keep);
/* Reads fixed argument values (int, float, bool, None). PyMem-allocated. */
int fl_ext_parse_values(PyObject *seq, fl_value **out, size_t *n);
/* Fills a target from an ABI name and a mapping of option names to ints or bools. */
int fl_ext_parse_target(PyObject *abi, PyObject *options, fl_abi default_abi, fl_target *target);
/* A layout as a dict {size, align, args, grid, ffts, hidden}. */
PyObject *fl_ext_layout_dict(const fl_layout *layout, const size_t *offsets, size_t n);

/* A METH_FASTCALL, METH_KEYWORDS or METH_VARARGS|METH_KEYWORDS function in a PyMethodDef: the
 * table's type is PyCFunction and CPython calls it through its real type, as _PyCFunction_CAST
 * does in CPython's own modules (the cast through void (*)(void) is the one C allows). */
#define FL_EXT_CFUNC(f) ((PyCFunction)(void (*)(void))(f))

/* ---- 3. the types ---- */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const fl_plan *plan;
  fl_ext_state *state;  /* borrowed: the module outlives its types' instances through the type */
  PyObject *owner;      /* keeps the kernel's owner (a CompiledKernel, a HostKernel) alive */
  PyObject *name;
  PyObject *arg_names; /* the tuple of arg_names, for messages, or NULL */
  fl_ext_args args;
} fl_PlanObject;

int fl_ext_add_host_kernel_type(PyObject *module, fl_ext_state *st);
/* Hands a HostKernel's function to a plan, with its own reference to the library: 1. Not a
 * HostKernel: 0. */
int fl_ext_host_kernel_take(PyObject *obj, PyTypeObject *type, void **fn, fl_host_lib **lib);

int fl_ext_add_plan_type(PyObject *module, fl_ext_state *st);
int fl_ext_add_entry_type(PyObject *module, fl_ext_state *st);

/* Triton's JIT: JitDispatcher and jit_torch_shim() (jit_types.c), AutotuneDispatcher (autotune.c),
 * HeuristicsDispatcher (heuristics.c), then JitCall and JitSubscript (jit_subscript.c), in that
 * order. */
int fl_ext_add_jit_types(PyObject *module, fl_ext_state *st);
int fl_ext_add_autotune_type(PyObject *module, fl_ext_state *st);
int fl_ext_add_heuristics_type(PyObject *module, fl_ext_state *st);
int fl_ext_add_tuner_slot_type(PyObject *module, fl_ext_state *st); /* tuner_slot.c: Autotuner.run's stand-in */
int fl_ext_add_jit_call_types(PyObject *module, fl_ext_state *st);
int fl_ext_add_compiled_types(PyObject *module, fl_ext_state *st); /* compiled.c: CompiledKernel[grid] */
int fl_ext_add_compiled_run_type(PyObject *module, fl_ext_state *st); /* compiled_run.c: compiled.run(...) */

/* Calls into Triton's own run or runner in flight (module.c defines both): inside them a kept
 * kernel's `run` is Triton's launcher (compiled_run.c), whatever fastlaunch serves. Counted on this
 * thread and in all threads together: a direct `.run` call reads the thread's count only while some
 * thread has such a call in flight (a thread-local read in a shared object costs a call to
 * __tls_get_addr, about 20 instructions; the process-wide count is one load). */
extern _Thread_local unsigned fl_ext_triton_depth;
extern unsigned fl_ext_triton_calls;
static inline void fl_ext_triton_enter(void) {
  fl_ext_triton_depth++;
#ifdef Py_GIL_DISABLED
  (void)__atomic_fetch_add(&fl_ext_triton_calls, 1, __ATOMIC_SEQ_CST);
#else
  fl_ext_triton_calls++;
#endif
}
static inline void fl_ext_triton_leave(void) {
#ifdef Py_GIL_DISABLED
  (void)__atomic_fetch_sub(&fl_ext_triton_calls, 1, __ATOMIC_SEQ_CST);
#else
  fl_ext_triton_calls--;
#endif
  fl_ext_triton_depth--;
}
/* Whether this thread is inside Triton's own run or runner (its count is only ever non-zero while
 * the process-wide one is). */
static inline int fl_ext_in_triton(void) { return FL_EXT_LOAD(fl_ext_triton_calls) && fl_ext_triton_depth; }

/* An attribute (1), or none (0, *out NULL, no exception: no AttributeError is made for a miss when
 * the type's lookup allows), or -1 with another error, left set. */
static inline int fl_ext_optional_attr(PyObject *obj, PyObject *name, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(obj, name, out);
#else
  return _PyObject_LookupAttr(obj, name, out);
#endif
}

PyObject *fl_ext_set_launch_knobs(PyObject *module, PyObject *knobs);
/* jit.c: a JitDispatcher called as kernel[grid](*args, **kwargs) is (grid given apart). */
PyObject *fl_ext_jit_run_grid(PyObject *jit, PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames);
/* autotune.c: an AutotuneDispatcher called as kernel[grid](...), and its reused kernel[grid] object. */
PyObject *fl_ext_autotune_call(PyObject *dispatcher, PyObject *grid, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);
PyObject **fl_ext_autotune_spare(PyObject *dispatcher);
/* heuristics.c: a HeuristicsDispatcher called as kernel[grid](...), and its reused kernel[grid] object. */
PyObject *fl_ext_heuristics_call(PyObject *dispatcher, PyObject *grid, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames);
PyObject **fl_ext_heuristics_spare(PyObject *dispatcher);
/* jit.c: counts[reason] += 1 (errors cleared: a count never fails a call); a name's index in a
 * tuple of str, by identity first, then by value (-1: absent). */
FL_EXT_COLD void fl_ext_count_reason(PyObject *counts, const char *reason, PyObject *reason_obj);
Py_ssize_t fl_ext_name_index(PyObject *names, PyObject *key);

/* ---- 4. what a build adds to the module beyond the product: extras.c in a wheel (nothing), the
 * testing build's layer in its place ---- */
int fl_ext_add_extras(PyObject *module, fl_ext_state *st);

/* The dealloc of a GC type whose references `clear` releases (its tp_clear): untracked, cleared,
 * freed, its heap type released. */
static inline void fl_ext_gc_dealloc(PyObject *op, inquiry clear) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

#endif
