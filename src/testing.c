/* testing.c: the testing build's layer, added from outside the backends (fastlaunch_testing.h).
 * Fault injection for the exactly-once tests and host memory accepted for the stand-in drivers are
 * tables standing in for a backend (fl__backend_stand_in): copies of the backend's, one with its
 * own submit, which forwards every launch to the backend's submit unless a fault is armed on that
 * plan, one that takes any memory. Plans carry no test field, and a plan created while its backend
 * has no stand-in launches exactly as in a release build. The GPU backends' floor loop and module
 * loading reach the vendor runtime through the backend's `symbol`. */
#include "backends/gpu_runtime.h"
#include "fastlaunch_testing.h"

#include <pthread.h>
#include <time.h>

/* The armed fault: its point, odds and sequence, and the plan it targets. */
static atomic_int fault_point = FL_FAULT_NONE;
static atomic_uint fault_one_in = 1;
static atomic_ullong fault_state;
static atomic_ullong fault_fired;
static pthread_mutex_t arm_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const fl_plan *) armed_plan; /* holds a reference while armed; set under arm_lock */

/* True when the armed fault fires for this launch (a splitmix64 step per check). */
static bool fires(void) {
  uint64_t z = atomic_fetch_add(&fault_state, 0x9e3779b97f4a7c15ull) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (z % atomic_load(&fault_one_in) != 0) return false;
  atomic_fetch_add(&fault_fired, 1);
  return true;
}

/* Every point reports what the real stage would: the ones before the boundary fail as refusals
 * (nothing submitted), SUBMIT_AFTER submits and then fails, SUBMIT_LOST fails as if it might have. */
static fl_status fault_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                              const uint32_t grid[3], fl_error *err) {
  (void)self; /* the wrapper: the backend's own table does the work */
  const fl__backend *real = fl__backend_builtin(plan->backend);
  if (atomic_load(&armed_plan) != plan) return real->submit(real, plan, stream, args, grid, err);
  int point = atomic_load(&fault_point);
  if (point == FL_FAULT_SUBMIT_AFTER) {
    fl_status st = real->submit(real, plan, stream, args, grid, err);
    if (st == FL_OK && fires()) return fl__fail_submitted(err, FL_BACKEND_ERROR, "fault_injected:submit_after");
    return st;
  }
  if (point != FL_FAULT_NONE && fires()) {
    switch (point) {
      case FL_FAULT_PACK:
        return fl__fail(err, FL_BAD_VALUE, false, "fault_injected:pack");
      case FL_FAULT_GRID:
        return fl__fail(err, FL_BAD_GRID, false, "fault_injected:grid");
      case FL_FAULT_SUBMIT_REFUSED:
        return fl__fail(err, FL_BAD_STREAM, false, "fault_injected:submit_refused");
      default:
        return fl__fail_submitted(err, FL_BACKEND_ERROR, "fault_injected:submit_lost");
    }
  }
  return real->submit(real, plan, stream, args, grid, err);
}

/* The stand-ins, filled once: per backend, variant bit 1 has fault_submit as its submit, bit 2
 * takes any memory. They are never written again, since plans made meanwhile keep pointing at them. */
enum { STAND_FAULT = 1, STAND_ANY_MEMORY = 2 };
static fl__backend tables[FL_BACKEND_COUNT][4];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t stand_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned variant[FL_BACKEND_COUNT]; /* under stand_lock */

static void fill_tables(void) {
  for (int b = 0; b < FL_BACKEND_COUNT; b++) {
    for (unsigned v = 0; v < 4; v++) {
      tables[b][v] = *fl__backend_builtin((fl_backend_id)b);
      if (v & STAND_FAULT) tables[b][v].submit = fault_submit;
      if (v & STAND_ANY_MEMORY) tables[b][v].memory = FL_MEMORY_ANY;
    }
  }
}

static void set_variant(fl_backend_id b, unsigned bit, bool on) {
  pthread_once(&tables_once, fill_tables);
  pthread_mutex_lock(&stand_lock);
  variant[b] = on ? variant[b] | bit : variant[b] & ~bit;
  fl__backend_stand_in(b, variant[b] ? &tables[b][variant[b]] : NULL);
  pthread_mutex_unlock(&stand_lock);
}

