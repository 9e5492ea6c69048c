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

from fldev.ta_precompiled import PRECOMPILED_H, TRAILER

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


# ---- the generated launcher compiled against a stand-in precompiled.h (fldev.ta_precompiled) ---------


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
