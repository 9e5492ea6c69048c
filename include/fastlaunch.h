/* fastlaunch.h: the public C contract of fastlaunch, the only header a caller includes. */
#ifndef FASTLAUNCH_H
#define FASTLAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FL_EXTERN __attribute__((visibility("default")))
#else
#define FL_EXTERN
#endif

#define FL_VERSION_MAJOR 0
#define FL_VERSION_MINOR 1

/* ---------------------------------------------------------------------------------------------
 * Status codes. One list generates the enum, fl_status_name() and fl_status_message().
 * The reason text of an fl_error carries the details (argument index, kind, backend error).
 * ------------------------------------------------------------------------------------------- */
#define FL_STATUS_MAP(X)                                                                          \
  X(OK, "ok")                                                                                     \
  X(NOMEM, "out of memory")                                                                       \
  X(BAD_DESCRIPTOR, "the plan descriptor is invalid")                                             \
  X(BAD_KIND, "an argument kind is unknown or not allowed here")                                  \
  X(BAD_ARG_COUNT, "the number of arguments does not match the plan")                             \
  X(BAD_VALUE, "an argument value has the wrong type or is out of range")                         \
  X(BAD_GRID, "the grid is missing, malformed or outside the backend's limits")                   \
  X(BAD_GRID_PROGRAM, "the grid expression cannot be compiled")                                   \
  X(GRID_EVAL, "the grid program failed (division by zero or overflow)")                          \
  X(BAD_STREAM, "the stream handle is invalid")                                                   \
  X(BACKEND_UNAVAILABLE, "the backend cannot be loaded on this machine")                          \
  X(KERNEL_LOAD, "the kernel could not be loaded")                                                \
  X(UNSUPPORTED, "the request is valid but not supported by this backend")                        \
  X(BACKEND_ERROR, "the backend failed to submit the launch")

typedef enum fl_status {
#define FL__STATUS_ENUM(name, msg) FL_##name,
  FL_STATUS_MAP(FL__STATUS_ENUM)
#undef FL__STATUS_ENUM
  FL_STATUS_COUNT
} fl_status;

FL_EXTERN const char *fl_status_name(fl_status status);    /* "BAD_VALUE"; "UNKNOWN" when out of range */
FL_EXTERN const char *fl_status_message(fl_status status); /* a sentence */

#define FL_REASON_MAX 160

/* An error report. Every function that can fail takes an `fl_error *` (NULL is allowed) and returns
 * an fl_status. `reason` is a short stable code with details, for example "int_out_of_range:2:i32";
 * `backend_submitted` is true only when the launch may have reached the device queue (never retry
 * such a launch); `stable` is true when the same plan or descriptor would fail the same way again. */
typedef struct fl_error {
  fl_status status;
  bool backend_submitted;
  bool stable;
  char reason[FL_REASON_MAX];
} fl_error;

/* ---------------------------------------------------------------------------------------------
 * Kinds: the ABI type of one kernel argument.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_kind {
  FL_KIND_PTR,
  FL_KIND_I1,
  FL_KIND_I8,
  FL_KIND_I16,
  FL_KIND_I32,
  FL_KIND_I64,
  FL_KIND_U8,
  FL_KIND_U16,
  FL_KIND_U32,
  FL_KIND_U64,
  FL_KIND_FP16,
  FL_KIND_BF16,
  FL_KIND_FP32,
  FL_KIND_FP64,
  /* A CUDA tensor map (CUtensorMap: 128 bytes at a 64-byte aligned offset), cuda ABI only: encoded
   * per launch from an FL_VALUE_TENSOR_MAP value and the plan's fl_tensor_map_meta for it, as
   * Triton's launcher encodes a host-side TensorDescriptor (see "Tensor maps" below). */
  FL_KIND_TMAP,
  FL_KIND_COUNT
} fl_kind;

FL_EXTERN const char *fl_kind_name(fl_kind kind); /* "ptr", "i32", ..., "tmap"; NULL when out of range */
/* Parses a kind name ("ptr", "i32", "fp16", "tmap", ...) or a Triton signature entry ("*fp32",
 * "*i8", "i32", "fp16", "u1", "nvTmaDesc"). "constexpr" is not a kind: it returns FL_BAD_KIND. */
