"""The Ascend stand-ins for tests and benchmarks, on a machine without an NPU:

- ascend_standin.c -> libfl_ascend_standin.so: CANN's runtime and AscendCL launch entry points,
  recording each launch (arguments copied whole) in one log with the "aten ops" below;
- torch_npu_standin.cpp -> libtorch_npu.so: torch_npu's RunAclCall over a real task queue (one
  worker thread, FIFO) and OpApiGetTaskQueueEnable.

    rt = ascend_standin.load()        # built once per source, loaded RTLD_GLOBAL, FASTLAUNCH_LIB* set
    rt.set_mode(1); rt.aten_op(stream, tag); rt.drain()
    rt.entries()                      # what reached the "device", in order

load() must run before fastlaunch looks for the Ascend runtime: it gives the npu backend the stand-in
as its libruntime and libascendcl settings (and FASTLAUNCH_LIBRUNTIME and FASTLAUNCH_LIBASCENDCL, for
child processes), and a later dlopen("libtorch_npu.so", RTLD_NOLOAD) finds the
queue stand-in by its soname.
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
RT_SRC = os.path.join(HERE, "ascend_standin.c")
NPU_SRC = os.path.join(HERE, "torch_npu_standin.cpp")
RT_LIB = "libfl_ascend_standin.so"
NPU_LIB = "libtorch_npu.so"

# What build() runs (the compiler from CC/CXX); the cache key covers these and both sources.
COMMON = ["-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra"]
RT_FLAGS = ["-std=c11", *COMMON]
NPU_FLAGS = ["-std=c++17", *COMMON, "-Wl,-soname," + NPU_LIB]
NPU_LIBS = ["-ldl"]

Entry = collections.namedtuple(
    "Entry", "kind stub blocks stream size tag cfg_null attr_id attr_value data")
KIND_RT, KIND_ACL, KIND_ATEN = 1, 2, 3  # rtKernelLaunch, aclrtLaunchKernelWithHostArgs, an aten op


def compilers():
    """(cc, c++) as build() runs them; a clear error when either is missing."""
    cc, cxx = os.environ.get("CC", "cc"), os.environ.get("CXX", "c++")
    for tool in (cc, cxx):
        if shutil.which(tool) is None:
            raise RuntimeError(f"ascend stand-ins: compiler {tool!r} not found "
                               "(set CC/CXX or install a C/C++ toolchain)")
    return cc, cxx


def cache_root():
    return os.environ.get("FLDEV_STANDIN_DIR") or os.path.join(
        os.environ.get("FASTLAUNCH_CACHE_DIR") or os.path.expanduser("~/.cache/fastlaunch"), "standins")


def build():
    """Both libraries, compiled once per (sources, compilers, flags) into <cache_root()>/<hash>/;
    returns (runtime stand-in path, libtorch_npu stand-in path). Built in a temporary directory
    beside the final one and renamed into place, so parallel processes never see half a library:
    the first rename wins and the others discard their copy."""
    cc, cxx = compilers()
    h = hashlib.sha256()
    for part in (cc, cxx, " ".join(RT_FLAGS), " ".join(NPU_FLAGS + NPU_LIBS)):
        h.update(part.encode() + b"\0")
    for src in (RT_SRC, NPU_SRC):
        with open(src, "rb") as f:
            h.update(f.read() + b"\0")
    root = cache_root()
    final = os.path.join(root, h.hexdigest()[:16])
    paths = (os.path.join(final, RT_LIB), os.path.join(final, NPU_LIB))
    if all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=root)
    try:
        for cmd in ([cc, *RT_FLAGS, "-o", os.path.join(tmp, RT_LIB), RT_SRC],
                    [cxx, *NPU_FLAGS, "-o", os.path.join(tmp, NPU_LIB), NPU_SRC, *NPU_LIBS]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"ascend stand-ins: {' '.join(cmd)} failed:\n{r.stderr}")
        try:
            os.rename(tmp, final)  # atomic; fails when another process got there first
        except OSError:
            if not all(os.path.exists(p) for p in paths):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when the rename succeeded
    return paths


def _fn(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


class Standins:
    """The loaded stand-ins and their test controls. Queue methods need load(queue=True)."""

    def __init__(self, rt_path):
        u64, u32, i32, sz, vp = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
        self.rt_path, self.npu_path = rt_path, None
        self.rt = ctypes.CDLL(rt_path, mode=ctypes.RTLD_GLOBAL)
        self.npu = None
        rt = self.rt
        # The runtime's own entry points, for tests that call them as a launcher would.
        self.rtKernelLaunch = _fn(rt, "rtKernelLaunch", i32, vp, u32, vp, u32, vp, vp)
        self.aclrtLaunchKernelWithHostArgs = _fn(rt, "aclrtLaunchKernelWithHostArgs", i32,
                                                 vp, u32, vp, vp, vp, sz, vp, sz)
        self.rtGetC2cCtrlAddr = _fn(rt, "rtGetC2cCtrlAddr", i32, ctypes.POINTER(u64), ctypes.POINTER(u32))
        self.aclrtGetHardwareSyncAddr = _fn(rt, "aclrtGetHardwareSyncAddr", i32, ctypes.POINTER(vp))
        self.rtGetDevice = _fn(rt, "rtGetDevice", i32, ctypes.POINTER(ctypes.c_int32))
        self.rtSetDevice = _fn(rt, "rtSetDevice", i32, ctypes.c_int32)
        self.aclrtGetDevice = _fn(rt, "aclrtGetDevice", i32, ctypes.POINTER(ctypes.c_int32))
        self.aclrtSetDevice = _fn(rt, "aclrtSetDevice", i32, ctypes.c_int32)
        self.aclGetRecentErrMsg = _fn(rt, "aclGetRecentErrMsg", ctypes.c_char_p)
        self._reset = _fn(rt, "standin_rt_reset", None)
        self._count_only = _fn(rt, "standin_rt_count_only", None, i32)
        self._launches = _fn(rt, "standin_rt_launches", u64)
        self._ffts = _fn(rt, "standin_rt_ffts_calls", u64)
        self._fail_next = _fn(rt, "standin_rt_fail_next", None, i32)
        self._record_aten = _fn(rt, "standin_rt_record_aten", None, u64, u64)
        self._count = _fn(rt, "standin_rt_count", sz)
        P = ctypes.POINTER
        self._entry = _fn(rt, "standin_rt_entry", i32, sz, P(i32), P(u64), P(u32), P(u64), P(u64), P(u64),
                          P(i32), P(i32), P(u32))
        self._bytes = _fn(rt, "standin_rt_bytes", sz, sz, vp, sz)

    def _load_npu(self, path):
        u64, i32 = ctypes.c_uint64, ctypes.c_int
        self.npu_path = path
        self.npu = npu = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.OpApiGetTaskQueueEnable = _fn(npu, "_Z23OpApiGetTaskQueueEnablev", ctypes.c_uint32)
        self._set_mode = _fn(npu, "standin_npu_set_task_queue_enable", None, i32)
        self._mode = _fn(npu, "standin_npu_mode", i32)
        self._aten_op = _fn(npu, "standin_npu_aten_op", None, u64, u64)
        self._drain = _fn(npu, "standin_npu_drain", None)
        self._enqueued = _fn(npu, "standin_npu_enqueued", u64)
        self._task_errors = _fn(npu, "standin_npu_task_errors", u64)
        self._fail = _fn(npu, "standin_npu_fail", None, i32)

    # ---- runtime controls ----
    def reset(self) -> None:
        """Clears the log, the counters and any pending injected failure."""
        self._reset()

    def count_only(self, on: bool = True) -> None:
        """Launches only counted (one atomic add), nothing recorded: for benchmarks."""
        self._count_only(1 if on else 0)

    def launches(self) -> int:
        return self._launches()

    def ffts_calls(self) -> int:
        return self._ffts()

    def fail_next(self, code: int) -> None:
        """The next launch call (either kind) returns code and records nothing; 0 cancels."""
        self._fail_next(code)

    def record_aten(self, stream: int, tag: int) -> None:
        """Records an aten op now, on this thread (no queue)."""
        self._record_aten(stream, tag)

    def count(self) -> int:
        return self._count()

    def entry(self, i: int) -> Entry:
        c = [ctypes.c_int(), ctypes.c_uint64(), ctypes.c_uint32(), ctypes.c_uint64(), ctypes.c_uint64(),
             ctypes.c_uint64(), ctypes.c_int(), ctypes.c_int(), ctypes.c_uint32()]
        if self._entry(i, *(ctypes.byref(x) for x in c)) != 0:
            raise IndexError(i)
        n = self._bytes(i, None, 0)
        buf = ctypes.create_string_buffer(n)
        self._bytes(i, buf, n)
        return Entry(*(x.value for x in c[:6]), bool(c[6].value), c[7].value, c[8].value, buf.raw)

    def entries(self) -> list:
        """The whole log, in the order it was recorded."""
        return [self.entry(i) for i in range(self.count())]

    # ---- torch_npu queue controls ----
    def _need_npu(self):
        if self.npu is None:
            raise RuntimeError("the torch_npu stand-in is not loaded: use ascend_standin.load(queue=True)")

    def set_mode(self, mode: int) -> None:
        """torch_npu.npu.set_task_queue_enable(mode): drains the queue, then switches."""
        self._need_npu()
        self._set_mode(mode)

    def mode(self) -> int:
        self._need_npu()
        return self._mode()

    def aten_op(self, stream: int, tag: int) -> None:
        """An aten op through the queue (recorded as kind 3 when it runs)."""
        self._need_npu()
        self._aten_op(stream, tag)

    def drain(self) -> None:
        """Returns once every task enqueued so far has run."""
        self._need_npu()
        self._drain()

    def enqueued(self) -> int:
        self._need_npu()
        return self._enqueued()

    def task_errors(self) -> int:
        self._need_npu()
        return self._task_errors()

    def fail(self, where: int) -> None:
        """The next RunAclCall throws: 1 before enqueuing, 2 after enqueuing (or running) the task."""
        self._need_npu()
        self._fail(where)


_lock = threading.Lock()
_loaded: Standins | None = None


def load(queue: bool = True) -> Standins:
    """The stand-ins, built and loaded RTLD_GLOBAL (once per process: later calls return the same
    object, loading the queue stand-in then if this one asks for it and an earlier one did not)."""
    global _loaded
    with _lock:
        rt_path, npu_path = build()
        if _loaded is None:
            # This process's npu backend, and (through fastlaunch.config, at import) its children's.
            from fastlaunch import _C as _fl_C

            _fl_C.backend_configure("npu", "libruntime", rt_path)
            _fl_C.backend_configure("npu", "libascendcl", rt_path)
            os.environ["FASTLAUNCH_LIBRUNTIME"] = rt_path
            os.environ["FASTLAUNCH_LIBASCENDCL"] = rt_path
            _loaded = Standins(rt_path)
        if queue and _loaded.npu is None:
            _loaded._load_npu(npu_path)
        return _loaded


if __name__ == "__main__":
    print("\n".join(build()))
