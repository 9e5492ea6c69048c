/* cuda_stub.c: a libcuda.so.1 for machines without a GPU, so Triton's own launcher (its cuda_utils,
 * built against whatever libcuda TRITON_LIBCUDA_PATH names) and fastlaunch's cuda backend both run
 * here against the same driver. It launches nothing. It counts launches and, when stub.record is
 * set, records the last one: grid, block, shared memory, stream, function, launch attributes, the
 * packed buffer (CU_LAUNCH_PARAM_BUFFER_POINTER) and the first stub.nparams parameters (8 bytes
 * each), so a test can compare what two launchers hand the driver byte for byte.
 *
 * A real driver knows each kernel's parameter count from the cubin; the stand-in takes it from the
 * test (stub.nparams), which may be an upper bound: a slot past the launcher's array is read only
 * where its memory is readable (zeros otherwise), and the test reads as many as the variant has. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct stub_state {
  uint64_t calls;
  int record;  /* 0: count only (benchmarks); 1: record the last launch */
  int nparams; /* parameters to copy from a parameter array */
  unsigned grid[3], block[3], shared;
  uint64_t stream, function;
  uint64_t stream_handle; /* what stub_current_stream returns */
  int nattrs;
  int attr_ids[8];
  unsigned attr_vals[8][3];
  size_t buffer_size;
  unsigned char buffer[4096];
  int used_params; /* 1: the last launch passed a parameter array; 0: a packed buffer */
  unsigned char params[256][8];
  /* Every launch while log_on, in order (the reentrancy harness: nested launches included): the
   * function, grid, and the first 64 bytes of the arguments as the launch passed them. */
  int log_on;
  unsigned nlog;
  struct {
    uint64_t function;
    unsigned grid[3];
    int used_params;
    unsigned char bytes[64]; /* the buffer's first 64 bytes, or the first 8 parameters, 8 bytes each */
  } log[256];
  /* cuTensorMapEncodeTiled: calls, the driver version cuDriverGetVersion answers (0: 13000), an
   * error to return (0: none). The map it writes mixes every argument the driver reads (a different
   * map for each combination), with bit 21 of its second word set; it refuses what the driver's
   * documentation says it refuses (CUDA_ERROR_INVALID_VALUE, 1). */
  uint64_t tmap_calls;
  int driver_version, tmap_fail;
  /* A parameter array's parameters at their own sizes (what the kernel declares; a tensor map's 128
   * bytes): param_sizes[i] bytes of parameter i, back to back in param_blob, while param_sizes[i]. */
  unsigned short param_sizes[64];
  unsigned char param_blob[4096];
  /* Two devices, each with its primary context (handle 1 + device): the thread's current device (0
   * unless a test sets it), whose context cuCtxGetCurrent answers; stub_current_stream answers
   * stream_handle for device 0 and stream_handle + 0x1000 * device for the other. */
  int device;
} stub_state;

__attribute__((visibility("default"))) stub_state stub;

#define API __attribute__((visibility("default"))) int

/* The stand-in driver's current device and stream for fastlaunch's JIT dispatcher, with the
 * signatures of torch's C shim (aoti_torch_get_current_device_index / _cuda_stream) that it calls on
 * a GPU; the Python driver's callables return the same values. */
API stub_current_device(int32_t *device) { *device = stub.device; return 0; }
API stub_current_stream(int32_t device, void **stream) {
  if (device < 0 || device > 1) return 1;
  *stream = (void *)(uintptr_t)(stub.stream_handle + 0x1000u * (unsigned)device);
  return 0;
}

API cuInit(unsigned f) { (void)f; return 0; }
API cuDriverGetVersion(int *v) { *v = stub.driver_version ? stub.driver_version : 13000; return 0; }
API cuGetErrorName(int r, const char **s) { (void)r; *s = "CUDA_ERROR_STUB"; return 0; }
API cuGetErrorString(int r, const char **s) { (void)r; *s = "stub driver error"; return 0; }
API cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
API cuDeviceGetCount(int *n) { *n = 2; return 0; }
API cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  switch (attr) {
    case 1: *v = 1024; break;    /* max threads per block */
    case 8: *v = 49152; break;   /* max shared memory per block */
    case 10: *v = 32; break;     /* warp size */
    case 16: *v = 132; break;    /* multiprocessors */
    case 75: *v = 9; break;      /* compute capability major */
    case 76: *v = 0; break;      /* minor */
    case 81: *v = 233472; break; /* max shared memory per multiprocessor */
    case 82: *v = 65536; break;  /* max registers per multiprocessor */
    case 97: *v = 232448; break; /* max shared memory per block, opt-in */
    default: *v = 1;
  }
  return 0;
}
API cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(uintptr_t)(1 + dev); return dev < 0 || dev > 1; }
API cuCtxGetCurrent(void **c) { *c = (void *)(uintptr_t)(1 + stub.device); return 0; }
API cuCtxSetCurrent(void *c) {
  uintptr_t h = (uintptr_t)c;
  if (h == 1 || h == 2) stub.device = (int)h - 1;
  return 0;
}
API cuCtxGetDevice(int *d) { *d = stub.device; return 0; }
API cuCtxGetLimit(size_t *v, int limit) { (void)limit; *v = 1024; return 0; }
API cuCtxSetLimit(int limit, size_t v) { (void)limit; (void)v; return 0; }
API cuFuncGetAttribute(int *v, int attr, void *f) {
  (void)f;
  *v = attr == 0 ? 1024 : attr == 4 ? 32 : 0; /* max threads per block; registers */
  return 0;
}
API cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
API cuFuncSetCacheConfig(void *f, int c) { (void)f; (void)c; return 0; }
API cuModuleLoadData(void **m, const void *image) { *m = (void *)image; return image ? 0 : 1; }
/* torch's static launcher loads the cubin by path: a distinct handle per load (never freed: a
 * process loads few). */
