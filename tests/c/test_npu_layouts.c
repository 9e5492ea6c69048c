/* test_npu_layouts.c: the npu backend's packed buffer for each combination of hidden slots (FFTS,
 * lock and workspace, SIMT-only, DTData, scratch), launched against the recording stand-in
 * libascendcl (npu_fake.h) and compared byte for byte with the layout Triton-Ascend's launcher builds. */
#include "fastlaunch.h"

#define FL_TESTS(X) X(fake_hidden_slot_layouts)
#define FL_TEST_MAIN
#include "fl_test.h"
#include "npu_fake.h"

/* Builds a plan over `kinds`, launches it with `args` on a {2,3,1} grid and checks the buffer the
 * fake received against `want`. */
static void launch_layout(fake_acl *s, fl_target abi, const fl_kind *kinds, size_t n, const fl_value *args,
                          const unsigned char *want, size_t size, bool simt) {
  fl_error err;
  fl_plan *p;
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_NPU;
  d.target = abi;
  d.kernel = KERNEL;
  d.kinds = kinds;
  d.nkinds = n;
  d.runtime_arg_count = n;
  d.grid_mode = FL_GRID_CALLER;
  d.target.npu.simt = simt;
  d.target.npu.dyn_ubuf = 65536;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ_U(fl_plan_layout(p)->size, size);
  int calls = s->calls;
  ASSERT_OK(fl_launch(p, STREAM, args, n, (const int64_t[]){2, 3, 1}, &err), &err);
  ASSERT_EQ(s->calls, calls + 1);
  ASSERT_EQ_U(s->num_blocks, 6);
  ASSERT_TRUE(s->cfg_null == !simt);
  if (simt) {
    ASSERT_EQ(s->attr_id, 2);
    ASSERT_EQ_U(s->attr_value, 65536);
  }
  expect_buffer(s, want, size);
  fl_plan_release(p);
}

static void fake_hidden_slot_layouts(void) {
  if (!in_child()) {
    run_child("fake_hidden_slot_layouts", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  unsigned char want[64];
  const int32_t grid[3] = {2, 3, 1};

  /* Pure SIMT without FFTS, two scratch slots and DTData (PR #1722):
   * ptr@0 i32@8 grid@12/16/20 global_scratch@24 profile_scratch@32 DTData@40, size 48. */
  {
    const fl_kind k[] = {FL_KIND_PTR, FL_KIND_I32};
    const fl_value a[] = {fl_ptr((void *)0xdead0000), fl_int(-7)};
    fl_target o = {.abi = FL_ABI_NPU, .npu.simt_only = true, .npu.dtdata = true, .npu.scratch = 2};
    memset(want, 0, sizeof want);
    put_u64(want, 0, 0xdead0000);
    put_i32(want, 8, -7);
    for (int g = 0; g < 3; g++) put_i32(want, 12 + 4 * (size_t)g, grid[g]);
    launch_layout(s, o, k, 2, a, want, 48, true);
    /* One scratch slot: size 40. */
    o.npu.scratch = 1;
    launch_layout(s, o, k, 2, a, want, 40, true);
  }
  /* The research notes' pure-SIMT example without DTData: ptr@0 i32@8 grid@12/16/20, size 24. */
  {
    const fl_kind k[] = {FL_KIND_PTR, FL_KIND_I32};
    const fl_value a[] = {fl_ptr((void *)0xdead0000), fl_int(-7)};
    fl_target o = {.abi = FL_ABI_NPU, .npu.simt_only = true};
    memset(want, 0, sizeof want);
    put_u64(want, 0, 0xdead0000);
    put_i32(want, 8, -7);
    for (int g = 0; g < 3; g++) put_i32(want, 12 + 4 * (size_t)g, grid[g]);
    launch_layout(s, o, k, 2, a, want, 24, false);
  }
  /* Pure SIMT with FFTS and DTData: ffts@0 i8@8 (one byte, 4-aligned) fp64@16 grid@24/28/32
   * DTData@40, size 48. */
  {
    const fl_kind k[] = {FL_KIND_I8, FL_KIND_FP64};
    const fl_value a[] = {fl_int(-2), fl_float(0.1)};
    fl_target o = {.abi = FL_ABI_NPU, .npu.ffts = true, .npu.simt_only = true, .npu.dtdata = true};
    memset(want, 0, sizeof want);
    put_u64(want, 0, FAKE_ACL_SYNC_ADDR);
    want[8] = 0xfe;
    double x = 0.1;
    put(want, 16, &x, 8);
    for (int g = 0; g < 3; g++) put_i32(want, 24 + 4 * (size_t)g, grid[g]);
    launch_layout(s, o, k, 2, a, want, 48, true);
  }
  /* Mixed mode with FFTS and DTData: ffts@0 lock@8 workspace@16 ptr@24 grid@32/36/40 DTData@48,
   * size 56. */
  {
    const fl_kind k[] = {FL_KIND_PTR};
    const fl_value a[] = {fl_none()};
    fl_target o = {.abi = FL_ABI_NPU, .npu.ffts = true, .npu.dtdata = true};
    memset(want, 0, sizeof want);
    put_u64(want, 0, FAKE_ACL_SYNC_ADDR);
    for (int g = 0; g < 3; g++) put_i32(want, 32 + 4 * (size_t)g, grid[g]);
    launch_layout(s, o, k, 1, a, want, 56, false);
  }
  /* The research notes' tail-padding example: FFTS, (tensor, i32, i32): ptr@24 i32@32 i32@36
   * grid@40/44/48, end 52, size 56. */
  {
    const fl_kind k[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_I32};
    const fl_value a[] = {fl_ptr((void *)0x40), fl_int(INT32_MIN), fl_int(INT32_MAX)};
    fl_target o = {.abi = FL_ABI_NPU, .npu.ffts = true};
    memset(want, 0, sizeof want);
    put_u64(want, 0, FAKE_ACL_SYNC_ADDR);
    put_u64(want, 24, 0x40);
    put_i32(want, 32, INT32_MIN);
    put_i32(want, 36, INT32_MAX);
    for (int g = 0; g < 3; g++) put_i32(want, 40 + 4 * (size_t)g, grid[g]);
    launch_layout(s, o, k, 3, a, want, 56, false);
  }
  /* Scratch slots on a kernel that is not pure SIMT are refused at creation. */
  {
    const fl_kind k[] = {FL_KIND_PTR};
    fl_plan_desc d;
    memset(&d, 0, sizeof d);
    d.backend = FL_BACKEND_NPU;
    d.target.abi = FL_ABI_NPU;
    d.target.npu.scratch = 2;
    d.kernel = KERNEL;
    d.kinds = k;
    d.nkinds = 1;
    d.runtime_arg_count = 1;
    d.grid_mode = FL_GRID_CALLER;
    fl_error err;
    fl_plan *p = (fl_plan *)0x1;
    ASSERT_FAILS(fl_plan_create(&d, &p, &err), &err, FL_BAD_DESCRIPTOR, "npu_scratch_requires_simt_only");
    ASSERT_TRUE(p == NULL);
  }
}
