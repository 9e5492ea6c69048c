/* cuda_api.h: the few CUDA driver API types and constants the cuda backend uses, declared here so
 * that the library builds without the CUDA toolkit. tests/c/test_cuda_abi.c checks them against
 * cuda.h wherever the toolkit is installed. */
#ifndef FL_CUDA_API_H
#define FL_CUDA_API_H

#include <stdint.h>

typedef int fl_CUresult;
typedef int fl_CUdevice;
typedef struct fl_CUctx_st *fl_CUcontext;
typedef struct fl_CUmod_st *fl_CUmodule;
typedef struct fl_CUfunc_st *fl_CUfunction;
typedef struct fl_CUstream_st *fl_CUstream;
typedef unsigned long long fl_CUdeviceptr;

typedef union fl_CUlaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } clusterDim;
  int clusterSchedulingPolicyPreference;
  int cooperative;
  int programmaticStreamSerializationAllowed;
} fl_CUlaunchAttributeValue;

typedef struct fl_CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  fl_CUlaunchAttributeValue value;
} fl_CUlaunchAttribute;

typedef struct fl_CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  fl_CUstream hStream;
  fl_CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} fl_CUlaunchConfig;

enum {
  FL_CUDA_SUCCESS = 0,
  FL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
  FL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
  FL_CU_CLUSTER_SCHEDULING_POLICY_SPREAD = 1,
  FL_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  FL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  FL_CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
  FL_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  FL_CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  FL_CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
  FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1,
  FL_CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 = 11,
};

/* cuTensorMapEncodeTiled (CUDA 12+). */
typedef fl_CUresult (*fl_cuTensorMapEncodeTiled_fn)(void *map, int type, unsigned rank, void *address,
                                                     const unsigned long long *dims,
                                                     const unsigned long long *strides, const unsigned *box,
                                                     const unsigned *element_strides, int interleave, int swizzle,
                                                     int l2_promotion, int oob_fill);

#define FL_CU_LAUNCH_PARAM_END ((void *)0x00)
#define FL_CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define FL_CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

#endif