API cuModuleLoad(void **m, const char *fname) {
  static char handles[4096];
  static size_t next;
  if (!fname || next + 32 > sizeof handles) return 1;
  *m = &handles[next];
  next += 32;
  return 0;
}
API cuModuleGetFunction(void **f, void *m, const char *name) { (void)name; *f = (char *)m + 16; return 0; }
API cuModuleUnload(void *m) { (void)m; return 0; }
API cuOccupancyMaxActiveClusters(int *n, void *f, const void *config) { (void)f; (void)config; *n = 1; return 0; }
API cuStreamIsCapturing(void *s, int *status) { (void)s; *status = 0; return 0; }
/* Every pointer is a device pointer here: CU_POINTER_ATTRIBUTE_DEVICE_POINTER gives it back. */
API cuPointerGetAttribute(void *data, int attr, uint64_t ptr) { (void)attr; memcpy(data, &ptr, 8); return 0; }
API cuPointerGetAttributes(unsigned n, int *attrs, void **data, uint64_t ptr) {
  (void)attrs;
  for (unsigned i = 0; i < n; i++) memcpy(data[i], &ptr, 8);
  return 0;
}
static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

API cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *address, const uint64_t *dims,
                           const uint64_t *strides, const unsigned *box, const unsigned *estrides, int interleave,
                           int swizzle, int l2, int fill) {
  static const unsigned char esize[16] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4, 1, 1, 1};
  stub.tmap_calls++;
  if (stub.tmap_fail) return stub.tmap_fail;
  uint64_t base = (uint64_t)(uintptr_t)address;
  if (!map || ((uintptr_t)map & 63) || type < 0 || type > 15 || rank < 1 || rank > 5 || (base & 15) ||
      interleave < 0 || interleave > 2 || swizzle < 0 || swizzle > 6 || l2 < 0 || l2 > 3 || fill < 0 || fill > 1)
    return 1;
  uint64_t h = mix(mix(mix(0, (unsigned)type), rank), base);
  for (unsigned i = 0; i < rank; i++) {
    if (dims[i] == 0 || dims[i] > (1ull << 32) || box[i] == 0 || box[i] > 256 || estrides[i] == 0 || estrides[i] > 8)
      return 1;
    if (i + 1 < rank && ((strides[i] & 15) || strides[i] >= (1ull << 40))) return 1;
    h = mix(mix(mix(h, dims[i]), box[i]), estrides[i]);
    if (i + 1 < rank) h = mix(h, strides[i]);
  }
  if (interleave == 0 && (box[0] * esize[type]) % 16) return 1;
  h = mix(mix(mix(mix(h, (unsigned)interleave), (unsigned)swizzle), (unsigned)l2), (unsigned)fill);
  uint64_t q[16];
  for (int i = 0; i < 16; i++) q[i] = h = mix(h, (uint64_t)i);
  q[1] |= 1ull << 21;
  memcpy(map, q, sizeof q);
  return 0;
}
API cuTensorMapEncodeIm2col(void *map, ...) { (void)map; return 0; }
API cuMemAlloc(uint64_t *p, size_t n) { (void)n; *p = 0x10000; return 0; }
API cuMemFree(uint64_t p) { (void)p; return 0; }

/* 8 bytes from p, or zeros where they cannot be read: the kernel writes them through a pipe, which
 * fails with EFAULT instead of faulting. */
static void copy_param(unsigned char dst[8], const void *p) {
  static int fds[2] = {-1, -1};
  memset(dst, 0, 8);
  if (fds[0] < 0 && pipe(fds) != 0) return;
  ssize_t n = write(fds[1], p, 8);
  if (n == 8 && read(fds[0], dst, 8) != 8) memset(dst, 0, 8);
  else if (n > 0 && n != 8) {
    unsigned char drain[8];
    if (read(fds[0], drain, (size_t)n) < 0) errno = 0;
  }
}

