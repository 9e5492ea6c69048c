/* npu.c: the Ascend backend. Two launch calls, each from its own library opened with dlopen at
 * first use: a kernel registered the way Triton-Ascend registers it (a stub from
 * rtFunctionRegister) goes through rtKernelLaunch (libruntime); an aclrtFuncHandle goes through
 * aclrtLaunchKernelWithHostArgs (libascendcl). Both take the Triton-Ascend packed buffer.
 *
 * torch_npu runs aten ops through a task queue; while it is on, a launch is enqueued there (the
 * table fl_npu_set_queue installs), so it runs after the ops queued before it. */
#include "../dl.h"
#include "fastlaunch_npu_queue.h"

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

enum { FFTS_DEVICES = 64 };

/* The backend's state. One per process: the Ascend runtime is a process-wide library, loaded once;
 * torch_npu's queue is the process's; FFTS addresses are per device. */
typedef struct npu_state {
  fl__load_once once;
  struct {
    /* libascendcl */
    fl_aclError (*launch)(void *func, uint32_t blocks, void *stream, fl_aclrtLaunchKernelCfg *cfg, void *args,
                          size_t size, void *placeholders, size_t nplaceholders);
    fl_aclError (*get_sync_addr)(void **addr);
    fl_aclError (*acl_get_device)(int32_t *device);
    const char *(*recent_err)(void);
    /* libruntime (CANN's runtime/rt.h) */
    int (*rt_launch)(const void *stub, uint32_t blocks, void *args, uint32_t size, void *sm_desc, void *stream);
    int (*rt_ffts)(uint64_t *addr, uint32_t *len);
    int (*rt_get_device)(int32_t *device);
  } api;
  fl_status load_status;
  char acl_why[FL_REASON_MAX], rt_why[FL_REASON_MAX];
  char load_why[2 * FL_REASON_MAX + 4];
  /* Settings (fl_backend_configure): other libraries to open (the tests' stand-ins, or a runtime
   * outside the loader's path); empty: libascendcl.so and libruntime.so. */
  char libascendcl[4096], libruntime[4096];
  /* The task queue fl_npu_set_queue installs (NULL: launches go to the runtime directly). */
  _Atomic(const fl_npu_queue *) queue;
  /* FFTS addresses by device, fetched once each (at plan creation, never on the launch path). */
  pthread_mutex_t ffts_lock;
  uint64_t ffts_by_device[FFTS_DEVICES];
} npu_state;

static npu_state the_state = {
    .once = FL__LOAD_ONCE_INIT, .load_status = FL_BACKEND_UNAVAILABLE, .ffts_lock = PTHREAD_MUTEX_INITIALIZER};

/* Opens `path` if set, else `name`; NULL with the loader's reason in why. */
static void *open_lib(const char *path, const char *name, char *why, size_t why_size) {
  const char *const names[] = {path[0] ? path : name, NULL};
  return fl__dl_open(names, why, why_size);
}

static void load_runtimes(void *state) {
  npu_state *st = state;
  void *acl = open_lib(st->libascendcl, "libascendcl.so", st->acl_why, sizeof st->acl_why);
  if (acl) {
    /* CANN before 8.5 has no host-args launch: then only the rt path remains. */
    *(void **)&st->api.launch = fl__dl_sym(acl, "aclrtLaunchKernelWithHostArgs", st->acl_why, sizeof st->acl_why);
    *(void **)&st->api.get_sync_addr = fl__dl_sym(acl, "aclrtGetHardwareSyncAddr", NULL, 0);
    *(void **)&st->api.acl_get_device = fl__dl_sym(acl, "aclrtGetDevice", NULL, 0);
    *(void **)&st->api.recent_err = fl__dl_sym(acl, "aclGetRecentErrMsg", NULL, 0);
  }
  void *rt = open_lib(st->libruntime, "libruntime.so", st->rt_why, sizeof st->rt_why);
  if (rt) {
    *(void **)&st->api.rt_launch = fl__dl_sym(rt, "rtKernelLaunch", st->rt_why, sizeof st->rt_why);
    *(void **)&st->api.rt_ffts = fl__dl_sym(rt, "rtGetC2cCtrlAddr", NULL, 0);
    *(void **)&st->api.rt_get_device = fl__dl_sym(rt, "rtGetDevice", NULL, 0);
  }
  snprintf(st->load_why, sizeof st->load_why, "%s; %s", st->acl_why, st->rt_why);
  if (st->api.launch || st->api.rt_launch) st->load_status = FL_OK;
}

static fl_status npu_configure(const fl__backend *self, const char *name, const char *value, fl_error *err) {
  npu_state *st = self->state;
  if (strcmp(name, "libascendcl") == 0)
    return fl__setting_path(&st->once, "npu", name, value, st->libascendcl, sizeof st->libascendcl, err);
  if (strcmp(name, "libruntime") == 0)
    return fl__setting_path(&st->once, "npu", name, value, st->libruntime, sizeof st->libruntime, err);
  return fl__fail(err, FL_BAD_VALUE, true, "setting_unknown:npu:%.40s", name);
}

