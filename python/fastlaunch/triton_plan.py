"""Plans from Triton compiled kernels (fastlaunch.triton re-exports what is public here).

`abi_of(compiled)` reads a CompiledKernel's signature (constexprs dropped, tuples flattened), its
metadata (num_warps, num_ctas, shared, scratch sizes, cooperative, PDL) and the hidden trailing
pointer slots the Triton version in use appends. `plan_from_compiled(...)` builds a fastlaunch Plan
whose owner is the compiled kernel, so the module stays loaded while the plan lives.

Triton 3.2 to 3.9 are recognised by feature, never by version number: how the signature and the
constants are keyed, which metadata fields exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastlaunch import _C
from fastlaunch._C import FastLaunchPlanUnavailable, Plan


@dataclass
class TritonABI:
    names: list            # the ABI arguments' names (tuple members as "name_j")
    kinds: list            # their kinds (kind names)
    positions: list        # for each ABI argument, (index of the Python argument, tuple member or None)
    hidden_ptrs: int       # trailing pointer slots (global scratch, profile scratch)
    num_warps: int = 4
    num_ctas: int = 1
    shared: int = 0
    cooperative: bool = False
    pdl: bool = False
    global_scratch_size: int = 0
    profile_scratch_size: int = 0
    constexprs: dict = field(default_factory=dict)
    # One per host-side tensor descriptor argument (its map, then its shape as i32s and its strides as
    # i64s in kinds): (swizzle, elem_size, elem_type, block_size, fp4_padded), from tensordesc_meta.
    tensor_maps: list = field(default_factory=list)
    # Host-side descriptors Triton passes decomposed (no tensordesc_meta: below sm_90, AMD without TDM).
    decomposed: int = 0


def _meta(metadata, name, default):
    if isinstance(metadata, dict):
        return metadata.get(name, default)
    return getattr(metadata, name, default)


def _has_meta(metadata, name):
    if isinstance(metadata, dict):
        return name in metadata
    return hasattr(metadata, name) or name in getattr(metadata, "_fields", ())


def _constant_keys(constants):
    """Normalises a constants mapping to a set of keys: argument names, (index,) tuples and ints."""
    keys = set()
    for k in (constants or {}):
        keys.add(k)
        if isinstance(k, tuple) and len(k) == 1:
            keys.add(k[0])
    return keys


def _ctas_per_cluster(metadata) -> int:
    """How many CTAs each program of the grid becomes, as the launcher of the Triton in use counts
    them. Triton <= 3.5 keeps `cluster_dims` (x, y, z) and, when num_ctas != 1, multiplies every grid
    dimension by it; later versions multiply x by num_ctas. fastlaunch launches clusters along x
    only, so a cluster with y or z extent is refused."""
    num_ctas = int(_meta(metadata, "num_ctas", 1) or 1)
    if num_ctas == 1:
        return 1
    cluster = _meta(metadata, "cluster_dims", None)
    if cluster is None:
        return num_ctas
    dims = tuple(int(d) for d in cluster) + (1, 1, 1)
    if dims[1] != 1 or dims[2] != 1:
        raise FastLaunchPlanUnavailable(f"cluster_dims_unsupported:{dims[0]}x{dims[1]}x{dims[2]}")
    return dims[0]


def _refuse_instrumentation(metadata):
    """Instrumented kernels (Triton 3.9's gsan and the like) take extra hidden arguments that their
    launcher fills per call: refused, stably."""
    mode = _meta(metadata, "instrumentation_mode", "") or ""
    if str(mode).strip():
        raise FastLaunchPlanUnavailable(f"instrumentation_unsupported:{str(mode).strip()}")


def _hidden_slots(metadata) -> int:
    """The hidden trailing pointer slots the Triton in use appends: global scratch from the version
    whose metadata has the field, profile scratch likewise, whatever their sizes (0 means a null
    pointer). The one place they are counted. Triton's AMD launcher passes both (null while unused)
    from the version whose metadata has the profile scratch's size (3.5), which has no field for the
    global one."""
    if is_hip(metadata) and _has_meta(metadata, "profile_scratch_size"):
        return 2
    return int(_has_meta(metadata, "global_scratch_size")) + int(_has_meta(metadata, "profile_scratch_size"))


def launch_options_of(metadata) -> dict:
    """Plan keyword options for a Triton binary's metadata (CUDA ABI): hidden slots, warps,
    CTAs per cluster, shared memory, cooperative and PDL. Refuses what the packed launch cannot
    reproduce (scratch that needs an allocation per launch, instrumentation, 3-D clusters)."""
    _refuse_instrumentation(metadata)
    gss = int(_meta(metadata, "global_scratch_size", 0) or 0)
    if gss > 0:
        raise FastLaunchPlanUnavailable(f"global_scratch_required:{gss}")
    pss = int(_meta(metadata, "profile_scratch_size", 0) or 0)
    if pss > 0:
        raise FastLaunchPlanUnavailable(f"profile_scratch_required:{pss}")
    return {"hidden_ptrs": _hidden_slots(metadata),
            "num_warps": int(_meta(metadata, "num_warps", 4)), "num_ctas": _ctas_per_cluster(metadata),
            "shared_mem": int(_meta(metadata, "shared", 0)),
            "cooperative": bool(_meta(metadata, "launch_cooperative_grid", False)),
            "pdl": bool(_meta(metadata, "launch_pdl", False))}


def is_hip(metadata) -> bool:
    """Whether a Triton binary's metadata says it was compiled for an AMD GPU (an hsaco)."""
    target = _meta(metadata, "target", None)
    backend = target.get("backend") if isinstance(target, dict) else getattr(target, "backend", None)
    return (backend or _meta(metadata, "backend_name", "")) == "hip"


def hip_launch_options_of(metadata) -> dict:
    """Plan keyword options for an hsaco's metadata (hip ABI): hidden slots, warps, the target's
    wavefront, CTAs, LDS and cooperative (the backend refuses the last two when set, by name)."""
    opts = launch_options_of(metadata)
    if opts.pop("pdl"):
        raise FastLaunchPlanUnavailable("hip_pdl_unsupported")
    target = _meta(metadata, "target", None)
    wave = _meta(metadata, "warp_size", None) or getattr(target, "warp_size", None) or 64
    return {**opts, "warp_size": int(wave)}


def _unique_names(names):
    """Plan argument names are identifiers, unique: a tuple member is `<tuple>_<j>`, with more
    underscores where a parameter of that name exists already."""
    seen, out = set(), []
    for n in names:
        while n in seen:
            n = "_" + n
        seen.add(n)
        out.append(n)
    return out


def _leaves(ty, path):
    """(path, type) of each leaf of a signature entry, depth first."""
    if not isinstance(ty, tuple):
        return [(path, ty)]
    return [leaf for j, member in enumerate(ty) for leaf in _leaves(member, path + (j,))]


def _descriptor(name, ty, meta, maps_out):
    """A host-side tensor descriptor's ABI entries as Triton's expand_signature lays them out, and
    each one's member among the values the JIT reads for a descriptor (its map, shape, strides, base
    address, padding and TF32 flags: jit_key.c). With its metadata (sm_90 on): the map, then the
    shape as i32s and the strides as i64s; the entry of tensordesc_meta goes to maps_out. Without
    (maps_out None: below sm_90, AMD without TDM): decomposed, the base pointer, the shape and strides
    as i64s, the two flags as i1s, the shape as i32s and the strides as i64s. Im2col is refused by
    name."""
    import re

    m = re.match(r"tensordesc<([^[>]*)\[([^\]]*)\]", ty)
    if m is None or "input_rank" in ty or "im2col" in ty:
        raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{name}:{ty}")
    if not descriptors_encoded_as_3_7():
        # Triton 3.5 and 3.6 encode otherwise (no TF32, no fix-up for older drivers, the doubled FP4 size
        # passed on): their descriptors stay Triton's.
        raise FastLaunchPlanUnavailable(f"tensor_descriptor_unsupported:{name}:triton_before_3_7")
    n = m.group(2).count(",") + 1
    shape, strides = [("desc", 1 + d) for d in range(n)], [("desc", 1 + n + d) for d in range(n)]
    if maps_out is None:
        flags = [("desc", 2 * n + 2), ("desc", 2 * n + 3)]
        return (["*" + m.group(1)] + ["i64"] * (2 * n) + ["i1", "i1"] + ["i32"] * n + ["i64"] * n,
                [("desc", 2 * n + 1)] + shape + strides + flags + shape + strides)
    if not isinstance(meta, dict):
        raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{name}:{ty}")
    if meta.get("is_im2col") or not all(k in meta for k in ("swizzle", "elem_size", "elem_type", "block_size")):
        raise FastLaunchPlanUnavailable(f"tensor_descriptor_unsupported:{name}:{'im2col' if meta.get('is_im2col') else 'meta'}")
    block = [int(b) for b in meta["block_size"]]
    if len(block) != n:
        raise FastLaunchPlanUnavailable(f"tensor_descriptor_unsupported:{name}:meta")
    maps_out.append((int(meta["swizzle"]), int(meta["elem_size"]), int(meta["elem_type"]), block,
                     bool(meta.get("fp4_padded", False))))
    return ["nvTmaDesc"] + ["i32"] * n + ["i64"] * n, [None] + shape + strides


def abi_from_signature(signature, constants, arg_names, tensordesc_meta=None, maps_out=None):
    """The one mapping from a Triton signature to launch ABI arguments, for every caller (compiled
    kernels, Inductor's triton_meta): constexprs (declared, or specialized and listed in the
    constants) dropped, tuples flattened. Returns (names, kinds, positions, folded): kinds are
    canonical names (C parses Triton's spellings; a type no plan takes is a stable refusal),
    positions are (index of the Python argument, tuple member or None), and folded maps the name of
    each integer constant Triton folded into the binary to its value. A host-side tensor descriptor
    gives the entries _descriptor lays out (with tensordesc_meta, and maps_out to take each map's
    metadata, its map, shape and strides; without, the decomposed form), their positions (index,
    ("desc", member)), but a map's (index, None)."""
    if not isinstance(signature, dict):
        raise FastLaunchPlanUnavailable("signature_unrecognised")
    constants = constants or {}
    const_keys = _constant_keys(constants)
    names, types, positions, folded = [], [], [], {}
    descriptors = 0
    for index, (key, ty) in enumerate(signature.items()):
        # Signatures are keyed by name (3.3+) or by position (older); constants by name, by
        # position, or by a tuple path into tuple arguments.
        name = key if isinstance(key, str) else (arg_names[key] if key < len(arg_names) else f"arg{key}")
        pos = key if isinstance(key, int) else index
        if not isinstance(ty, (str, tuple)):
            raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{ty!r}")
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            # The kernel's tensordesc_meta says the form: entries, maps; empty, decomposed. Without it (a
            # caller that has none, or takes no maps) the form is unknown: refused.
            if not isinstance(tensordesc_meta, (list, tuple)) or (tensordesc_meta and maps_out is None):
                raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{name}:{ty}")
            metas = tensordesc_meta or None
            entries, members = _descriptor(name, ty, metas[descriptors] if metas and descriptors < len(metas) else None,
                                           maps_out if metas else None)
            descriptors += 1
            n = (len(members) - 1) // 2 if metas else (len(members) - 3) // 4
            part = {1 + d: f"shape{d}" for d in range(n)} | {1 + n + d: f"stride{d}" for d in range(n)} | \
                {2 * n + 1: "base", 2 * n + 2: "padding_nan", 2 * n + 3: "tf32"}
            names += [name if m is None else f"{name}_{part[m[1]]}" for m in members]  # repeats made unique below
            types += entries
            positions += [(pos, m) for m in members]
            continue
        if not isinstance(ty, tuple) and (ty == "constexpr" or name in const_keys or pos in const_keys):
            for k in (name, pos, (pos,)):
                if k in constants and isinstance(constants[k], int) and not isinstance(constants[k], bool):
                    folded[name] = constants[k]
            continue
        # A tuple's members in Triton's order (depth first, nested tuples included, as its launcher
        # expands them); a member's position is its index among the tuple's leaves.
        for j, (path, mty) in enumerate(_leaves(ty, (pos,))):
            if mty == "constexpr" or path in const_keys:
                continue
            if not isinstance(mty, str):
                raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{name}:{mty!r}")
            names.append(name + "".join(f"_{i}" for i in path[1:]))
            types.append(mty)
            positions.append((pos, j if isinstance(ty, tuple) else None))
    names = _unique_names(names)
    try:
        kinds = _C.kinds(types)
    except FastLaunchPlanUnavailable as exc:
        # Name the argument, as the other refusals do: the entry's index -> its name.
        i = exc.index
        raise FastLaunchPlanUnavailable(f"arg_kind_unsupported:{names[i] if i is not None else '?'}:"
                                        f"{types[i] if i is not None else exc.reason}") from None
    return names, kinds, positions, folded


def abi_of(compiled) -> TritonABI:
    """The launch ABI of a Triton CompiledKernel (or anything with .src and .metadata alike)."""
    src = getattr(compiled, "src", None)
    metadata = getattr(compiled, "metadata", None)
    if src is None or metadata is None:
        raise FastLaunchPlanUnavailable("compiled_kernel_unrecognised")
    fn = getattr(src, "fn", None)
    maps = []
    names, kinds, positions, _ = abi_from_signature(getattr(src, "signature", None), getattr(src, "constants", None),
                                                    list(getattr(fn, "arg_names", None) or []),
                                                    tensordesc_meta=_meta(metadata, "tensordesc_meta", None),
                                                    maps_out=maps)
    _refuse_instrumentation(metadata)
    return TritonABI(
        names=names, kinds=kinds, positions=positions, hidden_ptrs=_hidden_slots(metadata),
        num_warps=int(_meta(metadata, "num_warps", 4)), num_ctas=_ctas_per_cluster(metadata),
        shared=int(_meta(metadata, "shared", 0)), cooperative=bool(_meta(metadata, "launch_cooperative_grid", False)),
        pdl=bool(_meta(metadata, "launch_pdl", False)),
        global_scratch_size=int(_meta(metadata, "global_scratch_size", 0) or 0),
        profile_scratch_size=int(_meta(metadata, "profile_scratch_size", 0) or 0),
        constexprs={k: v for k, v in (getattr(src, "constants", None) or {}).items()},
        tensor_maps=maps,
        decomposed=0 if maps else len({p for p, m in positions if is_descriptor_member(m)}),
    )


def function_handle(compiled, *, load: bool = True) -> int:
    """The CUfunction of a compiled kernel, loading it (on the current device) when needed."""
    fn = getattr(compiled, "function", None)
    if not fn and load and hasattr(compiled, "_init_handles"):
        compiled._init_handles()
        fn = getattr(compiled, "function", None)
    if not fn:
        raise FastLaunchPlanUnavailable("kernel_function_missing")
    return int(fn)


def plan_from_compiled(compiled, *, runtime_arg_count=None, fixed_args=(), grid=None, grid_exprs=None,
                       arg_names=None, backend=None, function=None, name=None, ignore=None,
                       scratch_args=False, descriptors=False) -> Plan:
    """A Plan launching `compiled` (a Triton CompiledKernel) with the packed buffer.

    The plan's arguments are the kernel's ABI arguments in order; the last len(fixed_args) of them
    are fixed. grid / grid_exprs / neither as for Plan. backend None: the GPU the kernel was
    compiled for ("hip" for an AMD GPU's hsaco, its kernarg segment; "cuda" for NVIDIA's); "null"
    builds the same layout without a GPU (for measuring and for ABI checks). ignore: positions of a
    call's arguments the plan skips (the constexprs, when a call passes every parameter).
    """
    abi = abi_of(compiled)
    if abi.tensor_maps and not descriptors:  # a caller that passes each descriptor as one argument
        raise FastLaunchPlanUnavailable("tensor_descriptor_unsupported_here")
    hip = is_hip(compiled.metadata)
    kinds, hidden = list(abi.kinds), abi.hidden_ptrs
    if abi.global_scratch_size > 0:
        # An allocation per launch from Triton's allocator: only a caller that makes it (scratch_args:
        # the launcher's trailing pointers become the plan's last runtime arguments, the caller
        # passing the buffer), on cuda (hip's launcher sizes it without num_ctas).
        if not scratch_args or hip or hidden < 1 or fixed_args:
            raise FastLaunchPlanUnavailable(f"global_scratch_required:{abi.global_scratch_size}")
        kinds, hidden = kinds + ["ptr"] * hidden, 0
    if abi.profile_scratch_size > 0:
        raise FastLaunchPlanUnavailable(f"profile_scratch_required:{abi.profile_scratch_size}")
    backend = backend or ("hip" if hip else "cuda")
    if backend in ("cuda", "hip") and hip != (backend == "hip"):
        raise FastLaunchPlanUnavailable(f"compiled_for_another_target:{'hip' if hip else 'cuda'}:{backend}")
    if function is None:
        function = function_handle(compiled) if backend in ("cuda", "hip") else None
    nfixed = len(fixed_args)
    if runtime_arg_count is not None and runtime_arg_count + nfixed != len(kinds):
        raise FastLaunchPlanUnavailable(f"canonical_args_size_mismatch:{runtime_arg_count + nfixed}:{len(kinds)}")
    if hip:
        options = hip_launch_options_of(compiled.metadata)
    else:
        options = {"hidden_ptrs": hidden, "num_warps": abi.num_warps, "num_ctas": abi.num_ctas,
                   "shared_mem": abi.shared, "cooperative": abi.cooperative, "pdl": abi.pdl}
    if arg_names is None and len(kinds) > len(abi.names):
        arg_names = abi.names + ["global_scratch", "profile_scratch"][:len(kinds) - len(abi.names)]
    return Plan(function, kinds, backend=backend, abi="hip" if hip else "cuda", options=options, owner=compiled,
                fixed_args=list(fixed_args), grid=grid, grid_exprs=grid_exprs, arg_names=arg_names or abi.names,
                name=name or getattr(compiled, "name", None) or _meta(compiled.metadata, "name", None), ignore=ignore,
                tensor_maps=abi.tensor_maps or None)


def is_descriptor_member(m) -> bool:
    """Whether a position's member is one of a descriptor's values (abi_from_signature)."""
    return isinstance(m, tuple) and len(m) == 2 and m[0] == "desc"


def jit_positions(positions):
    """(parameter, member) per runtime value as the JIT dispatcher reads them: a tuple's member, -1
    for a plain value (a descriptor's map), a descriptor's other values by their place among its
    values (JIT_DESC_VALUES: the map, the shape, the strides, the base's address, the two flags)."""
    return tuple((p, m[1] if is_descriptor_member(m) else -1 if m is None else m) for p, m in positions)


def descriptors_encoded_as_3_7() -> bool:
    """Whether the Triton in use encodes host-side descriptors as 3.7 to 3.9 do (what the cuda
    backend's encode follows): its NVIDIA driver calls fill_tma_descriptor_tiled (read once)."""
    if _encodes_as_3_7[0] is None:
        try:
            import inspect

            from triton.backends.nvidia import driver as nv

            _encodes_as_3_7[0] = "fill_tma_descriptor_tiled" in inspect.getsource(nv)
        except (ImportError, OSError, TypeError):
            _encodes_as_3_7[0] = False
    return _encodes_as_3_7[0]


_encodes_as_3_7 = [None]
