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
  /* The fake knows the test's signature: 5 arguments and 2 hidden pointers, 8 bytes read each. */
  for (int i = 0; i < 7; i++) memcpy(s->param_copies[i], params[i], 8);
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
