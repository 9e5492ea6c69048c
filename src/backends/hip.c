/* hip.c: the HIP backend (AMD GPUs): libamdhip64 opened with dlopen at first use, its version
 * checked as Triton's AMD driver checks it (major >= 6), launches of Triton's hsaco kernels by
 * hipModuleLaunchKernel with the packed buffer as the kernarg segment (or a parameter array, as
 * Triton passes it), block = warp_size x num_warps, dynamic LDS. Cooperative and multi-CTA kernels
 * are refused with a reason: Triton launches them through other calls. */
#include "gpu_runtime.h"
#include "hip_api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backend's state. One per process: the HIP runtime is a process-wide library, loaded once (its
 * symbols and its own state are the process's), and the settings say how it is loaded
 * (fastlaunch.config passes FASTLAUNCH_LIBHIP, else TRITON_LIBHIP_PATH, else the libamdhip64 of
 * torch's ROCm build, as "library"). */
typedef struct hip_state {
  fl__gpu_runtime rt; /* first: the shared loading and settings (gpu_runtime.h) */
  struct {
    fl_hipError_t (*hipDriverGetVersion)(int *);
    const char *(*hipGetErrorName)(fl_hipError_t);
    fl_hipError_t (*hipGetDevice)(int *);
    fl_hipError_t (*hipDeviceGetAttribute)(int *, int, int);
    fl_hipError_t (*hipModuleLaunchKernel)(fl_hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, unsigned, fl_hipStream_t, void **, void **);
  } api;
  int version;
} hip_state;

static void load_runtime(fl__gpu_runtime *rt);
static hip_state the_state = {.rt = FL__GPU_RUNTIME_INIT("hip", load_runtime)};

#define SYM(name) fl__gpu_sym(rt, (void **)&st->api.name, #name)

static void load_runtime(fl__gpu_runtime *rt) {
  hip_state *st = (hip_state *)rt;
  /* The versioned names first: torch's ROCm build has loaded its own under its soname, and the
   * process must use that one. */
  static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so",
                                      "/opt/rocm/lib/libamdhip64.so", NULL};
  if (!fl__gpu_open_library(rt, names)) return;
  if (!SYM(hipDriverGetVersion) || !SYM(hipGetErrorName) || !SYM(hipGetDevice) || !SYM(hipDeviceGetAttribute) ||
      !SYM(hipModuleLaunchKernel))
    return;
  int v = -1;
  fl_hipError_t r = st->api.hipDriverGetVersion(&v);
  if (r != FL_HIP_SUCCESS) {
    const char *name = st->api.hipGetErrorName(r);
    snprintf(rt->load_why, sizeof rt->load_why, "hipDriverGetVersion:%s:%d", name ? name : "hipErrorUnknown", r);
    return;
  }
  if (FL_HIP_VERSION_MAJOR(v) < FL_HIP_MIN_MAJOR) {
    snprintf(rt->load_why, sizeof rt->load_why, "hip_version_too_old:%d.%d:needs_%d", FL_HIP_VERSION_MAJOR(v),
             (v % 10000000) / 100000, FL_HIP_MIN_MAJOR);
    return;
  }
  st->version = v;
  rt->load_status = FL_OK;
}

static const char *hip_error_name(const hip_state *st, fl_hipError_t r) {
  const char *name = st->api.hipGetErrorName ? st->api.hipGetErrorName(r) : NULL;
  return name ? name : "hipErrorUnknown";
}

/* Per-plan state, immutable after plan_init. */
typedef struct hip_plan {
  fl__gpu_plan gpu; /* first */
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
  fl_hipError_t r = st->api.hipGetDevice(&device);
  if (r != FL_HIP_SUCCESS) return fl__fail(err, FL_BACKEND_ERROR, true, "backend_error:hip:hipGetDevice:%s",
                                           hip_error_name(st, r));
  if (o->shared_mem > 0) {
    r = st->api.hipDeviceGetAttribute(&max_shared, FL_HIP_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
    if (r != FL_HIP_SUCCESS)
      return fl__fail(err, FL_BACKEND_ERROR, true, "backend_error:hip:hipDeviceGetAttribute:%s", hip_error_name(st, r));
    if ((long)o->shared_mem > (long)max_shared)
      return fl__fail(err, FL_UNSUPPORTED, true, "shared_mem_exceeds_device:%u:%d", o->shared_mem, max_shared);
  }
  hip_plan *hp = fl__calloc(1, sizeof *hp);
  if (!hp) return fl__fail(err, FL_NOMEM, false, "nomem:hip_plan");
  hp->gpu.device = device;
  hp->block_x = warps * wave;
  hp->shared = o->shared_mem;
  plan->backend_data = hp;
  return FL_OK;
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
  if (FL__UNLIKELY(st->api.hipGetDevice(&device) != FL_HIP_SUCCESS || device != hp->gpu.device))
    return device_refused(device, hp->gpu.device, err);
  if (FL__UNLIKELY(grid[0] > INT32_MAX)) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_exceeds:0");
  void *extra[] = {FL_HIP_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, FL_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   FL_HIP_LAUNCH_PARAM_END};
  void **params = NULL, **extra_p = extra;
  void *param_array[FL__MAX_ARGS + FL_HIP_MAX_HIDDEN_PTRS];
  if (st->rt.use_param_array) {
    fl__gpu_param_array(plan, args, param_array);
    params = param_array;
    extra_p = NULL;
  }
  fl_hipError_t r = st->api.hipModuleLaunchKernel((fl_hipFunction_t)plan->kernel, grid[0], grid[1], grid[2],
                                                 hp->block_x, 1, 1, hp->shared, (fl_hipStream_t)(uintptr_t)stream,
                                                 params, extra_p);
  if (FL__UNLIKELY(r != FL_HIP_SUCCESS))
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:hip:hipModuleLaunchKernel:%s",
                              hip_error_name(st, r));
  fl__ok(err);
  return FL_OK;
}

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
    .configure = fl__gpu_configure,
    .load = fl__gpu_load,
    .symbol = fl__gpu_symbol,
    .plan_init = hip_plan_init,
    .plan_fini = fl__gpu_plan_fini,
    .submit = hip_submit,
    .plan_device = fl__gpu_plan_device,
};