FL_EXTERN fl_status fl_kind_parse(const char *text, fl_kind *out, fl_error *err);
FL_EXTERN bool fl_kind_is_int(fl_kind kind);   /* i1..u64 */
FL_EXTERN bool fl_kind_is_float(fl_kind kind); /* fp16..fp64 */
FL_EXTERN bool fl_kind_is_unsigned(fl_kind kind); /* u8..u64 */

/* ---------------------------------------------------------------------------------------------
 * Targets: an ABI (how the packed argument buffer is laid out) and the options of that
 * ABI, for the layout and for the launch. Only the options of the target's own ABI are
 * read; fl_target_set sets one by name, refusing names the ABI does not have.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_abi { FL_ABI_HOST, FL_ABI_CUDA, FL_ABI_NPU, FL_ABI_HIP, FL_ABI_COUNT } fl_abi;

FL_EXTERN const char *fl_abi_name(fl_abi abi); /* "host", "cuda", "npu", "hip"; NULL when out of range */
FL_EXTERN fl_status fl_abi_parse(const char *name, fl_abi *out, fl_error *err);

#define FL_CUDA_MAX_HIDDEN_PTRS 2
#define FL_NPU_MAX_SCRATCH 2
#define FL_HIP_MAX_HIDDEN_PTRS 2

typedef struct fl_cuda_options {
  uint32_t hidden_ptrs; /* layout: trailing pointer slots (global, then profile scratch), zeroed */
  uint32_t num_warps;   /* block = 32 x num_warps; 0 means 4 */
  uint32_t num_ctas;    /* CTAs per cluster along x; 0 means 1 */
  uint32_t shared_mem;  /* dynamic shared memory in bytes */
  bool cooperative;     /* cooperative launch */
  bool pdl;             /* programmatic dependent launch */
} fl_cuda_options;

typedef struct fl_npu_options {
  bool ffts;             /* layout: leading FFTS address slot */
  bool simt_only;        /* layout: a pure-SIMT kernel has no sync-lock and workspace slots */
  bool dtdata;           /* layout: trailing DTData pointer (newer Triton-Ascend) */
  uint32_t scratch;      /* layout: pointer-width scratch slots after the grid (pure SIMT), 0..2 */
  uint64_t ffts_addr;    /* the FFTS address for the template; 0: the backend asks its runtime */
  bool simt;             /* launch: attach the dynamic UB size attribute */
  uint32_t dyn_ubuf;     /* its value */
  uint32_t clamp_blocks; /* clamp the block count to this (the core count); 0 means no clamp */
  bool rt_stub;          /* launch: the kernel is a stub registered with rtFunctionRegister (what
                          * Triton-Ascend's CompiledKernel.function is), launched with rtKernelLaunch;
                          * otherwise an aclrtFuncHandle, through aclrtLaunchKernelWithHostArgs */
} fl_npu_options;

/* AMD GPUs (Triton's hsaco): the kernarg segment is laid out as cuda's buffer (natural C sizes and
 * alignment, i1 one byte), then Triton's two scratch pointers. */
typedef struct fl_hip_options {
  uint32_t hidden_ptrs; /* layout: trailing pointer slots (global, then profile scratch), zeroed */
  uint32_t num_warps;   /* block = warp_size x num_warps; 0 means 4 */
  uint32_t warp_size;   /* the target's wavefront: 64 (gfx9, MI300) or 32 (gfx10 and later); 0 means 64 */
  uint32_t num_ctas;    /* refused above 1 (Triton launches those with hipDrvLaunchKernelEx) */
  uint32_t shared_mem;  /* dynamic LDS in bytes */
  bool cooperative;     /* refused (Triton launches those with hipModuleLaunchCooperativeKernel) */
} fl_hip_options;

typedef struct fl_target {
  fl_abi abi;
  fl_cuda_options cuda; /* read when abi is FL_ABI_CUDA */
  fl_npu_options npu;   /* read when abi is FL_ABI_NPU */
  fl_hip_options hip;   /* read when abi is FL_ABI_HIP */
} fl_target;

/* Sets the option `name` of the target's ABI ("num_warps", "clamp_blocks", ...) to `value`.
 * FL_BAD_DESCRIPTOR "option_unknown:<abi>:<name>" for a name the ABI does not have,
 * "option_out_of_range:<name>" for a value its field cannot hold. */
