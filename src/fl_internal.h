/* fl_internal.h: internals shared between the core's files and the backends; never installed. */
#ifndef FL_INTERNAL_H
#define FL_INTERNAL_H

#include "fastlaunch.h"
#include "grid_shape.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#if defined(__GNUC__)
#define FL__LIKELY(x) __builtin_expect(!!(x), 1)
#define FL__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FL__NOINLINE __attribute__((noinline))
#define FL__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FL__LIKELY(x) (x)
#define FL__UNLIKELY(x) (x)
#define FL__NOINLINE
#define FL__PRINTF(a, b)
#endif

/* Packed buffers up to this size live on the launching thread's stack; larger ones (up to
 * FL__MAX_ARGS_SIZE) in a per-thread static buffer. */
#define FL__STACK_ARGS_SIZE 4096
/* Templates of up to this many bytes are copied whole (plan.c allocates at least this much). */
#define FL__SMALL_ARGS 64
#define FL__MAX_ARGS_SIZE 32768
/* Largest number of arguments a plan may have. */
#define FL__MAX_ARGS 1024
/* Largest number of distinct runtime arguments the grid programs of one plan may read. */
#define FL__MAX_GRID_VARS 16

/* ---- memory (alloc.c) ---- */
void *fl__malloc(size_t size);
void *fl__calloc(size_t count, size_t size);
void fl__free(void *ptr);
char *fl__strdup(const char *text);

/* ---- errors (error.c) ---- */
/* Fills `err` (when not NULL) and returns `status`. The reason is formatted from fmt. */
FL__NOINLINE fl_status fl__fail(fl_error *err, fl_status status, bool stable, const char *fmt, ...)
    FL__PRINTF(4, 5);
/* As fl__fail, for errors after the submit boundary: backend_submitted is true. */
FL__NOINLINE fl_status fl__fail_submitted(fl_error *err, fl_status status, const char *fmt, ...)
    FL__PRINTF(3, 4);
static inline void fl__ok(fl_error *err) {
  if (err) {
    err->status = FL_OK;
    err->backend_submitted = false;
    err->stable = false;
    err->reason[0] = '\0';
  }
}

/* ---- targets (target.c) ---- */
/* Checks a target: a known ABI, no option of another ABI set, every option in range. */
fl_status fl__target_check(const fl_target *target, fl_error *err);

/* ---- kinds (kinds.c): one row per kind, the one place a kind's facts are written ---- */
typedef enum fl__kind_class {
  FL__CLASS_PTR,   /* an address: a tensor, an int, None */
  FL__CLASS_INT,   /* an integer in [-max_neg, max_pos]: a bool, an int, anything with __index__ */
  FL__CLASS_FLOAT, /* a float: a float, an int, anything with __float__; converted to `format` */
  FL__CLASS_TMAP,  /* a tensor map, encoded by the plan's backend from a descriptor (tensor_map.c) */
} fl__kind_class;
typedef enum fl__float_format { FL__FLOAT_NONE, FL__FLOAT_FP16, FL__FLOAT_BF16, FL__FLOAT_FP32, FL__FLOAT_FP64 } fl__float_format;
typedef struct fl__kind_row {
  const char *name;          /* as parsed and printed */
  fl__kind_class cls;        /* how a value is read and packed */
  unsigned char size;        /* the slot in the host and cuda ABIs: the natural C size (alignment too,
                              * but for a tensor map's 64) */
  unsigned char npu_size;    /* the slot in the npu ABI (Triton-Ascend's ty_to_cpp) */
  unsigned char npu_align;   /* its alignment there */
  bool is_unsigned;          /* integers: no negative value */
  uint64_t max_pos, max_neg; /* integers: the largest value, the magnitude of the most negative */
  fl__float_format format;   /* floats: the format of the slot (npu: a C float below 64 bits) */
} fl__kind_row;
extern const fl__kind_row fl__kinds[FL_KIND_COUNT];

/* ---- layout (layout.c) ---- */
/* Size and alignment of a kind's slot in an ABI (0 for an unknown kind or ABI). */
size_t fl__layout_kind_size(fl_abi abi, fl_kind kind);
size_t fl__layout_kind_align(fl_abi abi, fl_kind kind);

/* ---- grid programs (grid.c) ---- */
/* Replaces variable `var` by the constant `value` and folds constants again. Refused
 * (grid_expr_const_*) only when no variable is left and the result fails; a refusal leaves the
 * program unchanged. */