static fl_status npu_load(const fl__backend *self, fl_error *err) {
  npu_state *st = self->state;
  fl__load_once_run(&st->once, load_runtimes, st);
  if (st->load_status != FL_OK)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:npu:%s", st->load_why);
  return FL_OK;
}

/* ---- torch_npu's task queue ---- */

fl_status fl_npu_set_queue(const fl_npu_queue *q, fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (q && (q->version != FL_NPU_QUEUE_VERSION || !q->mode || !q->enqueue))
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "npu_queue_version:%u", q->version);
  atomic_store(&the_state.queue, q);
  fl__ok(err);
  return FL_OK;
}

/* ---- plans ---- */

enum { TASK_RT = 1u, TASK_SIMT = 2u };

typedef struct npu_plan {
  int device;                /* the device whose FFTS address the template holds; -1: none needed */
  const fl_npu_queue *queue; /* the queue `name` was made by */
  void *name;                /* the kernel's name for the queue's records */
} npu_plan;

/* The calling thread's current device, or -1 when the runtime cannot say. */
static int current_device(const npu_state *st, bool rt) {
  int32_t d = -1;
  if (rt ? st->api.rt_get_device && st->api.rt_get_device(&d) == 0
         : st->api.acl_get_device && st->api.acl_get_device(&d) == 0)
    return d;
  return -1;
}

static fl_status ffts_address(npu_state *st, bool rt, int device, uint64_t *out, fl_error *err) {
  bool cached = device >= 0 && device < FFTS_DEVICES;
  pthread_mutex_lock(&st->ffts_lock);
  uint64_t a = cached ? st->ffts_by_device[device] : 0;
  if (!a) {
    int r;
    if (rt) {
      uint32_t len = 0;
      r = st->api.rt_ffts ? st->api.rt_ffts(&a, &len) : -1;
    } else {
      void *p = NULL;
      r = st->api.get_sync_addr ? st->api.get_sync_addr(&p) : -1;
      a = (uint64_t)(uintptr_t)p;
    }
    if (r != 0 || !a) {
      pthread_mutex_unlock(&st->ffts_lock);
      if (rt ? !st->api.rt_ffts : !st->api.get_sync_addr) return fl__fail(err, FL_UNSUPPORTED, true, "npu_ffts_unavailable");
      return fl__fail(err, FL_BACKEND_ERROR, true, "npu_ffts_unavailable:%d", r);
    }
    if (cached) st->ffts_by_device[device] = a;
  }
  pthread_mutex_unlock(&st->ffts_lock);
  *out = a;
  return FL_OK;
}

static void npu_plan_fini(const fl__backend *self, fl_plan *plan);

static fl_status npu_plan_init(const fl__backend *self, fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  npu_state *st = self->state;
  const fl_npu_options *o = &desc->target.npu;
  if (o->rt_stub && !st->api.rt_launch)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:npu:%s", st->rt_why);
  if (!o->rt_stub && !st->api.launch)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:npu:%s", st->acl_why);
  /* rtKernelLaunch takes no launch attributes: a SIMT kernel's UB size cannot travel with it. */
  if (o->rt_stub && o->simt) return fl__fail(err, FL_UNSUPPORTED, true, "npu_option_conflict:rt_stub:simt");
  npu_plan *np = fl__malloc(sizeof *np);
  if (!np) return fl__fail(err, FL_NOMEM, false, "plan_alloc");
  np->device = -1;
  np->queue = atomic_load(&st->queue);
  np->name = np->queue && np->queue->name_new ? np->queue->name_new(plan->name ? plan->name : "fastlaunch") : NULL;
  plan->backend_data = np;
  /* The FFTS address comes from the runtime once per device unless the caller supplied it; the
   * plan then launches on that device only. */
  if (plan->layout.ffts >= 0 && o->ffts_addr == 0) {
    np->device = current_device(st, o->rt_stub);
    uint64_t a = 0;
    fl_status status = ffts_address(st, o->rt_stub, np->device, &a, err);
    if (status != FL_OK) {
      npu_plan_fini(self, plan); /* a failed plan_init cleans up after itself */
      return status;
    }
    memcpy(plan->tmpl + plan->layout.ffts, &a, 8);
  }
  return FL_OK;
}

static void npu_plan_fini(const fl__backend *self, fl_plan *plan) {
  (void)self;
  npu_plan *np = plan->backend_data;
  if (!np) return;
  if (np->name && np->queue->name_free) np->queue->name_free(np->name);
  fl__free(np);
  plan->backend_data = NULL;
}

/* ---- launching ---- */

static int raw_launch(const npu_state *st, const void *kernel, uint32_t blocks, uint64_t stream, uint32_t flags,
                      uint32_t dyn_ubuf, const void *args, size_t size) {
  if (flags & TASK_RT)
    return st->api.rt_launch(kernel, blocks, (void *)args, (uint32_t)size, NULL, (void *)(uintptr_t)stream);
  fl_aclrtLaunchKernelAttr attr;
  memset(&attr, 0, sizeof attr); /* the union's other bytes are reserved: zero, not left over */
  attr.id = FL_ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE;
  attr.value.localMemorySize = dyn_ubuf;
  fl_aclrtLaunchKernelCfg cfg = {&attr, 1};
  return st->api.launch((void *)kernel, blocks, (void *)(uintptr_t)stream, (flags & TASK_SIMT) ? &cfg : NULL, (void *)args,
                    size, NULL, 0);
}