FL_EXTERN fl_status fl_target_set(fl_target *target, const char *name, int64_t value, fl_error *err);
/* The option names of an ABI, for messages: the i-th, or NULL past the last. */
FL_EXTERN const char *fl_target_option_name(fl_abi abi, size_t i);

/* The layout of a packed argument buffer. Offsets are in bytes; -1 means "no such slot". */
typedef struct fl_layout {
  size_t size;           /* total size, tail padding included */
  size_t align;          /* alignment of the whole buffer */
  int64_t grid[3];       /* npu: the int32 grid slots; -1 for host and cuda */
  int64_t ffts;          /* npu with FFTS: the FFTS address slot */
  int64_t hidden_first;  /* first hidden trailing slot (cuda scratch, npu scratch/DTData), or -1 */
  uint32_t hidden_count; /* number of pointer-width hidden slots that follow */
} fl_layout;

/* Lays out `nkinds` arguments for a target. `offsets` (may be NULL) receives one offset per
 * argument. Refuses unknown kinds and bad options with a reason. */
FL_EXTERN fl_status fl_layout_compute(const fl_target *target, const fl_kind *kinds, size_t nkinds,
                                      fl_layout *layout, size_t *offsets, fl_error *err);

/* ---------------------------------------------------------------------------------------------
 * Values: what a caller passes for one argument. The packer converts it to the argument's kind with
 * range checks and refuses what does not fit.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_value_type {
  FL_VALUE_NONE, /* no value (a null pointer for a ptr argument) */
  FL_VALUE_INT,  /* a signed integer in .i */
  FL_VALUE_UINT, /* an unsigned integer in .u (for values above INT64_MAX) */
  FL_VALUE_BOOL, /* a boolean in .b */
  FL_VALUE_FLOAT,/* a double in .f */
  FL_VALUE_PTR,  /* an address in .p */
  FL_VALUE_TENSOR_MAP /* .p: the address of an fl_tensor_map_value, read during the launch call only */
} fl_value_type;

typedef struct fl_value {
  fl_value_type type;
  union {
    int64_t i;
    uint64_t u;
    bool b;
    double f;
    uint64_t p;
  } v;
} fl_value;

static inline fl_value fl_int(int64_t i) { fl_value x; x.type = FL_VALUE_INT; x.v.i = i; return x; }
static inline fl_value fl_uint(uint64_t u) { fl_value x; x.type = FL_VALUE_UINT; x.v.u = u; return x; }
static inline fl_value fl_bool(bool b) { fl_value x; x.type = FL_VALUE_BOOL; x.v.u = 0; x.v.b = b; return x; }
static inline fl_value fl_float(double f) { fl_value x; x.type = FL_VALUE_FLOAT; x.v.f = f; return x; }
static inline fl_value fl_ptr(const void *p) { fl_value x; x.type = FL_VALUE_PTR; x.v.p = (uint64_t)(uintptr_t)p; return x; }
static inline fl_value fl_none(void) { fl_value x; x.type = FL_VALUE_NONE; x.v.u = 0; return x; }

/* ---------------------------------------------------------------------------------------------
 * Tensor maps: a host-side tensor descriptor (Triton's TensorDescriptor) as a kernel argument.
 * The plan holds what the compiled kernel fixes (its metadata's tensordesc_meta entry), the launch
 * what the descriptor holds; the backend encodes the map through the driver's own
 * cuTensorMapEncodeTiled with Triton's arguments (sizes and byte strides innermost first, the
 * metadata's element type mapped to the driver's, TF32 when rounding, the last dimension doubled
 * for FP4-padded types, OOB fill NaN for "nan" padding, 128-byte L2 promotion) and Triton's fix-up
 * for drivers up to 13.1. Each plan keeps the last maps it encoded per argument (a memo keyed by
 * every field below): a descriptor met again costs no driver call.
 * ------------------------------------------------------------------------------------------- */
#define FL_TENSOR_MAP_MAX_RANK 5
typedef struct fl_tensor_map_meta {
  int swizzle;       /* the driver's CUtensorMapSwizzle (Triton's metadata gives it as such) */
  int elem_size;     /* bytes per element */
  int elem_type;     /* Triton's device-side element type (its TMA enum) */
  uint32_t rank;     /* the block's rank, 1..5 */
  uint32_t block[FL_TENSOR_MAP_MAX_RANK]; /* the block shape, outermost first */
  bool fp4_padded;
} fl_tensor_map_meta;

