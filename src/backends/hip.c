/* hip.c: the HIP backend (AMD GPUs): libamdhip64 opened with dlopen at first use, its version
 * checked as Triton's AMD driver checks it (major >= 6), launches of Triton's hsaco kernels by
 * hipModuleLaunchKernel with the packed buffer as the kernarg segment (or a parameter array, as
 * Triton passes it), block = warp_size x num_warps, dynamic LDS. Cooperative and multi-CTA kernels
 * are refused with a reason: Triton launches them through other calls. */
#include "../dl.h"
#include "hip_api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The backend's state. One per process: the HIP runtime is a process-wide library, loaded once (its
 * symbols and its own state are the process's), and the settings say how it is loaded. */
typedef struct hip_state {
  fl__load_once once;
  struct {
    fl_hipError_t (*hipDriverGetVersion)(int *);
    const char *(*hipGetErrorName)(fl_hipError_t);
    fl_hipError_t (*hipGetDevice)(int *);
    fl_hipError_t (*hipDeviceGetAttribute)(int *, int, int);
    fl_hipError_t (*hipModuleLoadData)(fl_hipModule_t *, const void *);
    fl_hipError_t (*hipModuleGetFunction)(fl_hipFunction_t *, fl_hipModule_t, const char *);
    fl_hipError_t (*hipModuleUnload)(fl_hipModule_t);
    fl_hipError_t (*hipModuleLaunchKernel)(fl_hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, unsigned, fl_hipStream_t, void **, void **);
  } rt;
  int version;
  fl_status load_status;
  char load_why[FL_REASON_MAX - 32];
  void *lib;
  /* Settings (fl_backend_configure): "library" opens that file instead of the system's runtime
   * (fastlaunch.config passes FASTLAUNCH_LIBHIP, else TRITON_LIBHIP_PATH, else the libamdhip64 of
   * torch's ROCm build); "params" = "array" passes a parameter array instead of the packed buffer. */
  bool use_param_array;
  char library[4096];
} hip_state;

static hip_state the_state = {.once = FL__LOAD_ONCE_INIT, .load_status = FL_BACKEND_UNAVAILABLE};

#define SYM(name)                                                                                  \
  do {                                                                                             \
    *(void **)&st->rt.name = fl__dl_sym(st->lib, #name, st->load_why, sizeof st->load_why);        \
    if (!st->rt.name) return;                                                                      \
  } while (0)

static void load_runtime(void *state) {
  hip_state *st = state;
  /* The versioned names first: torch's ROCm build has loaded its own under its soname, and the
   * process must use that one. */
  static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so",
                                      "/opt/rocm/lib/libamdhip64.so", NULL};
  const char *const custom[] = {st->library, NULL};
  st->lib = fl__dl_open(st->library[0] ? custom : names, st->load_why, sizeof st->load_why);
  if (!st->lib) return;
  SYM(hipDriverGetVersion);
  SYM(hipGetErrorName);
  SYM(hipGetDevice);
  SYM(hipDeviceGetAttribute);
  SYM(hipModuleLoadData);
  SYM(hipModuleGetFunction);
  SYM(hipModuleUnload);
  SYM(hipModuleLaunchKernel);
  int v = -1;
  fl_hipError_t r = st->rt.hipDriverGetVersion(&v);
  if (r != FL_HIP_SUCCESS) {
    const char *name = st->rt.hipGetErrorName(r);
    snprintf(st->load_why, sizeof st->load_why, "hipDriverGetVersion:%s:%d", name ? name : "hipErrorUnknown", r);
    return;
  }
  if (FL_HIP_VERSION_MAJOR(v) < FL_HIP_MIN_MAJOR) {
    snprintf(st->load_why, sizeof st->load_why, "hip_version_too_old:%d.%d:needs_%d", FL_HIP_VERSION_MAJOR(v),
             (v % 10000000) / 100000, FL_HIP_MIN_MAJOR);
    return;
  }
  st->version = v;
  st->load_status = FL_OK;
}

static fl_status hip_configure(const fl__backend *self, const char *name, const char *value, fl_error *err) {
  hip_state *st = self->state;
  if (strcmp(name, "params") == 0) {
    if (!value || (strcmp(value, "array") != 0 && strcmp(value, "packed") != 0))
      return fl__fail(err, FL_BAD_VALUE, true, "setting_invalid:hip:params");
    bool array = strcmp(value, "array") == 0;
    pthread_mutex_lock(&st->once.lock);
    bool loaded = atomic_load_explicit(&st->once.done, memory_order_relaxed);
    if (!loaded) st->use_param_array = array;
    bool same = st->use_param_array == array;
    pthread_mutex_unlock(&st->once.lock);
    if (!same) return fl__fail(err, FL_UNSUPPORTED, true, "backend_loaded:hip:params");
    fl__ok(err);
    return FL_OK;
  }
  if (strcmp(name, "library") == 0)
    return fl__setting_path(&st->once, "hip", name, value, st->library, sizeof st->library, err);
  return fl__fail(err, FL_BAD_VALUE, true, "setting_unknown:hip:%.40s", name);
}

