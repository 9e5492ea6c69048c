/* test_layout.c: packed-buffer layouts checked against the C compiler's own struct layout. */
#include "fastlaunch.h"
#include "fl_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FL_TESTS(X)                                                                                \
  X(doc_worked_examples)                                                                           \
  X(doc_trailing_slots)                                                                            \
  X(kind_slots_match_c_types)                                                                      \
  X(empty_and_max_signatures)                                                                      \
  X(refusals)                                                                                      \
  X(refusal_leaves_outputs_alone)                                                                  \
  X(conformance_against_compiler)
#define FL_TEST_MAIN
#include "fl_test.h"

static fl_target npu_opts(bool ffts, bool simt_only, bool dtdata, uint32_t scratch) {
  return (fl_target){.abi = FL_ABI_NPU, .npu.ffts = ffts, .npu.simt_only = simt_only, .npu.dtdata = dtdata,
                     .npu.scratch = scratch};
}

/* The three worked examples of shared/research/torch_npu_fast_launch.md section 2.3, computed there
 * from torch_npu's BuildPackedLayout (which has neither scratch nor DTData slots). */
static void doc_worked_examples(void) {
  fl_error err;
  fl_layout l;
  size_t off[3];

  /* "FFTS on, non-pure-SIMT, (tensor, tensor, i32): ffts 0, lock 8, ws 16, ptr 24, ptr 32, i32 40,
   * gridX 44, gridY 48, gridZ 52 -> end 56 -> size 56." */
  fl_target o = npu_opts(true, false, false, 0);
  const fl_kind k1[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32};
  ASSERT_OK(fl_layout_compute(&o, k1, 3, &l, off, &err), &err);
  ASSERT_EQ(l.ffts, 0);
  ASSERT_EQ(off[0], 24);
  ASSERT_EQ(off[1], 32);
  ASSERT_EQ(off[2], 40);
  ASSERT_EQ(l.grid[0], 44);
  ASSERT_EQ(l.grid[1], 48);
  ASSERT_EQ(l.grid[2], 52);
  ASSERT_EQ(l.size, 56);
  ASSERT_EQ(l.align, 8);
  ASSERT_EQ(l.hidden_first, -1);
  ASSERT_EQ(l.hidden_count, 0);

  /* "FFTS on, (tensor, i32, i32): ..., ptr 24, i32 32, i32 36, grid 40/44/48 -> end 52 -> size 56
   * (tail pad)." */
  const fl_kind k2[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32};
  ASSERT_OK(fl_layout_compute(&o, k2, 3, &l, off, &err), &err);
  ASSERT_EQ(l.ffts, 0);
  ASSERT_EQ(off[0], 24);
  ASSERT_EQ(off[1], 32);
  ASSERT_EQ(off[2], 36);
  ASSERT_EQ(l.grid[0], 40);
  ASSERT_EQ(l.grid[1], 44);
  ASSERT_EQ(l.grid[2], 48);
  ASSERT_EQ(l.size, 56);

  /* "FFTS off, pure SIMT, (tensor, i32): ptr 0, i32 8, grid 12/16/20 -> size 24." */
  o = npu_opts(false, true, false, 0);
  const fl_kind k3[] = {FL_KIND_PTR, FL_KIND_I32};
  ASSERT_OK(fl_layout_compute(&o, k3, 2, &l, off, &err), &err);
  ASSERT_EQ(l.ffts, -1);
  ASSERT_EQ(off[0], 0);
  ASSERT_EQ(off[1], 8);
  ASSERT_EQ(l.grid[0], 12);
  ASSERT_EQ(l.grid[1], 16);
  ASSERT_EQ(l.grid[2], 20);
  ASSERT_EQ(l.size, 24);
}

/* Section 3.5 of the same document: newer Triton-Ascend appends DTData always and, for pure SIMT,
 * global and profile scratch before it, so the buffer grows by 8 bytes (24 for pure SIMT). */
