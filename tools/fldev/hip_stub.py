"""The `hip-stub` stand-in for tests and benchmarks: fastlaunch's hip backend (and, later, Triton's
own AMD launcher) over one libamdhip64 stand-in (hip_stub.c) that launches nothing, on a machine
without an AMD GPU.

    lib = hip_stub.build()           # the stand-in, built once per source, its path
    stub = hip_stub.Stub(lib)        # its state (hip_stub.h) and its calls, through ctypes
    stub = hip_stub.load()           # ... and Triton's AMD driver made active over it (TRITON_LIBHIP_PATH)
    ck = hip_stub.compile(fn, signature, constexprs)  # a real hsaco for gfx942, from Triton's wheel
    fn = stub.load_function(ck.asm["hsaco"], ck.name)  # its hipFunction_t, loaded by the stand-in
    stub.kernel_info(hsaco, name)    # the code object metadata: kernarg size, each argument's offset

The hip backend opens it when it is its "library" setting (FASTLAUNCH_LIBHIP before import).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
STREAM = 0x7F3A_5C00_1230  # a stream handle of the size real ones have
MAX_ARGS, KERNARG_MAX = 128, 4096


class Kernel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 128), ("kernarg_size", ctypes.c_uint32), ("nargs", ctypes.c_uint32),
                ("offset", ctypes.c_uint32 * MAX_ARGS), ("size", ctypes.c_uint32 * MAX_ARGS)]


class State(ctypes.Structure):
    _fields_ = [("calls", ctypes.c_uint64), ("get_device_calls", ctypes.c_uint64), ("record", ctypes.c_int),
                ("version", ctypes.c_int), ("device", ctypes.c_int), ("warp_size", ctypes.c_int),
                ("max_shared", ctypes.c_int), ("fail_load", ctypes.c_int), ("fail_launch", ctypes.c_int),
                ("fail_get_device", ctypes.c_int), ("host_pointer", ctypes.c_uint64), ("stream_handle", ctypes.c_uint64),
                ("function", ctypes.c_uint64),
                ("stream", ctypes.c_uint64), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("used_params", ctypes.c_int), ("known_function", ctypes.c_int),
                ("kernarg_size", ctypes.c_uint32), ("kernarg", ctypes.c_ubyte * KERNARG_MAX)]


def hip_include():
    """The HIP headers Triton's wheel ships (backends/amd/include), or None."""
    try:
        import triton
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(triton.__file__), "backends", "amd", "include")
    return d if os.path.isfile(os.path.join(d, "hip", "hip_runtime_api.h")) else None


def build(directory=None):
    """The stand-in's path, compiled once per source into the cache (~/.cache/fastlaunch/hip-stub);
    with hipGetDeviceProperties (hip_stub_props.c) where HIP's header is at hand."""
    directory = directory or os.path.join(os.environ.get("FASTLAUNCH_CACHE_DIR") or
                                          os.path.expanduser("~/.cache/fastlaunch"), "hip-stub")
    inc = hip_include()
    names = ["hip_stub.c", "hip_stub.h"] + (["hip_stub_props.c"] if inc else [])
    digest = hashlib.sha256(repr(inc).encode())
    for name in names:
        with open(os.path.join(HERE, name), "rb") as f:
            digest.update(f.read())
    out = os.path.join(directory, digest.hexdigest()[:16])
    lib = os.path.join(out, "libamdhip64.so")
    if not os.path.exists(lib):
        os.makedirs(out, exist_ok=True)
        tmp = lib + f".{os.getpid()}"
        srcs = [os.path.join(HERE, n) for n in names if n.endswith(".c")]
        subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                        "-Wl,-soname,libamdhip64.so", "-o", tmp, *srcs] + (["-I", inc] if inc else []), check=True)
        os.replace(tmp, lib)
    return lib


_stub = None


def _benchmark(kernel_call, quantiles=None, **_):
    """The stand-in's benchmarker for Triton's Autotuner (as cuda_stub's): the call runs once, its
    made-up time from the launch's block size (nearest to 128 threads fastest), the same every run."""
    state = _stub.state
    saved = state.record
    state.record = 1
    state.block[0] = 0
    kernel_call()
    t = float(abs(int(state.block[0]) - 128) + 1)
    state.record = saved
    return [t, t, t] if quantiles else t


def load(directory=None):
    """The stand-in, loaded as this process's libamdhip64 and the hip backend's library; Triton's
    AMD driver made the active driver over it (its launcher compiled against it, as on ROCm)."""
    global _stub
    if _stub is not None:
        return _stub
    lib = build(directory)
    _stub = Stub(lib)
    os.environ["TRITON_LIBHIP_PATH"] = lib
    from fastlaunch import _C as _fl_C

    _fl_C.backend_configure("hip", "library", lib)
    import triton
    from triton.backends.amd import driver as amd

    try:
        triton.knobs.amd.libhip_path = lib
    except AttributeError:
        pass
    d = amd.HIPDriver()
    # torch here has no ROCm: the device and stream Triton's path asks for come from these.
    d.get_current_device = (0).__index__
    d.set_current_device = lambda device: None
    d.get_current_stream = {0: STREAM}.get
    d.get_benchmarker = lambda: _benchmark
    _stub.state.stream_handle = STREAM
    from fastlaunch import triton_jit
    from fldev.cuda_stub import _capsule

    # Their C equivalents, which the JIT dispatcher calls (as it calls torch's C shim on a GPU).
    triton_jit.register_c_sources(d.get_current_device, _capsule(_stub.lib.hip_stub_current_device, "device"),
                                  d.get_current_stream, _capsule(_stub.lib.hip_stub_current_stream, "stream"))
    triton.runtime.driver.set_active(d)
    return _stub


class Stub:
    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.state = State.in_dll(self.lib, "stub")
        self.lib.hipModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        self.lib.hipModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        self.lib.hip_stub_kernel_info.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Kernel)]

    def kernel_info(self, image: bytes, name: str):
        """(kernarg_size, [(offset, size)] per argument) from the hsaco's metadata."""
        k = Kernel()
        r = self.lib.hip_stub_kernel_info(image, name.encode(), ctypes.byref(k))
        if r:
            raise ValueError(f"{name}: {'not an hsaco' if r == -1 else 'no such kernel'} ({r})")
        return k.kernarg_size, [(k.offset[i], k.size[i]) for i in range(k.nargs)]

    def load_function(self, image: bytes, name: str) -> int:
        """The hipFunction_t of `name` in the hsaco, loaded by the stand-in (as Triton's loader would)."""
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        r = self.lib.hipModuleLoadData(ctypes.byref(mod), image)
        if r:
            raise RuntimeError(f"hipModuleLoadData: {r}")
        r = self.lib.hipModuleGetFunction(ctypes.byref(fn), mod, name.encode())
        if r:
            raise RuntimeError(f"hipModuleGetFunction({name}): {r}")
        return fn.value

    def kernarg(self) -> bytes:
        return bytes(self.state.kernarg[:self.state.kernarg_size])


def compile(fn, signature, constexprs=None, num_warps=4, arch="gfx942", warp_size=64):
    """A Triton CompiledKernel for an AMD target (an hsaco from the wheel's own codegen; no ROCm)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}),
                          target=GPUTarget("hip", arch, warp_size), options={"num_warps": num_warps})