fl_status fl__grid_program_substitute(fl_grid_program *program, size_t var, int64_t value, fl_error *err);
/* True when the program reads variable `var`. */
bool fl__grid_program_uses_var(const fl_grid_program *program, size_t var);
/* The shapes evaluated without the interpreter: grid_shape.h. */

/* ---- backends (backend.c and src/backends/) ---- */
/* One backend: everything the core and the layers above need to know of it. Each backend fills one
 * static const instance; nothing outside its file names it, except the table in backend.c. Every
 * method receives the table it was reached through (`self`) and finds the backend's state at
 * self->state: the libraries it opened, its settings, its streams' words. */
typedef struct fl__backend fl__backend;
struct fl__backend {
  const char *name;
  void *state;                   /* the backend's own state, one per process (its file says why) */
  fl_abi default_abi;            /* the ABI its kernels use */
  unsigned abi_mask;             /* bit (1u << fl_abi) for each ABI it accepts */
  fl_kernel_kind kernel;         /* what it takes as the kernel handle */
  fl_memory memory;              /* where its kernels read pointer arguments */
  int64_t grid_max[3];           /* inclusive limit of each grid dimension */
  uint64_t grid_max_product;     /* limit on x*y*z, 0 for none; lifted for a plan that clamps its
                                  * block count (npu clamp_blocks) */
  bool grid_allow_zero;          /* a zero dimension launches nothing (Triton's behaviour) */
  size_t max_args_size;          /* largest packed buffer */
  /* Optional: one setting, before the backend loads (fl_backend_configure checks the name exists
   * and refuses a change once loaded). NULL: the backend has no settings. */
  fl_status (*configure)(const fl__backend *self, const char *name, const char *value, fl_error *err);
  /* Loads the backend's runtime if needed; idempotent and thread-safe. */
  fl_status (*load)(const fl__backend *self, fl_error *err);
  /* Optional: validates the target's launch options and prepares backend state in
   * plan->backend_data. */
  fl_status (*plan_init)(const fl__backend *self, fl_plan *plan, const fl_plan_desc *desc, fl_error *err);
  void (*plan_fini)(const fl__backend *self, fl_plan *plan);
  /* Validates the stream (before the boundary: BAD_STREAM, not submitted) and submits the packed
   * buffer `args` (plan->layout.size bytes). A failure of the submit itself is reported with
   * fl__fail_submitted. Succeeds with fl__ok. */
  fl_status (*submit)(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                      const uint32_t grid[3], fl_error *err);
  /* Streams; NULL where the framework owns streams (cuda, npu). */
  fl_status (*stream_create)(const fl__backend *self, uint64_t *stream, fl_error *err);
  fl_status (*stream_synchronize)(const fl__backend *self, uint64_t stream, fl_error *err);
  fl_status (*stream_destroy)(const fl__backend *self, uint64_t stream, fl_error *err);
  fl_status (*stream_count)(const fl__backend *self, uint64_t stream, uint64_t *count, fl_error *err);
  /* Optional: the device index of the plan's kernel (fl_plan_device); absent: -1. */
  int (*plan_device)(const fl__backend *self, const fl_plan *plan);
  /* Optional: a symbol of the backend's runtime library, loading it first; NULL when the backend
   * has none, fails to load, or lacks the name. For layers added from outside the backend. */
  void *(*symbol)(const fl__backend *self, const char *name);
  /* Optional: encodes a tensor map (128 bytes at `map`, 64-aligned) as Triton's launcher does for
   * this backend; absent: plans with tensor maps are refused. Not submitted on failure. */
  fl_status (*tensor_map_encode)(const fl__backend *self, const fl_tensor_map_meta *meta,
                                 const fl_tensor_map_value *value, void *map, fl_error *err);
};

/* A backend's load, run once: the first caller runs it under the lock, every later one reads
 * `done`. Settings (fl_backend_configure) are taken under the same lock, before that. */
typedef struct fl__load_once {
  atomic_bool done;
  pthread_mutex_t lock;
} fl__load_once;
#define FL__LOAD_ONCE_INIT {false, PTHREAD_MUTEX_INITIALIZER}
void fl__load_once_run(fl__load_once *once, void (*load)(void *state), void *state);
/* Copies a path setting into `dst` (n bytes): FL_BAD_VALUE "setting_invalid:<backend>:<name>" for
 * NULL, empty or too long; FL_UNSUPPORTED "backend_loaded:<backend>:<name>" when `once` has run
 * and the value differs from the one in use. */