fl_status fl_fault_wrap(fl_backend_id backend, bool on, fl_error *err) {
  if ((unsigned)backend >= FL_BACKEND_COUNT) return fl__fail(err, FL_BAD_VALUE, true, "backend_unknown:%d", (int)backend);
  set_variant(backend, STAND_FAULT, on);
  fl__ok(err);
  return FL_OK;
}

void fl_accept_any_memory(bool on) {
  for (int b = 0; b < FL_BACKEND_COUNT; b++) set_variant((fl_backend_id)b, STAND_ANY_MEMORY, on);
}

fl_status fl_fault_inject(fl_fault_point point, uint32_t one_in, uint64_t seed, const fl_plan *plan, fl_error *err) {
  if ((unsigned)point >= FL_FAULT_COUNT)
    return fl__fail(err, FL_BAD_VALUE, true, "fault_point_unknown:%d", (int)point);
  if (point == FL_FAULT_NONE || one_in == 0) plan = NULL;
  if (plan && plan->base != &tables[plan->backend][STAND_FAULT] &&
      plan->base != &tables[plan->backend][STAND_FAULT | STAND_ANY_MEMORY])
    return fl__fail(err, FL_BAD_VALUE, true, "fault_plan_not_wrapped:%s", plan->base->name);
  pthread_mutex_lock(&arm_lock);
  /* Disarm first, so a launch in flight never sees the new settings half-written. */
  const fl_plan *old = atomic_exchange(&armed_plan, NULL);
  atomic_store(&fault_point, FL_FAULT_NONE);
  atomic_store(&fault_one_in, one_in ? one_in : 1);
  atomic_store(&fault_state, seed * 0x9e3779b97f4a7c15ull + 1);
  atomic_store(&fault_fired, 0);
  if (plan) {
    fl_plan_retain(plan);
    atomic_store(&fault_point, (int)point);
    atomic_store(&armed_plan, plan);
  }
  pthread_mutex_unlock(&arm_lock);
  fl_plan_release(old); /* outside the lock: the last release may run an owner's release */
  fl__ok(err);
  return FL_OK;
}

uint64_t fl_fault_fired(void) { return atomic_load(&fault_fired); }

/* ---- the GPU backends' runtimes, reached through `symbol` ---- */

/* The calls a floor loop and a module load make, under each vendor's names, with the shapes both
 * runtimes share (handles are pointers, results ints). */
typedef struct vendor_calls {
  const char *load, *get_function, *unload, *launch;
} vendor_calls;

static const vendor_calls *calls_of(fl_backend_id backend) {
  static const vendor_calls cuda = {"cuModuleLoadData", "cuModuleGetFunction", "cuModuleUnload", "cuLaunchKernel"};
  static const vendor_calls hip = {"hipModuleLoadData", "hipModuleGetFunction", "hipModuleUnload",
                                   "hipModuleLaunchKernel"};
  return backend == FL_BACKEND_CUDA ? &cuda : backend == FL_BACKEND_HIP ? &hip : NULL;
}

static void *sym(const fl__backend *be, const char *name) { return be->symbol ? be->symbol(be, name) : NULL; }

/* The runtime's name for a result: cuGetErrorName writes it, hipGetErrorName returns it. */
static const char *error_name(fl_backend_id backend, int r) {
  const fl__backend *be = fl__backend_builtin(backend);
  const char *name = NULL;
  if (backend == FL_BACKEND_CUDA) {
    int (*get)(int, const char **);
    *(void **)&get = sym(be, "cuGetErrorName");
    if (!get || get(r, &name) != 0) name = NULL;
    return name ? name : "CUDA_ERROR_UNKNOWN";
  }
  const char *(*get)(int);
  *(void **)&get = sym(be, "hipGetErrorName");
  name = get ? get(r) : NULL;
  return name ? name : "hipErrorUnknown";
}

