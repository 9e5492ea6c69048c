/* ascend_standin.c: a recording stand-in for the parts of CANN's runtime (libruntime.so) and
 * AscendCL (libascendcl.so) that a Triton-Ascend launcher calls, for machines without an NPU. It
 * launches nothing. Each launch call appends an entry to a log: which entry point (kind 1:
 * rtKernelLaunch, kind 2: aclrtLaunchKernelWithHostArgs), the kernel handle, blocks, stream, the
 * argument bytes copied whole, and for kind 2 the first launch attribute. Kind 3 entries are
 * "aten ops" that the torch_npu stand-in records through standin_rt_record_aten, so one log shows
 * the order in which kernels and ops reached the device.
 *
 * Launches may come from several threads at once (torch_npu's queue thread and the callers): the
 * log is guarded by one mutex. In count-only mode (benchmarks) a launch is one atomic add.
 * Failure injection (standin_rt_fail_next) makes the next launch of either kind return a code and
 * record nothing; aclGetRecentErrMsg then names it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef struct entry {
  int kind; /* 1: rtKernelLaunch, 2: aclrtLaunchKernelWithHostArgs, 3: an aten op */
  uint64_t stub, stream, size, tag;
  uint32_t blocks;
  int cfg_null, attr_id;
  uint32_t attr_value;
  unsigned char *data; /* size bytes, or NULL when the caller passed none */
} entry;

/* AscendCL's launch configuration, as aclrtLaunchKernelWithHostArgs reads it. */
typedef struct launch_attr {
  int id;
  union {
    uint32_t localMemorySize;
    uint32_t rsv[4];
  } value;
} launch_attr;
typedef struct launch_cfg {
  launch_attr *attrs;
  size_t numAttrs;
} launch_cfg;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static entry *log_v; /* guarded by log_mu, as are log_n and log_cap */
static size_t log_n, log_cap;

static atomic_int count_only;
static atomic_int fail_pending; /* the code the next launch returns; 0: none */
static atomic_int fail_last;    /* the last code injected; 0: none since the last reset */
static atomic_uint_fast64_t n_launches, n_ffts;
static _Thread_local int32_t cur_device; /* rtSetDevice/aclrtSetDevice are per thread */

/* Appends e, taking ownership of e->data. On allocation failure the entry is dropped and an
 * error returned, so a test sees a failed launch rather than a silently missing one. */
static int append(entry *e) {
  pthread_mutex_lock(&log_mu);
  if (log_n == log_cap) {
    size_t cap = log_cap ? 2 * log_cap : 256;
    entry *v = realloc(log_v, cap * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&log_mu);
      free(e->data);
      return 207001; /* ACL_ERROR_RT_MEMORY_ALLOCATION */
    }
    log_v = v;
    log_cap = cap;
  }
  log_v[log_n++] = *e;
  pthread_mutex_unlock(&log_mu);
  return 0;
}

/* The common part of both launch kinds: failure injection, counting, copying the arguments
 * (outside the lock) and appending. cfg applies to kind 2 only. */
static int launch(int kind, const void *stub, uint32_t blocks, const void *args, size_t size, const void *stream,
                  const launch_cfg *cfg) {
  if (atomic_load_explicit(&fail_pending, memory_order_relaxed)) {
    int code = atomic_exchange(&fail_pending, 0);
    if (code) {
      atomic_store(&fail_last, code);
      return code;
    }
  }
  if (atomic_load_explicit(&count_only, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&n_launches, 1, memory_order_relaxed);
    return 0;
  }
  entry e = {.kind = kind, .stub = (uint64_t)(uintptr_t)stub, .stream = (uint64_t)(uintptr_t)stream,
             .size = size, .blocks = blocks, .cfg_null = cfg == NULL};
  if (cfg && cfg->numAttrs > 0 && cfg->attrs) {
    e.attr_id = cfg->attrs[0].id;
    e.attr_value = cfg->attrs[0].value.localMemorySize;
  }
  if (args && size) {
    if (!(e.data = malloc(size))) return 207001;
    memcpy(e.data, args, size);
  }
  int rc = append(&e);
  if (rc == 0) atomic_fetch_add_explicit(&n_launches, 1, memory_order_relaxed);
  return rc;
}

/* ---- the runtime's entry points ---- */

API int rtKernelLaunch(const void *stub, uint32_t blockDim, void *args, uint32_t argsSize, void *smDesc,
                       void *stream) {
  (void)smDesc; /* always NULL from Triton-Ascend */
  return launch(1, stub, blockDim, args, argsSize, stream, NULL);
}

API int aclrtLaunchKernelWithHostArgs(void *func, uint32_t numBlocks, void *stream, void *cfg, void *hostArgs,
                                      size_t argsSize, void *placeHolderArray, size_t placeHolderNum) {
  (void)placeHolderArray;
  (void)placeHolderNum;
  return launch(2, func, numBlocks, hostArgs, argsSize, stream, (const launch_cfg *)cfg);
}

