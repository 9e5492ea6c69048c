"""torch_npu's Inductor launch path on a machine without an NPU, for fastlaunch's tests.

What is real: torch_npu 2.14.0's own Inductor runtime (fldev.tn_reference: NPUCachingAutotuner,
cached_autotune, TritonCompileResultNpu.make_launcher, GridNpu/GridExprNpu, run() with its
best_launcher and runtime blocks), torch's CachingAutotuner under it, Triton's JITFunction, and the
packed bytes of every stock launch (Triton-Ascend 3.2.0's own generated launcher, fldev.ta_reference).

What stands in (each labelled where it is made):
  - `triton.compile` for the npu target: returns a CompiledKernelStandin, the shape of
    Triton-Ascend 3.2.0's CompiledKernel (src, metadata, packed_metadata, function, run);
  - its `run` (NPULauncher): TaLauncherStandin packs with Triton-Ascend's generated launcher and
    hands the bytes to the recording runtime stand-in's rtKernelLaunch (fldev.ascend_standin), behind
    the task queue's pending work, as OpCommand orders it;
  - `triton.backends.ascend.compiler.NPUOptions` (only its field names are read);
  - the benchmark: NPU profiling cannot run here, so each scene says which candidate wins.

    scene = Scene(rt, configs=[{"X0BLOCK": 64, "X0BLOCK_SUB": 16}, ...], winner="c1")
    scene.call(x_ptr, y_ptr, out_ptr, numel)    # what the generated code does: kernel.run(..., stream=)
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import os
import sys
import tempfile
import types

import triton
import triton.language as tl

from fldev import ta_reference, tn_reference

STREAM = 0x77
STUB_BASE = 0x5100_0000


def _kernel(in_ptr0, in_ptr1, out_ptr0, x0_numel, X0BLOCK, X0BLOCK_SUB: tl.constexpr):
    pass  # the body is never compiled here: the compile step is a stand-in


# Signature and metadata as torch_npu 2.14's codegen writes them for that kernel (a pointwise add
# over one split axis x0: X0BLOCK is a runtime block, X0BLOCK_SUB a constexpr).
SIGNATURE = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "x0_numel": "i32", "X0BLOCK": "i32"}


def inductor_meta(name: str, **extra) -> dict:
    meta = {
        "grid_type": "GridNpu", "autotune_hints": set(), "kernel_name": name, "mutated_arg_names": [],
        "split_axis": [0], "tiling_axis": [0], "no_loop_axis": [], "axis_names": ["x0"],
        "axis_static_values": (), "low_dims": {0}, "numof_reduction_axis": 0, "split_axis_dtype": None,
        "dual_reduction": False, "npu_kernel_type": "simd", "traced_graph_hash": "TRACED_GRAPH_HASH",
        "traced_graph_dir": "TRACED_GRAPH_DIR", "are_deterministic_algorithms_enabled": False,
        "runtime_block_arg_names": ("X0BLOCK",), "group_enabled": False, "group_template": None,
        "group_workload": None, "primary_group_axis": None, "static_split_axes": (),
        "secondary_runtime_symbolic_axes": (), "group_features": (), "force_disable_caches": True,
    }
    meta.update(extra)
    return meta


# ---- stand-ins -------------------------------------------------------------------------------------

@dataclasses.dataclass
class NPUOptionsStandin:
    """Stand-in for Triton-Ascend's NPUOptions: torch_npu reads only its field names."""
    debug: bool = False
    num_warps: int = 4
    num_stages: int = 1
    multibuffer: bool = True
    compile_mode: str = "simd"
    force_simt_only: bool = False
    parallel_mode: str = "simd"


def _metadata_type(extra):
    fields = ["hash", "target", "name", "kernel_name", "mix_mode", "parallel_mode", "force_simt_only",
              "compile_on_910_95", "shared", "num_warps", "num_ctas", "cluster_dims", "debug", "tensor_kinds",
              "required_ub_bits", *sorted(extra)]
    return collections.namedtuple("KernelMetadata", fields)


class TaLauncherStandin:
    """Stand-in for Triton-Ascend 3.2.0's NPULauncher (CompiledKernel.run): its arguments are parsed
    and packed by Triton-Ascend's own generated launcher (ta_reference), then the bytes go to the
    runtime stand-in's rtKernelLaunch on the stream it was given."""

    def __init__(self, scene, src):
        self.scene = scene
        names = list(src.fn.arg_names)
        self.ref_signature = {names.index(n): ty for n, ty in src.signature.items() if ty != "constexpr"}
        self.ref = ta_reference.reference(self.ref_signature, {}, ffts=True, force_simt_only=False)
        self.calls = 0

    def __call__(self, gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter, exit_, *args):
        rt = self.scene.rt
        addr, length = ctypes.c_uint64(), ctypes.c_uint32()
        assert rt.rtGetC2cCtrlAddr(ctypes.byref(addr), ctypes.byref(length)) == 0
        launch = self.ref.launch(list(args), (gx, gy, gz), addr.value)
        if rt.npu is not None and rt.mode() != 0:
            rt.drain()  # OpCommand runs it behind what the queue holds (stand-in: in order, now)
        rc = rt.rtKernelLaunch(function, launch.blocks, launch.data, launch.size, None, stream)
        if rc != 0:
            raise RuntimeError(f"rtKernelLaunch failed: {rc}")
        self.calls += 1


