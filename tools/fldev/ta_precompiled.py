"""The C++ text around Triton-Ascend's generated launcher when fldev.ta_reference compiles it on a
machine without Ascend: a stand-in for precompiled.h, and the recorder's accessors appended after
the generated source."""

# What Triton-Ascend's precompiled.h brings in (runtime/rt.h, ATen, acl, torch_npu's workspace
# allocator and OpCommand, msprof), reduced to the declarations the generated launcher uses. The
# runtime calls are defined here: rtKernelLaunch records the launch; rtGetC2cCtrlAddr returns the
# address the test set. -fvisibility=hidden and -Bsymbolic keep them from binding to any other
# library in the process (fastlaunch's recording stand-in exports functions of the same names).
PRECOMPILED_H = r"""
#ifndef FLDEV_TA_PRECOMPILED_H
#define FLDEV_TA_PRECOMPILED_H
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>
#include <functional>
#include <algorithm>
#include <Python.h>

/* ---- runtime/runtime/rt.h ---- */
typedef int rtError_t;
typedef void *rtStream_t;
typedef void rtSmDesc_t;
#define RT_ERROR_NONE 0
#define RT_MEMCPY_HOST_TO_DEVICE 1
typedef struct { void *args; void *hostInputInfoPtr; uint32_t argsSize; } rtArgsEx_t;
typedef struct { uint32_t localMemorySize; } rtTaskCfgInfo_t;

static unsigned char fldev_args[1 << 16];
static uint64_t fldev_size, fldev_stream, fldev_func, fldev_launches, fldev_ffts_addr, fldev_syncs;
static uint32_t fldev_blocks;

static rtError_t fldev_record(const void *func, uint32_t blockDim, const void *args, uint32_t argsSize,
                              rtStream_t stream) {
  if (argsSize > sizeof fldev_args) return 1;
  memcpy(fldev_args, args, argsSize);
  fldev_size = argsSize;
  fldev_blocks = blockDim;
  fldev_stream = (uint64_t)(uintptr_t)stream;
  fldev_func = (uint64_t)(uintptr_t)func;
  fldev_launches++;
  return RT_ERROR_NONE;
}
rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                         rtSmDesc_t *smDesc, rtStream_t stm) {
  (void)smDesc;
  return fldev_record(stubFunc, blockDim, args, argsSize, stm);
}
rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                   rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags,
                                   const rtTaskCfgInfo_t *cfgInfo) {
  (void)smDesc; (void)flags; (void)cfgInfo;
  return fldev_record(stubFunc, blockDim, argsInfo->args, argsInfo->argsSize, stm);
}
rtError_t rtGetC2cCtrlAddr(uint64_t *addr, uint32_t *len) {
  *addr = fldev_ffts_addr;
  *len = 8;
  return RT_ERROR_NONE;
}
rtError_t rtStreamSynchronize(rtStream_t stm) { (void)stm; fldev_syncs++; return RT_ERROR_NONE; }
rtError_t rtMemcpy(void *dst, uint64_t destMax, const void *src, uint64_t cnt, int kind) {
  (void)dst; (void)destMax; (void)src; (void)cnt; (void)kind;
  return RT_ERROR_NONE;
}

/* ---- ATen / torch_npu ---- */
namespace at {
enum DeviceType { kPrivateUse1 };
enum ScalarType { kByte };
struct Storage { void *p; const void *data() const { return p; } };
struct Tensor { Storage s; Storage storage() const { return s; } };
struct TensorOptions {
  TensorOptions device(DeviceType) const { return *this; }
  TensorOptions dtype(ScalarType) const { return *this; }
};
inline Tensor empty(uint64_t, TensorOptions) { return Tensor{{nullptr}}; }
}  // namespace at
namespace at_npu { namespace native {
inline at::Tensor allocate_workspace(uint64_t, rtStream_t) { return at::Tensor{{nullptr}}; }
struct OpCommand {  /* runs the custom handler at once, as the task queue eventually does */
  std::string name_;
  std::function<rtError_t()> fn_;
  OpCommand &Name(const char *n) { name_ = n; return *this; }
  OpCommand &SetCustomHandler(std::function<rtError_t()> f) { fn_ = f; return *this; }
  void Run() { if (fn_) fn_(); }
};
}}  // namespace at_npu::native

/* ---- msprof (only reached when profiling is on, which it never is here) ---- */
#define MSPROF_REPORT_NODE_LEVEL 10000
#define MSPROF_REPORT_NODE_BASIC_INFO_TYPE 0
#define MSPROF_REPORT_NODE_TENSOR_INFO_TYPE 1
#define MSPROF_REPORT_NODE_CONTEXT_ID_INFO_TYPE 4
#define MSPROF_REPORT_NODE_LAUNCH_TYPE 5
#define MSPROF_ADDTIONAL_INFO_DATA_LENGTH 232
#define MSPROF_GE_TENSOR_DATA_NUM 5
#define MSPROF_GE_TENSOR_DATA_SHAPE_LEN 8
#define MSPROF_GE_TENSOR_TYPE_INPUT 0
#define MSPROF_GE_TENSOR_TYPE_OUTPUT 1
enum { MSPROF_GE_TASK_TYPE_AI_CORE = 0, MSPROF_GE_TASK_TYPE_AI_CPU, MSPROF_GE_TASK_TYPE_AIV,
       MSPROF_GE_TASK_TYPE_MIX_AIC = 4, MSPROF_GE_TASK_TYPE_MIX_AIV };
struct MsprofApi { uint16_t magicNumber; uint16_t level; uint32_t type; uint32_t threadId;
                   uint32_t reserve; uint64_t beginTime; uint64_t endTime; uint64_t itemId; };
struct MsprofCommandHandle { uint64_t profSwitch; uint64_t profSwitchHi; uint32_t devNums;
                             uint32_t devIdList[64]; uint32_t modelId; uint32_t type; };
struct MsprofNodeBasicInfo { uint64_t opName; uint32_t taskType; uint64_t opType; uint32_t blockDim; };
struct MsprofCompactInfo { uint16_t magicNumber; uint16_t level; uint32_t type; uint32_t threadId;
                           uint32_t dataLen; uint64_t timeStamp;
                           union { uint8_t info[40]; MsprofNodeBasicInfo nodeBasicInfo; } data; };
struct MsprofAdditionalInfo { uint16_t magicNumber; uint16_t level; uint32_t type; uint32_t threadId;
                              uint32_t dataLen; uint64_t timeStamp; uint8_t data[MSPROF_ADDTIONAL_INFO_DATA_LENGTH]; };
struct MsprofContextIdInfo { uint64_t opName; uint32_t ctxIdNum; uint32_t ctxIds[55]; };
struct MsprofTensorData { uint32_t tensorType; uint32_t format; uint32_t dataType;
                          uint32_t shape[MSPROF_GE_TENSOR_DATA_SHAPE_LEN]; };
struct MsprofTensorInfo { uint64_t opName; uint32_t tensorNum; MsprofTensorData tensorData[MSPROF_GE_TENSOR_DATA_NUM]; };
extern "C" {
int MsprofReportApi(unsigned int agingFlag, const MsprofApi *api) { (void)agingFlag; (void)api; return 0; }
unsigned long int MsprofSysCycleTime() { return 0; }
int MsprofRegisterCallback(unsigned int moduleId, int (*handle)(unsigned int, void *, unsigned int)) {
  (void)moduleId; (void)handle; return 0;
}
int MsprofReportCompactInfo(uint32_t agingFlag, const void *data, uint32_t length) {
  (void)agingFlag; (void)data; (void)length; return 0;
}
int MsprofReportAdditionalInfo(uint32_t agingFlag, const void *data, uint32_t length) {
  (void)agingFlag; (void)data; (void)length; return 0;
}
uint64_t MsprofGetHashId(const char *name, size_t len) { (void)name; (void)len; return 0; }
}
#endif
"""

# Appended after the generated source: the recorder's accessors and the struct's layout (the
# generated declaration, verbatim, as a typedef, for offsetof/sizeof).
TRAILER = r"""
#include <stddef.h>
#define FLDEV_API extern "C" __attribute__((visibility("default")))
FLDEV_API void fldev_set_ffts_addr(uint64_t a) { fldev_ffts_addr = a; }
FLDEV_API uint64_t fldev_launches_count(void) { return fldev_launches; }
FLDEV_API uint64_t fldev_take(unsigned char *out, uint64_t cap, uint64_t meta[4]) {
  uint64_t n = fldev_size < cap ? fldev_size : cap;
  memcpy(out, fldev_args, n);
  meta[0] = fldev_size; meta[1] = fldev_blocks; meta[2] = fldev_stream; meta[3] = fldev_func;
  return fldev_size;
}
typedef @DECL@ fldev_args_t;
FLDEV_API int fldev_layout(uint64_t *out, int cap) {
  int i = 0;
  if (cap < 1) return -1;
  out[i++] = sizeof(fldev_args_t);
@MEMBERS@
  return i;
}
"""
