"""Host-side tensor descriptors (Triton's TensorDescriptor, TMA) through fastlaunch against Triton's
own launcher, on the stand-in driver (cuda_stub.c: its cuTensorMapEncodeTiled writes a map mixed
from every argument it reads, and refuses what the driver refuses).

Kernels of rank 1 to 5 over fp8, bf16, fp16 and fp32, compiled for sm_90 and sm_100, each loading a
block through one descriptor and storing it through another. Random calls of the kept compiled
kernels (`compiled[grid](a_desc, b_desc, n)`): shapes, strides (padded rows), base offsets (16 to
256-byte aligned), padding "zero" and "nan", TF32 rounding for fp32, the same descriptor values met
again, then changed; under a driver answering 13.0 and 13.2 (either side of Triton's fix-up). Each
call runs through Triton alone, then through fastlaunch; both must hand the driver the same
function, grid and parameter bytes (the 128-byte maps included) or raise the same error with
nothing launched: a descriptor mutated after construction (a stride no longer 16-byte aligned) and
an encode the stand-in is told to fail. Prints one JSON line.

    PYTHONPATH=tools python -m fldev.tma_fidelity [CALLS] [SEED]
"""

from __future__ import annotations

import json
import random
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

DTYPES = [("fp8e4nv", "float8_e4m3fn", 1), ("bf16", "bfloat16", 2), ("fp16", "float16", 2), ("fp32", "float32", 4)]


def _kernels(triton, tl):
    @triton.jit
    def k1(a_desc, b_desc, n):
        b_desc.store([0], a_desc.load([0]))

    @triton.jit
    def k2(a_desc, b_desc, n):
        b_desc.store([0, 0], a_desc.load([0, 0]))

    @triton.jit
    def k3(a_desc, b_desc, n):
        b_desc.store([0, 0, 0], a_desc.load([0, 0, 0]))

    @triton.jit
    def k4(a_desc, b_desc, n):
        b_desc.store([0, 0, 0, 0], a_desc.load([0, 0, 0, 0]))

    @triton.jit
    def k5(a_desc, b_desc, n):
        b_desc.store([0, 0, 0, 0, 0], a_desc.load([0, 0, 0, 0, 0]))

    return {1: k1, 2: k2, 3: k3, 4: k4, 5: k5}


def _block(rank, itemsize, rng):
    """A block TMA takes: each dimension a power of 2 up to 256, the innermost at least 16 bytes."""
    inner = rng.choice([b for b in (8, 16, 32, 64, 128, 256) if b * itemsize >= 16 and b * itemsize <= 256])
    outer = [rng.choice([1, 2, 4, 8] if rank > 2 else [2, 8, 16, 64]) for _ in range(rank - 1)]
    return outer + [inner]


def compile_all(rng):
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fns = _kernels(triton, tl)
    out = []
    for arch in (90, 100):
        for rank in range(1, 6):
            for tname, torch_name, itemsize in DTYPES:
                block = _block(rank, itemsize, rng)
                ty = f"tensordesc<{tname}{block}>"
                src = ASTSource(fn=fns[rank], signature={"a_desc": ty, "b_desc": ty, "n": "i32"}, constexprs={})
                ck = triton.compile(src, target=GPUTarget("cuda", arch, 32))
                ck._init_handles()
                out.append({"ck": ck, "arch": arch, "rank": rank, "dtype": torch_name, "itemsize": itemsize,
                            "block": block, "fn": fns[rank]})
    return out


