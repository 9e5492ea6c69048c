/* test_cuda_abi.c: the cuda backend without a GPU: its driver declarations against cuda.h, the
 * unavailable error, and its launches against a recording stand-in libcuda (tests/c/fakes). What
 * needs a real GPU runs in tools/gpu-check instead. */
#include "fastlaunch.h"
#include "backends/cuda_api.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FL_HAVE_CUDA_H
#include <cuda.h>
#endif

#define FL_TESTS(X)                    \
  X(driver_declarations_match_cuda_h)  \
  X(unavailable_without_libcuda)       \
  X(settings_are_checked)              \
  X(fake_driver_buffer)                \
  X(fake_driver_param_array)           \
  X(fake_driver_tensor_maps)           \
  X(tensor_map_layout)
#define FL_TEST_MAIN
#include "fl_test.h"

extern char **environ;

static void driver_declarations_match_cuda_h(void) {
#ifdef FL_HAVE_CUDA_H
  ASSERT_EQ(sizeof(fl_CUlaunchConfig), sizeof(CUlaunchConfig));
  ASSERT_EQ(offsetof(fl_CUlaunchConfig, sharedMemBytes), offsetof(CUlaunchConfig, sharedMemBytes));
  ASSERT_EQ(offsetof(fl_CUlaunchConfig, hStream), offsetof(CUlaunchConfig, hStream));
  ASSERT_EQ(offsetof(fl_CUlaunchConfig, attrs), offsetof(CUlaunchConfig, attrs));
  ASSERT_EQ(offsetof(fl_CUlaunchConfig, numAttrs), offsetof(CUlaunchConfig, numAttrs));
  ASSERT_EQ(sizeof(fl_CUlaunchAttribute), sizeof(CUlaunchAttribute));
  ASSERT_EQ(offsetof(fl_CUlaunchAttribute, value), offsetof(CUlaunchAttribute, value));
  ASSERT_EQ(sizeof(fl_CUlaunchAttributeValue), sizeof(CUlaunchAttributeValue));
  ASSERT_EQ(FL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  ASSERT_EQ(FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  ASSERT_EQ(FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
            CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  ASSERT_EQ(FL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  ASSERT_EQ(FL_CU_CLUSTER_SCHEDULING_POLICY_SPREAD, CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  ASSERT_EQ(FL_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  ASSERT_EQ(FL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  ASSERT_EQ(FL_CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  ASSERT_EQ(FL_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  ASSERT_TRUE(FL_CU_LAUNCH_PARAM_BUFFER_POINTER == CU_LAUNCH_PARAM_BUFFER_POINTER);
  ASSERT_TRUE(FL_CU_LAUNCH_PARAM_BUFFER_SIZE == CU_LAUNCH_PARAM_BUFFER_SIZE);
  ASSERT_TRUE(FL_CU_LAUNCH_PARAM_END == CU_LAUNCH_PARAM_END);
  ASSERT_EQ(FL_CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_INTERLEAVE_NONE);
  ASSERT_EQ(FL_CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  ASSERT_EQ(FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ASSERT_EQ(FL_CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  ASSERT_EQ(FL_CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32);
  ASSERT_EQ(sizeof(CUtensorMap), 128);
  ASSERT_EQ(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 9); /* Triton's device enum says 10: the backend maps it */
  ASSERT_EQ(CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 8);
  ASSERT_EQ(CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, 10);
#else
  SKIP("cuda.h not found: the driver declarations were not compared (the fake-driver tests still run)");
#endif
}

/* A child run: the fake driver and the parameter mode its parent chose (the test's own variables),
 * given to the backend as its settings before it loads. */
static bool in_fake_child(void) {
  const char *lib = getenv("FL_TEST_FAKE_CUDA"), *mode = getenv("FL_TEST_CUDA_PARAMS");
  if (!lib) return false;
  fl_error err;
  if (fl_backend_configure(FL_BACKEND_CUDA, "library", lib, &err) != FL_OK ||
      fl_backend_configure(FL_BACKEND_CUDA, "params", mode ? mode : "packed", &err) != FL_OK) {
    fprintf(stderr, "configure: %s\n", err.reason); /* the parent sees the child fail */
    exit(1);
  }
  return true;
}

static void unavailable_without_libcuda(void) {
  if (in_fake_child()) return;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    SKIP("libcuda is installed here: the unavailable path was not exercised");
  }
  fl_error err;
  ASSERT_EQ(fl_backend_load(FL_BACKEND_CUDA, &err), FL_BACKEND_UNAVAILABLE);
  ASSERT_TRUE(strncmp(err.reason, "backend_unavailable:cuda:libcuda.so", 35) == 0);
  ASSERT_TRUE(err.stable && !err.backend_submitted);
  void *f, *m;
  ASSERT_EQ(fl_cuda_module_load("x", "k", &f, &m, &err), FL_BACKEND_UNAVAILABLE);
  uint64_t s;
  ASSERT_EQ(fl_stream_create(FL_BACKEND_CUDA, &s, &err), FL_BACKEND_UNAVAILABLE);
}

/* fl_backend_configure: names and values are checked, and a loaded backend keeps its settings. */
static void settings_are_checked(void) {
  if (in_fake_child()) return;
  fl_error err;
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_COUNT, "params", "array", &err), &err, FL_BAD_DESCRIPTOR,
               "backend_unknown:5");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_HOST, "library", "x", &err), &err, FL_BAD_VALUE,
               "setting_unknown:host:library");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "nope", "x", &err), &err, FL_BAD_VALUE, "setting_unknown:cuda:nope");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, NULL, "x", &err), &err, FL_BAD_VALUE, "setting_unknown:cuda:(null)");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "params", "list", &err), &err, FL_BAD_VALUE,
               "setting_invalid:cuda:params");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "params", NULL, &err), &err, FL_BAD_VALUE,
               "setting_invalid:cuda:params");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_NPU, "libruntime", "", &err), &err, FL_BAD_VALUE,
               "setting_invalid:npu:libruntime");
  char long_path[5000];
  memset(long_path, 'a', sizeof long_path - 1);
  long_path[sizeof long_path - 1] = '\0';
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "library", long_path, &err), &err, FL_BAD_VALUE,
               "setting_invalid:cuda:library");
  /* Loaded (or tried: the driver is missing here), its settings hold; the value in use is accepted. */
  fl_backend_load(FL_BACKEND_CUDA, &err);
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "params", "array", &err), &err, FL_UNSUPPORTED,
               "backend_loaded:cuda:params");
  ASSERT_FAILS(fl_backend_configure(FL_BACKEND_CUDA, "library", "/x/libcuda.so", &err), &err, FL_UNSUPPORTED,
               "backend_loaded:cuda:library");
  ASSERT_OK(fl_backend_configure(FL_BACKEND_CUDA, "params", "packed", &err), &err);
}

