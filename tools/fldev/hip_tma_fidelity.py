"""Host-side tensor descriptors on AMD (gfx942, no TDM: Triton passes each descriptor decomposed, its
base pointer, shape and strides as i64s, its padding and TF32 flags as i1s, then its shape as i32s
and strides as i64s) through `kernel[grid]`, fastlaunch's JIT dispatcher on the hip backend against
Triton's own AMD launcher, over the stand-in libamdhip64 (hip_stub.c lays the parameters out as the
kernarg segment by the hsaco's metadata). Kernels of rank 1 to 5 over bf16, fp16 and fp32 (as
tma_fidelity's), random descriptors (shapes, padded strides, base offsets, padding, TF32; met again,
then changed; some mutated to a stride the map form refuses, which the decomposed form passes), each
call made by Triton alone, then with fastlaunch: the same kernarg bytes, grid and function, or the
same exception with nothing launched. Prints one JSON line; exit 1 on a difference.

    PYTHONPATH=tools python -m fldev.hip_tma_fidelity [CALLS] [SEED]

Runs in a process of its own: the stand-in becomes that process's libamdhip64.
"""

from __future__ import annotations

import json
import random
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def main(argv):
    calls = int(argv[0]) if argv else 2000
    rng = random.Random(int(argv[1]) if len(argv) > 1 else 20261207)
    from fldev import hip_stub
    from fldev.tma_fidelity import DTYPES, _block, _kernels, _spec

    stub = hip_stub.load()
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    import fastlaunch.triton as flt

    fns = _kernels(triton, None)
    kernels = [{"rank": r, "dtype": t, "itemsize": s, "block": _block(r, s, rng)}
               for r in range(1, 6) for _, t, s in DTYPES if t != "float8_e4m3fn"]
    pools = {t: torch.zeros(1 << 20, dtype=getattr(torch, t)) for _, t, _ in DTYPES if t != "float8_e4m3fn"}

    def desc(k, s):
        view = torch.as_strided(pools[k["dtype"]][s["offset"]:], s["shape"], s["strides"])
        return TensorDescriptor(view, list(s["shape"]), list(s["strides"]), list(k["block"]), padding=s["padding"],
                                round_f32_to_tf32=s["tf32"])

    plan = []
    while len(plan) < calls:
        k = rng.choice(kernels)
        sa, sb = _spec(k, rng, 1 << 20), _spec(k, rng, 1 << 20)
        for _ in range(rng.randint(1, 6)):
            plan.append((k, sa, sb, (rng.choice([1, 2, 7]), 1, 1), rng.randint(0, 2**31 - 1), rng.random() < 0.03))
    plan = plan[:calls]
    st = stub.state
    st.record = 1

    def run_one(fn, item):
        k, sa, sb, grid, n, mutated = item
        da, db = desc(k, sa), desc(k, sb)
        if mutated:  # an inner stride of 2: the map form's assertion; the decomposed form passes it
            da.strides = list(da.strides[:-1]) + [2]
        before = st.calls
        try:
            fn[grid](da, db, n)
            exc = None
        except Exception as e:  # noqa: BLE001  (compared by type and message)
            exc = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        launched = st.calls - before
        return (launched, exc, stub.kernarg() if launched else b"", tuple(st.grid) if launched else None)

    fresh = {r: triton.jit(f.fn) for r, f in fns.items()}  # Triton keeps a device's target from its first call
    flt.disable()
    triton_side = [run_one(fresh[item[0]["rank"]], item) for item in plan]
    flt.enable()
    fast_side = [run_one(fresh[item[0]["rank"]], item) for item in plan]
    counts = {r: dict(vars(f)["run"].counts) for r, f in fresh.items() if hasattr(vars(f).get("run"), "counts")}
    flt.disable()
    differ = [i for i, (a, b) in enumerate(zip(triton_side, fast_side)) if a != b]
    reasons = {}
    for c in counts.values():
        for r, v in c.get("stock_reasons", {}).items():
            reasons[r] = reasons.get(r, 0) + v
    result = {"calls": len(plan), "differ": len(differ), "served": sum(c["fast"] for c in counts.values()),
              "stock_reasons": reasons, "launched": sum(1 for a in triton_side if a[0]),
              "raised": sum(1 for a in triton_side if a[1]), "kernels": len(kernels),
              "first_differ": [{"rank": plan[i][0]["rank"], "dtype": plan[i][0]["dtype"], "triton": repr(triton_side[i])[:300],
                                "fastlaunch": repr(fast_side[i])[:300]} for i in differ[:3]]}
    print(json.dumps(result))
    return 0 if not differ and result["served"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