typedef struct fl_tensor_map_value {
  uint64_t base;     /* the global address */
  uint32_t rank;     /* entries of shape and strides; must equal the meta's */
  int64_t shape[FL_TENSOR_MAP_MAX_RANK];   /* outermost first, as the descriptor gives them */
  int64_t strides[FL_TENSOR_MAP_MAX_RANK]; /* in elements, outermost first */
  bool nan_padding;  /* padding "nan": out-of-bounds reads NaN */
  bool round_tf32;   /* round_f32_to_tf32 */
} fl_tensor_map_value;

static inline fl_value fl_tensor_map(const fl_tensor_map_value *t) {
  fl_value x; x.type = FL_VALUE_TENSOR_MAP; x.v.p = (uint64_t)(uintptr_t)t; return x;
}

/* Converts one value to `kind` for ABI `abi` and writes it at `dst` (which must have room for
 * the kind's slot size in that ABI). `index` only names the argument in the reason. A tensor map
 * needs its plan: "tmap_needs_plan:<index>" (FL_BAD_KIND). */
FL_EXTERN fl_status fl_pack_value(fl_abi abi, fl_kind kind, const fl_value *value, void *dst, size_t index,
                                  fl_error *err);

/* ---------------------------------------------------------------------------------------------
 * Backends and streams.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_backend_id {
  FL_BACKEND_HOST,
  FL_BACKEND_NULL,
  FL_BACKEND_CUDA,
  FL_BACKEND_NPU,
  FL_BACKEND_HIP,
  FL_BACKEND_COUNT
} fl_backend_id;

/* The backend a caller gets when it names none: the one that works on every machine. */
#define FL_BACKEND_DEFAULT FL_BACKEND_HOST

FL_EXTERN const char *fl_backend_name(fl_backend_id backend); /* NULL when out of range */
FL_EXTERN fl_status fl_backend_parse(const char *name, fl_backend_id *out, fl_error *err);

/* What a plan's kernel handle is, for a backend. */
typedef enum fl_kernel_kind {
  FL_KERNEL_NONE,    /* the backend runs nothing: the handle is ignored and may be NULL */
  FL_KERNEL_HOST_FN, /* an fl_host_kernel_fn from a library opened with fl_host_lib_open */
  FL_KERNEL_HANDLE   /* the device runtime's own handle (a CUfunction, an Ascend function) */
} fl_kernel_kind;

/* Where a backend's kernels read their pointer arguments: a caller that knows where a tensor lives
 * refuses one from elsewhere before launching. */
typedef enum fl_memory {
  FL_MEMORY_ANY,  /* the backend dereferences nothing (null) */
  FL_MEMORY_HOST, /* host memory (the host backend's kernels run on the CPU) */
  FL_MEMORY_CUDA, /* a GPU's memory as torch names it "cuda": NVIDIA's, and AMD's in torch's ROCm build */
  FL_MEMORY_NPU,  /* an Ascend NPU's memory */
  FL_MEMORY_OTHER /* anything else (a caller's answer for memory no backend takes) */
} fl_memory;

/* Everything a caller needs to know of a backend to build plans for it, from the backend's own
 * table: no layer above needs to know a backend by name. */
typedef struct fl_backend_info {
  const char *name;
  fl_abi default_abi;    /* the ABI its kernels use */
  unsigned abi_mask;     /* bit (1u << fl_abi) for each ABI it accepts */
  fl_kernel_kind kernel; /* what it takes as the kernel handle */
  fl_memory memory;      /* where its kernels read pointer arguments */
  bool own_streams;      /* streams come from fl_stream_create (else: the framework's raw stream) */
} fl_backend_info;

FL_EXTERN fl_status fl_backend_info_get(fl_backend_id backend, fl_backend_info *info, fl_error *err);
/* Loads the backend if needed (dlopen for cuda and npu). FL_BACKEND_UNAVAILABLE with the loader's
 * own words in the reason when it cannot load. */
FL_EXTERN fl_status fl_backend_load(fl_backend_id backend, fl_error *err);