/* Builds the fake driver and runs this binary again with it, one test in the child. */
static void run_child(const char *test, const char *mode) {
  char dir[] = "/tmp/fl_fakecuda_XXXXXX", lib[256], cmd[1024];
  if (!mkdtemp(dir)) FL_FAIL_AT("mkdtemp failed");
  const char *cc = getenv("CC") ? getenv("CC") : FL_TEST_CC;
  const char *src = getenv("FL_TEST_SRC_DIR") ? getenv("FL_TEST_SRC_DIR") : FL_TEST_SRC_DIR;
  snprintf(lib, sizeof lib, "%s/libfakecuda.so", dir);
  snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -o %s %s/tests/c/fakes/fake_cuda.c", cc, lib, src);
  ASSERT_EQ(system(cmd), 0);
  setenv("FL_TEST_FAKE_CUDA", lib, 1);
  setenv("FL_TEST_CUDA_PARAMS", mode, 1);
  char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_TRUE(n > 0);
  self[n] = '\0';
  char *argv[] = {self, (char *)test, NULL};
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  unsetenv("FL_TEST_FAKE_CUDA");
  unsetenv("FL_TEST_CUDA_PARAMS");
  unlink(lib);
  rmdir(dir);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FL_FAIL_AT("child run of %s (%s) failed", test, mode);
}

#include "fakes/fake_cuda.h"