/* The FFTS (cross-core sync) address: a distinct, recognisable value per device. Both queries
 * count as FFTS calls, so a test can tell whether a launcher asks once or per launch. */
static uint64_t ffts_addr(void) { return 0xFF750000000ull + (uint64_t)(uint32_t)cur_device * 0x100000ull; }

API int rtGetC2cCtrlAddr(uint64_t *addr, uint32_t *len) {
  if (!addr || !len) return 107000; /* ACL_ERROR_RT_PARAM_INVALID */
  atomic_fetch_add_explicit(&n_ffts, 1, memory_order_relaxed);
  *addr = ffts_addr();
  *len = 4096;
  return 0;
}

API int aclrtGetHardwareSyncAddr(void **addr) {
  if (!addr) return 107000;
  atomic_fetch_add_explicit(&n_ffts, 1, memory_order_relaxed);
  *addr = (void *)(uintptr_t)ffts_addr();
  return 0;
}

API int rtGetDevice(int32_t *d) {
  if (!d) return 107000;
  *d = cur_device;
  return 0;
}

API int rtSetDevice(int32_t d) {
  if (d < 0) return 107001; /* ACL_ERROR_RT_INVALID_DEVICEID */
  cur_device = d;
  return 0;
}

API int aclrtGetDevice(int32_t *d) { return rtGetDevice(d); }
API int aclrtSetDevice(int32_t d) { return rtSetDevice(d); }

/* Formatted per thread from the last injected code, so a reader never races a writer. */
API const char *aclGetRecentErrMsg(void) {
  static _Thread_local char msg[64];
  int code = atomic_load(&fail_last);
  if (!code) return "";
  snprintf(msg, sizeof msg, "standin: injected failure %d", code);
  return msg;
}

/* ---- test controls ---- */

API void standin_rt_reset(void) {
  pthread_mutex_lock(&log_mu);
  for (size_t i = 0; i < log_n; i++) free(log_v[i].data);
  free(log_v);
  log_v = NULL;
  log_n = log_cap = 0;
  pthread_mutex_unlock(&log_mu);
  atomic_store(&n_launches, 0);
  atomic_store(&n_ffts, 0);
  atomic_store(&fail_pending, 0);
  atomic_store(&fail_last, 0);
}

API void standin_rt_count_only(int on) { atomic_store(&count_only, on != 0); }
API uint64_t standin_rt_launches(void) { return atomic_load(&n_launches); }
API uint64_t standin_rt_ffts_calls(void) { return atomic_load(&n_ffts); }
API void standin_rt_fail_next(int code) { atomic_store(&fail_pending, code); }

/* An aten op reaching the device: recorded in the same log, whatever count_only says. */
API void standin_rt_record_aten(uint64_t stream, uint64_t tag) {
  entry e = {.kind = 3, .stream = stream, .tag = tag, .cfg_null = 1};
  if (append(&e)) fprintf(stderr, "standin: aten op %llu not recorded (out of memory)\n", (unsigned long long)tag);
}

API size_t standin_rt_count(void) {
  pthread_mutex_lock(&log_mu);
  size_t n = log_n;
  pthread_mutex_unlock(&log_mu);
  return n;
}

/* Entry i's fields; any output pointer may be NULL. 0: done; -1: no entry i. */
API int standin_rt_entry(size_t i, int *kind, uint64_t *stub, uint32_t *blocks, uint64_t *stream, uint64_t *size,
                         uint64_t *tag, int *cfg_null, int *attr_id, uint32_t *attr_value) {
  pthread_mutex_lock(&log_mu);
  if (i >= log_n) {
    pthread_mutex_unlock(&log_mu);
    return -1;
  }
  const entry *e = &log_v[i];
  if (kind) *kind = e->kind;
  if (stub) *stub = e->stub;
  if (blocks) *blocks = e->blocks;
  if (stream) *stream = e->stream;
  if (size) *size = e->size;
  if (tag) *tag = e->tag;
  if (cfg_null) *cfg_null = e->cfg_null;
  if (attr_id) *attr_id = e->attr_id;
  if (attr_value) *attr_value = e->attr_value;
  pthread_mutex_unlock(&log_mu);
  return 0;
}

/* Copies up to cap of entry i's argument bytes into buf; returns how many it recorded (0 for no
 * entry i, for an aten op, or for a launch that passed no argument pointer). */
API size_t standin_rt_bytes(size_t i, void *buf, size_t cap) {
  size_t n = 0;
  pthread_mutex_lock(&log_mu);
  if (i < log_n && log_v[i].data) {
    n = (size_t)log_v[i].size;
    if (buf) memcpy(buf, log_v[i].data, n < cap ? n : cap);
  }
  pthread_mutex_unlock(&log_mu);
  return n;
}