/* Sets one setting of a backend, before it loads (its first plan, stream or fl_backend_load); the
 * library reads no environment variable for them (fastlaunch.config does, for Python):
 *   cuda "params"       "packed" (the default: one packed buffer, CU_LAUNCH_PARAM_BUFFER_POINTER)
 *                       or "array" (a kernelParams array of pointers into it)
 *   npu  "libascendcl"  the ACL library to open instead of libascendcl.so
 *   npu  "libruntime"   the runtime library (rtKernelLaunch) to open instead of libruntime.so
 *   testing builds only: cuda "library", the driver to open instead of libcuda.so.1 (a stand-in).
 * FL_BAD_VALUE "setting_unknown:<backend>:<name>" or "setting_invalid:<backend>:<name>" (a value it
 * does not take: NULL, empty, too long, not a choice); FL_UNSUPPORTED "backend_loaded:<backend>:<name>"
 * when the backend has loaded with another value (a setting holds from load to the process's end;
 * giving the value in use again succeeds). */
FL_EXTERN fl_status fl_backend_configure(fl_backend_id backend, const char *name, const char *value, fl_error *err);

/* A stream is a 64-bit handle. For cuda and npu it is the framework's raw stream (CUstream,
 * aclrtStream) as an integer. For host and null it is a handle made by fl_stream_create and
 * validated on every launch (an unchecked integer is never dereferenced). */
FL_EXTERN fl_status fl_stream_create(fl_backend_id backend, uint64_t *stream, fl_error *err);
/* A host stream's queue is bounded: a launch waits while it is full (nothing is dropped), so a host
 * kernel must never wait for a thread that launches on its stream (for example on a lock that
 * thread holds, such as Python's GIL). */
/* Waits for every launch submitted so far to finish. */
FL_EXTERN fl_status fl_stream_synchronize(fl_backend_id backend, uint64_t stream, fl_error *err);
/* Hooks around the waits fastlaunch makes on a launching thread (a host stream's full queue):
 * `begin` runs before the thread blocks and returns a token that `end` receives after. A runtime
 * with a global lock releases it there (Python's extension releases the GIL, as Triton's launcher
 * does around its driver call), so a blocked launch never stalls other threads. Launches that do
 * not wait never call them. NULL restores the default (no hooks). */
typedef void *(*fl_wait_begin_fn)(void);
typedef void (*fl_wait_end_fn)(void *token);
FL_EXTERN void fl_set_wait_hooks(fl_wait_begin_fn begin, fl_wait_end_fn end);
/* Drains the stream, then destroys it. */
FL_EXTERN fl_status fl_stream_destroy(fl_backend_id backend, uint64_t stream, fl_error *err);
/* Launches completed (host) or accepted (null) on the stream so far. */
FL_EXTERN fl_status fl_stream_count(fl_backend_id backend, uint64_t stream, uint64_t *count, fl_error *err);

/* ---------------------------------------------------------------------------------------------
 * Host kernels: C functions in shared objects, called once per program id.
 * ------------------------------------------------------------------------------------------- */
typedef struct fl_host_program {
  uint32_t pid[3];  /* this program's id */
  uint32_t grid[3]; /* the grid */
} fl_host_program;

typedef void (*fl_host_kernel_fn)(const void *args, const fl_host_program *program);

typedef struct fl_host_lib fl_host_lib;

/* Opens a shared object (dlopen); the loader's own words are in the reason on failure. */
FL_EXTERN fl_status fl_host_lib_open(const char *path, fl_host_lib **lib, fl_error *err);
FL_EXTERN fl_status fl_host_lib_symbol(fl_host_lib *lib, const char *name, void **symbol, fl_error *err);
FL_EXTERN void fl_host_lib_retain(fl_host_lib *lib);
FL_EXTERN void fl_host_lib_release(fl_host_lib *lib); /* unloads on the last release */
/* Releases a library passed as an owner (the signature of fl_plan_desc.owner_release). */
FL_EXTERN void fl_host_lib_release_owner(void *lib);

typedef struct fl_plan fl_plan;

