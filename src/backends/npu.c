/* npu.c: the Ascend backend: the ACL runtime opened with dlopen at first use, launches through
 * aclrtLaunchKernelWithHostArgs with the Triton-Ascend packed buffer. */
#include "../dl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ACL declarations the backend needs (acl/acl_rt.h). The attribute value is a 16-byte union in
 * CANN's headers; only its first member is written. */
typedef int fl_aclError;
typedef union fl_aclrtLaunchKernelAttrValue {
  uint32_t localMemorySize; /* named dynUBufSize in some CANN releases */
  uint32_t rsv[4];
} fl_aclrtLaunchKernelAttrValue;
typedef struct fl_aclrtLaunchKernelAttr {
  int id;
  fl_aclrtLaunchKernelAttrValue value;
} fl_aclrtLaunchKernelAttr;
typedef struct fl_aclrtLaunchKernelCfg {
  fl_aclrtLaunchKernelAttr *attrs;
  size_t numAttrs;
} fl_aclrtLaunchKernelCfg;
enum { FL_ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE = 2 };

static struct {
  fl_aclError (*launch)(void *func, uint32_t blocks, void *stream, fl_aclrtLaunchKernelCfg *cfg, void *args,
                        size_t size, void *placeholders, size_t nplaceholders);
  fl_aclError (*get_sync_addr)(void **addr);
  const char *(*recent_err)(void);
} acl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static fl_status load_status = FL_BACKEND_UNAVAILABLE;
static char load_why[FL_REASON_MAX - 32];

static void load_acl(void) {
  static const char *const names[] = {"libascendcl.so", NULL};
  /* FASTLAUNCH_LIBASCENDCL names another library to open instead (the tests' stand-in). */
  const char *override = getenv("FASTLAUNCH_LIBASCENDCL");
  const char *const custom[] = {override, NULL};
  void *h = fl__dl_open(override && *override ? custom : names, load_why, sizeof load_why);
  if (!h) return;
  *(void **)&acl.launch = fl__dl_sym(h, "aclrtLaunchKernelWithHostArgs", load_why, sizeof load_why);
  if (!acl.launch) return; /* CANN before 8.5 has no host-args launch */
  *(void **)&acl.get_sync_addr = fl__dl_sym(h, "aclrtGetHardwareSyncAddr", NULL, 0);
  *(void **)&acl.recent_err = fl__dl_sym(h, "aclGetRecentErrMsg", NULL, 0);
  load_status = FL_OK;
}

static fl_status npu_load(fl_error *err) {
  pthread_once(&load_once, load_acl);
  if (load_status != FL_OK)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:npu:%s", load_why);
  return FL_OK;
}

static fl_status npu_plan_init(fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  /* A static grid past the core limit would fail every launch: refuse the plan instead (stable). */
  /* The FFTS address comes from the runtime once per plan unless the caller supplied it. */
  if (plan->layout.ffts >= 0 && desc->target.npu.ffts_addr == 0) {
    void *addr = NULL;
    if (!acl.get_sync_addr) return fl__fail(err, FL_UNSUPPORTED, true, "npu_ffts_unavailable");
    fl_aclError r = acl.get_sync_addr(&addr);
    if (r != 0 || !addr) return fl__fail(err, FL_BACKEND_ERROR, true, "npu_ffts_unavailable:%d", r);
    uint64_t a = (uint64_t)(uintptr_t)addr;
    memcpy(plan->tmpl + plan->layout.ffts, &a, 8);
  }
  return FL_OK;
}

static fl_status npu_submit(const fl_plan *plan, uint64_t stream, const void *args, size_t size,
                            const uint32_t grid[3], fl_error *err) {
  if (FL__UNLIKELY(stream == 0)) return fl__fail(err, FL_BAD_STREAM, false, "stream_is_none");
  /* Each dimension is below 2^31: the product can pass 2^64, so it saturates instead of wrapping. */
  uint64_t blocks = (uint64_t)grid[0] * grid[1];
  if (__builtin_mul_overflow(blocks, (uint64_t)grid[2], &blocks)) blocks = UINT64_MAX;
  /* The core checked the product against 65535 unless the plan clamps to the core count. */
  const fl_npu_options *o = &plan->target.npu;
  if (o->clamp_blocks && blocks > o->clamp_blocks) blocks = o->clamp_blocks;
  fl_aclrtLaunchKernelAttr attr;
  memset(&attr, 0, sizeof attr); /* the union's other bytes are reserved: zero, not left over */
  attr.id = FL_ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE;
  attr.value.localMemorySize = o->dyn_ubuf;
  fl_aclrtLaunchKernelCfg cfg = {&attr, 1};
  fl_aclError r = acl.launch(plan->kernel, (uint32_t)blocks, (void *)(uintptr_t)stream,
                             o->simt ? &cfg : NULL, (void *)args, size, NULL, 0);
  if (FL__UNLIKELY(r != 0)) {
    const char *msg = acl.recent_err ? acl.recent_err() : NULL;
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:npu:%d:%.80s", r, msg ? msg : "");
  }
  fl__ok(err);
  return FL_OK;
}

const fl__backend fl__backend_npu = {
    .name = "npu",
    .default_abi = FL_ABI_NPU,
    .abi_mask = 1u << FL_ABI_NPU,
    .kernel = FL_KERNEL_HANDLE,
    .memory = FL_MEMORY_NPU,
    .grid_max = {INT32_MAX, INT32_MAX, INT32_MAX},
    .grid_max_product = 65535, /* blocks per launch, unless the plan clamps to the core count */
    .grid_allow_zero = false,
    .max_args_size = 32768,
    .load = npu_load,
    .plan_init = npu_plan_init,
    .submit = npu_submit,
};