static void doc_trailing_slots(void) {
  fl_error err;
  fl_layout l;
  size_t off[3];
  fl_target o = npu_opts(true, false, true, 0);
  const fl_kind k1[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32};
  ASSERT_OK(fl_layout_compute(&o, k1, 3, &l, off, &err), &err);
  ASSERT_EQ(l.hidden_first, 56);
  ASSERT_EQ(l.hidden_count, 1);
  ASSERT_EQ(l.size, 56 + 8);

  o = npu_opts(false, true, true, 2);
  const fl_kind k3[] = {FL_KIND_PTR, FL_KIND_I32};
  ASSERT_OK(fl_layout_compute(&o, k3, 2, &l, off, &err), &err);
  ASSERT_EQ(l.grid[2], 20);
  ASSERT_EQ(l.hidden_first, 24);
  ASSERT_EQ(l.hidden_count, 3);
  ASSERT_EQ(l.size, 24 + 24);
}

/* The slot of each kind, per ABI, with the C type the generated launchers use for it. */
#define KIND_TYPES(X)                                                                              \
  X(FL_KIND_PTR, void *, void *)                                                                   \
  X(FL_KIND_I1, int8_t, int32_t)                                                                   \
  X(FL_KIND_I8, int8_t, int8_t)                                                                    \
  X(FL_KIND_I16, int16_t, int16_t)                                                                 \
  X(FL_KIND_I32, int32_t, int32_t)                                                                 \
  X(FL_KIND_I64, int64_t, int64_t)                                                                 \
  X(FL_KIND_U8, uint8_t, uint8_t)                                                                  \
  X(FL_KIND_U16, uint16_t, uint16_t)                                                               \
  X(FL_KIND_U32, uint32_t, uint32_t)                                                               \
  X(FL_KIND_U64, uint64_t, uint64_t)                                                               \
  X(FL_KIND_FP16, uint16_t, float)                                                                 \
  X(FL_KIND_BF16, uint16_t, float)                                                                 \
  X(FL_KIND_FP32, float, float)                                                                    \
  X(FL_KIND_FP64, double, double)

/* Triton's spelling of each kind: the npu alignment rule is stated on these strings. */
static const char *const triton_type[FL_KIND_COUNT] = {
    "*fp32", "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64",
};
static const char *const natural_ctype[FL_KIND_COUNT] = {
#define NAT(k, nat, npu) [k] = #nat,
    KIND_TYPES(NAT)
#undef NAT
};
static const char *const npu_ctype[FL_KIND_COUNT] = {
#define NPU(k, nat, npu) [k] = #npu,
    KIND_TYPES(NPU)
#undef NPU
};

/* Triton-Ascend's generator: aligned(4 if ty[0] != "*" and ty[-2:] != "64" else 8). */
static int triton_ascend_align(const char *ty) {
  size_t n = strlen(ty);
  return (ty[0] != '*' && !(n >= 2 && strcmp(ty + n - 2, "64") == 0)) ? 4 : 8;
}

static void kind_slots_match_c_types(void) {
#define CHECK(k, nat, npu)                                                                         \
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_HOST, k), sizeof(nat));                                         \
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_HOST, k), _Alignof(nat));                                      \
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_CUDA, k), sizeof(nat));                                         \
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_CUDA, k), _Alignof(nat));                                      \
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_NPU, k), sizeof(npu));                                          \
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_NPU, k), (size_t)triton_ascend_align(triton_type[k]));
  KIND_TYPES(CHECK)
#undef CHECK
  /* Bad input answers 0 rather than a plausible size. */
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_COUNT, FL_KIND_I32), 0);
  ASSERT_EQ_U(fl__layout_kind_size(-1, FL_KIND_I32), 0);
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_COUNT, FL_KIND_I32), 0);
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_HOST, FL_KIND_COUNT), 0);
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_NPU, FL_KIND_COUNT), 0);
  fl_kind neg;
  int minus_one = -1;
  memcpy(&neg, &minus_one, sizeof neg);
  ASSERT_EQ_U(fl__layout_kind_size(FL_ABI_HOST, neg), 0);
  ASSERT_EQ_U(fl__layout_kind_align(FL_ABI_HOST, neg), 0);
}

