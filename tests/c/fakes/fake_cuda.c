/* fake_cuda.c: a stand-in libcuda that records each call, so the cuda backend's launch logic is
 * tested on a machine without a GPU. It implements only what the backend resolves. */
#include <stdint.h>
#include <string.h>

#include "fake_cuda.h"

fake_launch fake_cuda_state;

int cuInit(unsigned f) { (void)f; return 0; }
int cuGetErrorName(int r, const char **s) { *s = r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_FAKE"; return 0; }
int cuCtxGetCurrent(void **c) {
  *c = fake_cuda_state.no_context ? (void *)0 : (void *)(uintptr_t)(0x1 + fake_cuda_state.context);
  return 0;
}
int cuCtxGetDevice(int *d) { *d = 0; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { (void)d; *v = a == 97 ? 232448 : 0; return 0; }
int cuFuncGetAttribute(int *v, int a, void *f) { (void)f; *v = a == 1 ? 1024 : 0; return 0; }
int cuFuncSetAttribute(void *f, int a, int v) {
  (void)f;
  fake_cuda_state.set_attr_calls++;
  fake_cuda_state.last_set_attr = a;
  fake_cuda_state.last_set_value = v;
  return 0;
}
int cuModuleLoadData(void **m, const void *image) { *m = (void *)image; return image ? 0 : 1; }
int cuModuleGetFunction(void **f, void *m, const char *name) { *f = m; return strcmp(name, "missing") ? 0 : 500; }
int cuModuleUnload(void *m) { (void)m; return 0; }

static void record_extra(void **extra) {
  fake_launch *s = &fake_cuda_state;
  s->extra = extra;
  s->buffer_size = 0;
  if (!extra) return;
  /* {BUFFER_POINTER, ptr, BUFFER_SIZE, &size, END} */
  if (extra[0] == (void *)1 && extra[2] == (void *)2 && extra[4] == (void *)0) {
    s->buffer_size = *(size_t *)extra[3];
    memcpy(s->buffer, extra[1], s->buffer_size < sizeof s->buffer ? s->buffer_size : sizeof s->buffer);
  }
}

static void record_params(void **params) {
  fake_launch *s = &fake_cuda_state;
  s->params = params;
  if (!params) return;
  /* The fake knows the test's signature: 5 arguments and 2 hidden pointers, 8 bytes read each;
   * with param_sizes set, as many parameters as are set, each its own size. */
  for (int i = 0; i < 7; i++) memcpy(s->param_copies[i], params[i], 8);
  for (int i = 0; i < 64 && s->param_sizes[i]; i++) memcpy(s->param_bytes[i], params[i], s->param_sizes[i]);
}

int cuDriverGetVersion(int *v) { *v = fake_cuda_state.driver_version; return 0; }

static unsigned long long mix(unsigned long long h, unsigned long long x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

int cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *address, const unsigned long long *dims,
                           const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                           int interleave, int swizzle, int l2, int fill) {
  fake_launch *s = &fake_cuda_state;
  s->tmap_calls++;
  if (s->tmap_fail) return s->tmap_fail;
  if ((uintptr_t)map & 63) return 1; /* the driver's: a map only at a 64-aligned address */
  s->tmap_type = type, s->tmap_rank = rank, s->tmap_address = (unsigned long long)(uintptr_t)address;
  s->tmap_interleave = interleave, s->tmap_swizzle = swizzle, s->tmap_l2 = l2, s->tmap_fill = fill;
  unsigned long long h = mix(mix(mix(0, (unsigned)type), rank), s->tmap_address);
  for (unsigned i = 0; i < rank && i < 5; i++) {
    s->tmap_dims[i] = dims[i], s->tmap_box[i] = box[i], s->tmap_estrides[i] = estrides[i];
    h = mix(mix(mix(h, dims[i]), box[i]), estrides[i]);
    if (i + 1 < rank) h = mix(h, s->tmap_strides[i] = strides[i]); /* the driver reads rank - 1 strides */
  }
  h = mix(mix(mix(mix(h, (unsigned)interleave), (unsigned)swizzle), (unsigned)l2), (unsigned)fill);
  for (int q = 0; q < 16; q++) s->tmap_map[q] = h = mix(h, (unsigned long long)q);
  s->tmap_map[1] |= 1ull << 21;
  memcpy(map, s->tmap_map, sizeof s->tmap_map);
  return 0;
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  fake_launch *s = &fake_cuda_state;
  if (s->fail_next) {
    int r = s->fail_next;
    s->fail_next = 0;
    return r;
  }
  s->calls++;
  s->function = f;
  s->grid[0] = gx, s->grid[1] = gy, s->grid[2] = gz;
  s->block[0] = bx, s->block[1] = by, s->block[2] = bz;
  s->shared = shared;
  s->stream = stream;
  s->nattrs = 0;
  record_extra(extra);
  record_params(params);
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
      int i;
    } value;
  } *attrs;
  unsigned nattrs;
} fake_config;

int cuLaunchKernelEx(const fake_config *c, void *f, void **params, void **extra) {
  fake_launch *s = &fake_cuda_state;
  int r = cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->shared, c->stream, params, extra);
  if (r) return r;
  s->ex_calls++;
  s->nattrs = (int)c->nattrs;
  for (unsigned i = 0; i < c->nattrs && i < 8; i++) {
    s->attr_ids[i] = c->attrs[i].id;
    memcpy(s->attr_vals[i], c->attrs[i].value.u, sizeof s->attr_vals[i]);
  }
  return 0;
}
