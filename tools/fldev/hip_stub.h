/* hip_stub.h: the state of the stand-in libamdhip64 (hip_stub.c), shared by the C tests
 * (tests/c/test_hip_abi.c) and read by the Python tools through ctypes (fldev/hip_stub.py keeps its
 * fields in the same order). */
#ifndef FL_HIP_STUB_H
#define FL_HIP_STUB_H

#include <stddef.h>
#include <stdint.h>

#define HIP_STUB_MAX_KERNELS 32
#define HIP_STUB_MAX_ARGS 128
#define HIP_STUB_KERNARG_MAX 4096

/* One kernel of a loaded hsaco, from its code object metadata (the NT_AMDGPU_METADATA note). */
typedef struct hip_stub_kernel {
  char name[128];
  uint32_t kernarg_size;
  uint32_t nargs;
  uint32_t offset[HIP_STUB_MAX_ARGS];
  uint32_t size[HIP_STUB_MAX_ARGS];
} hip_stub_kernel;

typedef struct hip_stub_state {
  uint64_t calls;          /* launches accepted */
  uint64_t get_device_calls;
  int record;              /* 1: record the last launch (its kernarg segment) */
  int version;             /* what hipDriverGetVersion answers (major x 10,000,000 + minor x 100,000) */
  int device;              /* what hipGetDevice answers */
  int warp_size;           /* hipDeviceAttributeWarpSize */
  int max_shared;          /* hipDeviceAttributeMaxSharedMemoryPerBlock */
  int fail_load;           /* nonzero: hipModuleLoadData(Ex) answers this error */
  int fail_launch;         /* nonzero: the next launch answers this error (and runs nothing) */
  int fail_get_device;     /* nonzero: hipGetDevice answers this error */
  uint64_t host_pointer;   /* hipPointerGetAttribute refuses this address (a host pointer) */
  uint64_t stream_handle;  /* what hip_stub_current_stream answers (torch's C shim's signature) */
  /* The last recorded launch. */
  uint64_t function, stream;
  unsigned grid[3], block[3], shared;
  int used_params;         /* 1: a parameter array; 0: a packed buffer (HIP_LAUNCH_PARAM_BUFFER_POINTER) */
  int known_function;      /* 1: the function came from hipModuleGetFunction (its metadata laid the segment out) */
  uint32_t kernarg_size;   /* the segment's size: the metadata's, or the buffer's */
  unsigned char kernarg[HIP_STUB_KERNARG_MAX];
} hip_stub_state;

#endif