fl_status fl__setting_path(fl__load_once *once, const char *backend, const char *name, const char *value,
                           char *dst, size_t n, fl_error *err);

/* The table plans of that backend are created with; NULL when out of range. */
const fl__backend *fl__backend_get(fl_backend_id backend);
/* The backend's own table, and a table (NULL: none) that fl__backend_get returns in its place from
 * now on: a layer added from outside (fault injection), which plans created meanwhile keep. */
const fl__backend *fl__backend_builtin(fl_backend_id backend);
void fl__backend_stand_in(fl_backend_id backend, const fl__backend *table);
/* Around a wait on the launching thread: the hooks set with fl_set_wait_hooks (backend.c). */
void *fl__wait_begin(void);
void fl__wait_end(void *token);

/* ---- plans (plan.c) ---- */
/* The arguments a launch writes without fl_pack_value, decided per argument from its kind's row
 * when the plan is made: an address given as one (any 8-byte pointer slot), or an int in range of
 * a signed 32- or 64-bit slot. Anything else, and any other value, takes the full way. */
enum { FL__FAST_NONE, FL__FAST_PTR, FL__FAST_S32, FL__FAST_S64, FL__FAST_TMAP /* tensor_map.c, always */ };
struct fl_plan {
  atomic_long refcount;
  fl_backend_id backend;
  const fl__backend *base; /* the backend's table (in testing builds, perhaps a wrapper of it) */
  fl_target target;
  void *kernel;
  void *owner;
  void (*owner_release)(void *owner);
  char *name;
  size_t nargs;
  size_t nruntime;
  fl_kind *kinds;     /* nargs */
  unsigned char *fast;/* nruntime: how a launch writes each runtime argument inline (FL__FAST_*) */
  bool words;         /* every runtime argument has a fast row: fl_launch_words takes the plan */
  /* A words plan's slots (nruntime): first the n_words8 whose word is copied whole (pointers,
   * 64-bit ints), then the 32-bit ints, each its buffer offset and its word's index. */
  struct fl__word_slot { uint32_t offset, index; } *word_slots;
  size_t n_words8;
  size_t *offsets;    /* nargs */
  fl_layout layout;
  unsigned char *tmpl;/* layout.size bytes */
  fl_grid_mode grid_mode;
  uint32_t static_grid[3];
  uint64_t grid_max_product; /* the backend's, unless this plan clamps */
  fl_grid_program *grid_prog[3];
  /* Each dimension's shape, decided once (fl__grid_shape): a constant, or one argument divided by
   * a constant, computed on every launch without the interpreter; a plan whose three dimensions
   * all have one of these shapes has grid_simple set. Otherwise the programs run. */
  fl__grid_shape grid_dim[3];
  bool grid_simple;
  /* The common case among those: x computed, y and z constants within the limits. Then a launch
   * whose x lands in [1, grid_x_max] (the x limit and the product limit divided by y * z) needs
   * no other check. */
  bool grid_1d;
  int64_t grid_x_max;
  /* Runtime argument indices the grid programs read, in increasing order. */
  uint32_t grid_vars[FL__MAX_GRID_VARS];
  size_t ngrid_vars;
  size_t grid_nvars;  /* size of the variable array the programs index (max used index + 1) */
  void *backend_data;
  struct fl__tmap_memo *tmaps; /* one per tensor map argument, in argument order (tensor_map.c) */
  size_t ntmaps;
};

/* ---- tensor maps (tensor_map.c) ---- */
/* The plan's tensor maps from desc->tensor_maps: each argument's metadata and memo. */
fl_status fl__tmap_plan_init(fl_plan *plan, const fl_plan_desc *desc, fl_error *err);
void fl__tmap_plan_fini(fl_plan *plan);
/* Runtime argument `index` (a tensor map, the plan's `which`-th) encoded into `dst` (128 bytes), from the memo or the
 * backend. Before the submit boundary: every failure is not submitted. */
fl_status fl__tmap_pack(const fl_plan *plan, size_t index, size_t which, const fl_value *value, unsigned char *dst,
                        fl_error *err);


#endif /* FL_INTERNAL_H */