static void log_launch(void *f, const unsigned g[3], void **params, void **extra) {
  if (!stub.log_on || stub.nlog >= 256) return;
  __typeof__(&stub.log[0]) e = &stub.log[stub.nlog++];
  memset(e, 0, sizeof *e);
  e->function = (uint64_t)(uintptr_t)f;
  e->grid[0] = g[0], e->grid[1] = g[1], e->grid[2] = g[2];
  e->used_params = params != NULL;
  if (extra && extra[0] == (void *)1 && extra[2] == (void *)2) {
    size_t n = *(size_t *)extra[3];
    memcpy(e->bytes, extra[1], n < sizeof e->bytes ? n : sizeof e->bytes);
  }
  for (int i = 0; params && i < stub.nparams && i < 8; i++) copy_param(e->bytes + 8 * i, params[i]);
}

static void record(void *f, const unsigned g[3], const unsigned b[3], unsigned shared, void *stream, void **params,
                   void **extra) {
  log_launch(f, g, params, extra);
  stub.grid[0] = g[0], stub.grid[1] = g[1], stub.grid[2] = g[2];
  stub.block[0] = b[0], stub.block[1] = b[1], stub.block[2] = b[2];
  stub.shared = shared;
  stub.stream = (uint64_t)(uintptr_t)stream;
  stub.function = (uint64_t)(uintptr_t)f;
  stub.buffer_size = 0;
  stub.used_params = params != NULL;
  /* {BUFFER_POINTER (1), ptr, BUFFER_SIZE (2), &size, END (0)} */
  if (extra && extra[0] == (void *)1 && extra[2] == (void *)2) {
    stub.buffer_size = *(size_t *)extra[3];
    memcpy(stub.buffer, extra[1], stub.buffer_size < sizeof stub.buffer ? stub.buffer_size : sizeof stub.buffer);
  }
  for (int i = 0; params && i < stub.nparams && i < 256; i++) copy_param(stub.params[i], params[i]);
  /* From a packed buffer, each parameter where the kernel's parameter space has it: at its
   * alignment (its size up to 8; a 128-byte tensor map at 64), as the driver reads the buffer. */
  size_t at = 0, off = 0;
  for (int i = 0; i < 64 && stub.param_sizes[i] && at + stub.param_sizes[i] <= sizeof stub.param_blob; i++) {
    size_t n = stub.param_sizes[i], align = n >= 128 ? 64 : n > 8 ? 8 : n;
    off = (off + align - 1) & ~(align - 1);
    if (params) memcpy(stub.param_blob + at, params[i], n);
    else if (off + n <= stub.buffer_size) memcpy(stub.param_blob + at, stub.buffer + off, n);
    else memset(stub.param_blob + at, 0xEE, n); /* past the buffer: never equal to a real launch */
    off += n;
    at += n;
  }
}

/* Launches are counted per thread, each thread's counter on a cache line of its own: two threads
 * launching at once would otherwise bounce one line (stub.calls, beside what every call reads) between
 * cores, and the stand-in, not the launch path, would set how two threads scale. stub_calls() adds
 * them up (with stub.calls, where threads past the slots count). */
#define STUB_SLOTS 256
static struct {
  _Alignas(64) uint64_t n;
} slot_calls[STUB_SLOTS];
static unsigned nslots;
static _Thread_local int my_slot = -1;

static void count_launch(void) {
  if (my_slot < 0) {
    unsigned s = __atomic_fetch_add(&nslots, 1, __ATOMIC_RELAXED);
    my_slot = s < STUB_SLOTS ? (int)s : STUB_SLOTS;
  }
  if (my_slot < STUB_SLOTS) __atomic_fetch_add(&slot_calls[my_slot].n, 1, __ATOMIC_RELAXED);
  else __atomic_fetch_add(&stub.calls, 1, __ATOMIC_RELAXED); /* launchers may run without the GIL */
}

__attribute__((visibility("default"))) uint64_t stub_calls(void) {
  uint64_t n = __atomic_load_n(&stub.calls, __ATOMIC_RELAXED);
  for (unsigned i = 0; i < STUB_SLOTS; i++) n += __atomic_load_n(&slot_calls[i].n, __ATOMIC_RELAXED);
  return n;
}

API cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  count_launch();
  if (stub.record) {
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    record(f, g, b, shared, stream, params, extra);
    stub.nattrs = 0;
  }
  return 0;
}

typedef struct {
  unsigned gx, gy, gz, bx, by, bz, shared;
  void *stream;
  struct {
    int id;
    char pad[4];
    union {
      char pad[64];
      unsigned u[3];
    } value;
  } *attrs;
  unsigned nattrs;
} stub_config;

API cuLaunchKernelEx(const stub_config *c, void *f, void **params, void **extra) {
  count_launch();
  if (stub.record) {
    unsigned g[3] = {c->gx, c->gy, c->gz}, b[3] = {c->bx, c->by, c->bz};
    record(f, g, b, c->shared, c->stream, params, extra);
    stub.nattrs = (int)c->nattrs;
    for (unsigned i = 0; i < c->nattrs && i < 8; i++) {
      stub.attr_ids[i] = c->attrs[i].id;
      memcpy(stub.attr_vals[i], c->attrs[i].value.u, sizeof stub.attr_vals[i]);
    }
  }
  return 0;
}