static fl_status module_load(fl_backend_id backend, const void *image, const char *name, void **function,
                             void **module, fl_error *err) {
  const fl__backend *be = fl__backend_builtin(backend);
  const vendor_calls *c = calls_of(backend);
  fl_status st = be->load(be, err);
  if (st != FL_OK) return st;
  if (!image || !name || !function || !module)
    return fl__fail(err, FL_BAD_VALUE, true, "%s_module_args_null", be->name);
  int (*load)(void **, const void *), (*get)(void **, void *, const char *), (*unload)(void *);
  *(void **)&load = sym(be, c->load);
  *(void **)&get = sym(be, c->get_function);
  *(void **)&unload = sym(be, c->unload);
  if (!load || !get || !unload) return fl__fail(err, FL_UNSUPPORTED, true, "%s_module_calls_missing", be->name);
  void *mod = NULL, *fn = NULL;
  int r = load(&mod, image);
  if (r != 0) return fl__fail(err, FL_KERNEL_LOAD, true, "kernel_load:%s:%s:%s", be->name, c->load, error_name(backend, r));
  r = get(&fn, mod, name);
  if (r != 0) {
    unload(mod);
    return fl__fail(err, FL_KERNEL_LOAD, true, "kernel_load:%s:%s:%s:%.40s", be->name, c->get_function,
                    error_name(backend, r), name);
  }
  *function = fn;
  *module = mod;
  fl__ok(err);
  return FL_OK;
}

static void module_unload(fl_backend_id backend, void *module) {
  const fl__backend *be = fl__backend_builtin(backend);
  int (*unload)(void *);
  *(void **)&unload = module ? sym(be, calls_of(backend)->unload) : NULL;
  if (unload) unload(module);
}

fl_status fl_cuda_module_load(const void *image, const char *name, void **function, void **module, fl_error *err) {
  return module_load(FL_BACKEND_CUDA, image, name, function, module, err);
}
void fl_cuda_module_unload(void *module) { module_unload(FL_BACKEND_CUDA, module); }
fl_status fl_hip_module_load(const void *image, const char *name, void **function, void **module, fl_error *err) {
  return module_load(FL_BACKEND_HIP, image, name, function, module, err);
}
void fl_hip_module_unload(void *module) { module_unload(FL_BACKEND_HIP, module); }

/* The runtime's floor: the launch call in a C loop with a parameter array over `packed`, the block
 * and grid as the backend computes them (cuda: 32 x num_warps threads, x times the cluster's CTAs;
 * hip: warp_size x num_warps). */
fl_status fl_bench_launch_loop(const fl_plan *plan, uint64_t stream, const void *packed, const uint32_t grid[3],
                               uint64_t n, uint64_t *ns, fl_error *err) {
  if (!plan || !packed || !grid || !ns) return fl__fail(err, FL_BAD_VALUE, true, "bench_loop_args_null");
  const vendor_calls *c = calls_of(plan->backend);
  int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                void **);
  *(void **)&launch = c ? sym(plan->base, c->launch) : NULL;
  if (!launch || plan->layout.hidden_count > 16)
    return fl__fail(err, FL_UNSUPPORTED, true, "bench_loop_unsupported:%s", plan->base->name);
  unsigned gx = grid[0], block, shared;
  if (plan->backend == FL_BACKEND_CUDA) {
    const fl_cuda_options *o = &plan->target.cuda;
    gx *= o->num_ctas ? o->num_ctas : 1;
    block = 32 * (o->num_warps ? o->num_warps : 4);
    shared = o->shared_mem;
  } else {
    const fl_hip_options *o = &plan->target.hip;
    block = (o->warp_size ? o->warp_size : 64) * (o->num_warps ? o->num_warps : 4);
    shared = o->shared_mem;
  }
  void *params[FL__MAX_ARGS + 16];
  fl__gpu_param_array(plan, packed, params);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint64_t i = 0; i < n; i++) {
    int r = launch(plan->kernel, gx, grid[1], grid[2], block, 1, 1, shared, (void *)(uintptr_t)stream, params, NULL);
    if (r != 0)
      return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:%s:%s:%s", plan->base->name, c->launch,
                                error_name(plan->backend, r));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
  fl__ok(err);
  return FL_OK;
}