class CompiledKernelStandin:
    """Stand-in for Triton-Ascend 3.2.0's CompiledKernel as make_launcher reads it: src (the
    ASTSource torch_npu compiled), metadata (a namedtuple of NPUOptions and what the compile adds),
    packed_metadata (a dict), function (the rtFunctionRegister stub: an int) and run."""

    def __init__(self, scene, src, options):
        self.src = src
        name = scene.name
        meta = dict(hash="0" * 64, target=("npu", "Ascend910B2", 32), name=f"{name} aiv", kernel_name=name,
                    mix_mode="aiv", parallel_mode="simd", force_simt_only=False, compile_on_910_95=False, shared=1,
                    num_warps=options.get("num_warps", 4), num_ctas=1, cluster_dims=(1, 1, 1), debug=False,
                    tensor_kinds=[0, 0, 1], required_ub_bits=0)
        meta.update(scene.metadata)
        self.metadata = _metadata_type(scene.metadata)(**meta)
        self.packed_metadata = {"kernel_name": name[-49:], "hash": meta["hash"], "debug": False,
                                "tensor_kinds": meta["tensor_kinds"]}
        scene.compiled.append(self)
        self.function = STUB_BASE + 0x100 * scene.index + len(scene.compiled)
        self.module = self.function + 0x8000
        self.run = TaLauncherStandin(scene, src)

    def _init_handles(self):
        pass

    def launch_metadata(self, grid, stream, *args):
        return None  # what Triton-Ascend 3.2.0 returns with no launch hook to feed


_scenes: dict = {}


def _compile_standin(src, target=None, options=None):
    """Stand-in for triton.compile on the npu target."""
    scene = _scenes.get(id(src.fn))
    if scene is None:
        raise RuntimeError("npu_inductor_scene: compile of a kernel no scene owns")
    return CompiledKernelStandin(scene, src, options or {})


def _install(th):
    if getattr(th, "_fldev_scene_installed", False):
        return
    th.triton = types.SimpleNamespace(compile=_compile_standin, __version__="3.2.0")
    # Triton-Ascend 3.2.0 is a Triton 3.2: torch's check for the attrs-dict signature says no.
    th.triton_version_uses_attrs_dict = lambda: False
    pkg = types.ModuleType("triton.backends.ascend")
    pkg.__path__ = []
    comp = types.ModuleType("triton.backends.ascend.compiler")
    comp.NPUOptions = NPUOptionsStandin
    sys.modules.setdefault("triton.backends.ascend", pkg)
    sys.modules.setdefault("triton.backends.ascend.compiler", comp)
    th._fldev_scene_installed = True


class Scene:
    """One kernel of torch_npu's Inductor: a real autotuner from torch_npu's cached_autotune."""

    count = 0

    def __init__(self, rt, *, configs=None, winner=None, metadata=None, name=None, meta=None, size_hint=4096):
        from torch._inductor.runtime.hints import DeviceProperties, HeuristicType
        from torch._inductor.runtime.triton_heuristics import Config

        self.th = th = tn_reference.load()
        _install(th)
        Scene.count += 1
        self.index = Scene.count
        self.rt = rt
        self.name = name or f"triton_poi_fused_add_{self.index}"
        self.metadata = dict(metadata or {})
        self.compiled = []
        py = types.FunctionType(_kernel.__code__, _kernel.__globals__, self.name)
        py.__annotations__ = dict(_kernel.__annotations__)
        py.__qualname__ = self.name
        globals()[self.name] = py  # found by name, as a kernel in Inductor's code cache is (pickling)
        self.fn = triton.jit(py)
        _scenes[id(self.fn)] = self
        configs = configs or [{"X0BLOCK": 256, "X0BLOCK_SUB": 64}]
        cfgs = [Config(dict(c), num_warps=1, num_stages=1) for c in configs]
        device = DeviceProperties(type="npu", index=0, multi_processor_count=tn_reference.CUBE_CORES,
                                  cc="Ascend910B2", major=None, regs_per_multiprocessor=None,
                                  max_threads_per_multi_processor=None, max_threads_per_block=None, warp_size=32)
        triton_meta = {"signature": dict(SIGNATURE), "device": device, "constants": {}, "mix_mode": "aiv"}
        filename = os.path.join(tempfile.gettempdir(), f"fldev_{os.getpid()}_{self.name}.py")
        self.autotuner = th.cached_autotune([size_hint], cfgs, triton_meta, HeuristicType.POINTWISE,
                                            filename=filename, inductor_meta=inductor_meta(self.name, **(meta or {})))(
            self.fn)
        if winner is not None:
            # Stand-in for the NPU benchmark (profiling needs a device): `winner` is fastest.
            def timings(*args, **kwargs):
                plan = self.autotuner.candidate_plan
                return {c["candidate_id"]: (0.5 if c["candidate_id"] == winner else 1.0)
                        for c in plan["candidate_entries"]}

            self.autotuner._benchmark_candidate_entries = timings

    def call(self, *args, stream=STREAM):
        """What torch_npu's generated wrapper does: kernel.run(*args, stream=stream0)."""
        return self.autotuner.run(*args, stream=stream)

    @property
    def stock_launches(self) -> int:
        return sum(c.run.calls for c in self.compiled)
