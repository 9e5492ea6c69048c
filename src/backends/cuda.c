/* cuda.c: the CUDA backend: libcuda opened with dlopen at first use, launches of Triton cubins
 * with the packed buffer (or a parameter array), block = 32 x num_warps, shared memory, clusters,
 * cooperative and programmatic-dependent launch. */
#include "cuda_api.h"
#include "gpu_runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backend's state. One per process: the driver is a process-wide library, loaded once (its
 * symbols and its own state are the process's), and the settings say how it is loaded. */
typedef struct cuda_state {
  fl__gpu_runtime rt; /* first: the shared loading and settings (gpu_runtime.h) */
  /* Every driver symbol is resolved once, at load. */
  struct {
    fl_CUresult (*cuInit)(unsigned int);
    fl_CUresult (*cuGetErrorName)(fl_CUresult, const char **);
    fl_CUresult (*cuCtxGetCurrent)(fl_CUcontext *);
    fl_CUresult (*cuCtxGetDevice)(fl_CUdevice *);
    fl_CUresult (*cuDeviceGetAttribute)(int *, int, fl_CUdevice);
    fl_CUresult (*cuFuncGetAttribute)(int *, int, fl_CUfunction);
    fl_CUresult (*cuFuncSetAttribute)(fl_CUfunction, int, int);
    fl_CUresult (*cuLaunchKernel)(fl_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, fl_CUstream, void **, void **);
    fl_CUresult (*cuLaunchKernelEx)(const fl_CUlaunchConfig *, fl_CUfunction, void **, void **);
    fl_cuTensorMapEncodeTiled_fn cuTensorMapEncodeTiled;
    fl_CUresult (*cuDriverGetVersion)(int *);
  } drv;
} cuda_state;

static void load_driver(fl__gpu_runtime *rt);
static cuda_state the_state = {.rt = FL__GPU_RUNTIME_INIT("cuda", load_driver)};

#define SYM(name) fl__gpu_sym(rt, (void **)&st->drv.name, #name)