static void empty_and_max_signatures(void) {
  fl_error err;
  fl_layout l;
  /* No arguments: an empty host buffer (size 0, align 1, like an empty GNU C struct); NULL kinds
   * and NULL offsets are accepted when there is nothing to lay out. */
  fl_target o = {.abi = FL_ABI_HOST};
  ASSERT_OK(fl_layout_compute(&o, NULL, 0, &l, NULL, &err), &err);
  ASSERT_EQ_U(l.size, 0);
  ASSERT_EQ_U(l.align, 1);
  ASSERT_EQ(l.grid[0], -1);
  ASSERT_EQ(l.grid[1], -1);
  ASSERT_EQ(l.grid[2], -1);
  ASSERT_EQ(l.ffts, -1);
  ASSERT_EQ(l.hidden_first, -1);
  ASSERT_EQ(l.hidden_count, 0);
  ASSERT_EQ(err.status, FL_OK);
  ASSERT_STREQ(err.reason, "");
  /* err may be NULL too. */
  ASSERT_EQ(fl_layout_compute(&o, NULL, 0, &l, NULL, NULL), FL_OK);

  /* FL__MAX_ARGS arguments are allowed; one more is refused. */
  static fl_kind many[FL__MAX_ARGS + 1];
  static size_t off[FL__MAX_ARGS + 1];
  for (size_t i = 0; i <= FL__MAX_ARGS; i++) many[i] = FL_KIND_FP64;
  o.abi = FL_ABI_NPU;
  ASSERT_OK(fl_layout_compute(&o, many, FL__MAX_ARGS, &l, off, &err), &err);
  ASSERT_EQ_U(off[FL__MAX_ARGS - 1], 16 + 8 * (FL__MAX_ARGS - 1));
  ASSERT_TRUE(l.size <= FL__MAX_ARGS_SIZE);
}