/* ---------------------------------------------------------------------------------------------
 * Plans.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_grid_mode {
  FL_GRID_CALLER,  /* each launch passes the grid */
  FL_GRID_STATIC,  /* the grid is fixed in the plan */
  FL_GRID_PROGRAM  /* three expressions over the integer arguments, evaluated per launch */
} fl_grid_mode;

typedef struct fl_plan_desc {
  const char *name;       /* kernel name, for messages; may be NULL */
  fl_backend_id backend;
  fl_target target;       /* the ABI (one the backend accepts) and its options */
  /* The kernel handle, as fl_backend_info.kernel says for the backend. */
  void *kernel;
  /* Whatever owns the kernel handle; released when the plan is destroyed (may be NULL). The last
   * fl_plan_release calls it, on whatever thread drops the last reference: a backend's worker
   * thread included (a host stream holds a reference while a launch is queued). */
  void *owner;
  void (*owner_release)(void *owner);
  const fl_kind *kinds;
  size_t nkinds;
  size_t runtime_arg_count;  /* the first runtime_arg_count args come with each launch */
  const fl_value *fixed_args;/* nkinds - runtime_arg_count values, written into the template */
  fl_grid_mode grid_mode;
  int64_t static_grid[3];    /* FL_GRID_STATIC */
  const char *grid_exprs[3]; /* FL_GRID_PROGRAM: one expression per dimension */
  /* Names by which grid expressions refer to arguments: NULL, or nkinds entries, each a non-NULL
   * identifier, none repeated (arg_name_null, arg_name_invalid, arg_name_duplicate otherwise). An
   * argument can always be named $N. Fixed integer arguments are folded into constants. */
  const char *const *arg_names;
  /* One entry per FL_KIND_TMAP argument, in argument order (NULL when there is none):
   * tensor_maps_count_mismatch:<given>:<kinds>, tmap_meta_invalid:<index>:<why>. */
  const fl_tensor_map_meta *tensor_maps;
  size_t ntensor_maps;
} fl_plan_desc;

/* Builds a plan: validates the descriptor, the fixed arguments and the static grid once. */
FL_EXTERN fl_status fl_plan_create(const fl_plan_desc *desc, fl_plan **plan, fl_error *err);
FL_EXTERN void fl_plan_retain(const fl_plan *plan);
FL_EXTERN void fl_plan_release(const fl_plan *plan);

/* Introspection. */
FL_EXTERN const fl_layout *fl_plan_layout(const fl_plan *plan);
FL_EXTERN size_t fl_plan_arg_offset(const fl_plan *plan, size_t index); /* SIZE_MAX when out of range */
FL_EXTERN size_t fl_plan_nargs(const fl_plan *plan);
FL_EXTERN size_t fl_plan_runtime_arg_count(const fl_plan *plan);
FL_EXTERN fl_kind fl_plan_arg_kind(const fl_plan *plan, size_t index);
FL_EXTERN fl_backend_id fl_plan_backend(const fl_plan *plan);
FL_EXTERN fl_abi fl_plan_abi(const fl_plan *plan);
/* The device index the plan's kernel lives on (cuda: its context's device), or -1 when the backend
 * has none. Pointer arguments from another device are the caller's to refuse. */
FL_EXTERN int fl_plan_device(const fl_plan *plan);
FL_EXTERN fl_grid_mode fl_plan_grid_mode(const fl_plan *plan);
FL_EXTERN const char *fl_plan_name(const fl_plan *plan);
/* Copies the template buffer (fixed args, static grid, FFTS address) into `dst` (size bytes, at
 * least the layout's size): template_dst_null, template_buffer_too_small:<size>:<needed>. */
FL_EXTERN fl_status fl_plan_template(const fl_plan *plan, void *dst, size_t size, fl_error *err);

/* Launches the plan. `args` holds runtime_arg_count values; `grid` is required for FL_GRID_CALLER
 * plans and must be NULL otherwise. Everything is validated before the submit boundary: an error
 * with backend_submitted false means nothing was launched. */
FL_EXTERN fl_status fl_launch(const fl_plan *plan, uint64_t stream, const fl_value *args, size_t nargs,
                              const int64_t *grid, fl_error *err);