static void load_driver(fl__gpu_runtime *rt) {
  cuda_state *st = (cuda_state *)rt;
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  if (!fl__gpu_open_library(rt, names)) return;
  if (!SYM(cuInit) || !SYM(cuGetErrorName) || !SYM(cuCtxGetCurrent) || !SYM(cuCtxGetDevice) ||
      !SYM(cuDeviceGetAttribute) || !SYM(cuFuncGetAttribute) || !SYM(cuFuncSetAttribute) || !SYM(cuLaunchKernel))
    return;
  (void)SYM(cuLaunchKernelEx); /* drivers before CUDA 12 lack it; plans needing it are refused */
  (void)SYM(cuTensorMapEncodeTiled); /* likewise: plans with tensor maps are refused without it */
  (void)SYM(cuDriverGetVersion);
  fl_CUresult r = st->drv.cuInit(0);
  if (r != FL_CUDA_SUCCESS) {
    const char *name = NULL;
    if (st->drv.cuGetErrorName(r, &name) != FL_CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
    snprintf(rt->load_why, sizeof rt->load_why, "cuInit:%s:%d", name, r);
    return;
  }
  rt->load_status = FL_OK;
}

static const char *cu_error_name(const cuda_state *st, fl_CUresult r) {
  const char *name = NULL;
  if (st->drv.cuGetErrorName && st->drv.cuGetErrorName(r, &name) == FL_CUDA_SUCCESS && name) return name;
  return "CUDA_ERROR_UNKNOWN";
}

/* Per-plan state, immutable after plan_init. */
typedef struct cuda_plan {
  fl__gpu_plan gpu; /* first: the device of ctx */
  fl_CUcontext ctx; /* the context current when the plan was made: its kernel handle belongs there */
  unsigned block_x;
  unsigned num_ctas;
  unsigned shared;
  unsigned nattrs;
  fl_CUlaunchAttribute attrs[4];
  bool param_array; /* a tensor map among the arguments: its 128 bytes go by a parameter array, each
                     * argument at its own size, as Triton's launcher passes them */
} cuda_plan;

static fl_status cuda_plan_init(const fl__backend *self, fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  const cuda_state *st = self->state;
  /* The option table (target.c) has checked the ranges: num_warps <= 32, num_ctas <= 16. */
  const fl_cuda_options *c = &desc->target.cuda;
  unsigned warps = c->num_warps ? c->num_warps : 4;
  unsigned ctas = c->num_ctas ? c->num_ctas : 1;
  cuda_plan *cp = fl__calloc(1, sizeof *cp);
  if (!cp) return fl__fail(err, FL_NOMEM, false, "nomem:cuda_plan");
  fl_CUresult r0;
  /* The kernel's module lives in the context current now (Triton loads it where the call runs). */
  if ((r0 = st->drv.cuCtxGetCurrent(&cp->ctx)) != FL_CUDA_SUCCESS || !cp->ctx) {
    fl__free(cp);
    return fl__fail(err, FL_BAD_STREAM, false, "cuda_no_current_context");
  }
  fl_CUdevice dev0;
  cp->gpu.device = st->drv.cuCtxGetDevice(&dev0) == FL_CUDA_SUCCESS ? (int)dev0 : -1;
  cp->block_x = 32 * warps;
  cp->num_ctas = ctas;
  cp->shared = c->shared_mem;
  fl_CUfunction fn = (fl_CUfunction)desc->kernel;
  fl_CUresult r;
  /* Above 48 KiB the kernel must opt in to dynamic shared memory, as Triton's loader does. */
  if (c->shared_mem > 49152) {
    fl_CUdevice dev;
    int optin = 0, static_shared = 0;
    if ((r = st->drv.cuCtxGetDevice(&dev)) != FL_CUDA_SUCCESS ||
        (r = st->drv.cuDeviceGetAttribute(&optin, FL_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)) !=
            FL_CUDA_SUCCESS ||
        (r = st->drv.cuFuncGetAttribute(&static_shared, FL_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn)) != FL_CUDA_SUCCESS)
      goto driver_error;
    if ((long)c->shared_mem > (long)optin - static_shared) {
      fl__free(cp);
      return fl__fail(err, FL_UNSUPPORTED, true, "shared_mem_exceeds_device:%u:%d", c->shared_mem,
                      optin - static_shared);
    }
    if ((r = st->drv.cuFuncSetAttribute(fn, FL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static_shared)) !=
        FL_CUDA_SUCCESS)
      goto driver_error;
  }
  if (ctas > 1) {
    fl_CUlaunchAttribute *a = &cp->attrs[cp->nattrs++];
    a->id = FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a->value.clusterDim.x = ctas;
    a->value.clusterDim.y = 1;
    a->value.clusterDim.z = 1;
    a = &cp->attrs[cp->nattrs++];
    a->id = FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    a->value.clusterSchedulingPolicyPreference = FL_CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    if (ctas == 16 && (r = st->drv.cuFuncSetAttribute(fn, FL_CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)) !=
                          FL_CUDA_SUCCESS)
      goto driver_error;
  }
  if (c->cooperative) {
    fl_CUlaunchAttribute *a = &cp->attrs[cp->nattrs++];
    a->id = FL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a->value.cooperative = 1;
  }
  if (c->pdl) {
    fl_CUlaunchAttribute *a = &cp->attrs[cp->nattrs++];
    a->id = FL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a->value.programmaticStreamSerializationAllowed = 1;
  }
  if (cp->nattrs && !st->drv.cuLaunchKernelEx) {
    fl__free(cp);
    return fl__fail(err, FL_UNSUPPORTED, true, "cuLaunchKernelEx_missing");
  }
  if (plan->ntmaps && (!st->drv.cuTensorMapEncodeTiled || !st->drv.cuDriverGetVersion)) {
    fl__free(cp);
    return fl__fail(err, FL_UNSUPPORTED, true, "cuTensorMapEncodeTiled_missing");
  }
  cp->param_array = plan->ntmaps > 0;
  plan->backend_data = cp;
  return FL_OK;
driver_error:
  fl__free(cp);
  return fl__fail(err, FL_BACKEND_ERROR, true, "backend_error:cuda:%s", cu_error_name(st, r));
}

/* The launch goes to the thread's current context, which can change (or be popped) between
 * launches: it must still be the plan's, or the driver would fail after the boundary. Asked of the
 * driver on every launch (a thread-local read in libcuda); refused before anything is submitted. */
static FL__NOINLINE fl_status context_refused(fl_CUcontext ctx, fl_error *err) {
  if (!ctx) return fl__fail(err, FL_BAD_STREAM, false, "cuda_no_current_context");
  return fl__fail(err, FL_BAD_STREAM, false, "cuda_context_changed");
}

static fl_status cuda_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                             const uint32_t grid[3], fl_error *err) {
  const cuda_state *st = self->state;
  const cuda_plan *cp = plan->backend_data;
  size_t size = plan->layout.size;
  fl_CUcontext ctx = NULL;
  if (FL__UNLIKELY(st->drv.cuCtxGetCurrent(&ctx) != FL_CUDA_SUCCESS || ctx != cp->ctx)) return context_refused(ctx, err);
  uint64_t gx = (uint64_t)grid[0] * cp->num_ctas;
  if (FL__UNLIKELY(gx > INT32_MAX)) return fl__fail(err, FL_BAD_GRID, false, "grid_dim_exceeds:0");
  void *extra[] = {FL_CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, FL_CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   FL_CU_LAUNCH_PARAM_END};
  void **params = NULL, **extra_p = extra;
  void *param_array[FL__MAX_ARGS + FL_CUDA_MAX_HIDDEN_PTRS];
  if (st->rt.use_param_array || cp->param_array) {
    fl__gpu_param_array(plan, args, param_array);
    params = param_array;
    extra_p = NULL;
  }
  fl_CUresult r;
  if (cp->nattrs == 0) {
    r = st->drv.cuLaunchKernel((fl_CUfunction)plan->kernel, (unsigned)gx, grid[1], grid[2], cp->block_x, 1, 1,
                           cp->shared, (fl_CUstream)(uintptr_t)stream, params, extra_p);
  } else {
    fl_CUlaunchConfig cfg = {(unsigned)gx, grid[1], grid[2], cp->block_x, 1, 1, cp->shared,
                             (fl_CUstream)(uintptr_t)stream, (fl_CUlaunchAttribute *)cp->attrs, cp->nattrs};
    r = st->drv.cuLaunchKernelEx(&cfg, (fl_CUfunction)plan->kernel, params, extra_p);
  }
  if (FL__UNLIKELY(r != FL_CUDA_SUCCESS))
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:cuda:%s", cu_error_name(st, r));
  fl__ok(err);
  return FL_OK;
}