static void refusals(void) {
  fl_error err;
  fl_layout l;
  size_t off[4];
  const fl_kind ok[] = {FL_KIND_PTR, FL_KIND_I32};
  fl_target o = {.abi = FL_ABI_HOST};

  ASSERT_FAILS(fl_layout_compute(&o, ok, 2, NULL, off, &err), &err, FL_BAD_DESCRIPTOR, "layout_null");
  ASSERT_TRUE(err.stable);
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_FAILS(fl_layout_compute(NULL, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR, "target_null");
  o.abi = FL_ABI_COUNT;
  ASSERT_FAILS(fl_layout_compute(&o, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR, "abi_unknown:4");
  o.abi = -7;
  ASSERT_FAILS(fl_layout_compute(&o, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR, "abi_unknown:-7");
  o.abi = FL_ABI_CUDA;
  ASSERT_FAILS(fl_layout_compute(&o, ok, FL__MAX_ARGS + 1, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "too_many_args:1025");
  ASSERT_FAILS(fl_layout_compute(&o, ok, SIZE_MAX, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "too_many_args:18446744073709551615");
  ASSERT_FAILS(fl_layout_compute(&o, NULL, 1, &l, off, &err), &err, FL_BAD_DESCRIPTOR, "kinds_null");

  /* Unknown kinds name their index and value, in every ABI. */
  fl_kind bad[3] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_COUNT};
  for (int abi = 0; abi < FL_ABI_COUNT; abi++) {
    fl_target a = {.abi = abi};
    ASSERT_FAILS(fl_layout_compute(&a, bad, 3, &l, off, &err), &err, FL_BAD_KIND, "kind_unknown:2:15");
    ASSERT_TRUE(err.stable);
  }
  int minus_one = -1;
  memcpy(&bad[1], &minus_one, sizeof bad[1]);
  ASSERT_FAILS(fl_layout_compute(&o, bad, 3, &l, off, &err), &err, FL_BAD_KIND, "kind_unknown:1:-1");

  /* Options of one ABI are refused by the others. */
  static const struct {
    int abi;
    fl_target opts;
    const char *reason;
  } foreign[] = {
      {FL_ABI_HOST, {.cuda.hidden_ptrs = 1}, "option_not_for_abi:hidden_ptrs:host"},
      {FL_ABI_HOST, {.npu.ffts = true}, "option_not_for_abi:ffts:host"},
      {FL_ABI_HOST, {.npu.simt_only = true}, "option_not_for_abi:simt_only:host"},
      {FL_ABI_HOST, {.npu.dtdata = true}, "option_not_for_abi:dtdata:host"},
      {FL_ABI_HOST, {.npu.scratch = 2}, "option_not_for_abi:scratch:host"},
      {FL_ABI_CUDA, {.npu.ffts = true}, "option_not_for_abi:ffts:cuda"},
      {FL_ABI_CUDA, {.npu.simt_only = true}, "option_not_for_abi:simt_only:cuda"},
      {FL_ABI_CUDA, {.npu.dtdata = true}, "option_not_for_abi:dtdata:cuda"},
      {FL_ABI_CUDA, {.npu.scratch = 1}, "option_not_for_abi:scratch:cuda"},
      {FL_ABI_NPU, {.cuda.hidden_ptrs = 2}, "option_not_for_abi:hidden_ptrs:npu"},
  };
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
    fl_target a = foreign[i].opts;
    a.abi = foreign[i].abi;
    ASSERT_FAILS(fl_layout_compute(&a, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR, foreign[i].reason);
    ASSERT_TRUE(err.stable);
  }

  fl_target c = {.abi = FL_ABI_CUDA, .cuda.hidden_ptrs = 3};
  ASSERT_FAILS(fl_layout_compute(&c, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "option_out_of_range:hidden_ptrs:3");
  c.cuda.hidden_ptrs = UINT32_MAX;
  ASSERT_FAILS(fl_layout_compute(&c, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "option_out_of_range:hidden_ptrs:4294967295");

  fl_target n = npu_opts(false, false, true, 1);
  ASSERT_FAILS(fl_layout_compute(&n, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "npu_scratch_requires_simt_only");
  n = npu_opts(true, true, false, 3);
  ASSERT_FAILS(fl_layout_compute(&n, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "option_out_of_range:scratch:3");
  /* A NULL err still gets the status. */
  ASSERT_EQ(fl_layout_compute(&n, ok, 2, &l, off, NULL), FL_BAD_DESCRIPTOR);
}

static void refusal_leaves_outputs_alone(void) {
  fl_error err;
  fl_layout l;
  memset(&l, 0xAB, sizeof l);
  size_t off[3] = {777, 777, 777};
  const fl_kind bad[3] = {FL_KIND_PTR, FL_KIND_I32, (fl_kind)99};
  fl_target o = {.abi = FL_ABI_CUDA, .cuda.hidden_ptrs = 2};
  ASSERT_FAILS(fl_layout_compute(&o, bad, 3, &l, off, &err), &err, FL_BAD_KIND, "kind_unknown:2:99");
  ASSERT_EQ_U(off[0], 777);
  ASSERT_EQ_U(off[1], 777);
  ASSERT_EQ_U(l.size, (size_t)0xABABABABABABABABull);
}

/* ---- conformance: random signatures, one generated C file per option set ---- */

/* HDR: the numbers in front of the argument offsets in each row the generated program prints. */
enum { RANDOM_SIGS = 1000, MAX_RANDOM_LEN = 70, MAX_OPTION_SETS = 32, MAX_MISMATCHES = 5, HDR = 10 };

typedef struct option_set {
  fl_target opts;
  char label[64];
} option_set;

typedef struct sig_list {
  size_t count;
  size_t *start; /* count + 1 entries into kinds */
  fl_kind *kinds;
} sig_list;

static uint64_t rng_state;

/* splitmix64: small, good enough, and the same sequence on every platform. */
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static size_t option_sets(option_set *sets) {
  size_t n = 0;
  sets[n].opts = (fl_target){.abi = FL_ABI_HOST};
  snprintf(sets[n++].label, sizeof sets[0].label, "host");
  for (int hip = 0; hip < 2; hip++) /* hip's kernarg segment is cuda's C struct (test_hip.py: real hsaco) */
    for (uint32_t h = 0; h <= FL_CUDA_MAX_HIDDEN_PTRS; h++) {
      sets[n].opts = hip ? (fl_target){.abi = FL_ABI_HIP, .hip.hidden_ptrs = h, .hip.warp_size = 64}
                         : (fl_target){.abi = FL_ABI_CUDA, .cuda.hidden_ptrs = h};
      snprintf(sets[n++].label, sizeof sets[0].label, "%s_hidden%u", hip ? "hip" : "cuda", (unsigned)h);
    }
  for (int ffts = 0; ffts < 2; ffts++)
    for (int simt = 0; simt < 2; simt++)
      for (int dt = 0; dt < 2; dt++)
        for (uint32_t scratch = 0; scratch <= (simt ? FL_NPU_MAX_SCRATCH : 0); scratch++) {
          sets[n].opts = npu_opts(ffts, simt, dt, scratch);
          snprintf(sets[n++].label, sizeof sets[0].label, "npu_ffts%d_simt%d_dtdata%d_scratch%u", ffts, simt,
                   dt, (unsigned)scratch);
        }
  return n;
}

/* The empty signature, each kind alone, one at the argument cap, then RANDOM_SIGS random ones of
 * lengths 0..MAX_RANDOM_LEN, of every kind but FL_KIND_TMAP (cuda's alone: test_cuda_abi.c). */
static bool make_sigs(sig_list *s) {
  size_t fixed = 1 + FL_KIND_TMAP + 1;
  s->count = fixed + RANDOM_SIGS;
  size_t lens_cap = s->count + 1;
  s->start = calloc(lens_cap, sizeof *s->start);
  s->kinds = calloc(FL_KIND_COUNT + FL__MAX_ARGS + (size_t)RANDOM_SIGS * MAX_RANDOM_LEN, sizeof *s->kinds);
  if (!s->start || !s->kinds) return false;
  size_t at = 0, i = 0;
  s->start[i++] = at; /* empty */
  for (int k = 0; k < FL_KIND_TMAP; k++) {
    s->start[i++] = at;
    s->kinds[at++] = (fl_kind)k;
  }
  s->start[i++] = at;
  for (size_t j = 0; j < FL__MAX_ARGS; j++) s->kinds[at++] = (fl_kind)(rng_next() % FL_KIND_TMAP);
  for (size_t r = 0; r < RANDOM_SIGS; r++) {
    s->start[i++] = at;
    size_t len = (size_t)(rng_next() % (MAX_RANDOM_LEN + 1));
    for (size_t j = 0; j < len; j++) s->kinds[at++] = (fl_kind)(rng_next() % FL_KIND_TMAP);
  }
  s->start[i] = at;
  return true;
}

/* Emits the struct for signature `idx` exactly as the launcher of its ABI would declare it,
 * followed by a row of what the compiler says about it: sizeof, _Alignof, the ffts and grid
 * offsets (or -1), the first and last hidden slots (or -1), the generator's hidden slot count,
 * the argument count and each argument's offsetof. */
static void emit_struct(FILE *f, const fl_target *o, const fl_kind *k, size_t n, size_t idx) {
  bool npu = o->abi == FL_ABI_NPU;
  fprintf(f, "struct %s s%zu {\n", npu ? "__attribute__((packed))" : "", idx);
  if (npu) {
    if (o->npu.ffts) fprintf(f, "  void* ffts_addr __attribute__((aligned(8)));\n");
    if (!o->npu.simt_only)
      fprintf(f, "  void* syncBlockLock __attribute__((aligned(8)));\n"
                 "  void* workspace_addr __attribute__((aligned(8)));\n");
  }
  for (size_t i = 0; i < n; i++) {
    if (npu)
      fprintf(f, "  %s a%zu __attribute__((aligned(%d)));\n", npu_ctype[k[i]], i,
              triton_ascend_align(triton_type[k[i]]));
    else
      fprintf(f, "  %s a%zu;\n", natural_ctype[k[i]], i);
  }
  static const char *const scratch[2] = {"global_scratch", "profile_scratch"};
  const char *first_hidden = NULL, *last_hidden = NULL;
  unsigned hidden = 0;
  if (npu) {
    fprintf(f, "  int32_t gridX __attribute__((aligned(4)));\n"
               "  int32_t gridY __attribute__((aligned(4)));\n"
               "  int32_t gridZ __attribute__((aligned(4)));\n");
    for (uint32_t h = 0; h < o->npu.scratch && h < 2; h++) {
      fprintf(f, "  void* %s __attribute__((aligned(8)));\n", scratch[h]);
      if (!first_hidden) first_hidden = scratch[h];
      last_hidden = scratch[h];
      hidden++;
    }
    if (o->npu.dtdata) {
      fprintf(f, "  void* DTData __attribute__((aligned(8)));\n");
      if (!first_hidden) first_hidden = "DTData";
      last_hidden = "DTData";
      hidden++;
    }
  } else {
    for (uint32_t h = 0; h < (o->abi == FL_ABI_HIP ? o->hip.hidden_ptrs : o->cuda.hidden_ptrs) && h < 2; h++) {
      fprintf(f, "  void* %s;\n", scratch[h]);
      if (!first_hidden) first_hidden = scratch[h];
      last_hidden = scratch[h];
      hidden++;
    }
  }
  fprintf(f, "};\nstatic const long long r%zu[] = {(long long)sizeof(struct s%zu), "
             "(long long)_Alignof(struct s%zu), ",
          idx, idx, idx);
  if (npu && o->npu.ffts)
    fprintf(f, "(long long)offsetof(struct s%zu, ffts_addr), ", idx);
  else
    fprintf(f, "-1, ");
  if (npu)
    fprintf(f, "(long long)offsetof(struct s%zu, gridX), (long long)offsetof(struct s%zu, gridY), "
               "(long long)offsetof(struct s%zu, gridZ), ",
            idx, idx, idx);
  else
    fprintf(f, "-1, -1, -1, ");
  if (first_hidden)
    fprintf(f, "(long long)offsetof(struct s%zu, %s), (long long)offsetof(struct s%zu, %s), ", idx,
            first_hidden, idx, last_hidden);
  else
    fprintf(f, "-1, -1, ");
  fprintf(f, "%u, %zu", hidden, n);
  for (size_t i = 0; i < n; i++) fprintf(f, ", (long long)offsetof(struct s%zu, a%zu)", idx, i);
  fprintf(f, "};\n");
}

static bool write_source(const char *path, const fl_target *o, const sig_list *s) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  fprintf(f, "/* generated by test_layout.c */\n#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n"
             "_Static_assert(sizeof(void*) == 8, \"64-bit target\");\n");
  for (size_t i = 0; i < s->count; i++)
    emit_struct(f, o, s->kinds + s->start[i], s->start[i + 1] - s->start[i], i);
  fprintf(f, "static const long long *const rows[] = {");
  for (size_t i = 0; i < s->count; i++) fprintf(f, "%sr%zu", i ? ", " : "", i);
  fprintf(f, "};\nint main(void) {\n"
             "  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {\n"
             "    const long long *r = rows[i];\n"
             "    for (long long j = 0; j < %d + r[%d]; j++) printf(\"%%lld \", r[j]);\n"
             "    printf(\"\\n\");\n  }\n  return 0;\n}\n",
          HDR, HDR - 1);
  return fclose(f) == 0;
}

static void print_sig(const fl_kind *k, size_t n) {
  fprintf(stderr, "  signature (%zu):", n);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", triton_type[k[i]]);
  fprintf(stderr, "\n");
}

/* Compares one row of compiler output with fl_layout_compute; returns false on a mismatch. */
static bool check_row(const char *label, size_t idx, const fl_target *o, const fl_kind *k, size_t n,
                      const long long *row, size_t nrow) {
  static size_t off[FL__MAX_ARGS];
  fl_layout l;
  fl_error err;
  if (fl_layout_compute(o, k, n, &l, off, &err) != FL_OK) {
    fprintf(stderr, "%s sig %zu: fl_layout_compute refused: %s\n", label, idx, err.reason);
    return false;
  }
  /* The hidden slots are contiguous pointers, so the last one sits 8 bytes per slot after the first. */
  long long last = l.hidden_count ? l.hidden_first + 8 * ((long long)l.hidden_count - 1) : -1;
  const long long want[HDR - 1] = {
      (long long)l.size, (long long)l.align, l.ffts, l.grid[0], l.grid[1], l.grid[2], l.hidden_first,
      last, (long long)l.hidden_count};
  static const char *const names[HDR - 1] = {"size", "align", "ffts", "gridX", "gridY", "gridZ",
                                             "hidden_first", "hidden_last", "hidden_count"};
  if (nrow != HDR + n || row[HDR - 1] != (long long)n) {
    fprintf(stderr, "%s sig %zu: compiler row has %zu numbers, expected %zu\n", label, idx, nrow, HDR + n);
    return false;
  }
  bool ok = true;
  for (int j = 0; j < HDR - 1; j++) {
    if (row[j] != want[j]) {
      fprintf(stderr, "%s sig %zu: %s compiler %lld, fastlaunch %lld\n", label, idx, names[j], row[j], want[j]);
      ok = false;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (row[HDR + i] != (long long)off[i]) {
      fprintf(stderr, "%s sig %zu: arg %zu (%s) offset compiler %lld, fastlaunch %zu\n", label, idx, i,
              triton_type[k[i]], row[HDR + i], off[i]);
      ok = false;
    }
  }
  if (!ok) print_sig(k, n);
  return ok;
}

static void conformance_against_compiler(void) {
  const char *seed_text = getenv("FL_TEST_SEED");
  uint64_t seed = seed_text && *seed_text ? strtoull(seed_text, NULL, 0) : 20260401u;
  printf("test_layout: seed %llu (set FL_TEST_SEED to reproduce)\n", (unsigned long long)seed);
  const char *cc = getenv("CC");
  if (!cc || !*cc) cc = "cc";
  const char *tmp = getenv("TMPDIR");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/fl_layout_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ASSERT_TRUE(mkdtemp(dir) != NULL);

  option_set sets[MAX_OPTION_SETS];
  size_t nsets = option_sets(sets);
  ASSERT_EQ_U(nsets, 23); /* host, cuda x3, hip x3, npu x16 (scratch 0..2 only with simt_only) */
  sig_list sigs[MAX_OPTION_SETS];
  memset(sigs, 0, sizeof sigs);
  char path[700];
  bool setup_ok = true;
  for (size_t s = 0; s < nsets && setup_ok; s++) {
    /* Each option set draws its own signatures from a seed derived from the base seed. */
    rng_state = seed * 0x100000001B3ull + s;
    setup_ok = make_sigs(&sigs[s]);
    snprintf(path, sizeof path, "%s/%s.c", dir, sets[s].label);
    setup_ok = setup_ok && write_source(path, &sets[s].opts, &sigs[s]);
  }

  /* One shell compiles every file at once; a failed compile leaves its log and a .fail marker. */
  size_t cmd_cap = 512 + nsets * (strlen(cc) + 3 * sizeof dir + 3 * 64 + 64);
  char *cmd = malloc(cmd_cap);
  size_t len = 0;
  bool compiled = setup_ok && cmd;
  if (compiled) {
    len += (size_t)snprintf(cmd + len, cmd_cap - len, "cd '%s' && {", dir);
    for (size_t s = 0; s < nsets; s++)
      len += (size_t)snprintf(cmd + len, cmd_cap - len,
                              " { %s -O0 -o %s.bin %s.c >%s.log 2>&1 || echo fail >%s.fail; } &", cc,
                              sets[s].label, sets[s].label, sets[s].label, sets[s].label);
    snprintf(cmd + len, cmd_cap - len, " wait; }");
    int rc = system(cmd);
    compiled = rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
    if (!compiled) fprintf(stderr, "compile shell failed: %s\n", cmd);
  }
  free(cmd);

  size_t checked = 0, mismatches = 0;
  long long *row = malloc((HDR + FL__MAX_ARGS + 1) * sizeof *row);
  char *line = NULL;
  size_t line_cap = 0;
  for (size_t s = 0; compiled && row && s < nsets && mismatches < MAX_MISMATCHES; s++) {
    snprintf(path, sizeof path, "%s/%s.fail", dir, sets[s].label);
    struct stat st;
    if (stat(path, &st) == 0) {
      fprintf(stderr, "%s: the C compiler failed; see %s/%s.log\n", sets[s].label, dir, sets[s].label);
      mismatches++;
      continue;
    }
    snprintf(path, sizeof path, "'%s/%s.bin'", dir, sets[s].label);
    FILE *p = popen(path, "r");
    if (!p) {
      mismatches++;
      continue;
    }
    size_t idx = 0;
    while (getline(&line, &line_cap, p) != -1 && mismatches < MAX_MISMATCHES) {
      size_t nrow = 0;
      char *q = line, *end;
      while (nrow < HDR + FL__MAX_ARGS + 1) {
        long long v = strtoll(q, &end, 10);
        if (end == q) break;
        row[nrow++] = v;
        q = end;
      }
      if (idx >= sigs[s].count) {
        mismatches++;
        break;
      }
      const fl_kind *k = sigs[s].kinds + sigs[s].start[idx];
      size_t n = sigs[s].start[idx + 1] - sigs[s].start[idx];
      if (!check_row(sets[s].label, idx, &sets[s].opts, k, n, row, nrow)) mismatches++;
      idx++;
      checked++;
    }
    int rc = pclose(p);
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0 || idx != sigs[s].count) {
      if (mismatches < MAX_MISMATCHES)
        fprintf(stderr, "%s: generated program gave %zu rows of %zu (status %d)\n", sets[s].label, idx,
                sigs[s].count, rc);
      mismatches++;
    }
  }
  free(line);
  free(row);

  size_t expected = 0;
  for (size_t s = 0; s < nsets; s++) expected += sigs[s].count;
  /* Keep the generated files when something failed, so that the failure can be inspected. */
  if (mismatches == 0 && setup_ok && compiled) {
    for (size_t s = 0; s < nsets; s++) {
      static const char *const ext[] = {"c", "bin", "log", "fail"};
      for (size_t e = 0; e < 4; e++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, sets[s].label, ext[e]);
        unlink(path);
      }
    }
    rmdir(dir);
  } else {
    fprintf(stderr, "generated sources kept in %s\n", dir);
  }
  for (size_t s = 0; s < nsets; s++) {
    free(sigs[s].start);
    free(sigs[s].kinds);
  }
  printf("test_layout: %zu signatures over %zu option sets checked against %s\n", checked, nsets, cc);
  ASSERT_TRUE(setup_ok);
  ASSERT_TRUE(compiled);
  ASSERT_EQ_U(mismatches, 0);
  ASSERT_EQ_U(checked, expected);
}