/* On the queue's thread: the launch this task carries, then the block goes. A callback of the
 * queue's ABI, which carries no context: the backend's one state is the process's. */
static int task_run(fl_npu_task *task) {
  int r = raw_launch(&the_state, task->kernel, task->blocks, task->stream, task->flags, task->dyn_ubuf,
                     (const unsigned char *)(task + 1), task->size);
  fl__free(task);
  return r;
}

static fl_status npu_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                            const uint32_t grid[3], fl_error *err) {
  const npu_state *st = self->state;
  const size_t size = plan->layout.size;
  if (FL__UNLIKELY(stream == 0)) return fl__fail(err, FL_BAD_STREAM, false, "stream_is_none");
  const fl_npu_options *o = &plan->target.npu;
  const npu_plan *np = plan->backend_data;
  /* Each dimension is below 2^31: the product can pass 2^64, so it saturates instead of wrapping. */
  uint64_t blocks = (uint64_t)grid[0] * grid[1];
  if (__builtin_mul_overflow(blocks, (uint64_t)grid[2], &blocks)) blocks = UINT64_MAX;
  /* The core checked the product against 65535 unless the plan clamps to the core count. */
  if (o->clamp_blocks && blocks > o->clamp_blocks) blocks = o->clamp_blocks;
  /* The template's FFTS address is its device's: another device's stream would get the wrong one. */
  if (np->device >= 0) {
    int now = current_device(st, o->rt_stub);
    if (FL__UNLIKELY(now != np->device))
      return fl__fail(err, FL_UNSUPPORTED, false, "npu_device_changed:%d:%d", np->device, now);
  }
  const uint32_t flags = (o->rt_stub ? TASK_RT : 0u) | (o->simt ? TASK_SIMT : 0u);
  const fl_npu_queue *q = atomic_load_explicit(&st->queue, memory_order_acquire);
  int mode = q ? q->mode() : 0;
  if (FL__UNLIKELY(mode < 0)) /* torch_npu is there, its queue is not reachable: never launch out of order */
    return fl__fail(err, FL_UNSUPPORTED, true, "npu_queue_unavailable:%s", q->why ? q->why : "?");
  if (mode > 0) {
    /* The one allocation on this path: the queue runs the launch later, so it gets its own copy. */
    fl_npu_task *task = fl__malloc(sizeof *task + size);
    if (FL__UNLIKELY(!task)) return fl__fail(err, FL_NOMEM, false, "npu_task_alloc");
    task->run = task_run;
    task->kernel = plan->kernel;
    task->stream = stream;
    task->blocks = (uint32_t)blocks;
    task->flags = flags;
    task->dyn_ubuf = o->dyn_ubuf;
    task->size = (uint32_t)size;
    memcpy(task + 1, args, size);
    char why[96] = "";
    int r = q->enqueue(np->queue == q ? np->name : NULL, task, why, sizeof why);
    if (FL__LIKELY(r == 0)) {
      fl__ok(err);
      return FL_OK; /* submitted: it is in the queue, in order */
    }
    if (r == -1) {
      fl__free(task);
      return fl__fail(err, FL_BACKEND_ERROR, false, "npu_enqueue_refused:%.80s", why);
    }
    /* The queue may hold the task: it is the queue's now, and the launch may happen. */
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "npu_enqueue_failed:%.80s", why);
  }
  int r = raw_launch(st, plan->kernel, (uint32_t)blocks, stream, flags, o->dyn_ubuf, args, size);
  if (FL__UNLIKELY(r != 0)) {
    const char *msg = !o->rt_stub && st->api.recent_err ? st->api.recent_err() : NULL;
    return fl__fail_submitted(err, FL_BACKEND_ERROR, "backend_error:npu:%d:%.80s", r, msg ? msg : "");
  }
  fl__ok(err);
  return FL_OK;
}

static int npu_plan_device(const fl__backend *self, const fl_plan *plan) {
  (void)self;
  return ((const npu_plan *)plan->backend_data)->device;
}

const fl__backend fl__backend_npu = {
    .name = "npu",
    .state = &the_state,
    .default_abi = FL_ABI_NPU,
    .abi_mask = 1u << FL_ABI_NPU,
    .kernel = FL_KERNEL_HANDLE,
    .memory = FL_MEMORY_NPU,
    .grid_max = {INT32_MAX, INT32_MAX, INT32_MAX},
    .grid_max_product = 65535, /* blocks per launch, unless the plan clamps to the core count */
    .grid_allow_zero = false,
    .max_args_size = 32768,
    .configure = npu_configure,
    .load = npu_load,
    .plan_init = npu_plan_init,
    .plan_fini = npu_plan_fini,
    .submit = npu_submit,
    .plan_device = npu_plan_device,
};
