/* layout.c: where each argument and hidden slot sits in the packed buffer of each ABI. */
#include "fl_internal.h"

static bool kind_valid(int kind) { return kind >= 0 && kind < FL_KIND_COUNT; }

/* The slot sizes and alignments come from the kinds' table (kinds.c). */
/* A tensor map has a slot in the cuda ABI alone (a kernel parameter `.align 64 .b8 [128]`). */
static bool kind_in_abi(fl_abi abi, int kind) { return kind != FL_KIND_TMAP || abi == FL_ABI_CUDA; }

size_t fl__layout_kind_size(fl_abi abi, fl_kind kind) {
  int k = (int)kind;
  if (!kind_valid(k) || !kind_in_abi(abi, k)) return 0;
  switch (abi) {
  case FL_ABI_HOST:
  case FL_ABI_CUDA:
  case FL_ABI_HIP:
    return fl__kinds[k].size;
  case FL_ABI_NPU:
    return fl__kinds[k].npu_size;
  default:
    return 0;
  }
}

size_t fl__layout_kind_align(fl_abi abi, fl_kind kind) {
  int k = (int)kind;
  if (!kind_valid(k) || !kind_in_abi(abi, k)) return 0;
  switch (abi) {
  case FL_ABI_HOST:
  case FL_ABI_CUDA:
  case FL_ABI_HIP:
    /* Every natural slot is a power of two no larger than 8, so its size is its alignment; a
     * tensor map's 128 bytes sit at 64. */
    return k == FL_KIND_TMAP ? 64 : fl__kinds[k].size;
  case FL_ABI_NPU:
    return fl__kinds[k].npu_align;
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

fl_status fl_layout_compute(const fl_target *target, const fl_kind *kinds, size_t nkinds,
                            fl_layout *layout, size_t *offsets, fl_error *err) {
  if (!layout) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "layout_null");
  if (!target) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "target_null");
  fl_status st = fl__target_check(target, err);
  if (st != FL_OK) return st;
  if (nkinds > FL__MAX_ARGS) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "too_many_args:%zu", nkinds);
  if (!kinds && nkinds > 0) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "kinds_null");
  const fl_abi abi = target->abi;
  const fl_npu_options *npu = &target->npu;
  /* Kinds are checked before anything is written, so a refused call leaves the outputs alone. */
  for (size_t i = 0; i < nkinds; i++) {
    int k = (int)kinds[i];
    if (!kind_valid(k)) return fl__fail(err, FL_BAD_KIND, true, "kind_unknown:%zu:%d", i, k);
    if (!kind_in_abi(abi, k))
      return fl__fail(err, FL_BAD_KIND, true, "kind_not_in_abi:%zu:%s:%s", i, fl_kind_name(kinds[i]), fl_abi_name(abi));
  }

  fl_layout out = {.grid = {-1, -1, -1}, .ffts = -1, .hidden_first = -1, .hidden_count = 0};
  /* An empty host or cuda buffer has size 0 and alignment 1, what GNU C gives an empty struct. The
   * npu buffer always holds the grid, so its alignment comes out at least 4. */
  cursor c = {0, 1};
  const size_t ptr = sizeof(uint64_t);

  if (abi == FL_ABI_NPU) {
    if (npu->ffts) out.ffts = (int64_t)place(&c, ptr, 8);
    if (!npu->simt_only) {
      place(&c, ptr, 8); /* syncBlockLock */
      place(&c, ptr, 8); /* workspace_addr */
    }
  }
  for (size_t i = 0; i < nkinds; i++) {
    size_t at = place(&c, fl__layout_kind_size(abi, kinds[i]), fl__layout_kind_align(abi, kinds[i]));
    if (offsets) offsets[i] = at;
  }
  if (abi == FL_ABI_NPU) {
    for (int d = 0; d < 3; d++) out.grid[d] = (int64_t)place(&c, sizeof(int32_t), 4);
    /* Scratch slots and DTData follow the grid back to back, all pointer-aligned, so one first
     * offset and a count describe them. */
    uint32_t hidden = npu->scratch + (npu->dtdata ? 1u : 0u);
    for (uint32_t h = 0; h < hidden; h++) {
      size_t at = place(&c, ptr, 8);
      if (h == 0) out.hidden_first = (int64_t)at;
    }
    out.hidden_count = hidden;
  } else if (abi == FL_ABI_CUDA || abi == FL_ABI_HIP) {
    /* Triton's scratch pointers after the arguments: cuda's parameter list, hip's kernarg segment. */
    uint32_t hidden = abi == FL_ABI_CUDA ? target->cuda.hidden_ptrs : target->hip.hidden_ptrs;
    for (uint32_t h = 0; h < hidden; h++) {
      size_t at = place(&c, ptr, 8);
      if (h == 0) out.hidden_first = (int64_t)at;
    }
    out.hidden_count = hidden;
  }
  /* Like a C struct, the buffer ends with tail padding up to its own alignment; the NPU launcher
   * passes sizeof(args), padding included, as argsSize. */
  out.size = align_up(c.offset, c.align);
  out.align = c.align;
  *layout = out;
  fl__ok(err);
  return FL_OK;
}
