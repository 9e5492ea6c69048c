"""Triton-Ascend 3.2.0's own launcher as the reference for fastlaunch's npu packed buffer.

Nothing here is rewritten from Triton-Ascend: the wheel is fetched from PyPI with pip (never
installed), two files are taken out of it with zipfile (`triton/backends/ascend/driver.py` and the
`utils.py` whose `get_ascend_arch_from_env`/`is_ffts_supported`/`force_disable_ffts` decide FFTS),
and the REAL `generate_npu_wrapper_src` writes the launcher C++ for a signature. That whole
generated source is then compiled, unchanged, as the CPython extension Triton-Ascend builds
(`__triton_launcher`, one `launch` function) against a stand-in for its precompiled header: the CANN
runtime calls, ATen/torch_npu types and msprof declarations it names, with `rtKernelLaunch` copying
`(args, sizeof(args))` aside. Calling that module's `launch` with Python values therefore runs
Triton-Ascend's own PyArg_ParseTuple format string, its `getPointer`, its `_launch` parameter
conversions, its `struct __attribute__((packed)) {...} args = {...}` and its `sizeof(args)`.

    ref = Reference(signature, constants, ffts=True, force_simt_only=False)
    ref.launch(values, grid, ffts_addr)   # -> Launch(data, size, blocks, stream, func); raises as TA does
    reference_bytes(signature, constants, values, grid, ffts=..., ffts_addr=..., force_simt_only=...)
    struct_for(signature, constants, ffts=..., force_simt_only=...)    # the struct text, verbatim

`signature` is {index: Triton type} for every non-constexpr parameter (what NPULauncher passes:
constants' entries included, e.g. "i32" for an int specialised to 1, "*i8" for a None argument);
`constants` is {index: value}. `values` excludes the constants (the launcher is called with the
constants' values filled in, as Triton's JIT does). Padding bytes inside Triton-Ascend's struct are
indeterminate (stack contents): the reference returns them as zero (`Reference.layout()` says where
they are).

Cache: $FLDEV_TA_CACHE or ~/.cache/fastlaunch/triton-ascend-3.2.0/ (the two extracted files, the
compiled launchers). Every write is a rename into place, and the download runs under a file lock,
so parallel pytest processes share it safely.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import ctypes
import fcntl
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import types
import warnings
import zipfile

VERSION = "3.2.0"
REQUIREMENT = f"triton-ascend=={VERSION}"
DRIVER_MEMBER = "triton/backends/ascend/driver.py"
UTILS_MEMBER = "triton/backends/ascend/utils.py"
FALLBACK_PLATFORM = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                     "--platform", "manylinux_2_27_x86_64"]

# The flags the reference launchers are compiled with (part of their cache key).
CXX_FLAGS = ["-O0", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-Bsymbolic", "-w"]

Launch = collections.namedtuple("Launch", "data size blocks stream func")


class Unavailable(RuntimeError):
    """The wheel could not be fetched (no network, no pip) or no C++ compiler: tests skip on it."""


# ---- the wheel --------------------------------------------------------------------------------------

def cache_dir() -> str:
    return os.environ.get("FLDEV_TA_CACHE") or os.path.join(
        os.path.expanduser("~/.cache/fastlaunch"), f"triton-ascend-{VERSION}")


@contextlib.contextmanager
def _locked(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_atomic(path: str, data: bytes) -> None:
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _download_wheel(dest: str, requirement: str = REQUIREMENT, prefix: str = "triton_ascend-") -> str:
    """pip download into dest; returns the wheel's path. This interpreter's tags first, then the
    cp311 manylinux_2_27/2_28 x86_64 wheel explicitly."""
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "-d", dest, requirement]
    errors = []
    for extra in ([], FALLBACK_PLATFORM):
        try:
            r = subprocess.run(base + extra, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(str(e))
            continue
        wheels = [f for f in os.listdir(dest) if f.endswith(".whl") and f.startswith(prefix)]
        if r.returncode == 0 and wheels:
            return os.path.join(dest, wheels[0])
        errors.append((r.stderr or r.stdout).strip()[-600:])
    raise Unavailable(f"pip download {requirement} failed:\n" + "\n---\n".join(errors))


def _ensure_files() -> dict:
    """{member: cached path} for driver.py and utils.py, fetching the wheel once."""
    root = cache_dir()
    paths = {m: os.path.join(root, "files", m) for m in (DRIVER_MEMBER, UTILS_MEMBER)}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    with _locked(os.path.join(root, ".download.lock")):
        if all(os.path.exists(p) for p in paths.values()):  # another process got there first
            return paths
        tmp = tempfile.mkdtemp(prefix=".wheel-", dir=root)
        try:
            wheel = _download_wheel(tmp)
            with open(wheel, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            with zipfile.ZipFile(wheel) as z:
                for member, path in paths.items():
                    _write_atomic(path, z.read(member))  # only these two members are read
            _write_atomic(os.path.join(root, "SOURCE"),
                          f"{os.path.basename(wheel)} sha256={digest}\n".encode())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return paths


def driver_source() -> str:
    """The text of triton/backends/ascend/driver.py from the triton-ascend 3.2.0 wheel."""
    with open(_ensure_files()[DRIVER_MEMBER], encoding="utf-8") as f:
        return f.read()


def utils_source() -> str:
    with open(_ensure_files()[UTILS_MEMBER], encoding="utf-8") as f:
        return f.read()


# ---- the generator, loaded with stand-ins for its imports ---------------------------------------------

def _standin_module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)

    def missing(attr):
        raise AttributeError(f"{name}.{attr}: not provided by the fldev.ta_reference stand-in")

    m.__getattr__ = missing
    return m


def _not_here(what):
    def f(*a, **k):
        raise RuntimeError(f"{what} is not available in the fldev.ta_reference stand-in")
    return f


def _exec_module(name: str, source: str, filename: str, resolve) -> types.ModuleType:
    """Runs source as module `name` without registering it in sys.modules; imports of names that
    resolve() answers come from it, everything else from the real import system."""
    real_import = builtins.__import__

    def _import(n, globals=None, locals=None, fromlist=(), level=0):
        m = resolve(n) if level == 0 else None
        if m is not None:
            if fromlist:
                return m
            return resolve(n.split(".")[0]) or m
        if level == 0 and (n == "triton" or n.startswith("triton.")):
            raise ImportError(f"{n}: not provided by the fldev.ta_reference stand-in")
        return real_import(n, globals, locals, fromlist, level)

    mod = types.ModuleType(name)
    mod.__file__ = filename
    b = dict(builtins.__dict__)
    b["__import__"] = _import
    mod.__dict__["__builtins__"] = b
    with warnings.catch_warnings():  # driver.py has a '\\[' escape that newer Pythons warn about
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        code = compile(source, filename, "exec")
    exec(code, mod.__dict__)
    return mod


class _NPUUtilsStandin:
    """driver.NPUUtils compiles npu_utils.cpp and asks the device for its core counts; the
    generator only puts those counts into a warning and the (off) block clamp."""

    def get_aicore_num(self):
        return 24

    def get_aivector_core_num(self):
        return 48


@functools.lru_cache(maxsize=None)
def _generator():
    """The real driver module (its generate_npu_wrapper_src) and the real utils module."""
    paths = _ensure_files()
    mods = {}

    def resolve(n):
        if n == "pybind11":  # utils.py imports it at the top for _build_npu_ext
            return _standin_module("pybind11", get_include=_not_here("pybind11.get_include"))
        if n == "triton.backends.ascend.utils":
            return mods["utils"]
        if n == "triton.runtime.cache":
            return _standin_module(n, get_cache_manager=_not_here("get_cache_manager"),
                                   get_dump_manager=_not_here("get_dump_manager"))
        if n == "triton.backends.driver":
            return _standin_module(n, DriverBase=type("DriverBase", (), {}))
        if n == "triton.backends.compiler":
            return _standin_module(n, GPUTarget=collections.namedtuple("GPUTarget", "backend arch warp_size"))
        return None

    with open(paths[UTILS_MEMBER], encoding="utf-8") as f:
        mods["utils"] = _exec_module("triton.backends.ascend.utils", f.read(), paths[UTILS_MEMBER], resolve)
    with open(paths[DRIVER_MEMBER], encoding="utf-8") as f:
        driver = _exec_module("triton.backends.ascend.driver", f.read(), paths[DRIVER_MEMBER], resolve)
    driver.NPUUtils = _NPUUtilsStandin
    return driver, mods["utils"]


# Environment the generator reads; everything not set below is removed around the call so the
# defaults apply (task queue on, no device print, no grid warning, no block clamp).
_GEN_ENV = ("TRITON_ASCEND_ARCH", "TRITON_DISABLE_FFTS", "TRITON_DEVICE_PRINT", "TRITON_ENABLE_TASKQUEUE",
            "TRITON_GRID_WARN_PRINT", "TRITON_ALL_BLOCKS_PARALLEL")
_env_lock = threading.Lock()


def _metadata(force_simt_only: bool):
    """The CompiledKernel metadata fields generate_npu_wrapper_src reads: no workspace and no
    sync-block lock (both slots then hold nullptr), a vector kernel, not the 910_95 SIMT launch."""
    return types.SimpleNamespace(workspace_size=0, lock_init_value=0, lock_num=0, bs_task_type=0,
                                 mix_mode="aiv", compile_on_910_95=False, parallel_mode="simd",
                                 force_simt_only=bool(force_simt_only), debug=False, shared=0)


def _key(signature, constants):
    # The generator reads only which indices are constants, not their values; values stay in the
    # key anyway (ints and None in practice, all hashable).
    sig = tuple(sorted((int(k), str(v)) for k, v in signature.items()))
    cst = tuple(sorted((int(k), v) for k, v in constants.items()))
    return sig, cst


@functools.lru_cache(maxsize=None)
def _wrapper_source_cached(sig, cst, ffts, force_simt_only):
    driver, utils = _generator()
    signature = dict(sig)
    constants = dict(cst)
    env = {"TRITON_ASCEND_ARCH": "Ascend910B3"}
    if not ffts:
        env["TRITON_DISABLE_FFTS"] = "1"
    with _env_lock:
        saved = {k: os.environ.get(k) for k in _GEN_ENV}
        try:
            for k in _GEN_ENV:
                os.environ.pop(k, None)
            os.environ.update(env)
            arch = utils.get_ascend_arch_from_env()
            decided = utils.is_ffts_supported(arch) and not utils.force_disable_ffts()
            src = driver.generate_npu_wrapper_src(constants, signature, _metadata(force_simt_only))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    if decided != bool(ffts):
        raise AssertionError(f"Triton-Ascend's utils decided ffts={decided}, wanted {ffts}")
    return src


def wrapper_source(signature: dict, constants: dict, *, ffts: bool, force_simt_only: bool) -> str:
    """The whole launcher C++ that Triton-Ascend 3.2.0 generates for this call."""
    return _wrapper_source_cached(*_key(signature, constants), bool(ffts), bool(force_simt_only))


_STRUCT_RE = re.compile(r"struct __attribute__\(\(packed\)\) \{.*?\} args = \{.*?\};", re.S)


def struct_for(signature: dict, constants: dict, *, ffts: bool, force_simt_only: bool) -> str:
    """`struct __attribute__((packed)) { ... } args = { ... };` exactly as generated."""
    src = wrapper_source(signature, constants, ffts=ffts, force_simt_only=force_simt_only)
    found = _STRUCT_RE.findall(src)
    if len(found) != 1:
        raise AssertionError(f"expected one packed args struct in the generated launcher, found {len(found)}")
    return found[0]


def struct_members(struct_text: str) -> list:
    """The member names of the struct declaration, in order."""
    decl = struct_text.split("} args = {", 1)[0]
    return re.findall(r"([A-Za-z_]\w*) __attribute__\(\(aligned\(\d+\)\)\);", decl)


# ---- the generated launcher compiled against a stand-in precompiled.h ---------------------------------

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


def _compiler():
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        raise Unavailable(f"no C++ compiler {cxx!r} (set CXX)")
    return cxx


def _reference_source(signature, constants, ffts, force_simt_only):
    src = wrapper_source(signature, constants, ffts=ffts, force_simt_only=force_simt_only)
    text = struct_for(signature, constants, ffts=ffts, force_simt_only=force_simt_only)
    decl = text.split("} args = {", 1)[0] + "}"
    members = "\n".join(
        f"  if (i + 2 <= cap) {{ out[i++] = offsetof(fldev_args_t, {m}); "
        f"out[i++] = sizeof(((fldev_args_t *)0)->{m}); }}" for m in struct_members(text))
    return src + TRAILER.replace("@DECL@", decl).replace("@MEMBERS@", members)


def _build(source: str) -> str:
    """The launcher extension for this source, compiled once into the cache (by content hash)."""
    cxx = _compiler()
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    h = hashlib.sha256()
    for part in (cxx, " ".join(CXX_FLAGS), include, suffix, PRECOMPILED_H, source):
        h.update(part.encode() + b"\0")
    digest = h.hexdigest()[:24]
    out = os.path.join(cache_dir(), "launchers", f"launcher_{digest}{suffix}")
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(out))
    try:
        with open(os.path.join(tmp, "precompiled.h"), "w") as f:
            f.write(PRECOMPILED_H)
        src_path = os.path.join(tmp, "launcher.cxx")
        with open(src_path, "w") as f:
            f.write(source)
        so = os.path.join(tmp, "launcher" + suffix)
        cmd = [cxx, *CXX_FLAGS, "-I", tmp, "-I", include, src_path, "-o", so]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"compiling the Triton-Ascend launcher failed: {' '.join(cmd)}\n{r.stderr[-4000:]}")
        os.replace(so, out)  # atomic; a concurrent identical build just replaces it with the same bytes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


class Reference:
    """Triton-Ascend's generated launcher for one (signature, constants, ffts, force_simt_only),
    compiled and loaded; launch() calls its `launch` as CompiledKernel.run would."""

    STREAM = 0x5000
    FUNC = 0xF00D0000

    def __init__(self, signature: dict, constants: dict, *, ffts: bool, force_simt_only: bool):
        self.signature = {int(k): v for k, v in signature.items()}
        self.constants = {int(k): v for k, v in constants.items()}
        self.ffts, self.force_simt_only = bool(ffts), bool(force_simt_only)
        self.struct_text = struct_for(self.signature, self.constants, ffts=ffts, force_simt_only=force_simt_only)
        self.path = _build(_reference_source(self.signature, self.constants, self.ffts, self.force_simt_only))
        spec = importlib.util.spec_from_file_location("__triton_launcher", self.path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self._launch = mod.launch
        lib = ctypes.CDLL(self.path)  # the same handle the import opened: the same recorder
        u64 = ctypes.c_uint64
        self._set_ffts = lib.fldev_set_ffts_addr
        self._set_ffts.argtypes, self._set_ffts.restype = [u64], None
        self._count = lib.fldev_launches_count
        self._count.argtypes, self._count.restype = [], u64
        self._take = lib.fldev_take
        self._take.argtypes, self._take.restype = [ctypes.c_char_p, u64, ctypes.POINTER(u64)], u64
        lay = (u64 * 256)()
        n = lib.fldev_layout(lay, 256)
        self.size = lay[0]
        self.members = dict(zip(struct_members(self.struct_text),
                                [(lay[i], lay[i + 1]) for i in range(1, n, 2)]))
        self.member_mask = bytearray(self.size)
        for off, sz in self.members.values():
            self.member_mask[off:off + sz] = b"\1" * sz
        self._buf = ctypes.create_string_buffer(self.size + 64)
        self._meta = (u64 * 4)()
        self._metadata = {"kernel_name": "fldev_ref"}
        self._lock = threading.Lock()

    def layout(self) -> dict:
        """{"size": sizeof(args), "members": {name: (offset, size)}, "padding": [offsets]}"""
        return {"size": self.size, "members": dict(self.members),
                "padding": [i for i, m in enumerate(self.member_mask) if not m]}

    def call_args(self, values) -> list:
        """All signature values in order: `values` for the non-constants, the constants' values."""
        values = list(values)
        order = sorted(self.signature)
        runtime = [i for i in order if i not in self.constants]
        if len(values) != len(runtime):
            raise ValueError(f"expected {len(runtime)} values, got {len(values)}")
        by_index = dict(zip(runtime, values))
        return [self.constants[i] if i in self.constants else by_index[i] for i in order]

    def launch(self, values, grid, ffts_addr: int = 0) -> Launch:
        """One launch through Triton-Ascend's launcher. Raises whatever it raises (TypeError,
        OverflowError, ...): Triton-Ascend refuses the call. Padding bytes come back zero."""
        gx, gy, gz = (tuple(grid) + (1, 1, 1))[:3]
        args = self.call_args(values)
        with self._lock:
            self._set_ffts(ffts_addr & (2**64 - 1))
            before = self._count()
            self._launch(gx, gy, gz, self.STREAM, self.FUNC, self._metadata, None, None, None, *args)
            if self._count() != before + 1:
                raise AssertionError("Triton-Ascend's launcher returned without launching")
            n = self._take(self._buf, self.size, self._meta)
            data = bytes(b if m else 0 for b, m in zip(self._buf.raw[:n], self.member_mask))
            return Launch(data, self._meta[0], self._meta[1], self._meta[2], self._meta[3])


_refs: dict = {}
_refs_lock = threading.Lock()


def reference(signature: dict, constants: dict, *, ffts: bool, force_simt_only: bool) -> Reference:
    """A Reference, built once per process for each (signature, constants, flags)."""
    key = (_key(signature, constants), bool(ffts), bool(force_simt_only))
    with _refs_lock:
        r = _refs.get(key)
        if r is None:
            r = _refs[key] = Reference(signature, constants, ffts=ffts, force_simt_only=force_simt_only)
        return r


def reference_bytes(signature: dict, constants: dict, values, grid, *, ffts: bool, ffts_addr: int,
                    force_simt_only: bool) -> bytes:
    """The bytes Triton-Ascend 3.2.0's launcher hands rtKernelLaunch (sizeof(args) of them) for
    this call, padding as zero. Raises as Triton-Ascend's launch() does for a value it refuses."""
    ref = reference(signature, constants, ffts=ffts, force_simt_only=force_simt_only)
    return ref.launch(values, grid, ffts_addr).data


if __name__ == "__main__":  # fetch (if needed) and print where the files are
    for member, path in _ensure_files().items():
        print(f"{member}: {path}")