static fake_launch *fake_state(void) {
  void *h = dlopen(getenv("FL_TEST_FAKE_CUDA"), RTLD_NOW | RTLD_NOLOAD);
  return h ? dlsym(h, "fake_cuda_state") : NULL;
}

static const fl_kind sig[] = {FL_KIND_PTR, FL_KIND_I32, FL_KIND_FP16, FL_KIND_I64, FL_KIND_I8};

static fl_plan_desc cuda_desc(void) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_CUDA;
  d.target.abi = FL_ABI_CUDA;
  d.target.cuda.hidden_ptrs = 2;
  d.kernel = (void *)0xf00d;
  d.kinds = sig;
  d.nkinds = 5;
  d.runtime_arg_count = 4;
  static fl_value fixed[1];
  fixed[0] = fl_int(-5);
  d.fixed_args = fixed;
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = 5, d.static_grid[1] = 2, d.static_grid[2] = 1;
  d.target.cuda.num_warps = 8;
  d.target.cuda.shared_mem = 1000;
  return d;
}

static void launches_through_fake(bool param_array) {
  if (!in_fake_child()) {
    run_child(param_array ? "fake_driver_param_array" : "fake_driver_buffer", param_array ? "array" : "packed");
    return;
  }
  fl_error err;
  fl_plan *p;
  fl_plan_desc d = cuda_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  fake_launch *s = fake_state();
  ASSERT_TRUE(s != NULL);
  fl_value args[] = {fl_ptr((void *)0x7000), fl_int(-3), fl_float(1.5), fl_int(1LL << 40)};
  /* A thread without a current context is refused before anything reaches the driver. */
  s->no_context = 1;
  ASSERT_FAILS(fl_launch(p, 0x77, args, 4, NULL, &err), &err, FL_BAD_STREAM, "cuda_no_current_context");
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_EQ(s->calls, 0);
  s->no_context = 0;
  /* Another context made current after the plan (or the plan's popped): refused before the driver. */
  s->context = 1;
  ASSERT_FAILS(fl_launch(p, 0x77, args, 4, NULL, &err), &err, FL_BAD_STREAM, "cuda_context_changed");
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_EQ(s->calls, 0);
  s->context = 0;
  ASSERT_OK(fl_launch(p, 0x77, args, 4, NULL, &err), &err);
  ASSERT_EQ(s->calls, 1);
  ASSERT_EQ(s->ex_calls, 0);
  ASSERT_EQ(s->grid[0], 5);
  ASSERT_EQ(s->grid[1], 2);
  ASSERT_EQ(s->grid[2], 1);
  ASSERT_EQ(s->block[0], 256);
  ASSERT_EQ(s->block[1], 1);
  ASSERT_EQ(s->shared, 1000);
  ASSERT_EQ_U((uintptr_t)s->stream, 0x77);
  ASSERT_EQ_U((uintptr_t)s->function, 0xf00d);
  const fl_layout *l = fl_plan_layout(p);
  /* ptr@0 i32@8 fp16@12 i64@16 i8@24, hidden pointers @32 and @40, size 48 */
  ASSERT_EQ(l->size, 48);
  unsigned char want[48];
  memset(want, 0, sizeof want);
  uint64_t ptr = 0x7000;
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
    ASSERT_TRUE(s->params == NULL);
    ASSERT_EQ(s->buffer_size, 48);
    ASSERT_TRUE(memcmp(s->buffer, want, 48) == 0);
  } else {
    /* One pointer per parameter, each at its slot: 5 arguments then 2 hidden scratch pointers. */
    ASSERT_TRUE(s->extra == NULL);
    size_t offs[] = {0, 8, 12, 16, 24, 32, 40};
    size_t sizes[] = {8, 4, 2, 8, 1, 8, 8};
    for (int i = 0; i < 7; i++) ASSERT_TRUE(memcmp(s->param_copies[i], want + offs[i], sizes[i]) == 0);
  }
  /* A y dimension past 65535 is refused before the driver is called. */
  fl_plan_release(p);
  d.grid_mode = FL_GRID_CALLER;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  int64_t tall[3] = {1, 70000, 1}, ok[3] = {3, 4, 5};
  ASSERT_FAILS(fl_launch(p, 0x77, args, 4, tall, &err), &err, FL_BAD_GRID, "grid_dim_exceeds:1");
  ASSERT_EQ(s->calls, 1);
  /* A driver error after the boundary says the launch may have been submitted. */
  s->fail_next = 700;
  ASSERT_FAILS(fl_launch(p, 0x77, args, 4, ok, &err), &err, FL_BACKEND_ERROR, "backend_error:cuda:CUDA_ERROR_ILLEGAL_ADDRESS");
  ASSERT_TRUE(err.backend_submitted && !err.stable);
  ASSERT_OK(fl_launch(p, 0x77, args, 4, ok, &err), &err);
  ASSERT_EQ(s->calls, 2);
  ASSERT_EQ(s->grid[2], 5);
  fl_plan_release(p);

  /* Clusters, cooperative and PDL go through cuLaunchKernelEx with the x grid scaled by num_ctas. */
  d = cuda_desc();
  d.target.cuda.num_ctas = 2;
  d.target.cuda.cooperative = true;
  d.target.cuda.pdl = true;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_OK(fl_launch(p, 0x77, args, 4, NULL, &err), &err);
  ASSERT_EQ(s->ex_calls, 1);
  ASSERT_EQ(s->grid[0], 10);
  ASSERT_EQ(s->nattrs, 4);
  ASSERT_EQ(s->attr_ids[0], FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  ASSERT_EQ(s->attr_vals[0][0], 2);
  ASSERT_EQ(s->attr_vals[0][1], 1);
  ASSERT_EQ(s->attr_ids[1], FL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  ASSERT_EQ(s->attr_vals[1][0], FL_CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  ASSERT_EQ(s->attr_ids[2], FL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  ASSERT_EQ(s->attr_ids[3], FL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  fl_plan_release(p);
  /* gridX x num_ctas past int32 is refused before the driver. */
  d.grid_mode = FL_GRID_STATIC;
  d.static_grid[0] = INT32_MAX;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_FAILS(fl_launch(p, 0x77, args, 4, NULL, &err), &err, FL_BAD_GRID, "grid_dim_exceeds:0");
  ASSERT_TRUE(!err.backend_submitted);
  fl_plan_release(p);

  /* More than 48 KiB of shared memory opts in: optin (232448) minus the static size (1024). */
  d = cuda_desc();
  d.target.cuda.shared_mem = 100000;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  ASSERT_EQ(s->last_set_attr, FL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  ASSERT_EQ(s->last_set_value, 232448 - 1024);
  fl_plan_release(p);
  d.target.cuda.shared_mem = 300000;
  fl_plan *q = (fl_plan *)0x1;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_UNSUPPORTED, "shared_mem_exceeds_device:300000:231424");
  ASSERT_TRUE(q == NULL);
  d = cuda_desc();
  d.target.cuda.num_warps = 64;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "option_out_of_range:num_warps:64");
  d = cuda_desc();
  d.target.cuda.num_ctas = 32;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "option_out_of_range:num_ctas:32");
  /* Module loading reports the driver's error name. */
  void *fn, *mod;
  ASSERT_OK(fl_cuda_module_load("image", "kernel", &fn, &mod, &err), &err);
  fl_cuda_module_unload(mod);
  ASSERT_FAILS(fl_cuda_module_load("image", "missing", &fn, &mod, &err), &err, FL_KERNEL_LOAD,
               "kernel_load:cuda:cuModuleGetFunction:CUDA_ERROR_FAKE:missing");
  /* cuda streams belong to the framework. */
  uint64_t st;
  ASSERT_FAILS(fl_stream_create(FL_BACKEND_CUDA, &st, &err), &err, FL_UNSUPPORTED, "stream_create_unsupported:cuda");
}

static void fake_driver_buffer(void) { launches_through_fake(false); }
static void fake_driver_param_array(void) { launches_through_fake(true); }

/* A tensor map in the cuda ABI: 128 bytes at a 64-aligned offset, as ptxas declares Triton's
 * nvTmaDesc parameter (`.param .align 64 .b8 p[128]`), here against the C struct a compiler lays out
 * for the same members (a 2-D descriptor's map, shape as i32, strides as i64, twice, then an i32 and
 * the two scratch pointers). Every other ABI refuses it by name. */
static void tensor_map_layout(void) {
  typedef struct { _Alignas(64) unsigned char b[128]; } map;
  struct s { map a; int32_t s0, s1; int64_t t0, t1; map b; int32_t u0, u1; int64_t v0, v1; int32_t m; void *g, *p; };
  const fl_kind k[] = {FL_KIND_TMAP, FL_KIND_I32, FL_KIND_I32, FL_KIND_I64, FL_KIND_I64,
                       FL_KIND_TMAP, FL_KIND_I32, FL_KIND_I32, FL_KIND_I64, FL_KIND_I64, FL_KIND_I32};
  const size_t want[] = {offsetof(struct s, a), offsetof(struct s, s0), offsetof(struct s, s1), offsetof(struct s, t0),
                         offsetof(struct s, t1), offsetof(struct s, b), offsetof(struct s, u0), offsetof(struct s, u1),
                         offsetof(struct s, v0), offsetof(struct s, v1), offsetof(struct s, m)};
  fl_target t = {.abi = FL_ABI_CUDA, .cuda.hidden_ptrs = 2};
  fl_layout l;
  size_t off[11];
  fl_error err;
  ASSERT_OK(fl_layout_compute(&t, k, 11, &l, off, &err), &err);
  for (size_t i = 0; i < 11; i++) ASSERT_EQ_U(off[i], want[i]);
  ASSERT_EQ_U(off[5], 192);
  ASSERT_EQ((size_t)l.hidden_first, offsetof(struct s, g));
  ASSERT_EQ_U(l.size, sizeof(struct s));
  ASSERT_EQ_U(l.align, 64);
  const char *names[] = {"host", "cuda", "npu", "hip"};
  for (int abi = 0; abi < FL_ABI_COUNT; abi++) {
    if (abi == FL_ABI_CUDA) continue;
    fl_target o = {.abi = abi};
    char want_reason[64];
    snprintf(want_reason, sizeof want_reason, "kind_not_in_abi:1:tmap:%s", names[abi]);
    const fl_kind one[] = {FL_KIND_PTR, FL_KIND_TMAP};
    ASSERT_FAILS(fl_layout_compute(&o, one, 2, &l, off, &err), &err, FL_BAD_KIND, want_reason);
  }
}

/* Tensor maps (FL_KIND_TMAP) through the fake driver: the arguments Triton's launcher gives
 * cuTensorMapEncodeTiled, the map by value in a parameter array, the memo, the fix-up for drivers up
 * to 13.1 (with Triton's 32-bit sum), and the refusals, each before anything is submitted. */
static const fl_kind tmap_sig[] = {FL_KIND_TMAP, FL_KIND_I32, FL_KIND_I32, FL_KIND_I64, FL_KIND_I64, FL_KIND_PTR};
static const fl_tensor_map_meta tmap_meta = {.swizzle = 3, .elem_size = 2, .elem_type = 6, .rank = 2, .block = {64, 32}};

static fl_plan_desc tmap_desc(void) {
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  d.backend = FL_BACKEND_CUDA;
  d.target.abi = FL_ABI_CUDA;
  d.target.cuda.hidden_ptrs = 2;
  d.kernel = (void *)0xf00d;
  d.kinds = tmap_sig;
  d.nkinds = d.runtime_arg_count = 6;
  d.grid_mode = FL_GRID_CALLER;
  d.tensor_maps = &tmap_meta;
  d.ntensor_maps = 1;
  return d;
}

/* Launches t (shape and strides as the following arguments, as Triton's expanded signature has them). */
static fl_status tmap_launch(fl_plan *p, const fl_tensor_map_value *t, fl_error *err) {
  fl_value a[] = {fl_tensor_map(t), fl_int(t->shape[0]), fl_int(t->shape[1]), fl_int(t->strides[0]),
                  fl_int(t->strides[1]), fl_ptr((void *)0x7f00000a0000)};
  int64_t g[3] = {4, 1, 1};
  return fl_launch(p, 0x7f3a5c0099a0, a, 6, g, err);
}

static bool bit21(const unsigned char *map) {
  uint64_t w;
  memcpy(&w, map + 8, 8);
  return (w >> 21) & 1;
}

static void tensor_map_refusals(fake_launch *s) {
  fl_error err;
  fl_plan *q = NULL;
  fl_plan_desc d = tmap_desc();
  d.ntensor_maps = 0;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "tensor_maps_count_mismatch:0:1");
  d = tmap_desc();
  fl_tensor_map_meta bad = tmap_meta;
  bad.rank = 6;
  d.tensor_maps = &bad;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "tmap_meta_invalid:0:rank_6");
  bad = tmap_meta;
  bad.elem_size = 3;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "tmap_meta_invalid:0:elem_size_3");
  d = tmap_desc();
  d.runtime_arg_count = 0; /* a tensor map cannot be fixed */
  fl_value fixed[6] = {fl_int(0), fl_int(0), fl_int(0), fl_int(0), fl_int(0), fl_int(0)};
  d.fixed_args = fixed;
  d.ntensor_maps = 0;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_DESCRIPTOR, "fixed_tmap_unsupported:0");
  d = tmap_desc();
  memset(&d.target, 0, sizeof d.target);
  d.target.abi = FL_ABI_HOST;
  d.backend = FL_BACKEND_NULL;
  ASSERT_FAILS(fl_plan_create(&d, &q, &err), &err, FL_BAD_KIND, "kind_not_in_abi:0:tmap:host");
  ASSERT_TRUE(q == NULL);
  ASSERT_EQ(s->tmap_calls, 0);
}

