/* gpu_runtime.h: what the cuda and hip backends share. Each opens a vendor runtime with dlopen at
 * first use, takes the same two settings before it loads ("library": that file instead of the
 * system's; "params": "array" passes a parameter array instead of the packed buffer), and keeps
 * the device its plans were made on. Each backend's state begins with an fl__gpu_runtime, and each
 * plan's backend_data with an fl__gpu_plan. */
#ifndef FL_GPU_RUNTIME_H
#define FL_GPU_RUNTIME_H

#include "../fl_internal.h"

typedef struct fl__gpu_runtime {
  fl__load_once once;
  const char *vendor;                   /* the backend's name, in reasons */
  void (*open)(struct fl__gpu_runtime *rt); /* resolves the symbols; sets load_status on success */
  fl_status load_status;
  char load_why[FL_REASON_MAX - 32];
  void *lib;
  bool use_param_array;
  char library[4096];
} fl__gpu_runtime;

#define FL__GPU_RUNTIME_INIT(name, opener)                                                         \
  {.once = FL__LOAD_ONCE_INIT, .vendor = (name), .open = (opener), .load_status = FL_BACKEND_UNAVAILABLE}

/* The runtime's library: the "library" setting's file, else the first of `names` that loads. */
bool fl__gpu_open_library(fl__gpu_runtime *rt, const char *const *names);
/* Resolves `name` into *slot; false (the loader's words in load_why) when absent. */
bool fl__gpu_sym(fl__gpu_runtime *rt, void **slot, const char *name);

/* The backend table's configure, load and symbol for either backend: self->state is the runtime. */
fl_status fl__gpu_configure(const fl__backend *self, const char *name, const char *value, fl_error *err);
fl_status fl__gpu_load(const fl__backend *self, fl_error *err);
void *fl__gpu_symbol(const fl__backend *self, const char *name);

typedef struct fl__gpu_plan {
  int device; /* the device current when the plan was made: its kernel was loaded there */
} fl__gpu_plan;

int fl__gpu_plan_device(const fl__backend *self, const fl_plan *plan);
void fl__gpu_plan_fini(const fl__backend *self, fl_plan *plan);

/* The parameter array over a packed buffer: one pointer per argument, then one per hidden slot.
 * `out` holds FL__MAX_ARGS + the backend's hidden-slot maximum. */
static inline void fl__gpu_param_array(const fl_plan *plan, const void *args, void **out) {
  size_t n = 0;
  for (size_t i = 0; i < plan->nargs; i++) out[n++] = (unsigned char *)args + plan->offsets[i];
  for (uint32_t h = 0; h < plan->layout.hidden_count; h++)
    out[n++] = (unsigned char *)args + plan->layout.hidden_first + 8 * h;
}

#endif
