/* test_npu_abi.c: the npu backend without Ascend hardware: the unavailable error, and its launches
 * against a recording stand-in libascendcl (tests/c/fakes/fake_acl.c) given as its "libascendcl"
 * setting. Each fake test runs in a child process, because the backend loads once per process. */
#include "fastlaunch.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#define FL_TESTS(X)                                                                                \
  X(unavailable_without_libascendcl)                                                               \
  X(override_missing_library)                                                                      \
  X(override_without_launch_symbol)                                                                \
  X(fake_packed_buffer)                                                                            \
  X(fake_grid_limits)                                                                              \
  X(fake_simt_cfg)                                                                                 \
  X(fake_launch_error)                                                                             \
  X(fake_sync_addr_failure)
#define FL_TEST_MAIN
#include "fl_test.h"

#include "npu_fake.h"

/* ---- the unavailable paths ---- */

static void unavailable_without_libascendcl(void) {
  if (in_child()) return;
  void *h = dlopen("libascendcl.so", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    SKIP("libascendcl is installed here: the unavailable path was not exercised");
  }
  fl_error err;
  ASSERT_EQ(fl_backend_load(FL_BACKEND_NPU, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:npu:", 24) == 0);
  ASSERT_TRUE(strstr(err.reason, "libascendcl.so") != NULL);
  ASSERT_TRUE(err.stable && !err.backend_submitted);
  /* The answer is remembered, and plan creation gives the same one. */
  char first[FL_REASON_MAX];
  memcpy(first, err.reason, sizeof first);
  ASSERT_EQ(fl_backend_load(FL_BACKEND_NPU, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_STREQ(err.reason, first);
  static const fl_kind k[] = {FL_KIND_PTR};
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_NPU;
  d.target.abi = FL_ABI_NPU;
  d.kernel = (void *)0x1;
  d.kinds = k;
  d.nkinds = 1;
  d.runtime_arg_count = 1;
  d.grid_mode = FL_GRID_CALLER;
  fl_plan *p = (fl_plan *)0x1;
  ASSERT_EQ(fl_plan_create(&d, &p, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_STREQ(err.reason, first);
  ASSERT_TRUE(p == NULL);
  /* npu streams belong to the framework. */
  uint64_t s;
  ASSERT_EQ(fl_stream_create(FL_BACKEND_NPU, &s, &err), FL_BACKEND_UNAVAILABLE);
}

/* The override replaces the default name: a missing file is reported with the loader's words. */
static void override_missing_library(void) {
  if (!in_child()) {
    run_child("override_missing_library", "/nonexistent/fl_no_such_libascendcl.so");
    return;
  }
  fl_error err;
  ASSERT_EQ(fl_backend_load(FL_BACKEND_NPU, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:npu:/nonexistent/fl_no_such_libascendcl.so", 62) == 0);
  ASSERT_TRUE(err.stable && !err.backend_submitted);
}

/* A library without aclrtLaunchKernelWithHostArgs (CANN before 8.5) is unavailable. */
static void override_without_launch_symbol(void) {
  if (!in_child()) {
    run_child("override_without_launch_symbol", "libm.so.6");
    return;
  }
  fl_error err;
  ASSERT_EQ(fl_backend_load(FL_BACKEND_NPU, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:npu:", 24) == 0);
  ASSERT_TRUE(strstr(err.reason, "aclrtLaunchKernelWithHostArgs") != NULL);
}

/* ---- launches through the fake ---- */

/* ptr ptr i32 fp16 i64 i1; the i1 is fixed. With FFTS and the lock/workspace slots:
 * ffts@0 lock@8 workspace@16 x@24 y@32 n@40 alpha@44 (a float) big@48 flag@56 (an int32)
 * gridX@60 gridY@64 gridZ@68, size 72. */
static const fl_kind sig[] = {FL_KIND_PTR, FL_KIND_PTR, FL_KIND_I32, FL_KIND_FP16, FL_KIND_I64, FL_KIND_I1};
static const char *const sig_names[] = {"x", "y", "n", "alpha", "big", "flag"};
static const fl_value sig_fixed[] = {{.type = FL_VALUE_BOOL, .v = {.b = true}}};

static fl_plan_desc npu_desc(void) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.name = "fake_kernel";
  d.backend = FL_BACKEND_NPU;
  d.target.abi = FL_ABI_NPU;
  d.target.npu.ffts = true;
  d.kernel = KERNEL;
  d.kinds = sig;
  d.nkinds = 6;
  d.runtime_arg_count = 5;
  d.fixed_args = sig_fixed;
  d.arg_names = sig_names;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = 3, d.static_grid[1] = 2, d.static_grid[2] = 4;
  return d;
}

/* The buffer the stock Triton-Ascend launcher would build for sig, byte for byte. */
static void sig_expected(unsigned char want[72], uint64_t ffts, int32_t n, float alpha, int64_t big,
                         const int32_t grid[3]) {
  memset(want, 0, 72);
  put_u64(want, 0, ffts);
  /* 8 and 16: syncBlockLock and workspace_addr, left NULL */
  put_u64(want, 24, 0x1000);
  put_u64(want, 32, 0x2000);
  put_i32(want, 40, n);
  put(want, 44, &alpha, 4);
  put(want, 48, &big, 8);
  put_i32(want, 56, 1);
  for (int d = 0; d < 3; d++) put_i32(want, 60 + 4 * (size_t)d, grid[d]);
}

static fl_value sig_args[5];
static const fl_value *args_for(int64_t n) {
  sig_args[0] = fl_ptr((void *)0x1000);
  sig_args[1] = fl_ptr((void *)0x2000);
  sig_args[2] = fl_int(n);
  sig_args[3] = fl_float(1.5);
  sig_args[4] = fl_int(-(1LL << 40));
  return sig_args;
}

static void fake_packed_buffer(void) {
  if (!in_child()) {
    run_child("fake_packed_buffer", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *p;
  unsigned char want[72];

  /* Static grid; the FFTS address comes from aclrtGetHardwareSyncAddr, once per plan. */
  fl_plan_desc d = npu_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(s->sync_calls, 1);
  const fl_layout *l = fl_plan_layout(p);
  ASSERT_EQ_U(l->size, 72);
  ASSERT_EQ(l->ffts, 0);
  ASSERT_EQ(l->grid[0], 60);
  ASSERT_EQ(l->grid[1], 64);
  ASSERT_EQ(l->grid[2], 68);
  ASSERT_EQ(l->hidden_first, -1);
  static const size_t offs[] = {24, 32, 40, 44, 48, 56};
  for (size_t i = 0; i < 6; i++) ASSERT_EQ_U(fl_plan_arg_offset(p, i), offs[i]);
  ASSERT_OK(fl_launch(p, STREAM, args_for(1000), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 1);
  ASSERT_TRUE(s->func == KERNEL);
  ASSERT_EQ_U((uintptr_t)s->stream, STREAM);
  ASSERT_EQ_U(s->num_blocks, 24);
  ASSERT_TRUE(s->cfg_null);
  ASSERT_TRUE(s->placeholders == NULL);
  ASSERT_EQ_U(s->num_placeholders, 0);
  sig_expected(want, FAKE_ACL_SYNC_ADDR, 1000, 1.5f, -(1LL << 40), (const int32_t[]){3, 2, 4});
  expect_buffer(s, want, 72);
  ASSERT_EQ_U(s->buffer_size, l->size);
  /* A second launch does not ask the runtime again. */
  ASSERT_OK(fl_launch(p, STREAM, args_for(7), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 2);
  ASSERT_EQ(s->sync_calls, 1);
  sig_expected(want, FAKE_ACL_SYNC_ADDR, 7, 1.5f, -(1LL << 40), (const int32_t[]){3, 2, 4});
  expect_buffer(s, want, 72);
  fl_plan_release(p);

  /* A grid program over n and the fixed flag; the caller's FFTS address is used as given. */
  d = npu_desc();
  d.grid_mode = FL_GRID_PROGRAM;
  d.grid_exprs[0] = "cdiv(n, 64)";
  d.grid_exprs[1] = "2 if flag else 1";
  d.grid_exprs[2] = "max(n // 500, 1)";
  d.target.npu.ffts_addr = 0x12345678abcd0000ull;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_grid_mode(p), FL_GRID_PROGRAM);
  ASSERT_EQ(s->sync_calls, 1);
  ASSERT_OK(fl_launch(p, STREAM + 1, args_for(1000), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 3);
  ASSERT_EQ_U((uintptr_t)s->stream, STREAM + 1);
  ASSERT_EQ_U(s->num_blocks, 16 * 2 * 2);
  sig_expected(want, 0x12345678abcd0000ull, 1000, 1.5f, -(1LL << 40), (const int32_t[]){16, 2, 2});
  expect_buffer(s, want, 72);
  ASSERT_OK(fl_launch(p, STREAM, args_for(100), 5, NULL, &err), &err);
  ASSERT_EQ_U(s->num_blocks, 2 * 2 * 1);
  sig_expected(want, 0x12345678abcd0000ull, 100, 1.5f, -(1LL << 40), (const int32_t[]){2, 2, 1});
  expect_buffer(s, want, 72);
  /* A program that yields a zero dimension, or a product past 65535, submits nothing. */
  ASSERT_FAILS(fl_launch(p, STREAM, args_for(0), 5, NULL, &err), &err, FL_BAD_GRID, "grid_dim_zero:0");
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_FAILS(fl_launch(p, STREAM, args_for(64 * 65536), 5, NULL, &err), &err, FL_BAD_GRID, "grid_product_exceeds");
  ASSERT_TRUE(!err.backend_submitted && !err.stable);
  ASSERT_EQ(s->calls, 4);
  /* Stream 0 (None) is refused before the runtime. */
  ASSERT_FAILS(fl_launch(p, 0, args_for(1000), 5, NULL, &err), &err, FL_BAD_STREAM, "stream_is_none");
  ASSERT_TRUE(!err.backend_submitted && !err.stable);
  ASSERT_EQ(s->calls, 4);
  fl_plan_release(p);
  ASSERT_EQ(s->sync_calls, 1);
  /* npu streams belong to the framework. */
  uint64_t st;
  ASSERT_FAILS(fl_stream_create(FL_BACKEND_NPU, &st, &err), &err, FL_UNSUPPORTED, "stream_create_unsupported:npu");
}

static void fake_grid_limits(void) {
  if (!in_child()) {
    run_child("fake_grid_limits", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *p;
  unsigned char want[72];
  fl_plan_desc d = npu_desc();
  d.grid_mode = FL_GRID_CALLER;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  const fl_value *a = args_for(5);
  const int64_t big = INT32_MAX;

  ASSERT_FAILS(fl_launch(p, 0, a, 5, (const int64_t[]){1, 1, 1}, &err), &err, FL_BAD_STREAM, "stream_is_none");
  ASSERT_TRUE(!err.backend_submitted);
  /* The product must stay below 65536, computed without wrapping: 2^32 and 2^32 + 65536 would wrap
   * to 0 and 65536 in 32 bits, the last one overflows 64 bits. */
  const int64_t refused[][3] = {{65536, 1, 1}, {256, 256, 1},   {1, 1, 65536},          {65536, 65536, 1},
                                {65536, 65537, 1}, {big, big, 4}, {big, big, big}, {1, big, 1}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    ASSERT_FAILS(fl_launch(p, STREAM, a, 5, refused[i], &err), &err, FL_BAD_GRID, "grid_product_exceeds");
    ASSERT_TRUE(!err.backend_submitted && !err.stable);
  }
  ASSERT_FAILS(fl_launch(p, STREAM, a, 5, (const int64_t[]){big + 1, 1, 1}, &err), &err, FL_BAD_GRID,
               "grid_dim_exceeds:0");
  ASSERT_FAILS(fl_launch(p, STREAM, a, 5, (const int64_t[]){4, 0, 1}, &err), &err, FL_BAD_GRID, "grid_dim_zero:1");
  ASSERT_FAILS(fl_launch(p, STREAM, a, 5, (const int64_t[]){4, 1, 0}, &err), &err, FL_BAD_GRID, "grid_dim_zero:2");
  ASSERT_FAILS(fl_launch(p, STREAM, a, 5, (const int64_t[]){-1, 1, 1}, &err), &err, FL_BAD_GRID,
               "grid_dim_negative:0");
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_EQ(s->calls, 0);
  /* 65535 is the largest product. */
  ASSERT_OK(fl_launch(p, STREAM, a, 5, (const int64_t[]){65535, 1, 1}, &err), &err);
  ASSERT_EQ(s->calls, 1);
  ASSERT_EQ_U(s->num_blocks, 65535);
  sig_expected(want, FAKE_ACL_SYNC_ADDR, 5, 1.5f, -(1LL << 40), (const int32_t[]){65535, 1, 1});
  expect_buffer(s, want, 72);
  ASSERT_OK(fl_launch(p, STREAM, a, 5, (const int64_t[]){5, 13107, 1}, &err), &err);
  ASSERT_EQ_U(s->num_blocks, 65535);
  fl_plan_release(p);

  /* With npu_clamp_blocks the block count is clamped to it, however large the product; the grid
   * slots still carry the whole grid. */
  d.target.npu.clamp_blocks = 40;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  int calls = s->calls;
  const int64_t clamped[][3] = {{65536, 1, 1}, {65536, 65536, 1}, {65536, 65537, 1}, {big, big, 4}, {big, big, big}, {5, 8, 1}};
  for (size_t i = 0; i < sizeof clamped / sizeof clamped[0]; i++) {
    ASSERT_OK(fl_launch(p, STREAM, a, 5, clamped[i], &err), &err);
    ASSERT_EQ(s->calls, ++calls);
    ASSERT_EQ_U(s->num_blocks, 40);
    int32_t g[3] = {(int32_t)clamped[i][0], (int32_t)clamped[i][1], (int32_t)clamped[i][2]};
    sig_expected(want, FAKE_ACL_SYNC_ADDR, 5, 1.5f, -(1LL << 40), g);
    expect_buffer(s, want, 72);
  }
  /* Below the clamp the product is passed as is. */
  ASSERT_OK(fl_launch(p, STREAM, a, 5, (const int64_t[]){2, 3, 1}, &err), &err);
  ASSERT_EQ_U(s->num_blocks, 6);
  ASSERT_FAILS(fl_launch(p, STREAM, a, 5, (const int64_t[]){0, 1, 1}, &err), &err, FL_BAD_GRID, "grid_dim_zero:0");
  ASSERT_FAILS(fl_launch(p, 0, a, 5, (const int64_t[]){1, 1, 1}, &err), &err, FL_BAD_STREAM, "stream_is_none");
  ASSERT_EQ(s->calls, calls + 1);
  fl_plan_release(p);

  /* A static grid is checked at creation against each dimension's limit. */
  d = npu_desc();
  d.static_grid[1] = 0;
  fl_plan *q = (fl_plan *)0x1;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_GRID, "grid_dim_zero:1");
  ASSERT_TRUE(q == NULL && err.stable);
  d.static_grid[1] = big + 1;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_GRID, "grid_dim_exceeds:1");
  /* ... and its product too, unless clamped: it would fail every launch, so the plan is refused. */
  d.static_grid[0] = 65536, d.static_grid[1] = 1, d.static_grid[2] = 1;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_GRID, "grid_product_exceeds");
  ASSERT_TRUE(q == NULL && err.stable);
  d.static_grid[0] = 256, d.static_grid[1] = 16, d.static_grid[2] = 16;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_GRID, "grid_product_exceeds");
  d.static_grid[0] = 65535, d.static_grid[1] = 1, d.static_grid[2] = 1;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  fl_plan_release(p);
  d.static_grid[0] = 65536;
  d.target.npu.clamp_blocks = 48;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, STREAM, a, 5, NULL, &err), &err);
  ASSERT_EQ_U(s->num_blocks, 48);
  sig_expected(want, FAKE_ACL_SYNC_ADDR, 5, 1.5f, -(1LL << 40), (const int32_t[]){65536, 1, 1});
  expect_buffer(s, want, 72);
  fl_plan_release(p);
}

static void fake_simt_cfg(void) {
  if (!in_child()) {
    run_child("fake_simt_cfg", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = npu_desc();
  d.target.npu.simt = true;
  d.target.npu.dyn_ubuf = 0x12345;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 1);
  ASSERT_TRUE(!s->cfg_null);
  ASSERT_EQ_U(s->num_attrs, 1);
  ASSERT_EQ(s->attr_id, 2); /* ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE */
  ASSERT_EQ_U(s->attr_value, 0x12345);
  ASSERT_EQ_U(s->num_blocks, 24);
  ASSERT_EQ_U(s->buffer_size, 72);
  fl_plan_release(p);
  /* A zero size is still attached when SIMT is on. */
  d.target.npu.dyn_ubuf = 0;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err);
  ASSERT_TRUE(!s->cfg_null);
  ASSERT_EQ_U(s->num_attrs, 1);
  ASSERT_EQ(s->attr_id, 2);
  ASSERT_EQ_U(s->attr_value, 0);
  fl_plan_release(p);
  /* SIMT off: no cfg at all, whatever npu_dyn_ubuf says. */
  d.target.npu.simt = false;
  d.target.npu.dyn_ubuf = 4096;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 3);
  ASSERT_TRUE(s->cfg_null);
  ASSERT_EQ_U(s->num_attrs, 0);
  fl_plan_release(p);
}

static void fake_launch_error(void) {
  if (!in_child()) {
    run_child("fake_launch_error", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = npu_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  /* An error from the runtime is reported with its code and recent message, as possibly submitted. */
  s->fail_next = 507015;
  s->fail_msg = "EZ9999: the fake kernel faulted";
  ASSERT_FAILS(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err, FL_BACKEND_ERROR,
               "backend_error:npu:507015:EZ9999: the fake kernel faulted");
  ASSERT_TRUE(err.backend_submitted && !err.stable);
  ASSERT_EQ(s->calls, 0);
  /* The switch is one-shot. */
  ASSERT_OK(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err);
  ASSERT_EQ(s->calls, 1);
  /* A long message is cut at 80 characters. */
  static const char long_msg[] = "EE1001: 0123456789012345678901234567890123456789012345678901234567890123456789"
                                 "TAIL THAT IS DROPPED";
  s->fail_next = -1;
  s->fail_msg = long_msg;
  ASSERT_FAILS(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err, FL_BACKEND_ERROR,
               "backend_error:npu:-1:EE1001: 0123456789012345678901234567890123456789012345678901234567890123456789"
               "TA");
  ASSERT_TRUE(err.backend_submitted);
  /* No message at all. */
  s->fail_next = 100000;
  s->fail_msg = NULL;
  ASSERT_FAILS(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err, FL_BACKEND_ERROR, "backend_error:npu:100000:");
  ASSERT_TRUE(err.backend_submitted);
  ASSERT_EQ(s->calls, 1);
  fl_plan_release(p);
}

static void fake_sync_addr_failure(void) {
  if (!in_child()) {
    run_child("fake_sync_addr_failure", NULL);
    return;
  }
  fake_acl *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *p = (fl_plan *)0x1;
  fl_plan_desc d = npu_desc();
  s->sync_fail = 507899;
  ASSERT_FAILS(fl_plan_create(&d, &p, &err), &err, FL_BACKEND_ERROR, "npu_ffts_unavailable:507899");
  ASSERT_TRUE(p == NULL && err.stable && !err.backend_submitted);
  ASSERT_EQ(s->sync_calls, 1);
  /* Success with a NULL address is a failure too. */
  s->sync_fail = 0;
  s->sync_addr = 0;
  p = (fl_plan *)0x1;
  ASSERT_FAILS(fl_plan_create(&d, &p, &err), &err, FL_BACKEND_ERROR, "npu_ffts_unavailable:0");
  ASSERT_TRUE(p == NULL);
  ASSERT_EQ(s->sync_calls, 2);
  /* The runtime is not asked when the caller gives the address or the kernel has no FFTS slot. */
  s->sync_fail = 507899;
  d.target.npu.ffts_addr = 0xfeed0000;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, STREAM, args_for(1), 5, NULL, &err), &err);
  uint64_t ffts;
  memcpy(&ffts, s->buffer, 8);
  ASSERT_EQ_U(ffts, 0xfeed0000);
  fl_plan_release(p);
  d = npu_desc();
  d.target.npu.ffts = false;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_layout(p)->ffts, -1);
  ASSERT_EQ_U(fl_plan_layout(p)->size, 64);
  fl_plan_release(p);
  ASSERT_EQ(s->sync_calls, 2);
  s->sync_fail = 0;
  s->sync_addr = FAKE_ACL_SYNC_ADDR;
}
