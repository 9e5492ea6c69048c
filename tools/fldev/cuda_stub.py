"""The `cuda-stub` backend for benchmarks and tests: Triton's real CUDA launcher and fastlaunch's
cuda backend over one libcuda stand-in (cuda_stub.c) that launches nothing, on a machine without a
GPU.

    stub = cuda_stub.load()      # builds the stub once, loads it as libcuda.so.1, points Triton at it
    ck = cuda_stub.compile(fn, signature, constexprs)   # a real cubin, handles loaded through the stub
    ck.run(...)                  # Triton's own launcher (its cuda_utils compiled against the stub)
    stub.state.calls             # what the driver saw; stub.record(nparams) to capture the last launch

Call load() before anything asks Triton for its driver: the stub must be the process's libcuda.so.1.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The stand-in driver's current stream: a handle of the size real ones have (0x7f...).
STREAM = 0x7F3A_5C00_1230


class LogEntry(ctypes.Structure):
    _fields_ = [("function", ctypes.c_uint64), ("grid", ctypes.c_uint * 3), ("used_params", ctypes.c_int),
                ("bytes", ctypes.c_ubyte * 64)]


class StubState(ctypes.Structure):
    _fields_ = [("calls", ctypes.c_uint64), ("record", ctypes.c_int), ("nparams", ctypes.c_int),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_uint64), ("function", ctypes.c_uint64), ("stream_handle", ctypes.c_uint64),
                ("nattrs", ctypes.c_int),
                ("attr_ids", ctypes.c_int * 8), ("attr_vals", (ctypes.c_uint * 3) * 8),
                ("buffer_size", ctypes.c_size_t), ("buffer", ctypes.c_ubyte * 4096), ("used_params", ctypes.c_int),
                ("params", (ctypes.c_ubyte * 8) * 256),
                ("log_on", ctypes.c_int), ("nlog", ctypes.c_uint), ("log", LogEntry * 256),
                ("tmap_calls", ctypes.c_uint64), ("driver_version", ctypes.c_int), ("tmap_fail", ctypes.c_int),
                ("param_sizes", ctypes.c_ushort * 64), ("param_blob", ctypes.c_ubyte * 4096), ("device", ctypes.c_int)]


class _State:
    """The stub's StubState, read and written through; `calls` is every launch counted, in every thread
    (the stand-in counts per thread, each on a cache line of its own: stub_calls() adds them up)."""

    __slots__ = ("_raw", "_calls")

    def __init__(self, raw, calls):
        object.__setattr__(self, "_raw", raw)
        object.__setattr__(self, "_calls", calls)

    @property
    def calls(self):
        return self._calls()

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def __setattr__(self, name, value):
        setattr(self._raw, name, value)


class Stub:
    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.lib.stub_calls.restype = ctypes.c_uint64
        self.lib.stub_calls.argtypes = []
        self.state = _State(StubState.in_dll(self.lib, "stub"), self.lib.stub_calls)

    def record(self, nparams=0, sizes=()):
        """Records each launch; a parameter array's first nparams parameters 8 bytes each, and with
        sizes, each parameter at its size (param_blob)."""
        self.state.record = 1
        self.state.nparams = nparams
        for i in range(64):
            self.state.param_sizes[i] = sizes[i] if i < len(sizes) else 0

    def param_bytes(self):
        """The last launch's parameters at the sizes record() was given, back to back."""
        n = sum(self.state.param_sizes[i] for i in range(64))
        return bytes(self.state.param_blob[:n])

    def log(self, nparams=8):
        """Logs every launch from now on (record() is set too: the log is kept where launches are
        recorded); take_log() returns them and starts again."""
        self.record(nparams)
        self.state.nlog = 0
        self.state.log_on = 1

    def take_log(self):
        st = self.state
        out = [(e.function, tuple(e.grid), e.used_params, bytes(e.bytes)) for e in st.log[:st.nlog]]
        st.nlog = 0
        return out

    def count_only(self):
        self.state.record = 0


_stub = None