def _spec(k, rng, pool_elems):
    """One descriptor's values: shape, padded strides, base offset in elements, padding, rounding."""
    rank, itemsize, block = k["rank"], k["itemsize"], k["block"]
    shape = [rng.randint(1, 3 * b) for b in block]
    while True:  # within the pool: the outer sizes halved until the view fits
        total = itemsize
        for s in shape:
            total *= s + 4
        if total * 2 < pool_elems * itemsize or all(s == 1 for s in shape[:-1]):
            break
        d = max(range(rank - 1), key=lambda i: shape[i]) if rank > 1 else 0
        shape[d] = max(1, shape[d] // 2)
    align = 16 // itemsize  # elements per 16 bytes
    row = shape[-1] + rng.choice([0, 0, 1, 3]) * align
    row = -(-row // align) * align
    strides = [1]
    extent = row
    for d in range(rank - 2, -1, -1):
        strides.insert(0, extent)
        extent *= shape[d] + rng.choice([0, 0, 1])
    offset = rng.choice([0, 1, 2, 4, 8, 16]) * align
    if offset + extent > pool_elems:
        offset = 0
    assert extent <= pool_elems, (shape, strides)
    padding = rng.choice(["zero", "nan"])
    tf32 = k["dtype"] == "float32" and rng.random() < 0.5
    return {"shape": shape, "strides": strides, "offset": offset, "padding": padding, "tf32": tf32}


def hostile_cases(kernels, stub, TensorDescriptor, flt, torch):
    """Descriptors a user could hand over, through a compiled kernel and kernel[grid] (sm_90, 2-D
    fp16): each case's launches (bytes) or exception the same with Triton alone and with fastlaunch."""
    import numpy as np

    k = next(k for k in kernels if k["arch"] == 90 and k["rank"] == 2 and k["dtype"] == "float16")
    x = torch.zeros(512, 256, dtype=torch.float16)

    class Sub(TensorDescriptor):  # a subclass: not the exact class the JIT reads itself
        pass

    class Base:  # a tensor-like base whose data_ptr() raises
        dtype = torch.float16

        def data_ptr(self):
            raise ValueError("data_ptr raised")

    def fresh(**kw):
        d = TensorDescriptor.from_tensor(x, list(k["block"]))
        for name, v in kw.items():
            setattr(d, name, v)
        return d

    cases = {
        "subclass": lambda: Sub(x, list(x.shape), list(x.stride()), list(k["block"])),
        "numpy shape": lambda: fresh(shape=[np.int64(512), np.int64(256)]),
        "padding NaN (case)": lambda: fresh(padding="NaN"),
        "tf32 as int on fp16": lambda: fresh(round_f32_to_tf32=1),  # an attribute 3.5's class lacks: set anyway
        "rank 3 for a rank-2 kernel": lambda: fresh(shape=[2, 256, 256], strides=[65536, 256, 1]),
        "inner stride 2": lambda: fresh(strides=[256, 2]),
        "base whose data_ptr raises": lambda: fresh(base=Base()),
        "strides as a tuple": lambda: fresh(strides=(256, 1)),
        "shape past int32": lambda: fresh(shape=[2**31 + 8, 256]),
    }
    sizes = ([128] + [4] * 2 + [8] * 2) * 2 + [4, 8, 8]
    out = {"cases": 0, "differ": [], "served": 0}
    for name, make in cases.items():
        for form in ("compiled", "jit"):
            sides = []
            for enabled in (False, True):
                (flt.enable if enabled else flt.disable)()
                da, db = make(), fresh()
                stub.record(0, sizes)
                before, fast0 = stub.state.calls, _fast(k, form)
                try:
                    (k["ck"][(2, 1, 1)] if form == "compiled" else k["fn"][(2, 1, 1)])(da, db, 7)
                    exc = None
                except Exception as e:  # noqa: BLE001  (compared by type and message)
                    exc = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                launched = stub.state.calls - before
                sides.append((launched, exc, stub.param_bytes() if launched else b""))
                if enabled:
                    out["served"] += _fast(k, form) > fast0
            out["cases"] += 1
            if sides[0] != sides[1]:
                out["differ"].append([name, form, repr(sides[0])[:200], repr(sides[1])[:200]])
    flt.disable()
    return out


def memo_mutations(kernels, stub, TensorDescriptor, flt, torch):
    """One descriptor object met again by kernel[grid] (the JIT's memo takes it), changed in place
    between calls as user code can: its lists' items, its base tensor's storage moved (the
    descriptor untouched), its base (same dtype, then another), padding, tf32, block shape, a
    subclass instance, and its class given a property then rid of it; then a new descriptor each
    call over three buffers, the last one dropped first (its address reused). Every
    call's launch (bytes) or exception the same with Triton alone and with fastlaunch, and the
    property read as often."""
    k = next(k for k in kernels if k["arch"] == 90 and k["rank"] == 2 and k["dtype"] == "float16")
    x, y = torch.zeros(512, 256, dtype=torch.float16), torch.zeros(512, 256, dtype=torch.float16)
    z = torch.zeros(512, 256, dtype=torch.float32)
    w = torch.zeros(512, 256, dtype=torch.float16)[:, :128]  # another shape and stride
    reads = [0]

    class Sub(TensorDescriptor):
        pass

    def padding_prop(self):
        reads[0] += 1
        return "zero"

    def steps(d, e):
        yield "again"
        d.shape[0] = 384
        yield "shape item"
        d.strides[0] = 512
        yield "stride item"
        xs = x.untyped_storage()
        x.set_(y.untyped_storage(), 0, x.shape, x.stride())  # the base's storage moved, the descriptor untouched
        yield "base storage moved"
        x.set_(xs, 0, x.shape, x.stride())
        yield "base storage back"
        d.base = y
        yield "base, same dtype"
        d.base = z
        yield "base, another dtype"
        d.base = x
        d.padding = "nan"
        yield "padding nan"
        d.round_f32_to_tf32 = True
        yield "tf32"
        d.block_shape[0] = d.block_shape[0] // 2 or 1
        yield "block shape"
        d.block_shape[0] = k["block"][0]
        yield "block shape back"
        e.append(Sub(x, [512, 256], [256, 1], list(k["block"])))
        yield "subclass"
        e.pop()
        TensorDescriptor.padding = property(padding_prop)
        yield "class with a property"
        del TensorDescriptor.padding
        TensorDescriptor.padding = "zero"
        d.padding = "zero"
        yield "property removed"

    out = {"calls": 0, "differ": [], "memo": 0, "checked": 0}
    sides = []
    for enabled in (False, True):
        (flt.enable if enabled else flt.disable)()
        fn = k["fn"]
        d, db, extra = TensorDescriptor.from_tensor(x, list(k["block"])), TensorDescriptor.from_tensor(x, list(k["block"])), []
        d.shape, d.strides, d.block_shape = list(d.shape), list(d.strides), list(d.block_shape)
        run = vars(fn).get("run")
        memo0 = dict(run.counts).get("memo", 0) if hasattr(run, "counts") else 0
        checked0 = dict(run.counts).get("checked", 0) if hasattr(run, "counts") else 0
        side = []
        for name in steps(d, extra):
            for _ in range(3):  # met again: the memo's hits
                stub.record(0, ([128] + [4] * 2 + [8] * 2) * 2 + [4, 8, 8])
                before, reads0 = stub.state.calls, reads[0]
                try:
                    fn[(2, 1, 1)](extra[-1] if extra else d, db, 5)
                    exc = None
                except Exception as e:  # noqa: BLE001  (compared by type and message)
                    exc = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                launched = stub.state.calls - before
                side.append((name, launched, exc, stub.param_bytes() if launched else b"", reads[0] - reads0))
        run = vars(fn).get("run")
        if enabled and hasattr(run, "counts"):
            out["memo"] = dict(run.counts).get("memo", 0) - memo0
            out["checked"] = dict(run.counts).get("checked", 0) - checked0
        # A new descriptor each call, the last one dropped first (CPython hands the next one the
        # same address, often its dict's too): each read as what it is, never as the last one met.
        bufs = (x, y, w)
        for i in range(12):
            nd = TensorDescriptor.from_tensor(bufs[i % 3], list(k["block"]))
            stub.record(0, ([128] + [4] * 2 + [8] * 2) * 2 + [4, 8, 8])
            before = stub.state.calls
            fn[(2, 1, 1)](nd, db, 5)
            side.append((f"fresh {i}", stub.state.calls - before, None, stub.param_bytes(), 0))
            del nd
        sides.append(side)
    flt.disable()
    for a, b in zip(*sides):
        out["calls"] += 1
        if a != b:
            out["differ"].append([a[0], repr(a[1:])[:200], repr(b[1:])[:200]])
    return out


def _fast(k, form):
    from fastlaunch import triton_compiled as tc

    if form == "compiled":
        launch = tc.launch_of(k["ck"])
        return launch.counts()["fast"] if launch else 0
    run = vars(k["fn"]).get("run")
    return dict(run.counts)["fast"] if hasattr(run, "counts") else 0


def main(argv):
    calls = int(argv[0]) if argv else 10_000
    seed = int(argv[1]) if len(argv) > 1 else 20261207
    rng = random.Random(seed)
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    import fastlaunch.triton as flt
    from fastlaunch import triton_compiled as tc

    kernels = compile_all(rng)
    pools = {k["dtype"]: torch.zeros(1 << 20, dtype=getattr(torch, k["dtype"])) for k in kernels}
    # Where the descriptors of failing encodes live, each at an address no other call uses.
    fail_pools = {k["dtype"]: torch.zeros((calls + 2) * 16 * 16 + (1 << 20), dtype=getattr(torch, k["dtype"]))
                  for k in kernels}

    import dataclasses

    has_tf32 = "round_f32_to_tf32" in {f.name for f in dataclasses.fields(TensorDescriptor)}  # Triton 3.7 on

    def desc(k, s):
        base = (fail_pools if s.get("pool") == "fail" else pools)[k["dtype"]][s["offset"]:]
        view = torch.as_strided(base, s["shape"], s["strides"])
        extra = {"round_f32_to_tf32": s["tf32"]} if has_tf32 else {}
        return TensorDescriptor(view, list(s["shape"]), list(s["strides"]), list(k["block"]), padding=s["padding"],
                                **extra)

    # The calls: per kernel a run of specs, each met again a few times (the memo's hits), then
    # changed; a few of them mutated after construction or failing in the driver.
    plan = []
    while len(plan) < calls:
        k = rng.choice(kernels)
        spec_a, spec_b = _spec(k, rng, 1 << 20), _spec(k, rng, 1 << 20)
        for _ in range(rng.randint(1, 6)):
            grid = (rng.choice([1, 2, 7]), 1, 1)
            how = rng.choices(["plain", "mutated", "encode_fails"], [0.96, 0.02, 0.02])[0]
            if how == "encode_fails":  # values never met: a driver fails on new arguments, not on a map it made
                fresh = dict(spec_a, pool="fail", offset=16 * (len(plan) + 1) * (16 // k["itemsize"]))
                plan.append((k, fresh, spec_b, grid, rng.randint(0, 2**31 - 1), how))
                continue
            plan.append((k, spec_a, spec_b, grid, rng.randint(0, 2**31 - 1), how))
    plan = plan[:calls]

    def run_one(item, jit=False):
        k, sa, sb, grid, n, how = item
        da, db = desc(k, sa), desc(k, sb)
        if how == "mutated":
            da.strides = [s + (1 if d + 1 < len(da.strides) else 0) for d, s in enumerate(da.strides)]
        r = k["rank"]  # each descriptor's parameters at their PTX sizes: the map form, or decomposed (sm_80)
        sizes = [8] + [8] * (2 * r) + [1, 1] + [4] * r + [8] * r if k.get("decomposed") else [128] + [4] * r + [8] * r
        stub.record(0, sizes * 2 + [4, 8, 8])
        stub.state.tmap_fail = 1 if how == "encode_fails" else 0
        before = stub.state.calls
        exc = None
        try:
            if jit:  # kernel[grid]: the variant compiled for the device (the stand-in's sm_90)
                k["fn"][grid](da, db, n)
            else:
                k["ck"][grid](da, db, n)
        except Exception as e:  # noqa: BLE001  (compared by type and message)
            exc = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        stub.state.tmap_fail = 0
        launched = stub.state.calls - before
        st = stub.state
        return (launched, exc, stub.param_bytes() if launched else b"", tuple(st.grid) if launched else None,
                st.function if launched else None)

    result = {"calls": 0, "differ": 0, "first_differ": [], "served": 0, "raised": 0, "versions": []}
    for version in (13000, 13020):
        stub.state.driver_version = version
        flt.disable()
        enc0 = stub.state.tmap_calls
        triton_side = [run_one(item) for item in plan]
        enc_triton = stub.state.tmap_calls - enc0
        flt.enable()
        fast0 = sum(tc.launch_of(k["ck"]).counts()["fast"] for k in kernels if tc.launch_of(k["ck"]))
        enc0 = stub.state.tmap_calls
        fast_side = [run_one(item) for item in plan]
        enc_fast = stub.state.tmap_calls - enc0
        served = sum(tc.launch_of(k["ck"]).counts()["fast"] for k in kernels if tc.launch_of(k["ck"])) - fast0
        reasons = {}
        for k in kernels:
            launch = tc.launch_of(k["ck"])
            if launch is not None:
                if launch.reason:
                    reasons[launch.reason] = reasons.get(launch.reason, 0) + 1
                for r, c in launch.counts()["stock_reasons"].items():
                    reasons[r] = reasons.get(r, 0) + c
        flt.disable()  # the next version's plans start with empty memos
        for item, a, b in zip(plan, triton_side, fast_side):
            result["calls"] += 1
            result["raised"] += a[1] is not None
            if a != b:
                result["differ"] += 1
                if len(result["first_differ"]) < 5:
                    k = item[0]
                    result["first_differ"].append({"version": version, "arch": k["arch"], "rank": k["rank"],
                                                   "dtype": k["dtype"], "how": item[5], "triton": repr(a)[:300],
                                                   "fastlaunch": repr(b)[:300]})
        result["served"] += served
        result["versions"].append({"driver": version, "encodes_triton": enc_triton, "encodes_fastlaunch": enc_fast,
                                   "served": served, "stock_reasons": reasons})
    # kernel[grid] with descriptors: the same calls through Triton's JIT alone and through fastlaunch's
    # dispatcher, with the stand-in device answering sm_90, then sm_100, then sm_80 (the decomposed
    # form: sm_90's calls again) (fresh JITFunctions: Triton keeps a device's target from its first call).
    import triton

    stub.state.driver_version = 13000
    driver = triton.runtime.driver.active
    jit_result = {"calls": 0, "differ": 0, "served": 0, "stock_reasons": {}, "archs": []}
    for arch in (90, 100, 80):
        driver.get_device_capability = lambda device=None, a=arch: (a // 10, 0)
        fresh = {rank: triton.jit(fn.fn) for rank, fn in _kernels(triton, None).items()}
        arch_plan = [(dict(item[0], fn=fresh[item[0]["rank"]], decomposed=arch < 90),) + item[1:] for item in plan
                     if item[0]["arch"] == max(arch, 90)][: calls // 4]
        flt.disable()
        triton_side = [run_one(item, jit=True) for item in arch_plan]
        flt.enable()
        fast0 = sum(_fast({"fn": f}, "jit") for f in fresh.values())
        fast_side = [run_one(item, jit=True) for item in arch_plan]
        served = sum(_fast({"fn": f}, "jit") for f in fresh.values()) - fast0
        jit_result["served"] += served
        jit_result.setdefault("served_by_arch", {})[arch] = served
        for what in ("memo", "checked"):
            jit_result[what] = jit_result.get(what, 0) + sum(
                dict(vars(f)["run"].counts).get(what, 0) for f in fresh.values() if hasattr(vars(f).get("run"), "counts"))
        for fn in fresh.values():
            run = vars(fn).get("run")
            for r, c in (dict(run.counts).get("stock_reasons", {}) if hasattr(run, "counts") else {}).items():
                jit_result["stock_reasons"][r] = jit_result["stock_reasons"].get(r, 0) + c
        flt.disable()
        jit_result["calls"] += len(arch_plan)
        jit_result["differ"] += sum(1 for a, b in zip(triton_side, fast_side) if a != b)
        jit_result["archs"].append(arch)
    driver.get_device_capability = lambda device=None: (9, 0)
    result["jit"] = jit_result
    result["differ"] += jit_result["differ"]
    result["hostile"] = hostile_cases(kernels, stub, TensorDescriptor, flt, torch)
    result["differ"] += len(result["hostile"]["differ"])
    if has_tf32:  # the memo's reads of a changed descriptor (its steps set round_f32_to_tf32)
        result["memo_mutations"] = memo_mutations(kernels, stub, TensorDescriptor, flt, torch)
        result["differ"] += len(result["memo_mutations"]["differ"])
    result["kernels"] = len(kernels)
    from fastlaunch.triton_plan import descriptors_encoded_as_3_7

    result["served_here"] = descriptors_encoded_as_3_7()  # Triton 3.5 and 3.6: descriptors stay Triton's
    print(json.dumps(result))
    return 0 if result["differ"] == 0 and result["calls"] >= calls else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