static fl_status hip_load(const fl__backend *self, fl_error *err) {
  hip_state *st = self->state;
  fl__load_once_run(&st->once, load_runtime, st);
  if (st->load_status != FL_OK)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:hip:%s", st->load_why);
  return FL_OK;
}

static const char *hip_error_name(const hip_state *st, fl_hipError_t r) {
  const char *name = st->rt.hipGetErrorName ? st->rt.hipGetErrorName(r) : NULL;
  return name ? name : "hipErrorUnknown";
}

/* Per-plan state, immutable after plan_init. */
typedef struct hip_plan {
  int device; /* the device current when the plan was made: its module was loaded there */
  unsigned block_x;
  unsigned shared;
} hip_plan;

static fl_status hip_plan_init(const fl__backend *self, fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  const hip_state *st = self->state;
  const fl_hip_options *o = &desc->target.hip;
  if (o->cooperative) return fl__fail(err, FL_UNSUPPORTED, true, "hip_cooperative_not_served");
  if (o->num_ctas > 1) return fl__fail(err, FL_UNSUPPORTED, true, "hip_num_ctas_not_served:%u", o->num_ctas);
  unsigned warps = o->num_warps ? o->num_warps : 4, wave = o->warp_size ? o->warp_size : 64;
  if (warps * wave > 1024) return fl__fail(err, FL_UNSUPPORTED, true, "hip_block_exceeds_1024:%u", warps * wave);
  int device = -1, max_shared = 0;
  fl_hipError_t r = st->rt.hipGetDevice(&device);
  if (r != FL_HIP_SUCCESS) return fl__fail(err, FL_BACKEND_ERROR, true, "backend_error:hip:hipGetDevice:%s",
                                           hip_error_name(st, r));
  if (o->shared_mem > 0) {
    r = st->rt.hipDeviceGetAttribute(&max_shared, FL_HIP_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
    if (r != FL_HIP_SUCCESS)
      return fl__fail(err, FL_BACKEND_ERROR, true, "backend_error:hip:hipDeviceGetAttribute:%s", hip_error_name(st, r));
    if ((long)o->shared_mem > (long)max_shared)
      return fl__fail(err, FL_UNSUPPORTED, true, "shared_mem_exceeds_device:%u:%d", o->shared_mem, max_shared);
  }
  hip_plan *hp = fl__calloc(1, sizeof *hp);
  if (!hp) return fl__fail(err, FL_NOMEM, false, "nomem:hip_plan");
  hp->device = device;
  hp->block_x = warps * wave;
  hp->shared = o->shared_mem;
  plan->backend_data = hp;
  return FL_OK;
}

static void hip_plan_fini(const fl__backend *self, fl_plan *plan) {
  (void)self;
  fl__free(plan->backend_data);
  plan->backend_data = NULL;
}

/* The launch goes to the thread's current device, which can change between launches: it must still
 * be the plan's, or the runtime would fail (or run on another device) after the boundary. */
static FL__NOINLINE fl_status device_refused(int now, int want, fl_error *err) {
  return fl__fail(err, FL_BAD_STREAM, false, "hip_device_changed:%d:%d", want, now);
}

static fl_status hip_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                            const uint32_t grid[3], fl_error *err) {
  const hip_state *st = self->state;
  const hip_plan *hp = plan->backend_data;
  size_t size = plan->layout.size;
  int device = -1;
  if (FL__UNLIKELY(st->rt.hipGetDevice(&device) != FL_HIP_SUCCESS || device != hp->device))
    return device_refused(device, hp->device, err);
  if (FL__UNLIKELY(grid[0] > INT32_MAX)) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_exceeds:0");
  void *extra[] = {FL_HIP_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, FL_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   FL_HIP_LAUNCH_PARAM_END};
  void **params = NULL, **extra_p = extra;
  void *param_array[FL__MAX_ARGS + FL_HIP_MAX_HIDDEN_PTRS];
  if (st->use_param_array) {
    size_t n = 0;
    for (size_t i = 0; i < plan->nargs; i++) param_array[n++] = (unsigned char *)args + plan->offsets[i];
    for (uint32_t h = 0; h < plan->layout.hidden_count; h++)
      param_array[n++] = (unsigned char *)args + plan->layout.hidden_first + 8 * h;
    params = param_array;
    extra_p = NULL;
  }
  fl_hipError_t r = st->rt.hipModuleLaunchKernel((fl_hipFunction_t)plan->kernel, grid[0], grid[1], grid[2],
                                                 hp->block_x, 1, 1, hp->shared, (fl_hipStream_t)(uintptr_t)stream,
                                                 params, extra_p);
  if (FL__UNLIKELY(r != FL_HIP_SUCCESS))
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:hip:hipModuleLaunchKernel:%s",
                              hip_error_name(st, r));
  fl__ok(err);
  return FL_OK;
}