def _capsule(cfunc, what):
    """A PyCapsule named fastlaunch.current_<what> around a C function of the stub."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    name = _CAPSULE_NAMES.setdefault(what, ctypes.create_string_buffer(f"fastlaunch.current_{what}".encode()))
    return new(ctypes.cast(cfunc, ctypes.c_void_p), ctypes.addressof(name), None)


_CAPSULE_NAMES = {}  # the capsules' names must outlive them


def _benchmark(kernel_call, quantiles=None, **_):
    """The stand-in driver's benchmarker for Triton's Autotuner: runs the call once and reports a
    made-up, deterministic time from the launch's block size (nearest to 128 threads is fastest),
    so tuning picks the same config on every run."""
    state = _stub.state
    saved = state.record
    state.record = 1
    state.block[0] = 0
    kernel_call()
    t = float(abs(int(state.block[0]) - 128) + 1)
    state.record = saved
    return [t, t, t] if quantiles else t


def _build(directory):
    src = os.path.join(HERE, "cuda_stub.c")
    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(directory, digest)
    lib = os.path.join(out, "libcuda.so.1")
    if not os.path.exists(lib):
        os.makedirs(out, exist_ok=True)
        tmp = lib + f".{os.getpid()}"
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                        "-Wl,-soname,libcuda.so.1", "-o", tmp, src], check=True)
        os.replace(tmp, lib)
    link = os.path.join(out, "libcuda.so")
    if not os.path.exists(link):
        try:
            os.symlink("libcuda.so.1", link)
        except FileExistsError:
            pass
    return lib


def load(directory=None):
    """The stub, built (once per source) and loaded as this process's libcuda.so.1; Triton's
    active driver becomes its CUDA driver over it, and fastlaunch's cuda backend opens it too."""
    global _stub
    if _stub is not None:
        return _stub
    directory = directory or os.path.join(os.environ.get("FASTLAUNCH_CACHE_DIR") or
                                          os.path.expanduser("~/.cache/fastlaunch"), "cuda-stub")
    lib = _build(directory)
    _stub = Stub(lib)  # loaded first: a later dlopen("libcuda.so.1") finds this one by its soname
    os.environ["TRITON_LIBCUDA_PATH"] = os.path.dirname(lib)
    from fastlaunch import _C as _fl_C

    _fl_C.backend_configure("cuda", "library", lib)  # a testing build's setting: the stand-in driver
    import triton
    from triton.backends.nvidia import driver as nv

    try:
        triton.knobs.nvidia.libcuda_path = os.path.dirname(lib)
    except AttributeError:
        pass
    d = nv.CudaDriver()
    # torch here has no CUDA: the driver's device and stream come from C callables standing in for
    # torch's (device 0; a stream handle of a realistic size). Triton's own path calls these; the
    # JIT dispatcher calls their C equivalents in the stub (as it calls torch's C shim on a GPU).
    d.get_current_device = (0).__index__
    d.set_current_device = lambda device: None
    d.get_current_stream = {0: STREAM}.get
    _stub.state.stream_handle = STREAM
    from fastlaunch import triton_jit

    triton_jit.register_c_sources(d.get_current_device, _capsule(_stub.lib.stub_current_device, "device"),
                                  d.get_current_stream, _capsule(_stub.lib.stub_current_stream, "stream"))
    d.get_device_capability = lambda device=None: (9, 0)
    d.get_benchmarker = lambda: _benchmark
    triton.runtime.driver.set_active(d)
    return _stub


def two_devices(on=True):
    """The driver's current device read from the stand-in (two devices, a context each: stub.device,
    set by set_current_device), as torch's current device is on a machine with two GPUs; off: device 0
    as load() sets it (a C callable, no Python frame: what the benchmarks' Triton alone calls)."""
    import triton

    d = triton.runtime.driver.active
    state = _stub.state
    state.device = 0
    if on:
        d.get_current_device = lambda: state.device
        d.set_current_device = lambda device: setattr(state, "device", int(device))
        d.get_current_stream = lambda device=None: STREAM + 0x1000 * (state.device if device is None else device)
    else:
        d.get_current_device = (0).__index__
        d.set_current_device = lambda device: None
        d.get_current_stream = {0: STREAM}.get
    from fastlaunch import triton_jit

    triton_jit.register_c_sources(d.get_current_device, _capsule(_stub.lib.stub_current_device, "device"),
                                  d.get_current_stream, _capsule(_stub.lib.stub_current_stream, "stream"))


def compile(fn, signature, constexprs=None, num_warps=4):
    """A Triton CompiledKernel for sm_90, its handles loaded through the stub."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ck = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    ck._init_handles()
    return ck


if __name__ == "__main__":
    s = load()
    print(s.path, file=sys.stderr)