/* A tensor map as Triton's launcher encodes a host-side descriptor (its fillTMADescriptorTiled):
 * sizes, box and byte strides innermost first (the outermost stride dropped), the device element
 * type mapped to the driver's (TF32 when rounding), the last size doubled for FP4-padded types,
 * element strides 1, no interleave, 128-byte L2 promotion, NaN fill for "nan" padding. Then its
 * fix-up for drivers up to 13.1: the address-generation bit (bit 21 of the second word) cleared
 * when the tensor's last byte index + 1 is below 128 KiB, that index summed in 32-bit int as
 * Triton's C computes it. */
static fl_status cuda_tensor_map_encode(const fl__backend *self, const fl_tensor_map_meta *meta,
                                        const fl_tensor_map_value *v, void *map, fl_error *err) {
  const cuda_state *st = self->state;
  const uint32_t rank = meta->rank;
  unsigned long long dims[FL_TENSOR_MAP_MAX_RANK], strides[FL_TENSOR_MAP_MAX_RANK];
  unsigned box[FL_TENSOR_MAP_MAX_RANK], ones[FL_TENSOR_MAP_MAX_RANK] = {1, 1, 1, 1, 1};
  const unsigned long long esize = (unsigned long long)meta->elem_size;
  for (uint32_t i = 0; i < rank; i++) {
    box[rank - i - 1] = meta->block[i];
    unsigned long long d = (unsigned long long)v->shape[i];
    if (meta->fp4_padded && i == rank - 1) d *= 2;
    dims[rank - i - 1] = d;
  }
  for (uint32_t i = 0; i + 1 < rank; i++) strides[rank - i - 2] = esize * (unsigned long long)v->strides[i];
  strides[rank - 1] = dims[rank - 1] * (rank == 1 ? esize : strides[rank - 2]);
  static const int to_driver[16] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 8, 9, 11, 12, 13, 14, 15};
  const int type = to_driver[v->round_tf32 ? FL_CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 : meta->elem_type];
  const int fill = v->nan_padding ? FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  fl_CUresult r = st->drv.cuTensorMapEncodeTiled(map, type, rank, (void *)(uintptr_t)v->base, dims, strides, box, ones,
                                                 FL_CU_TENSOR_MAP_INTERLEAVE_NONE, meta->swizzle,
                                                 FL_CU_TENSOR_MAP_L2_PROMOTION_L2_128B, fill);
  if (r != FL_CUDA_SUCCESS) return fl__fail(err, FL_BACKEND_ERROR, false, "tmap_encode:cuda:%s", cu_error_name(st, r));
  int version = 0;
  if ((r = st->drv.cuDriverGetVersion(&version)) != FL_CUDA_SUCCESS)
    return fl__fail(err, FL_BACKEND_ERROR, false, "cuDriverGetVersion:%s", cu_error_name(st, r));
  if (version <= 13010) {
    /* Triton: `int m = 0; m += (dims[i] - 1) * (int)stride_bytes;`, the sum taken in 64 bits and
     * kept in an int at each step (two's complement, as the compilers Triton is built with do). */
    int32_t m = 0;
    for (uint32_t i = 0; i < rank; i++) {
      int32_t bytes = (int32_t)(uint32_t)(i == 0 ? esize : strides[i - 1]);
      uint64_t sum = (uint64_t)(int64_t)m + (dims[i] - 1) * (uint64_t)(int64_t)bytes;
      m = (int32_t)(uint32_t)sum;
    }
    if ((int64_t)m + 1 < 128 * 1024) {
      uint64_t w;
      memcpy(&w, (unsigned char *)map + 8, 8);
      w &= ~(1ull << 21);
      memcpy((unsigned char *)map + 8, &w, 8);
    }
  }
  fl__ok(err);
  return FL_OK;
}

const fl__backend fl__backend_cuda = {
    .name = "cuda",
    .state = &the_state,
    .default_abi = FL_ABI_CUDA,
    .abi_mask = 1u << FL_ABI_CUDA,
    .kernel = FL_KERNEL_HANDLE,
    .memory = FL_MEMORY_CUDA,
    .grid_max = {INT32_MAX, 65535, 65535},
    .grid_max_product = 0,
    .grid_allow_zero = true,
    .max_args_size = 32764,
    .configure = fl__gpu_configure,
    .load = fl__gpu_load,
    .symbol = fl__gpu_symbol,
    .plan_init = cuda_plan_init,
    .plan_fini = fl__gpu_plan_fini,
    .submit = cuda_submit,
    .plan_device = fl__gpu_plan_device,
    .tensor_map_encode = cuda_tensor_map_encode,
};
