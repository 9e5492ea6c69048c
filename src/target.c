/* target.c: a plan's target: its ABI and that ABI's options, set by name and checked. */
#include "fl_internal.h"

#include <string.h>

/* One option of an ABI: where it lives in fl_target and the largest value it takes. Layout
 * options come first in each ABI; the table is the one place their names are spelled. */
typedef struct option {
  fl_abi abi;
  const char *name;
  size_t offset;
  enum { OPT_BOOL, OPT_U32, OPT_U64 } type;
  uint64_t max;
} option;

#define CUDA_OPT(field, type, max) {FL_ABI_CUDA, #field, offsetof(fl_target, cuda.field), type, max}
#define NPU_OPT(field, type, max) {FL_ABI_NPU, #field, offsetof(fl_target, npu.field), type, max}
#define HIP_OPT(field, type, max) {FL_ABI_HIP, #field, offsetof(fl_target, hip.field), type, max}

static const option options[] = {
    CUDA_OPT(hidden_ptrs, OPT_U32, FL_CUDA_MAX_HIDDEN_PTRS),
    CUDA_OPT(num_warps, OPT_U32, 32),
    CUDA_OPT(num_ctas, OPT_U32, 16),
    CUDA_OPT(shared_mem, OPT_U32, UINT32_MAX),
    CUDA_OPT(cooperative, OPT_BOOL, 1),
    CUDA_OPT(pdl, OPT_BOOL, 1),
    NPU_OPT(ffts, OPT_BOOL, 1),
    NPU_OPT(simt_only, OPT_BOOL, 1),
    NPU_OPT(dtdata, OPT_BOOL, 1),
    NPU_OPT(scratch, OPT_U32, FL_NPU_MAX_SCRATCH),
    NPU_OPT(ffts_addr, OPT_U64, UINT64_MAX),
    NPU_OPT(simt, OPT_BOOL, 1),
    NPU_OPT(dyn_ubuf, OPT_U32, UINT32_MAX),
    NPU_OPT(clamp_blocks, OPT_U32, UINT32_MAX),
    NPU_OPT(rt_stub, OPT_BOOL, 1),
    HIP_OPT(hidden_ptrs, OPT_U32, FL_HIP_MAX_HIDDEN_PTRS),
    HIP_OPT(num_warps, OPT_U32, 32),
    HIP_OPT(warp_size, OPT_U32, 64),
    HIP_OPT(num_ctas, OPT_U32, 16),
    HIP_OPT(shared_mem, OPT_U32, UINT32_MAX),
    HIP_OPT(cooperative, OPT_BOOL, 1),
};
#define NOPTIONS (sizeof options / sizeof options[0])

static uint64_t get(const fl_target *t, const option *o) {
  const unsigned char *at = (const unsigned char *)t + o->offset;
  bool b;
  uint32_t u32;
  uint64_t u64;
  switch (o->type) {
    case OPT_BOOL:
      memcpy(&b, at, sizeof b);
      return b;
    case OPT_U32:
      memcpy(&u32, at, sizeof u32);
      return u32;
    default:
      memcpy(&u64, at, sizeof u64);
      return u64;
  }
}

static void set(fl_target *t, const option *o, uint64_t v) {
  unsigned char *at = (unsigned char *)t + o->offset;
  bool b = v != 0;
  uint32_t u32 = (uint32_t)v;
  switch (o->type) {
    case OPT_BOOL:
      memcpy(at, &b, sizeof b);
      break;
    case OPT_U32:
      memcpy(at, &u32, sizeof u32);
      break;
    default:
      memcpy(at, &v, sizeof v);
  }
}

fl_status fl_target_set(fl_target *target, const char *name, int64_t value, fl_error *err) {
  if (!target || !name) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "target_null");
  if ((unsigned)target->abi >= FL_ABI_COUNT)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_unknown:%d", (int)target->abi);
  for (size_t i = 0; i < NOPTIONS; i++) {
    const option *o = &options[i];
    if (o->abi != target->abi || strcmp(o->name, name) != 0) continue;
    /* An address is the one option that may use all 64 bits; it arrives as a signed value. */
    uint64_t v = (uint64_t)value;
    if ((o->type != OPT_U64 && value < 0) || v > o->max)
      return fl__fail(err, FL_BAD_DESCRIPTOR, true, "option_out_of_range:%s:%lld", o->name, (long long)value);
    set(target, o, v);
    fl__ok(err);
    return FL_OK;
  }
  return fl__fail(err, FL_BAD_DESCRIPTOR, true, "option_unknown:%s:%.60s", fl_abi_name(target->abi), name);
}

const char *fl_target_option_name(fl_abi abi, size_t i) {
  for (size_t k = 0; k < NOPTIONS; k++)
    if (options[k].abi == abi && i-- == 0) return options[k].name;
  return NULL;
}

fl_status fl__target_check(const fl_target *t, fl_error *err) {
  if ((unsigned)t->abi >= FL_ABI_COUNT) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_unknown:%d", (int)t->abi);
  /* Options of another ABI must be left at zero: a descriptor meant for another ABI is
   * refused instead of silently producing a different buffer or launch. */
  for (size_t i = 0; i < NOPTIONS; i++) {
    const option *o = &options[i];
    uint64_t v = get(t, o);
    if (o->abi != t->abi && v != 0)
      return fl__fail(err, FL_BAD_DESCRIPTOR, true, "option_not_for_abi:%s:%s", o->name, fl_abi_name(t->abi));
    if (v > o->max) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "option_out_of_range:%s:%llu", o->name,
                                    (unsigned long long)v);
  }
  /* Triton-Ascend reserves the global and profile scratch slots only for pure-SIMT kernels. */
  if (t->abi == FL_ABI_NPU && t->npu.scratch > 0 && !t->npu.simt_only)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "npu_scratch_requires_simt_only");
  /* An AMD wavefront is 64 lanes (gfx9) or 32 (gfx10 and later). */
  if (t->abi == FL_ABI_HIP && t->hip.warp_size != 0 && t->hip.warp_size != 32 && t->hip.warp_size != 64)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "option_out_of_range:warp_size:%u", t->hip.warp_size);
  return FL_OK;
}
