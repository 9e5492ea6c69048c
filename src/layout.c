/* layout.c: where each argument and hidden slot sits in the packed buffer of each ABI flavour. */
#include "fl_internal.h"

/* Slot sizes for host and cuda: the natural C size of each kind. i1 takes one byte because
 * Triton's CUDA launcher passes booleans as int8; fp16 and bf16 travel as their 16 bits. */
static const unsigned char natural_size[FL_KIND_COUNT] = {
    [FL_KIND_PTR] = 8,  [FL_KIND_I1] = 1,   [FL_KIND_I8] = 1,   [FL_KIND_I16] = 2,
    [FL_KIND_I32] = 4,  [FL_KIND_I64] = 8,  [FL_KIND_U8] = 1,   [FL_KIND_U16] = 2,
    [FL_KIND_U32] = 4,  [FL_KIND_U64] = 8,  [FL_KIND_FP16] = 2, [FL_KIND_BF16] = 2,
    [FL_KIND_FP32] = 4, [FL_KIND_FP64] = 8,
};

/* Slot sizes for npu follow Triton-Ascend's ty_to_cpp: i1 becomes int32_t and every float narrower
 * than 64 bits becomes a C float, so fp16 and bf16 occupy four bytes there. */
static const unsigned char npu_size[FL_KIND_COUNT] = {
    [FL_KIND_PTR] = 8,  [FL_KIND_I1] = 4,   [FL_KIND_I8] = 1,   [FL_KIND_I16] = 2,
    [FL_KIND_I32] = 4,  [FL_KIND_I64] = 8,  [FL_KIND_U8] = 1,   [FL_KIND_U16] = 2,
    [FL_KIND_U32] = 4,  [FL_KIND_U64] = 8,  [FL_KIND_FP16] = 4, [FL_KIND_BF16] = 4,
    [FL_KIND_FP32] = 4, [FL_KIND_FP64] = 8,
};

/* The Ascend launcher aligns pointers and types whose name ends in "64" to 8 and everything else to
 * 4, whatever its size (an i8 takes one byte at a 4-aligned offset). */
static size_t npu_align(fl_kind kind) {
  return (kind == FL_KIND_PTR || kind == FL_KIND_I64 || kind == FL_KIND_U64 || kind == FL_KIND_FP64)
             ? 8
             : 4;
}

static bool kind_valid(int kind) { return kind >= 0 && kind < FL_KIND_COUNT; }

size_t fl__kind_size(int abi, fl_kind kind) {
  int k = (int)kind;
  if (!kind_valid(k)) return 0;
  switch (abi) {
  case FL_ABI_HOST:
  case FL_ABI_CUDA:
    return natural_size[k];
  case FL_ABI_NPU:
    return npu_size[k];
  default:
    return 0;
  }
}

size_t fl__kind_align(int abi, fl_kind kind) {
  int k = (int)kind;
  if (!kind_valid(k)) return 0;
  switch (abi) {
  case FL_ABI_HOST:
  case FL_ABI_CUDA:
    /* Every natural slot is a power of two no larger than 8, so its size is its alignment. */
    return natural_size[k];
  case FL_ABI_NPU:
    return npu_align(kind);
  default:
    return 0;
  }
}

/* Alignments are powers of two; offsets stay below a few tens of kilobytes (FL__MAX_ARGS slots of
 * at most 8 bytes plus a handful of hidden slots), so this cannot overflow. */
static size_t align_up(size_t offset, size_t align) { return (offset + align - 1) & ~(align - 1); }

/* A running layout: the next free offset and the largest alignment seen so far. */
typedef struct cursor {
  size_t offset;
  size_t align;
} cursor;

static size_t place(cursor *c, size_t size, size_t align) {
  size_t at = align_up(c->offset, align);
  c->offset = at + size;
  if (align > c->align) c->align = align;
  return at;
}

/* Each flavour accepts only its own options, so that a descriptor meant for another flavour is
 * refused instead of silently producing a different buffer. Returns the name of the first option
 * set that the flavour does not use, or NULL. */
static const char *foreign_option(const fl_abi_options *o) {
  if (o->abi != FL_ABI_CUDA && o->cuda_hidden_ptrs != 0) return "cuda_hidden_ptrs";
  if (o->abi != FL_ABI_NPU) {
    if (o->npu_ffts) return "npu_ffts";
    if (o->npu_simt_only) return "npu_simt_only";
    if (o->npu_dtdata) return "npu_dtdata";
    if (o->npu_scratch != 0) return "npu_scratch";
  }
  return NULL;
}

