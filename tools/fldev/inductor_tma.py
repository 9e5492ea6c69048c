"""Inductor's TMA templates through the Inductor adapter, on the stand-in driver (sm_90, no GPU).

torch 2.15 compiles its persistent TMA matmul template (templates/triton_persistent_tma_mm.py.jinja)
in two forms: device-side descriptors (`tl.make_tensor_descriptor`: the binary asks for global
scratch, which torch's static launcher allocates per launch from Triton's allocator) and host-side
TMA (`ENABLE_HOST_SIDE_TMA=1`: inductor_meta's host_tma_descriptor_args; the generated launcher
turns each input tensor into a CUtensorMap with its shape and strides fixed at compile time). Both
take their grid as the launcher's last three arguments (FixedGrid, as every template kernel does).
The device-side form is compiled for sm_90 and, with its tile loop warp-specialized as Blackwell's
template has it, for sm_100.

The kernels below are the template's body as Inductor renders it for `A @ B` (fp16, the store
written out as a masked store). Each goes through torch's own compile step
(CachingAutotuner._precompile_config with an sm_90 GPU's DeviceProperties, torch's static CUDA
launcher over the stand-in libcuda), once for a stock autotuner and once for one that
`fastlaunch.inductor.enable()` bound and promoted; every call runs on both and is compared: the
function, grid, block, stream, each kernel parameter at its size (the 128-byte maps included), the
allocator's calls (size, alignment, stream) and the launches counted. Also: no allocator set (the
same error, nothing launched), and a tensor whose address is not 16-byte aligned (torch's launcher
copies it: the call goes to the stock path, launched once), and hostile allocators: one that points an
argument at other memory (torch's launcher reads the arguments after allocating) and one that launches
the same kernel again from inside the call, and one doing both (a pair: it launches, then moves the
storage). Prints a JSON summary.

    PYTHONPATH=tools python -m fldev.inductor_tma [CALLS] [SEED]   (exit 1 on a mismatch)
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

_CONSTS = """
    GROUP_M : tl.constexpr = 8
    EVEN_K : tl.constexpr = False
    ALLOW_TF32 : tl.constexpr = False
    USE_FAST_ACCUM : tl.constexpr = False
    ACC_TYPE : tl.constexpr = tl.float32
    BLOCK_M : tl.constexpr = 64
    BLOCK_N : tl.constexpr = 64
    BLOCK_K : tl.constexpr = 32
    A_ROW_MAJOR : tl.constexpr = True
    B_ROW_MAJOR : tl.constexpr = True
    NUM_SMS : tl.constexpr = 132
    TMA_SIZE : tl.constexpr = 128
    TMA_EXPERIMENTAL_API : tl.constexpr = False
    INDEX_DTYPE : tl.constexpr = tl.int32
"""

_LOOP = """
    start_pid = tl.program_id(0).to(INDEX_DTYPE)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = grid_m * grid_n
    width = GROUP_M * grid_n
{descs}
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS{ws}):
        group_id = tile_id // width
        group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
        pid_m = group_id * GROUP_M + (tile_id % group_size)
        pid_n = (tile_id % width) // (group_size)
        rm = pid_m * BLOCK_M
        rn = pid_n * BLOCK_N
        rm_desc = rm.to(tl.int32)
        rn_desc = rn.to(tl.int32)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)
        for rk in tl.range(0, K, BLOCK_K):
            rk_desc = rk.to(tl.int32)
            a = a_desc.load([rm_desc, rk_desc])
            b = b_desc.load([rk_desc, rn_desc])
            acc += tl.dot(a, b, allow_tf32=ALLOW_TF32)
        rm = pid_m * BLOCK_M
        rn = pid_n * BLOCK_N
        idx_m = (rm + tl.arange(0, BLOCK_M))[:, None]
        idx_n = (rn + tl.arange(0, BLOCK_N))[None, :]
        mask = (idx_m < M) & (idx_n < N)
        xindex = idx_n + N * idx_m
        tl.store(out_ptr0 + (tl.broadcast_to(xindex, mask.shape)), acc, mask)
