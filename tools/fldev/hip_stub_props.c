/* hip_stub_props.c: hipGetDeviceProperties for the stand-in libamdhip64, in a unit of its own because
 * it needs HIP's own hipDeviceProp_t (hip_runtime_api.h, which Triton's wheel ships): Triton's AMD
 * driver reads the device's properties through it. Built into the stand-in by fldev/hip_stub.py when
 * the header is there; the C tests' build of the stand-in has no such unit. An MI300X's values. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <string.h>

#include "hip_stub.h"

extern hip_stub_state stub;

__attribute__((visibility("default"))) int hip_stub_get_device_properties(void *out, int device) {
  hipDeviceProp_t *p = out;
  if (!p || device != 0) return hipErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  strcpy(p->name, "AMD Instinct MI300X (fastlaunch stand-in)");
  strcpy(p->gcnArchName, "gfx942:sramecc+:xnack-");
  p->sharedMemPerBlock = (size_t)stub.max_shared;
  p->regsPerBlock = 512 * 1024 / 4 * 4;
  p->multiProcessorCount = 304;
  p->clockRate = 2100000;
  p->memoryClockRate = 1300000;
  p->memoryBusWidth = 8192;
  p->warpSize = stub.warp_size;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsPerBlock = 1024;
  p->cooperativeLaunch = 1;
  p->totalGlobalMem = (size_t)192 << 30;
  return hipSuccess;
}