static void fake_driver_tensor_maps(void) {
  if (!in_fake_child()) {
    run_child("fake_driver_tensor_maps", "packed");
    return;
  }
  fl_error err;
  ASSERT_OK(fl_backend_load(FL_BACKEND_CUDA, &err), &err);
  fake_launch *s = fake_state();
  ASSERT_TRUE(s != NULL);
  tensor_map_refusals(s);
  const unsigned sizes[] = {128, 4, 4, 8, 8, 8, 8, 8};
  memcpy(s->param_sizes, sizes, sizeof sizes);
  s->driver_version = 13000;
  fl_plan *p;
  fl_plan_desc d = tmap_desc();
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  fl_tensor_map_value t = {.base = 0x7f0000001000, .rank = 2, .shape = {1000, 64}, .strides = {64, 1}};
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  /* Triton's arguments: innermost first, byte strides without the outermost, f16 (6), 128-byte L2. */
  ASSERT_EQ(s->tmap_calls, 1);
  ASSERT_EQ(s->calls, 1);
  ASSERT_TRUE(s->extra == NULL); /* a tensor map goes by a parameter array */
  ASSERT_EQ(s->tmap_type, 6);
  ASSERT_EQ(s->tmap_rank, 2);
  ASSERT_EQ_U(s->tmap_address, 0x7f0000001000);
  ASSERT_EQ_U(s->tmap_dims[0], 64);
  ASSERT_EQ_U(s->tmap_dims[1], 1000);
  ASSERT_EQ_U(s->tmap_strides[0], 128);
  ASSERT_EQ(s->tmap_box[0], 32);
  ASSERT_EQ(s->tmap_box[1], 64);
  ASSERT_EQ(s->tmap_estrides[0], 1);
  ASSERT_EQ(s->tmap_estrides[1], 1);
  ASSERT_EQ(s->tmap_interleave, 0);
  ASSERT_EQ(s->tmap_swizzle, 3);
  ASSERT_EQ(s->tmap_l2, 2);
  ASSERT_EQ(s->tmap_fill, 0);
  /* The map by value, its bit 21 cleared: the last byte index, 63*2 + 999*128, is below 128 KiB. */
  unsigned char want[128];
  memcpy(want, s->tmap_map, 128);
  ASSERT_TRUE(bit21(want));
  ASSERT_TRUE(!bit21(s->param_bytes[0]));
  want[10] &= (unsigned char)~0x20;
  ASSERT_TRUE(memcmp(s->param_bytes[0], want, 128) == 0);
  int32_t shape0;
  int64_t stride0;
  memcpy(&shape0, s->param_bytes[1], 4);
  memcpy(&stride0, s->param_bytes[3], 8);
  ASSERT_EQ(shape0, 1000);
  ASSERT_EQ(stride0, 64);
  /* Met again: no driver call, the same bytes. A new base encodes anew. */
  memset(s->param_bytes[0], 0, 128);
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_EQ(s->tmap_calls, 1);
  ASSERT_EQ(s->calls, 2);
  ASSERT_TRUE(memcmp(s->param_bytes[0], want, 128) == 0);
  t.base += 4096;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_EQ(s->tmap_calls, 2);
  /* Past 128 KiB the bit stays; at 2^32 + 126 bytes Triton's 32-bit sum reads 126 and clears it; a
   * driver past 13.1 keeps it whatever the size. */
  t.shape[0] = 2000;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_TRUE(bit21(s->param_bytes[0]));
  t.shape[0] = 33554433;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_TRUE(!bit21(s->param_bytes[0]));
  s->driver_version = 13020;
  t.shape[0] = 1000;
  t.base += 4096;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_TRUE(bit21(s->param_bytes[0]));
  ASSERT_EQ(s->tmap_calls, 5);
  /* TF32 rounding and NaN padding reach the driver; f32 stays 7, bf16 (device 10) is the driver's 9. */
  t.round_tf32 = true;
  t.nan_padding = true;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_EQ(s->tmap_type, 11);
  ASSERT_EQ(s->tmap_fill, 1);
  fl_plan_release(p);
  fl_tensor_map_meta bf = tmap_meta;
  bf.elem_type = 10;
  bf.fp4_padded = true;
  d.tensor_maps = &bf;
  ASSERT_OK(fl_plan_create(&d, &p, &err), &err);
  t.round_tf32 = t.nan_padding = false;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_EQ(s->tmap_type, 9);
  ASSERT_EQ_U(s->tmap_dims[0], 128); /* the innermost size doubled for an FP4-padded type */
  /* Refused before the boundary, nothing launched: the driver's failure (the memo keeps nothing),
   * a rank the plan's meta does not have, a value that is no tensor map. */
  int calls = s->calls;
  s->tmap_fail = 1;
  t.base += 4096;
  ASSERT_FAILS(tmap_launch(p, &t, &err), &err, FL_BACKEND_ERROR, "tmap_encode:cuda:CUDA_ERROR_FAKE");
  ASSERT_TRUE(!err.backend_submitted);
  s->tmap_fail = 0;
  int before = s->tmap_calls;
  ASSERT_OK(tmap_launch(p, &t, &err), &err);
  ASSERT_EQ(s->tmap_calls, before + 1);
  ASSERT_EQ(s->calls, calls + 1);
  t.rank = 3;
  ASSERT_FAILS(tmap_launch(p, &t, &err), &err, FL_BAD_VALUE, "tmap_rank_mismatch:0:3:2");
  ASSERT_TRUE(!err.backend_submitted);
  t.rank = 2;
  int64_t inner = t.strides[1];
  t.strides[1] = 2; /* Triton asserts the innermost stride is 1 before encoding: no driver call */
  before = s->tmap_calls;
  ASSERT_FAILS(tmap_launch(p, &t, &err), &err, FL_BAD_VALUE, "tmap_inner_stride:0");
  ASSERT_TRUE(!err.backend_submitted);
  ASSERT_EQ(s->tmap_calls, before);
  t.strides[1] = inner;
  fl_value a[] = {fl_int(5), fl_int(1), fl_int(1), fl_int(1), fl_int(1), fl_ptr(NULL)};
  int64_t g[3] = {1, 1, 1};
  ASSERT_FAILS(fl_launch(p, 0, a, 6, g, &err), &err, FL_BAD_VALUE, "tmap_expected:0");
  ASSERT_EQ(s->calls, calls + 1);
  /* Bounded: after 100 other descriptors the first is encoded again. */
  t.rank = 2;
  fl_tensor_map_value first = t;
  for (int i = 0; i < 100; i++) {
    t.base += 1024;
    ASSERT_OK(tmap_launch(p, &t, &err), &err);
  }
  before = s->tmap_calls;
  ASSERT_OK(tmap_launch(p, &first, &err), &err);
  ASSERT_EQ(s->tmap_calls, before + 1);
  ASSERT_TRUE(!fl_plan_takes_words(p));
  fl_plan_release(p);
}