/* The same launch from one 64-bit word per runtime argument, read as the argument's kind says: a
 * pointer kind's address, or an int kind's value as a two's complement int64. Plans whose runtime
 * arguments are all pointers and signed 32- or 64-bit ints take it (fl_plan_takes_words); any other
 * answers FL_UNSUPPORTED "words_unsupported" (stable). Checks, refusals (an int outside a 32-bit
 * slot: "int_out_of_range:<i>:<kind>") and the submit are fl_launch's: the two forms launch the same
 * bytes for the same arguments. A binding that has already read every argument into a word (the
 * extension's entry) saves the values' tags this way. */
FL_EXTERN bool fl_plan_takes_words(const fl_plan *plan);
FL_EXTERN fl_status fl_launch_words(const fl_plan *plan, uint64_t stream, const uint64_t *words, size_t nwords,
                                    const int64_t *grid, fl_error *err);

/* Computes the grid a launch would use (static, program or caller grid), validated against the
 * backend's limits, without launching. */
FL_EXTERN fl_status fl_plan_resolve_grid(const fl_plan *plan, const fl_value *args, size_t nargs,
                                         const int64_t *grid, uint32_t out[3], fl_error *err);

/* ---------------------------------------------------------------------------------------------
 * Grid programs: the expressions a plan's grid is computed from (plans compile them through
 * fl_plan_desc.grid_exprs); alone, for a caller that computes a grid itself (the JIT dispatcher's
 * grid callables) and for tools and tests.
 * ------------------------------------------------------------------------------------------- */
typedef struct fl_grid_program fl_grid_program;

/* Compiles one expression. `names` (nnames entries, may be NULL) name the variables; $N names
 * variable N. The language is Python's integer expressions, with Python's precedence: decimal
 * literals, + - * // % << >>, unary + -, min(...), max(...), cdiv(a, b) and ceildiv(a, b) (ceiling
 * division), next_power_of_2(n) (Triton's: the smallest power of 2 >= n, 0 for n <= 0), one comparison == != < <= > >= (1 when true, 0 when false; a chained a < b < c is
 * refused with "grid_expr_syntax:<offset>:chained comparison"), and the conditional `A if C else B`
 * (lowest precedence, right-associative), which evaluates only the branch C chooses, so
 * `0 if d == 0 else n // d` never divides by zero. Refuses anything outside the language with
 * FL_BAD_GRID_PROGRAM and a reason naming the position ("grid_expr_syntax:<offset>:expected 'else'"
 * and others). Operations on constants are folded at compile time when they succeed; one that would
 * fail (division by zero, overflow, negative shift) is kept and fails only if and when it is
 * evaluated, with the FL_GRID_EVAL error of the first failure in evaluation order. A constant
 * condition keeps only the branch it chooses. A program that reads no variable is evaluated once at
 * compile time and refused as "grid_expr_const_<error>" when that fails: `1 // 0` and
 * `n if 0 else 1 // 0` are refused, while `n + 1 // 0` compiles and fails with "grid_div_by_zero"
 * whenever it is evaluated. */
FL_EXTERN fl_status fl_grid_program_compile(const char *expr, const char *const *names, size_t nnames,
                                            fl_grid_program **program, fl_error *err);
/* Evaluates with Python's integer semantics on int64: floor division and modulo, arithmetic shifts;
 * division by zero and overflow are FL_GRID_EVAL errors. */
FL_EXTERN fl_status fl_grid_program_eval(const fl_grid_program *program, const int64_t *vars, size_t nvars,
                                         int64_t *out, fl_error *err);
/* True when the program refers to no variable; its value is then known at compile time. */
FL_EXTERN bool fl_grid_program_is_constant(const fl_grid_program *program);
/* The largest variable index used, plus one (0 for a constant program). */
FL_EXTERN size_t fl_grid_program_nvars(const fl_grid_program *program);
FL_EXTERN void fl_grid_program_free(fl_grid_program *program);

/* ---------------------------------------------------------------------------------------------
 * Memory: a replaceable allocator (for tests that fail each allocation in turn). Set it before
 * creating anything; NULL restores malloc/free.
 * ------------------------------------------------------------------------------------------- */
typedef void *(*fl_malloc_fn)(size_t size);
typedef void (*fl_free_fn)(void *ptr);
FL_EXTERN void fl_set_allocator(fl_malloc_fn malloc_fn, fl_free_fn free_fn);

#ifdef __cplusplus
}
#endif
#endif /* FASTLAUNCH_H */
