"""torch_npu 2.14.0's own Inductor runtime, loaded on a machine without CANN, for fastlaunch's tests.

torch_npu cannot be imported here (its package loads CANN's libraries). Its Inductor runtime is
Python, though: this module fetches the torch-npu 2.14.0 wheel from PyPI with pip (never
installed), takes five files out of it with zipfile, and runs them unchanged as the modules they
are in torch_npu:

    torch_npu._inductor.config                       (read from the environment, as on a device)
    torch_npu._inductor.codegen.triton_utils
    torch_npu._inductor.runtime.tile_generator
    torch_npu._inductor.runtime.symbolic_grouping
    torch_npu._inductor.runtime.triton_heuristics   (NPUCachingAutotuner, TritonCompileResultNpu,
                                                     GridNpu, GridExprNpu, cached_autotune)

Only what needs an Ascend device is stood in for, and is labelled as a stand-in where it is made:
the package modules above them (their __init__ files import torch_npu's C extension), the SoC
version and core counts (`torch_npu.npu._backends.get_soc_version`, `torch.npu`'s device
properties: an Ascend910B2's), a device interface for "npu" (torch's DeviceGuard needs one),
`torch_npu._inductor.utils.classproperty`, and the accuracy checker and profiler entry points
(which raise: nothing here calls them).

    th = tn_reference.load()      # once per process; registers the modules in sys.modules

load() changes the process (sys.modules, `torch.npu`, the device registry): call it in a child
process or a process of its own. Cache: $FLDEV_TN_CACHE or ~/.cache/fastlaunch/torch-npu-2.14.0/.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import types
import zipfile

from fldev.ta_reference import Unavailable, _download_wheel, _locked, _write_atomic

VERSION = "2.14.0"
REQUIREMENT = f"torch-npu=={VERSION}"
PKG = "torch_npu/_inductor/"
# (module name, wheel member), in the order they are run.
MODULES = (
    ("torch_npu._inductor.config", PKG + "config.py"),
    ("torch_npu._inductor.codegen.triton_utils", PKG + "codegen/triton_utils.py"),
    ("torch_npu._inductor.runtime.tile_generator", PKG + "runtime/tile_generator.py"),
    ("torch_npu._inductor.runtime.symbolic_grouping", PKG + "runtime/symbolic_grouping.py"),
    ("torch_npu._inductor.runtime.triton_heuristics", PKG + "runtime/triton_heuristics.py"),
)
# Stand-in device facts: an Ascend910B2 (SoC code below Ascend950's 260; 24 cube, 48 vector cores).
SOC_VERSION = 223
CUBE_CORES, VECTOR_CORES = 24, 48

__all__ = ["Unavailable", "Incompatible", "load", "cache_dir", "files"]


class Incompatible(Unavailable):
    """The wheel was fetched, but its runtime does not load with this torch (built for torch 2.14,
    it reads names older Inductors lack)."""


def cache_dir() -> str:
    return os.environ.get("FLDEV_TN_CACHE") or os.path.join(
        os.path.expanduser("~/.cache/fastlaunch"), f"torch-npu-{VERSION}")


def files() -> dict:
    """{wheel member: cached path} for the modules, fetching the wheel once (under a file lock)."""
    root = cache_dir()
    paths = {m: os.path.join(root, "files", m) for _, m in MODULES}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    with _locked(os.path.join(root, ".download.lock")):
        if all(os.path.exists(p) for p in paths.values()):
            return paths
        tmp = tempfile.mkdtemp(prefix=".wheel-", dir=root)
        try:
            wheel = _download_wheel(tmp, REQUIREMENT, "torch_npu-")
            with open(wheel, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            with zipfile.ZipFile(wheel) as z:
                for member, path in paths.items():
                    _write_atomic(path, z.read(member))
            _write_atomic(os.path.join(root, "SOURCE"), f"{os.path.basename(wheel)} sha256={digest}\n".encode())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return paths


def _package(name: str) -> types.ModuleType:
    """A package module with no files of its own (stand-in for torch_npu's __init__ files)."""
    m = types.ModuleType(name)
    m.__path__ = []
    m.__package__ = name
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def _raises(what):
    def f(*a, **k):
        raise RuntimeError(f"{what}: a stand-in of fldev.tn_reference (needs an Ascend device)")
    return f


class _classproperty:
    """Stand-in for torch_npu._inductor.utils.classproperty (a descriptor read on the class)."""

    def __init__(self, fget):
        self.fget = fget

    def __get__(self, obj, owner):
        return self.fget(owner)


def _standins():
    import torch

    for name in ("torch_npu", "torch_npu.npu", "torch_npu._inductor", "torch_npu._inductor.runtime",
                 "torch_npu._inductor.codegen"):
        _package(name)
    tn = sys.modules["torch_npu"]
    tn.__version__ = VERSION
    tn.npu.is_current_stream_capturing = lambda: False
    backends = _package("torch_npu.npu._backends")
    backends.get_soc_version = lambda: SOC_VERSION
    utils = _package("torch_npu._inductor.utils")
    utils.classproperty = _classproperty
    compare = _package("torch_npu._inductor.npu_compare")
    compare.check_accuracy_triton = _raises("check_accuracy_triton")
    profiler = _package("torch_npu._inductor.profiler")
    profiler.simple_trace_handler = _raises("simple_trace_handler")
    profiler.mspti_batch_benchmark = _raises("mspti_batch_benchmark")
    props = types.SimpleNamespace(cube_core_num=CUBE_CORES, vector_core_num=VECTOR_CORES, name="Ascend910B2")
    torch.npu = types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda device=0: props,
                                      is_available=lambda: False)
    _register_device_interface()


def _register_device_interface():
    """torch's DeviceGuard over "npu" (NPUCachingAutotuner._make_launchers loads binaries under one)."""
    from torch._dynamo import device_interface as di

    class NpuInterfaceStandin(di.DeviceInterface):
        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def set_device(device):
            pass

        @staticmethod
        def exchange_device(device):
            return 0

        @staticmethod
        def maybe_exchange_device(device):
            return 0

        @staticmethod
        def device_count():
            return 1

        @staticmethod
        def is_available():
            return True

        @staticmethod
        def synchronize(device=None):
            pass

    di.register_interface_for_device("npu", NpuInterfaceStandin)


@functools.lru_cache(maxsize=None)
def load() -> types.ModuleType:
    """torch_npu._inductor.runtime.triton_heuristics, run from the wheel's own file."""
    paths = files()
    _standins()
    mod = None
    for name, member in MODULES:
        spec = importlib.util.spec_from_file_location(name, paths[member])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, mod)
        try:
            spec.loader.exec_module(mod)
        except (ImportError, AttributeError) as exc:  # built for torch 2.14: older Inductors lack names
            import torch

            raise Incompatible(f"torch-npu {VERSION}'s {name} does not load with torch {torch.__version__}: "
                               f"{exc}") from exc
    return mod
