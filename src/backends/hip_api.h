/* hip_api.h: the few HIP runtime API types and constants the hip backend uses, declared here so
 * that the library builds without ROCm. tests/python/test_hip.py checks them against the
 * hip_runtime_api.h that Triton's wheel ships (triton/backends/amd/include). */
#ifndef FL_HIP_API_H
#define FL_HIP_API_H

typedef int fl_hipError_t;
typedef struct fl_hipModule_st *fl_hipModule_t;
typedef struct fl_hipFunction_st *fl_hipFunction_t;
typedef struct fl_hipStream_st *fl_hipStream_t;

enum {
  FL_HIP_SUCCESS = 0,
  FL_HIP_ERROR_INVALID_VALUE = 1,
  FL_HIP_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 74,
  FL_HIP_DEVICE_ATTRIBUTE_WARP_SIZE = 87,
};

#define FL_HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define FL_HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define FL_HIP_LAUNCH_PARAM_END ((void *)0x03)

/* HIP's version number: major x 10,000,000 + minor x 100,000 + patch (hipDriverGetVersion). */
#define FL_HIP_VERSION_MAJOR(v) ((v) / 10000000)
#define FL_HIP_MIN_MAJOR 6 /* what Triton's AMD driver requires */

#endif
