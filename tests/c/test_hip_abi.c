/* test_hip_abi.c: the hip backend without an AMD GPU: the unavailable error, its settings, and its
 * launches against the project's stand-in libamdhip64 (tools/fldev/hip_stub.c, built here), given
 * as its "library" setting. Each stand-in test runs in a child process, because the backend loads
 * once per process. The declarations against HIP's own header and the kernarg offsets against real
 * hsaco metadata are checked by tests/python/test_hip.py (Triton's wheel brings both); what needs
 * a real GPU is tools/gpu-check's, never run here. */
#include "fastlaunch.h"
#include "fastlaunch_testing.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#define FL_TESTS(X)                 \
  X(layout_options)                 \
  X(unavailable_without_libhip)     \
  X(settings_are_checked)           \
  X(stub_version_too_old)           \
  X(stub_buffer)                    \
  X(stub_param_array)               \
  X(stub_refusals)
#define FL_TEST_MAIN
#include "fl_test.h"

#include "../../tools/fldev/hip_stub.h"

extern char **environ;

static bool in_stub_child(void) {
  const char *lib = getenv("FL_TEST_HIP_STUB"), *mode = getenv("FL_TEST_HIP_PARAMS");
  if (!lib) return false;
  fl_error err;
  if (fl_backend_configure(FL_BACKEND_HIP, "library", lib, &err) != FL_OK ||
      fl_backend_configure(FL_BACKEND_HIP, "params", mode ? mode : "packed", &err) != FL_OK) {
    fprintf(stderr, "configure: %s\n", err.reason);
    exit(1);
  }
  return true;
}

static hip_stub_state *stub_state(void) {
  void *h = dlopen(getenv("FL_TEST_HIP_STUB"), RTLD_NOW | RTLD_GLOBAL);
  return h ? dlsym(h, "stub") : NULL;
}

/* Builds the stand-in and runs this binary again with it, one test in the child. */
static void run_child(const char *test, const char *mode) {
  char dir[] = "/tmp/fl_hipstub_XXXXXX", lib[256], cmd[1024];
  if (!mkdtemp(dir)) FL_FAIL_AT("mkdtemp failed");
  const char *cc = getenv("CC") ? getenv("CC") : FL_TEST_CC;
  const char *src = getenv("FL_TEST_SRC_DIR") ? getenv("FL_TEST_SRC_DIR") : FL_TEST_SRC_DIR;
  snprintf(lib, sizeof lib, "%s/libamdhip64.so", dir);
  snprintf(cmd, sizeof cmd, "%s -std=c11 -Wall -Wextra -Werror -shared -fPIC -O1 -o %s %s/tools/fldev/hip_stub.c", cc,
           lib, src);
  ASSERT_EQ(system(cmd), 0);
  setenv("FL_TEST_HIP_STUB", lib, 1);
  setenv("FL_TEST_HIP_PARAMS", mode, 1);
  char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_TRUE(n > 0);
  self[n] = '\0';
  char *argv[] = {self, (char *)test, NULL};
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  unsetenv("FL_TEST_HIP_STUB");
  unsetenv("FL_TEST_HIP_PARAMS");
  unlink(lib);
  rmdir(dir);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FL_FAIL_AT("child run of %s (%s) failed", test, mode);
}

