/* fl_internal.h: internals shared between the core's files and the backends; never installed. */
#ifndef FL_INTERNAL_H
#define FL_INTERNAL_H

#include "fastlaunch.h"

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

/* ---- kinds and layout (kinds.c, layout.c) ---- */
/* Size and alignment of a kind's slot in a flavour. */
size_t fl__kind_size(int abi, fl_kind kind);
size_t fl__kind_align(int abi, fl_kind kind);

/* ---- grid programs (grid.c) ---- */
/* Replaces variable `var` by the constant `value` and folds constants again. Refused
 * (grid_expr_const_*) only when no variable is left and the result fails; a refusal leaves the
 * program unchanged. */
fl_status fl__grid_program_substitute(fl_grid_program *program, size_t var, int64_t value, fl_error *err);
/* True when the program reads variable `var`. */
bool fl__grid_program_uses_var(const fl_grid_program *program, size_t var);

/* ---- backends ---- */
typedef struct fl__backend {
  const char *name;
  unsigned abi_mask;             /* bit (1u << fl_abi) for each flavour it accepts */
  int64_t grid_max[3];           /* inclusive limit of each grid dimension */
  uint64_t grid_max_product;     /* 0: no limit on x*y*z */
  bool grid_allow_zero;          /* a zero dimension launches nothing (Triton's behaviour) */
  size_t max_args_size;          /* largest packed buffer */
  /* Loads the backend's runtime if needed; idempotent and thread-safe. */
  fl_status (*load)(fl_error *err);
  /* Optional: validates the launch configuration and prepares backend state in plan->backend_data. */
  fl_status (*plan_init)(fl_plan *plan, const fl_plan_desc *desc, fl_error *err);
  void (*plan_fini)(fl_plan *plan);
  /* Validates the stream (before the boundary: BAD_STREAM, not submitted) and submits. A failure of
   * the submit itself is reported with fl__fail_submitted. */
  fl_status (*submit)(const fl_plan *plan, uint64_t stream, const void *args, size_t size,
                      const uint32_t grid[3], fl_error *err);
  /* Streams; NULL where the framework owns streams (cuda, npu). */
  fl_status (*stream_create)(uint64_t *stream, fl_error *err);
  fl_status (*stream_synchronize)(uint64_t stream, fl_error *err);
  fl_status (*stream_destroy)(uint64_t stream, fl_error *err);
  fl_status (*stream_count)(uint64_t stream, uint64_t *count, fl_error *err);
} fl__backend;

extern const fl__backend fl__backend_host;
extern const fl__backend fl__backend_null;
extern const fl__backend fl__backend_cuda;
extern const fl__backend fl__backend_npu;

const fl__backend *fl__backend_get(int backend); /* NULL when out of range */

/* ---- plans (plan.c) ---- */
struct fl_plan {
  atomic_long refcount;
  int backend;
  const fl__backend *be;
  fl_abi_options abi;
  void *kernel;
  void *owner;
  void (*owner_release)(void *owner);
  char *name;
  size_t nargs;
  size_t nruntime;
  fl_kind *kinds;     /* nargs */
  size_t *offsets;    /* nargs */
  fl_layout layout;
  unsigned char *tmpl;/* layout.size bytes */
  int grid_mode;
  uint32_t static_grid[3];
  fl_grid_program *grid_prog[3];
  /* Runtime argument indices the grid programs read, in increasing order. */
  uint32_t grid_vars[FL__MAX_GRID_VARS];
  size_t ngrid_vars;
  size_t grid_nvars;  /* size of the variable array the programs index (max used index + 1) */
  fl_launch_config config;
  void *backend_data;
};

/* Checks a grid against the backend's limits; returns BAD_GRID (not stable) with
 * "grid_dim_negative:i", "grid_dim_zero:i", "grid_dim_exceeds:i" or "grid_product_exceeds". */
/* Writes the grid into the npu flavour's int32 grid slots of a packed buffer. */
void fl__plan_write_grid(const fl_plan *plan, unsigned char *buf, const uint32_t grid[3]);

fl_status fl__grid_check(const fl__backend *be, const int64_t grid[3], uint32_t out[3], fl_error *err);

#endif /* FL_INTERNAL_H */