static int hip_plan_device(const fl__backend *self, const fl_plan *plan) {
  (void)self;
  return ((const hip_plan *)plan->backend_data)->device;
}

#ifdef FL_TESTING
static fl_status hip_bench_loop(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *packed,
                                const uint32_t grid[3], uint64_t n, uint64_t *ns, fl_error *err);
#endif

const fl__backend fl__backend_hip = {
    .name = "hip",
    .state = &the_state,
    .default_abi = FL_ABI_HIP,
    .abi_mask = 1u << FL_ABI_HIP,
    .kernel = FL_KERNEL_HANDLE,
    .memory = FL_MEMORY_CUDA, /* torch's ROCm build calls AMD GPU memory "cuda" */
    .grid_max = {INT32_MAX, 65535, 65535},
    .grid_max_product = 0,
    .grid_allow_zero = true,
    .max_args_size = 4096, /* HIP's kernarg segment */
    .configure = hip_configure,
    .load = hip_load,
    .plan_init = hip_plan_init,
    .plan_fini = hip_plan_fini,
    .submit = hip_submit,
    .plan_device = hip_plan_device,
#ifdef FL_TESTING
    .bench_loop = hip_bench_loop,
#endif
};

#ifdef FL_TESTING
/* ---- module loading, for tools and tests that bring their own hsaco (testing builds) ---- */

fl_status fl_hip_module_load(const void *image, const char *name, void **function, void **module, fl_error *err) {
  const hip_state *hs = &the_state;
  fl_status st = hip_load(fl__backend_get(FL_BACKEND_HIP), err);
  if (st != FL_OK) return st;
  if (!image || !name || !function || !module) return fl__fail(err, FL_BAD_VALUE, true, "hip_module_args_null");
  fl_hipModule_t mod;
  fl_hipFunction_t fn;
  fl_hipError_t r = hs->rt.hipModuleLoadData(&mod, image);
  if (r != FL_HIP_SUCCESS)
    return fl__fail(err, FL_KERNEL_LOAD, true, "kernel_load:hip:hipModuleLoadData:%s", hip_error_name(hs, r));
  r = hs->rt.hipModuleGetFunction(&fn, mod, name);
  if (r != FL_HIP_SUCCESS) {
    hs->rt.hipModuleUnload(mod);
    return fl__fail(err, FL_KERNEL_LOAD, true, "kernel_load:hip:hipModuleGetFunction:%s:%.40s", hip_error_name(hs, r),
                    name);
  }
  *function = fn;
  *module = mod;
  return FL_OK;
}

void fl_hip_module_unload(void *module) {
  if (module && the_state.load_status == FL_OK) the_state.rt.hipModuleUnload((fl_hipModule_t)module);
}

/* ---- the runtime's floor, for benchmarks: hipModuleLaunchKernel in a C loop with a parameter array,
 * as Triton's launcher passes it ---- */
static fl_status hip_bench_loop(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *packed,
                                const uint32_t grid[3], uint64_t n, uint64_t *ns, fl_error *err) {
  const hip_state *st = self->state;
  const hip_plan *hp = plan->backend_data;
  void *params[FL__MAX_ARGS + FL_HIP_MAX_HIDDEN_PTRS];
  size_t np = 0;
  for (size_t i = 0; i < plan->nargs; i++) params[np++] = (unsigned char *)packed + plan->offsets[i];
  for (uint32_t h = 0; h < plan->layout.hidden_count; h++)
    params[np++] = (unsigned char *)packed + plan->layout.hidden_first + 8 * h;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint64_t i = 0; i < n; i++) {
    fl_hipError_t r = st->rt.hipModuleLaunchKernel((fl_hipFunction_t)plan->kernel, grid[0], grid[1], grid[2],
                                                   hp->block_x, 1, 1, hp->shared, (fl_hipStream_t)(uintptr_t)stream,
                                                   params, NULL);
    if (r != FL_HIP_SUCCESS)
      return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:hip:hipModuleLaunchKernel:%s",
                                hip_error_name(st, r));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
  return FL_OK;
}
#endif /* FL_TESTING */