/* hip's options: checked by the layout, refused by the other ABIs (and theirs by hip). */
static void layout_options(void) {
  if (in_stub_child()) return;
  fl_error err;
  fl_layout l;
  size_t off[2];
  const fl_kind ok[2] = {FL_KIND_PTR, FL_KIND_I32};
  fl_target hp = {.abi = FL_ABI_HIP, .hip.hidden_ptrs = 3};
  ASSERT_FAILS(fl_layout_compute(&hp, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "option_out_of_range:hidden_ptrs:3");
  hp.hip.hidden_ptrs = 2;
  hp.hip.warp_size = 48; /* a wavefront is 32 or 64 lanes */
  ASSERT_FAILS(fl_layout_compute(&hp, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR,
               "option_out_of_range:warp_size:48");
  hp.hip.warp_size = 32;
  ASSERT_OK(fl_layout_compute(&hp, ok, 2, &l, off, &err), &err);
  ASSERT_EQ_U(l.hidden_count, 2);
  ASSERT_EQ_U(l.hidden_first, 16);
  ASSERT_EQ_U(l.size, 32);
  static const struct {
    fl_abi abi;
    fl_target opts;
    const char *reason;
  } foreign[] = {
      {FL_ABI_HIP, {.cuda.hidden_ptrs = 2}, "option_not_for_abi:hidden_ptrs:hip"},
      {FL_ABI_HIP, {.cuda.num_warps = 8}, "option_not_for_abi:num_warps:hip"},
      {FL_ABI_CUDA, {.hip.hidden_ptrs = 2}, "option_not_for_abi:hidden_ptrs:cuda"},
      {FL_ABI_CUDA, {.hip.warp_size = 64}, "option_not_for_abi:warp_size:cuda"},
      {FL_ABI_NPU, {.hip.cooperative = true}, "option_not_for_abi:cooperative:npu"},
      {FL_ABI_HOST, {.hip.num_warps = 4}, "option_not_for_abi:num_warps:host"},
  };
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
    fl_target a = foreign[i].opts;
    a.abi = foreign[i].abi;
    ASSERT_FAILS(fl_layout_compute(&a, ok, 2, &l, off, &err), &err, FL_BAD_DESCRIPTOR, foreign[i].reason);
  }
  ASSERT_STREQ(fl_abi_name(FL_ABI_HIP), "hip");
}

static void unavailable_without_libhip(void) {
  if (in_stub_child()) return;
  void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    SKIP("libamdhip64 is installed here: the unavailable path was not exercised");
  }
  fl_error err;
  ASSERT_EQ(fl_backend_load(FL_BACKEND_HIP, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:hip:libamdhip64.so", 38) == 0);
  ASSERT_TRUE(err.stable && !err.backend_submitted);
  void *f, *m;
  ASSERT_EQ(fl_hip_module_load("x", "k", &f, &m, &err), FL_BACKEND_UNAVAILABLE);
  uint64_t s;
  ASSERT_EQ(fl_stream_create(FL_BACKEND_HIP, &s, &err), FL_BACKEND_UNAVAILABLE);
}

static void settings_are_checked(void) {
  if (in_stub_child()) return;
  fl_error err;
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HIP, "nope", "x", &err), &err, FL_BAD_VALUE, "setting_unknown:hip:nope");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HIP, "params", "list", &err), &err, FL_BAD_VALUE,
               "setting_invalid:hip:params");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HIP, "library", "", &err), &err, FL_BAD_VALUE,
               "setting_invalid:hip:library");
  /* Loaded (or tried: the runtime is missing here), its settings hold; the value in use is accepted. */
  fl_backend_load(FL_BACKEND_HIP, &err);
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HIP, "library", "/x/libamdhip64.so", &err), &err, FL_UNSUPPORTED,
               "backend_loaded:hip:library");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HIP, "params", "array", &err), &err, FL_UNSUPPORTED,
               "backend_loaded:hip:params");
  ASSERT_OK(fl_backend_configure(FL_BACKEND_HIP, "params", "packed", &err), &err);
}

/* A runtime older than HIP 6 is refused at load, as Triton's AMD driver refuses it. */
static void stub_version_too_old(void) {
  if (!in_stub_child()) {
    run_child("stub_version_too_old", "packed");
    return;
  }
  hip_stub_state *s = stub_state();
  ASSERT_TRUE(s != NULL);
  s->version = 50731921; /* 5.7.31921 */
  fl_error err;
  ASSERT_FAILS(fl_backend_load(FL_BACKEND_HIP, &err), &err, FL_BACKEND_UNAVAILABLE,
               "backend_unavailable:hip:hip_version_too_old:5.7:needs_6");
}

static const fl_kind sig[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_FP16, FL_KIND_I64, FL_KIND_I8};

static fl_plan_desc hip_desc(void) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_HIP;
  d.target.abi = FL_ABI_HIP;
  d.target.hip.hidden_ptrs = 2;
  d.target.hip.num_warps = 8;
  d.target.hip.warp_size = 64;
  d.target.hip.shared_mem = 1000;
  d.kernel = (void *)0xf00d;
  d.kinds = sig;
  d.nkinds = 5;
  d.runtime_arg_count = 4;
  static fl_value fixed[1];
  fixed[0] = fl_int(-5);
  d.fixed_args = fixed;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = 5, d.static_grid[1] = 2, d.static_grid[2] = 1;
  return d;
}

