"""What an Inductor launcher passes and what its binary takes, for the Inductor adapter (inductor.py):
the ABI from the autotuner's Triton signature, with torch 2.15's host-side TMA descriptors (the
launcher builds a TensorDescriptor from the tensor it is given, its shape and strides fixed when the
kernel was compiled), the launch options of the binary behind the launcher (torch's static launcher
or Triton's), and its global scratch (torch 2.15's static launcher allocates it per launch, as
Triton's launcher does: the device-side descriptors of the TMA templates).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastlaunch._C import FastLaunchPlanUnavailable
from fastlaunch.triton_plan import (abi_from_signature, abi_of, hip_launch_options_of, is_descriptor_member, is_hip,
                                    launch_options_of)


def scope_of(launcher):
    return getattr(launcher, "__globals__", None) or {}


def static_kernel(launcher):
    """The StaticallyLaunched*Kernel behind a static launcher (its runner is that kernel's run)."""
    runner = scope_of(launcher).get("runner")
    owner = getattr(runner, "__self__", None)
    if owner is not None and hasattr(owner, "arg_tys") and hasattr(owner, "function"):
        return owner
    return None


def device_type(autotuner):
    meta = getattr(autotuner, "triton_meta", None) or {}
    return getattr(getattr(autotuner, "device_props", None), "type", None) or meta.get("device_type")


@dataclass
class LauncherAbi:
    names: list            # the binary's ABI arguments (a descriptor's map, then its shape and strides)
    kinds: list
    folded: dict           # integer constants Triton folded into the binary, by name
    call_names: list       # the ABI names a launcher call passes (one per descriptor)
    maps: list = field(default_factory=list)      # each tensor map's metadata (Plan tensor_maps=)
    geometry: list = field(default_factory=list)  # each map's fixed (shape, strides) (tensor_map_geometry=)


def abi_of_launcher(autotuner, launcher, args, def_args) -> LauncherAbi:
    """The launcher's call onto its binary's ABI: the autotuner's signature, each host-side TMA
    argument (inductor_meta's host_tma_descriptor_args, where the binary took it as a descriptor) a
    tensor map whose shape and strides the compile step fixed. Tuples are refused."""
    triton_meta = getattr(autotuner, "triton_meta", None) or {}
    signature = triton_meta.get("signature")
    if not isinstance(signature, dict):
        raise FastLaunchPlanUnavailable("codegen_signature_missing")
    fn = getattr(autotuner, "fn", None)
    arg_names = list(getattr(fn, "arg_names", None) or [])
    signature, tensordesc_meta, geometry = _host_tma(autotuner, launcher, dict(signature), args, def_args)
    maps = []
    names, kinds, positions, folded = abi_from_signature(signature, triton_meta.get("constants"), arg_names,
                                                         tensordesc_meta=tensordesc_meta, maps_out=maps)
    for name, (_, member) in zip(names, positions):
        if member is not None and not is_descriptor_member(member):
            raise FastLaunchPlanUnavailable(f"tuple_arg_unsupported:{name.split('.')[0]}")
    call_names = [n for n, (_, m) in zip(names, positions) if m is None]
    return LauncherAbi(names, kinds, folded, call_names, maps, geometry)


def _desc_names_and_meta(launcher):
    """(names of the binary's descriptor parameters, its tensordesc_meta), from torch's static
    kernel or Triton's binary."""
    static = static_kernel(launcher)
    if static is not None:
        return list(getattr(static, "tensordesc_arg_names", None) or ()), getattr(static, "tensordesc_meta", None)
    binary = scope_of(launcher).get("bin")
    src_sig = getattr(getattr(binary, "src", None), "signature", None) or {}
    md = getattr(binary, "metadata", None)
    meta = md.get("tensordesc_meta") if isinstance(md, dict) else getattr(md, "tensordesc_meta", None)
    return [k for k, t in src_sig.items() if isinstance(k, str) and str(t).startswith("tensordesc")], meta


class _Base:
    """A base standing in for the tensor while TensorDescriptor checks the fixed geometry (its own
    assertions: rank, block shape, strides' alignment for the dtype, the innermost stride)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self):
        return 0


def _host_tma(autotuner, launcher, signature, args, def_args):
    """The signature as the compile step rewrote it for host-side TMA (tensordesc<dtype[block]> for
    each descriptor argument), the binary's tensordesc_meta, and each descriptor's fixed (shape,
    strides), resolved by torch's own _resolve_dims as its launcher resolves them."""
    meta = getattr(autotuner, "inductor_meta", None) or {}
    host = meta.get("host_tma_descriptor_args")
    if not host:
        return signature, None, []
    desc_names, tensordesc_meta = _desc_names_and_meta(launcher)
    if not desc_names:
        raise FastLaunchPlanUnavailable("host_tma_descriptors_unrecognised")
    if not tensordesc_meta or len(tensordesc_meta) != len(desc_names):
        raise FastLaunchPlanUnavailable("host_tma_decomposed")  # no map form (below sm_90): torch's
    try:
        from torch._inductor.runtime.triton_heuristics import _resolve_dims
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError as exc:
        raise FastLaunchPlanUnavailable("host_tma_unrecognised") from exc
    config = getattr(launcher, "config", None)
    cfg_kwargs = dict(getattr(config, "kwargs", None) or {})
    constants = {**((getattr(autotuner, "triton_meta", None) or {}).get("constants") or {}), **cfg_kwargs}
    geometry = {}
    for name in desc_names:
        info = host.get(name)
        ty = signature.get(name)
        dims = [_resolve_dims(info[k], cfg_kwargs, constants) for k in ("block_shape", "shape", "strides")] \
            if isinstance(info, dict) else [None]
        if any(d is None for d in dims) or not isinstance(ty, str) or name not in def_args:
            raise FastLaunchPlanUnavailable(f"host_tma_unresolved:{name}")
        block, shape, strides = dims
        dtype = ty[1:] if ty.startswith("*") else ty.split("<")[1].split("[")[0] if ty.startswith("tensordesc<") else None
        if dtype is None:
            raise FastLaunchPlanUnavailable(f"host_tma_unresolved:{name}")
        tensor = args[def_args.index(name)]
        try:  # the launcher's TensorDescriptor would assert on these every call: left to it
            TensorDescriptor(_Base(tensor.dtype), shape, strides, block)
        except Exception as exc:
            raise FastLaunchPlanUnavailable(f"host_tma_descriptor_invalid:{name}") from exc
        signature[name] = f"tensordesc<{dtype}{list(block)}>"
        geometry[name] = (tuple(shape), tuple(strides))
    order = [k for k, t in signature.items() if isinstance(t, str) and t.startswith("tensordesc")]
    if sorted(order) != sorted(desc_names):
        raise FastLaunchPlanUnavailable("host_tma_descriptors_unrecognised")
    return signature, list(tensordesc_meta), [geometry[n] for n in order]


def launch_target(backend, autotuner, launcher):
    """(options, abi name, backend, trailing pointer kinds, scratch) of the launcher's binary: cuda's,
    or hip's for an AMD GPU's hsaco. With global scratch the launcher's trailing pointers become the
    plan's last arguments and scratch is (allocator ContextVar, bytes per CTA, alignment, num_ctas,
    trailing pointers) for the entry, which allocates as the launcher does."""
    if backend not in ("cuda", "hip"):
        return {}, None, backend, [], None
    static = static_kernel(launcher)
    if static is not None:
        if device_type(autotuner) == "hip":
            # torch's static launcher on ROCm: fastlaunch reads the binary's metadata instead.
            raise FastLaunchPlanUnavailable("hip_static_launcher_unsupported")
        hidden = int(bool(getattr(static, "has_global_scratch", False))) + int(bool(getattr(static, "has_profile_scratch", False)))
        options = {"hidden_ptrs": hidden, "num_warps": int(static.num_warps), "shared_mem": int(static.shared)}
        gss = int(getattr(static, "global_scratch_size", 0) or 0)
        if gss <= 0:
            return options, "cuda", "cuda", [], None
        if not getattr(static, "has_global_scratch", False):
            raise FastLaunchPlanUnavailable(f"global_scratch_required:{gss}")
        align = int(getattr(static, "global_scratch_align", 1) or 1)
        return dict(options, hidden_ptrs=0), "cuda", "cuda", ["ptr"] * hidden, _scratch(gss, align, 1, hidden)
    binary = scope_of(launcher).get("bin")
    md = getattr(binary, "metadata", None)
    if md is None:
        raise FastLaunchPlanUnavailable("kernel_metadata_missing")
    if is_hip(md):
        return hip_launch_options_of(md), "hip", "hip", [], None
    babi = abi_of(binary)
    if babi.global_scratch_size <= 0 or babi.profile_scratch_size > 0:
        return launch_options_of(md), "cuda", "cuda", [], None  # refuses what it must, by name
    align = int(getattr(md, "global_scratch_align", 1) or 1)
    options = {"hidden_ptrs": 0, "num_warps": babi.num_warps, "num_ctas": babi.num_ctas, "shared_mem": babi.shared,
               "cooperative": babi.cooperative, "pdl": babi.pdl}
    return options, "cuda", "cuda", ["ptr"] * babi.hidden_ptrs, _scratch(babi.global_scratch_size, align, babi.num_ctas,
                                                                          babi.hidden_ptrs)


def _scratch(size, align, ctas, hidden):
    try:
        from triton.runtime import _allocation

        var = _allocation._allocator
    except (ImportError, AttributeError) as exc:
        raise FastLaunchPlanUnavailable(f"global_scratch_required:{size}") from exc
    return (var, int(size), int(align), int(ctas), int(hidden))
