"""Plans from Triton-Ascend kernels, launched as Triton-Ascend 3.2.0's own launcher launches them.

Triton-Ascend registers each kernel with rtDevBinaryRegister + rtFunctionRegister: its
CompiledKernel.function is that stub, launched with rtKernelLaunch on the packed argument struct
its generator emits (FFTS address, sync-lock and workspace slots, the arguments, the grid). The
plan takes the same stub and the same bytes (npu ABI, option rt_stub). What that launcher
decides from the environment when it is generated is decided here from the same variables.

Refused, each with its own stable reason, so the stock launcher keeps the call:
  - a workspace or sync-lock kernel (the launcher allocates per launch): npu_workspace_unsupported:N,
    npu_sync_lock_unsupported:N
  - TRITON_DEVICE_PRINT (a DebugTunnel per launch): npu_device_print_unsupported
  - a scalar kind the launcher cannot take (i8, i16, u8, u16, u1, fp8): arg_kind_unsupported_by_launcher:name:kind
  - a 910_95 SIMT kernel (rtKernelLaunchWithFlagV2): npu_launch_unsupported:910_95_simt
  - TRITON_REGISTER_TENSOR_MSPROF=1 (3.2.0's launcher then records and does not launch):
    npu_msprof_registration
  - TRITON_ALL_BLOCKS_PARALLEL without a known core count: npu_core_count_unknown
A grid past 65,535 blocks is refused per launch by the core (grid_product_exceeds), as the JIT
refuses it, unless TRITON_ALL_BLOCKS_PARALLEL clamps the block count to the cores.
"""

from __future__ import annotations

import os

from fastlaunch import FastLaunchPlanUnavailable, Plan
from fastlaunch.triton_plan import _meta, abi_from_signature

# Scalars Triton-Ascend 3.2.0's launcher parses (its extracted-type map); pointers always.
LAUNCHER_SCALARS = frozenset({"i1", "i32", "i64", "u32", "u64", "fp16", "bf16", "fp32", "f32", "fp64"})


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("true", "1")


def ffts_enabled() -> bool:
    """Whether the launcher passes an FFTS address: on unless TRITON_DISABLE_FFTS, or an
    architecture without FFTS in TRITON_ASCEND_ARCH."""
    arch = os.environ.get("TRITON_ASCEND_ARCH", "")
    return arch not in ("Ascend910A", "Ascend310B4") and not _env_on("TRITON_DISABLE_FFTS")


def _core_count(mix_mode) -> int | None:
    """Physical cores the launcher clamps to under TRITON_ALL_BLOCKS_PARALLEL (vector cores for aiv
    kernels), from Triton-Ascend's own driver; None where it cannot say."""
    try:
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(driver.active.get_current_device())
        return int(props["num_vectorcore" if mix_mode == "aiv" else "num_aicore"])
    except Exception:
        return None


def options_of(metadata) -> dict:
    """The npu plan options for a kernel with this metadata, or FastLaunchPlanUnavailable."""
    if _env_on("TRITON_DEVICE_PRINT"):
        raise FastLaunchPlanUnavailable("npu_device_print_unsupported")
    if os.environ.get("TRITON_REGISTER_TENSOR_MSPROF") == "1":
        raise FastLaunchPlanUnavailable("npu_msprof_registration")
    workspace = int(_meta(metadata, "workspace_size", -1) or -1)
    if workspace > 0:
        raise FastLaunchPlanUnavailable(f"npu_workspace_unsupported:{workspace}")
    locks = int(_meta(metadata, "lock_num", -1) or -1)
    if locks > 0:
        raise FastLaunchPlanUnavailable(f"npu_sync_lock_unsupported:{locks}")
    layout = int(_meta(metadata, "sync_block_lock_layout", 0) or 0)  # Triton-Ascend 3.6's lock field
    if layout > 0:
        raise FastLaunchPlanUnavailable(f"npu_sync_lock_unsupported:layout:{layout}")
    simt_only = bool(_meta(metadata, "force_simt_only", False))
    simt = simt_only or _meta(metadata, "parallel_mode", "simd") == "simt"
    if _meta(metadata, "compile_on_910_95", False) and simt:
        raise FastLaunchPlanUnavailable("npu_launch_unsupported:910_95_simt")
    options = {"ffts": ffts_enabled(), "simt_only": simt_only, "rt_stub": True}
    if _env_on("TRITON_ALL_BLOCKS_PARALLEL"):
        cores = _core_count(_meta(metadata, "mix_mode", None))
        if not cores:
            raise FastLaunchPlanUnavailable("npu_core_count_unknown")
        options["clamp_blocks"] = cores
    return options


def abi_of(signature, constants, arg_names):
    """(names, kinds) of the arguments in the packed struct: constexprs and specialised constants
    (ints equal to 1, None) dropped, every kind one the launcher takes."""
    names, kinds, _ = abi_and_folded(signature, constants, arg_names)
    return names, kinds


def abi_and_folded(signature, constants, arg_names):
    """abi_of, and the integer constants folded into the binary by name (what a caller may still
    pass positionally and the struct leaves out)."""
    names, kinds, positions, folded = abi_from_signature(signature, constants, arg_names)
    types = list(signature.values())
    for name, (pos, member) in zip(names, positions):
        ty = types[pos] if isinstance(pos, int) and pos < len(types) else None
        if member is not None or isinstance(ty, tuple):
            raise FastLaunchPlanUnavailable(f"tuple_arg_unsupported:{name}")
        if isinstance(ty, str) and not ty.startswith("*") and ty not in LAUNCHER_SCALARS:
            raise FastLaunchPlanUnavailable(f"arg_kind_unsupported_by_launcher:{name}:{ty}")
    return names, kinds, folded


def stub_of(compiled) -> int:
    """The registered stub (CompiledKernel.function), loading the binary when needed."""
    fn = getattr(compiled, "function", None)
    if not fn and hasattr(compiled, "_init_handles"):
        compiled._init_handles()
        fn = getattr(compiled, "function", None)
    if not fn:
        raise FastLaunchPlanUnavailable("kernel_function_missing")
    return int(fn)


def plan_from_ascend(compiled, *, grid=None, grid_exprs=None, arg_names=None, backend: str = "npu",
                     function=None, name=None) -> Plan:
    """A Plan launching a Triton-Ascend CompiledKernel (or anything with .src, .metadata and
    .function alike) as its own launcher does. backend="null" builds the same layout without the
    runtime (measuring, checks)."""
    src, metadata = getattr(compiled, "src", None), getattr(compiled, "metadata", None)
    if src is None or metadata is None:
        raise FastLaunchPlanUnavailable("compiled_kernel_unrecognised")
    signature = getattr(src, "signature", None)
    if not isinstance(signature, dict):
        raise FastLaunchPlanUnavailable("signature_unrecognised")
    fn = getattr(src, "fn", None)
    names, kinds = abi_of(signature, getattr(src, "constants", None), list(getattr(fn, "arg_names", None) or []))
    options = options_of(metadata)
    if function is None:
        function = stub_of(compiled) if backend == "npu" else 0
    packed = getattr(compiled, "packed_metadata", None)
    kname = name or (packed.get("kernel_name") if isinstance(packed, dict) else None) or _meta(metadata, "kernel_name",
                                                                                                None)
    if backend != "npu":
        options.pop("rt_stub")
    return Plan(function, kinds, backend=backend, abi="npu", options=options, owner=compiled, grid=grid,
                grid_exprs=grid_exprs, arg_names=arg_names or names, name=kname)