static void launches_through_stub(bool param_array) {
  if (!in_stub_child()) {
    run_child(param_array ? "stub_param_array" : "stub_buffer", param_array ? "array" : "packed");
    return;
  }
  hip_stub_state *s = stub_state();
  ASSERT_TRUE(s != NULL);
  s->record = 1;
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = hip_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(fl_plan_device(p), 0);
  fl_value args[] = {fl_ptr((void *)0x7f3a00001000), fl_int(-3), fl_float(1.5), fl_int(1LL << 40)};
  ASSERT_OK(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err);
  ASSERT_EQ(s->calls, 1);
  ASSERT_EQ(s->grid[0], 5);
  ASSERT_EQ(s->grid[1], 2);
  ASSERT_EQ(s->grid[2], 1);
  ASSERT_EQ(s->block[0], 512); /* 64 lanes x 8 warps */
  ASSERT_EQ(s->block[1], 1);
  ASSERT_EQ(s->shared, 1000);
  ASSERT_TRUE(s->stream == 0x7f3a5c001230);
  ASSERT_TRUE(s->function == 0xf00d);
  ASSERT_EQ(s->used_params, param_array);
  /* ptr@0 i32@8 fp16@12 i64@16 i8@24, the scratch pointers @32 and @40 (zero), segment of 48 */
  ASSERT_EQ(fl_plan_layout(p)->size, 48);
  unsigned char want[48];
  memset(want, 0, sizeof want);
  uint64_t ptr = 0x7f3a00001000;
  int32_t i32 = -3;
  uint16_t h = 0x3e00;
  int64_t i64 = 1LL << 40;
  int8_t i8 = -5;
  memcpy(want + 0, &ptr, 8);
  memcpy(want + 8, &i32, 4);
  memcpy(want + 12, &h, 2);
  memcpy(want + 16, &i64, 8);
  memcpy(want + 24, &i8, 1);
  if (!param_array) {
    ASSERT_EQ(s->kernarg_size, 48);
    ASSERT_TRUE(memcmp(s->kernarg, want, 48) == 0);
  }
  /* Another device made current after the plan: refused before the runtime launches anything. */
  s->device = 1;
  ASSERT_FAILS(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err, FL_BAD_STREAM, "hip_device_changed:0:1");
  ASSERT_TRUE(!err.backend_submitted);
  s->fail_get_device = 101;
  s->device = 0;
  ASSERT_FAILS(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err, FL_BAD_STREAM, "hip_device_changed:0:-1");
  s->fail_get_device = 0;
  ASSERT_EQ(s->calls, 1);
  /* A runtime error after the boundary says the launch may have been submitted, naming the call. */
  s->fail_launch = 719;
  ASSERT_FAILS(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err, FL_BACKEND_ERROR,
               "backend_error:hip:hipModuleLaunchKernel:hipErrorLaunchFailure");
  ASSERT_TRUE(err.backend_submitted && !err.stable);
  ASSERT_OK(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err);
  ASSERT_EQ(s->calls, 2);
  fl_plan_release(p);
  /* gfx10 and later: 32-lane wavefronts. */
  d.target.hip.warp_size = 32;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, 0x7f3a5c001230, args, 4, NULL, &err), &err);
  ASSERT_EQ(s->block[0], 256);
  fl_plan_release(p);
  /* The floor's loop hands the runtime a parameter array, as Triton does. */
  d = hip_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  uint64_t ns = 0;
  const uint32_t g[3] = {1, 1, 1};
  ASSERT_OK(fl_bench_launch_loop(p, 0x7f3a5c001230, want, g, 10, &ns, &err), &err);
  ASSERT_EQ(s->calls, 13);
  ASSERT_EQ(s->used_params, 1);
  fl_plan_release(p);
}

static void stub_buffer(void) { launches_through_stub(false); }
static void stub_param_array(void) { launches_through_stub(true); }

/* What the backend refuses at plan creation, by name, and a module that is not an hsaco. */
static void stub_refusals(void) {
  if (!in_stub_child()) {
    run_child("stub_refusals", "packed");
    return;
  }
  hip_stub_state *s = stub_state();
  ASSERT_TRUE(s != NULL);
  fl_error err;
  fl_plan *q = (fl_plan *)0x1;
  fl_plan_desc d = hip_desc();
  d.target.hip.cooperative = true;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_UNSUPPORTED, "hip_cooperative_not_served");
  ASSERT_TRUE(q == NULL);
  d = hip_desc();
  d.target.hip.num_ctas = 2;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_UNSUPPORTED, "hip_num_ctas_not_served:2");
  d = hip_desc();
  d.target.hip.num_warps = 32;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_UNSUPPORTED, "hip_block_exceeds_1024:2048");
  d = hip_desc();
  d.target.hip.shared_mem = 70000;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_UNSUPPORTED, "shared_mem_exceeds_device:70000:65536");
  d = hip_desc();
  d.target.hip.warp_size = 16;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "option_out_of_range:warp_size:16");
  s->fail_get_device = 101;
  d = hip_desc();
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BACKEND_ERROR,
               "backend_error:hip:hipGetDevice:hipErrorInvalidDevice");
  s->fail_get_device = 0;
  ASSERT_EQ(s->calls, 0);
  void *fn, *mod;
  static const char not_hsaco[128] = "not an ELF image: the stand-in reads its header as the runtime does";
  ASSERT_FAILS(fl_hip_module_load(not_hsaco, "k", &fn, &mod, &err), &err,
               FL_KERNEL_LOAD, "kernel_load:hip:hipModuleLoadData:hipErrorInvalidImage");
  s->fail_load = 209;
  ASSERT_FAILS(fl_hip_module_load("x", "k", &fn, &mod, &err), &err, FL_KERNEL_LOAD,
               "kernel_load:hip:hipModuleLoadData:hipErrorNoBinaryForGpu");
  uint64_t st;
  ASSERT_FAILS(fl_stream_create(FL_BACKEND_HIP, &st, &err), &err, FL_UNSUPPORTED, "stream_create_unsupported:hip");
}