fl_status fl_layout_compute(const fl_abi_options *abi, const fl_kind *kinds, size_t nkinds,
                            fl_layout *layout, size_t *offsets, fl_error *err) {
  if (!layout) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "layout_null");
  if (!abi) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_null");
  if (abi->abi < 0 || abi->abi >= FL_ABI_COUNT)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_unknown:%d", abi->abi);
  if (nkinds > FL__MAX_ARGS) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "too_many_args:%zu", nkinds);
  if (!kinds && nkinds > 0) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "kinds_null");
  const char *foreign = foreign_option(abi);
  if (foreign)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_option_not_for_flavour:%s:%s", foreign,
                    fl_abi_name(abi->abi));
  if (abi->abi == FL_ABI_CUDA && abi->cuda_hidden_ptrs > FL_CUDA_MAX_HIDDEN_PTRS)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "cuda_hidden_ptrs_out_of_range:%u",
                    (unsigned)abi->cuda_hidden_ptrs);
  if (abi->abi == FL_ABI_NPU) {
    if (abi->npu_scratch > FL_NPU_MAX_SCRATCH)
      return fl__fail(err, FL_BAD_DESCRIPTOR, true, "npu_scratch_out_of_range:%u",
                      (unsigned)abi->npu_scratch);
    /* Triton-Ascend reserves the global and profile scratch slots only for pure-SIMT kernels. */
    if (abi->npu_scratch > 0 && !abi->npu_simt_only)
      return fl__fail(err, FL_BAD_DESCRIPTOR, true, "npu_scratch_requires_simt_only");
  }
  /* Kinds are checked before anything is written, so a refused call leaves the outputs alone. */
  for (size_t i = 0; i < nkinds; i++) {
    int k = (int)kinds[i];
    if (!kind_valid(k)) return fl__fail(err, FL_BAD_KIND, true, "kind_unknown:%zu:%d", i, k);
  }

  fl_layout out = {.grid = {-1, -1, -1}, .ffts = -1, .hidden_first = -1, .hidden_count = 0};
  /* An empty host or cuda buffer has size 0 and alignment 1, what GNU C gives an empty struct. The
   * npu buffer always holds the grid, so its alignment comes out at least 4. */
  cursor c = {0, 1};
  const size_t ptr = sizeof(uint64_t);

  if (abi->abi == FL_ABI_NPU) {
    if (abi->npu_ffts) out.ffts = (int64_t)place(&c, ptr, 8);
    if (!abi->npu_simt_only) {
      place(&c, ptr, 8); /* syncBlockLock */
      place(&c, ptr, 8); /* workspace_addr */
    }
  }
  for (size_t i = 0; i < nkinds; i++) {
    size_t at = place(&c, fl__kind_size(abi->abi, kinds[i]), fl__kind_align(abi->abi, kinds[i]));
    if (offsets) offsets[i] = at;
  }
  if (abi->abi == FL_ABI_NPU) {
    for (int d = 0; d < 3; d++) out.grid[d] = (int64_t)place(&c, sizeof(int32_t), 4);
    /* Scratch slots and DTData follow the grid back to back, all pointer-aligned, so one first
     * offset and a count describe them. */
    uint32_t hidden = abi->npu_scratch + (abi->npu_dtdata ? 1u : 0u);
    for (uint32_t h = 0; h < hidden; h++) {
      size_t at = place(&c, ptr, 8);
      if (h == 0) out.hidden_first = (int64_t)at;
    }
    out.hidden_count = hidden;
  } else if (abi->abi == FL_ABI_CUDA) {
    for (uint32_t h = 0; h < abi->cuda_hidden_ptrs; h++) {
      size_t at = place(&c, ptr, 8);
      if (h == 0) out.hidden_first = (int64_t)at;
    }
    out.hidden_count = abi->cuda_hidden_ptrs;
  }
  /* Like a C struct, the buffer ends with tail padding up to its own alignment; the NPU launcher
   * passes sizeof(args), padding included, as argsSize. */
  out.size = align_up(c.offset, c.align);
  out.align = c.align;
  *layout = out;
  fl__ok(err);
  return FL_OK;
}