"""

DEVICE_SRC = """
import triton
import triton.language as tl

@triton.jit
def {name}(arg_A, arg_B, out_ptr0, ks0, ks1, ks2):
""" + _CONSTS + """
    A = arg_A
    B = arg_B
    M = ks0
    N = ks1
    K = ks2
    if (M == 0) or (N == 0):
        return
""" + _LOOP.replace("{descs}", """
    a_desc = triton.language.make_tensor_descriptor(base=A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = triton.language.make_tensor_descriptor(base=B, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
""")

HOST_M, HOST_N, HOST_K = 256, 192, 128
HOST_SRC = """
import triton
import triton.language as tl

@triton.jit
def triton_tem_fused_mm_1(arg_A, arg_B, out_ptr0):
""" + _CONSTS + f"""
    M = {HOST_M}
    N = {HOST_N}
    K = {HOST_K}
    a_desc = arg_A
    b_desc = arg_B
""" + _LOOP.format(descs="", ws="")


def _device_props(cc):
    from torch._inductor.runtime.hints import DeviceProperties

    want = dict(type="cuda", index=0, multi_processor_count=132 if cc == 90 else 148, cc=cc, major=cc // 10,
                regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024,
                warp_size=32)
    return DeviceProperties(**{k: v for k, v in want.items() if k in DeviceProperties._fields})


def _autotuner(fn, signature, inductor_meta, tag, cc=90):
    """torch's CachingAutotuner for `fn` on an sm_90 GPU, compiled by its own compile step with its
    static launcher (torch 2.15's default) over the stand-in driver."""
    import torch
    import triton
    from torch._inductor.runtime import triton_heuristics as th
    from torch._inductor.runtime.hints import HeuristicType

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
    import inductor_kernels as IK

    IK.compile_without_gpu()
    cfg = triton.Config({}, num_warps=4, num_stages=3)
    meta = dict(inductor_meta, kernel_name=f"{fn.__name__}_{tag}")
    at = th.CachingAutotuner(fn, triton_meta={"signature": dict(signature), "device": _device_props(cc),
                                              "constants": {}, "configs": [{}]},
                             configs=[cfg], save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                             heuristic_type=HeuristicType.TEMPLATE, size_hints=None, inductor_meta=meta)
    result = at._precompile_config(cfg)
    at.compile_results = [result]
    with sm90_answered():
        at.launchers = [result.make_launcher()]
    return at


@contextlib.contextmanager
def sm90_answered():
    """torch asks whether the GPU takes TMA (has_triton_stable_tma_api: a CUDA device of capability
    9.0 or more) before it writes a host-side TMA launcher: answered as Inductor's tests answer it,
    torch.cuda's availability and capability patched, for that one question (its cache cleared)."""
    from unittest import mock

    import torch
    from torch.utils import _triton

    _triton.has_triton_stable_tma_api.cache_clear()
    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: (9, 0)):
        try:
            yield
        finally:
            _triton.has_triton_stable_tma_api.cache_clear()


def _fixed_grid():
    from torch._inductor.runtime.triton_heuristics import FixedGrid

    return {"grid_type": "FixedGrid", **FixedGrid.setup_grid_as_args()} if hasattr(FixedGrid, "setup_grid_as_args") \
        else {"grid_type": "FixedGrid", "fixed_grid": ["_grid_0", "_grid_1", "_grid_2"],
              "extra_launcher_args": ["_grid_0", "_grid_1", "_grid_2"]}


def _grid(m, n):
    tiles = -(-m // 64) * -(-n // 64)
    return min(132, tiles), 1, 1


def build(stub):
    """The two kernels, each as (stock autotuner, fastlaunch's, parameter sizes, kind)."""
    from fldev.stub_bench import module_from_source
    from fastlaunch import inductor

    directory = os.environ.get("FASTLAUNCH_CACHE_DIR") or "/tmp"
    dev = module_from_source(directory, "fl_inductor_tma_device", DEVICE_SRC.format(
        name="triton_tem_fused_mm_0", ws="")).triton_tem_fused_mm_0
    # Blackwell's template form: the tile loop warp-specialized (one CTA per cluster: torch's static
    # launcher takes no more), compiled for sm_100.
    ws = module_from_source(directory, "fl_inductor_tma_ws", DEVICE_SRC.format(
        name="triton_tem_fused_mm_2", ws=", flatten=True, warp_specialize=True")).triton_tem_fused_mm_2
    host = module_from_source(directory, "fl_inductor_tma_host", HOST_SRC).triton_tem_fused_mm_1
    dev_sig = {"arg_A": "*fp16", "arg_B": "*fp16", "out_ptr0": "*fp16", "ks0": "i32", "ks1": "i32", "ks2": "i32"}
    host_sig = {"arg_A": "*fp16", "arg_B": "*fp16", "out_ptr0": "*fp16"}
    host_meta = dict(_fixed_grid(), host_tma_descriptor_args={
        "arg_A": {"block_shape": ["64", "32"], "shape": [str(HOST_M), str(HOST_K)], "strides": [str(HOST_K), "1"]},
        "arg_B": {"block_shape": ["32", "64"], "shape": [str(HOST_K), str(HOST_N)], "strides": [str(HOST_N), "1"]}})
    out = {}
    for kind, fn, sig, meta, cc in (("device", dev, dev_sig, _fixed_grid(), 90), ("host", host, host_sig, host_meta, 90),
                                    ("device_sm100", ws, dev_sig, _fixed_grid(), 100)):
        stock = _autotuner(fn, sig, meta, "stock", cc)
        with inductor.scope(inductor.InductorAdapter()):  # binds the autotuners made inside it
            fast = _autotuner(fn, sig, meta, "fast", cc)
        out[kind] = (stock, fast)
    return out


def _sizes(kind, static):
    hidden = [8] * (int(bool(getattr(static, "has_global_scratch", False)))
                    + int(bool(getattr(static, "has_profile_scratch", False))))
    if kind.startswith("device"):
        return [8, 8, 8, 4, 4, 4] + hidden
    return ([128, 4, 4, 8, 8] * 2) + [8] + hidden


def bad_inputs(fast_host):
    """Plan(tensor_map_geometry=...) and FinalizedLaunch(grid_args=..., scratch=...) given what they
    refuse: each error's type and message, by case."""
    from fastlaunch import FinalizedLaunch, Plan

    entry = vars(fast_host)["run"]
    plan = entry.plan
    metas = [(3, 2, 6, [64, 32], False), (3, 2, 6, [32, 64], False)]
    kinds = ["nvTmaDesc", "i32", "i32", "i64", "i64"] * 2 + ["ptr", "ptr", "ptr"]

    def make(geometry, **kw):
        return Plan(1, kinds, backend="cuda", abi="cuda", options={"num_warps": 4}, tensor_maps=metas,
                    tensor_map_geometry=geometry, ignore=[3, 4, 5], **kw)

    good = [((256, 128), (128, 1)), ((128, 192), (192, 1))]
    cases = {
        "geometry_rank": lambda: make([((256,), (1,)), good[1]]),
        "geometry_inner_stride": lambda: make([((256, 128), (128, 2)), good[1]]),
        "geometry_count": lambda: make(good[:1]),
        "geometry_not_a_pair": lambda: make([(256, 128), good[1]]),
        "geometry_zero_dim": lambda: make([((0, 128), (128, 1)), good[1]]),
        "grid_args_not_ignored": lambda: FinalizedLaunch(entry.bound, plan, grid_args=(0, 1, 2)),
        "grid_args_two": lambda: FinalizedLaunch(entry.bound, plan, grid_args=(3, 4)),
        "grid_args_out_of_range": lambda: FinalizedLaunch(entry.bound, plan, grid_args=(3, 4, 99)),
        "scratch_not_a_contextvar": lambda: FinalizedLaunch(entry.bound, plan, grid_args=(3, 4, 5),
                                                            scratch=("allocator", 256, 128, 1, 1)),
        "caller_grid_without_grid_args": lambda: FinalizedLaunch(entry.bound, plan),
    }
    out = {}
    for name, fn in cases.items():
        try:
            fn()
            out[name] = None
        except Exception as e:  # noqa: BLE001
            out[name] = f"{type(e).__name__}: {e}"
    return out


def main(ncalls=200, seed=20261207):
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import torch
    import triton
    from triton.runtime import _allocation

    from fastlaunch import inductor

    rng = random.Random(seed)
    pair_rng = random.Random(seed + 1)
    kernels = build(stub)
    # Inductor's run sets its own allocator on its slow path (the first call: torch.empty on the
    # autotuner's device, a GPU this machine lacks); the steady state, torch's cached launcher and
    # fastlaunch's entry alike, calls the one in Triton's ContextVar, which each call here sets.
    triton.set_allocator = lambda allocator: None
    pool = {}
    allocs = []

    def allocator(size, align, stream):  # the same buffer for the same size on both sides
        allocs.append((size, align, stream))
        return pool.setdefault(size, torch.empty(size, dtype=torch.int8))

    current = {}  # the call being made: its autotuner, args and "mutates"' other memory

    def mutates(size, align, stream):  # points the call's first tensor at other memory: read after it
        allocs.append(("mutates", size))
        current["args"][0].set_(current["alt"])
        return allocator(size, align, stream)

    def launches(size, align, stream):  # the same kernel launched again from inside the call
        allocs.append(("launches", size))
        inner = _allocation._allocator.set(allocator)
        try:
            current["at"].run(*current["args"], stream=cuda_stub.STREAM)
        finally:
            _allocation._allocator.reset(inner)
        return allocator(size, align, stream)

    def launches_mutates(size, align, stream):  # two actions in one call: launches again, then moves storage
        launches(size, align, stream)
        return mutates(size, align, stream)

    null = getattr(_allocation, "_NULL_ALLOCATOR", None) or _allocation.NullAllocator()
    hostile = {"no_allocator": null, "mutates": mutates, "launches": launches, "launches_mutates": launches_mutates}
    summary = {"torch": torch.__version__, "triton": triton.__version__, "calls": 0, "identical": 0, "mismatches": 0,
               "first_mismatches": []}
    tensors = {}

    def tensor(shape, fresh, offset=0):
        key = (shape, offset)
        if fresh or key not in tensors:
            base = torch.randn(shape[0] * shape[1] + 64, dtype=torch.float32).to(torch.float16)
            tensors[key] = base[offset:offset + shape[0] * shape[1]].view(shape)
        return tensors[key]

    for kind, (stock, fast) in kernels.items():
        static = stock.launchers[0].__globals__["runner"].__self__  # torch's StaticallyLaunchedCudaKernel
        sizes = _sizes(kind, static)
        per = {"calls": 0, "identical": 0, "fallbacks_expected": 0, "no_allocator_checked": 0}
        encodes, outcomes = [0, 0], {}
        for i in range(ncalls):
            if kind.startswith("device"):
                m, n, k = rng.choice([(128, 128, 64), (256, 64, 96), (64, 512, 32), (1000, 1000, 64), (0, 64, 32)])
                shapes = ((m, k), (k, n), (m, n))
            else:
                m, n, k = HOST_M, HOST_N, HOST_K
                shapes = ((m, k), (k, n), (m, n))
            how = rng.choices(["plain", "fresh", "unaligned", "no_allocator", "float_grid", "none_arg", "mutates",
                               "launches"], [0.64, 0.16, 0.04, 0.04, 0.03, 0.03, 0.03, 0.03])[0]
            if how == "plain" and kind.startswith("device") and pair_rng.random() < 0.05:
                how = "launches_mutates"  # its own generator: every other kind of call drawn as before
            if how == "unaligned" and kind.startswith("device"):
                how = "fresh"  # device-side descriptors take any base: nothing to copy
            if how in hostile and kind == "host":
                how = "plain"  # no scratch: no allocator called
            a = tensor(shapes[0], how == "fresh", 1 if how == "unaligned" else 0)
            b = tensor(shapes[1], how == "fresh")
            c = tensor(shapes[2], False)
            args = (a, b, c) + ((m, n, k) if kind.startswith("device") else ()) + _grid(m, n)
            if how == "float_grid":  # a grid value that is no int: the launcher's own error, on both sides
                args = args[:-3] + (float(args[-3]),) + args[-2:]
            if how == "none_arg":  # no tensor where the launcher reads one (the host form's descriptor)
                args = (None,) + args[1:]
            got = []
            current.update(args=args, alt=torch.zeros_like(a))
            home = a.view_as(a)  # a's own memory, put back after each side ("mutates")
            for at in (stock, fast):
                del allocs[:]
                current["at"] = at
                token = _allocation._allocator.set(hostile.get(how, allocator))
                stub.record(0, sizes)
                before, exc, tmaps0 = stub.state.calls, None, stub.state.tmap_calls
                try:
                    at.run(*args, stream=cuda_stub.STREAM)
                except Exception as e:  # noqa: BLE001  (compared by type and message)
                    exc = f"{type(e).__name__}: {e}"
                _allocation._allocator.reset(token)
                a.set_(home)
                launched = stub.state.calls - before
                st = stub.state
                encodes[at is fast] += st.tmap_calls - tmaps0
                outcomes[how] = outcomes.get(how, 0) + (launched if at is fast else 0)
                got.append((launched, exc, list(allocs), tuple(st.grid) if launched else None,
                            tuple(st.block) if launched else None, st.stream if launched else None,
                            stub.param_bytes() if launched else b""))
            same = got[0] == got[1]
            if how == "unaligned":  # each side copies the tensor to a new address: all but the maps
                same = got[0][:6] == got[1][:6] and got[0][0] == 1
                per["fallbacks_expected"] += 1
            if how == "no_allocator":
                per["no_allocator_checked"] += int(got[0][0] == 0 and got[0][1] is not None)
            per["calls"] += 1
            per["identical"] += int(same)
            if not same and len(summary["first_mismatches"]) < 5:
                summary["first_mismatches"].append(repr((kind, i, how, m, n, k, [g[:6] for g in got],
                                                         [g[6].hex() for g in got]))[:1500])
        per["encodes_stock"], per["encodes_fastlaunch"] = encodes
        per["launched_by_case"] = outcomes  # fastlaunch's side: launches per kind of call
        entry = vars(fast).get("run")
        per["promoted"] = type(entry).__name__
        bound = getattr(entry, "bound", entry)
        per["refusals"] = bound.counts().get("refusals") if hasattr(bound, "counts") else None
        per["plan"] = repr(getattr(entry, "plan", None))
        per["entry_calls"] = getattr(entry, "calls", None)
        per["entry_fallbacks"] = getattr(entry, "fallbacks", None)
        per["stock_runner"] = type(static).__name__
        per["compiled_for"] = f"sm_{stock.compile_results[0].compile_meta.get('cc')}"
        per["global_scratch_size"] = static.global_scratch_size
        per["num_warps"] = static.num_warps
        summary[kind] = per
        summary["calls"] += per["calls"]
        summary["identical"] += per["identical"]
    summary["mismatches"] = summary["calls"] - summary["identical"]
    summary["bad_inputs"] = bad_inputs(kernels["host"][1])
    inductor.disable()
    print(json.dumps(summary, indent=1))
    ok = summary["mismatches"] == 0 and all(summary[k]["promoted"] == "FinalizedLaunch" for k in kernels)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
