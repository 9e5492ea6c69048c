"""The JIT dispatcher against Triton's own JIT: random calls of `kernel[grid](*args, **kwargs)` over
the kernels of tests/python/jit_kernels.py (every kind Triton specializes on, the edges of each:
ints 1 and multiples of 16, the i32/i64/u64 edges, misaligned tensor views, None, bool, float,
tuples, constexpr keywords, defaults, do_not_specialize, num_warps and friends; tuple, lambda and
opaque grids). Each call runs twice over the stand-in driver (cuda_stub.c): through Triton's own
run, then through `kernel[grid](...)` with fastlaunch enabled. Both must hand the driver the same
function (the same compiled variant), grid, block, shared memory, stream, launch attributes and
argument bytes, and return the same CompiledKernel; a call fastlaunch sends to Triton is counted
as such (its first call of a variant, the opaque grid's calls stay fast).

    PYTHONPATH=tools python -m fldev.jit_fidelity [N] [SEED] [cuda|hip]   (JSON summary; exit 1 on a mismatch)

With `hip`, the kernels compile for gfx942 and run over the stand-in libamdhip64 (hip_stub.c) with
Triton's own AMD driver active: the runtime's kernarg segment, which the stand-in lays out by each
hsaco's metadata, is what is compared.
"""

from __future__ import annotations

import collections
import json
import os
import random
import sys

from fastlaunch import _C  # noqa: E402
from fldev import verify  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

SIZES = {"ptr": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
         "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
INT_EDGES = [0, 1, 2, 15, 16, 17, 32, 1000, 2**31 - 1, 2**31, 2**31 + 16, -(2**31), -(2**31) - 1, -16, -1,
             2**32, 2**63 - 1, 2**63, 2**63 + 16, 2**64 - 1, -(2**63)]


def record(st):
    return {"grid": tuple(st.grid), "block": tuple(st.block), "shared": st.shared, "stream": st.stream,
            "function": st.function, "nattrs": st.nattrs,
            "attrs": tuple((st.attr_ids[i], tuple(st.attr_vals[i])) for i in range(min(st.nattrs, 8))),
            "used_params": st.used_params, "buffer": bytes(st.buffer[:st.buffer_size]),
            "params": [bytes(st.params[j]) for j in range(st.nparams)]}


def arg_bytes(rec, kinds, layout):
    """The argument bytes a launch handed the driver, whichever way it passed them."""
    n = len(kinds)
    if rec["used_params"]:
        args = [rec["params"][j][:SIZES[k]] for j, k in enumerate(kinds)]
        hidden = [rec["params"][n + h] for h in range(len(layout["hidden"]))]
    else:
        buf = rec["buffer"]
        args = [buf[off:off + SIZES[k]] for off, k in zip(layout["args"], kinds)]
        hidden = [buf[off:off + 8] for off in layout["hidden"]]
    return args, hidden


class CudaSide:
    """The stand-in libcuda: arguments compared as the driver got them (parameter array or buffer)."""
    abi = "cuda"

    def __init__(self):
        from fldev import cuda_stub

        self.stub = cuda_stub.load()

    def arm(self, nparams):
        self.stub.record(nparams)  # the driver copies exactly as many parameters as the launch passes

    def record(self):
        return record(self.stub.state)

    def same_args(self, r1, r2, kinds, layout):
        return arg_bytes(r1, kinds, layout) == arg_bytes(r2, kinds, layout)


class HipSide:
    """The stand-in libamdhip64: the kernarg segment the runtime builds, whichever way it was passed."""
    abi = "hip"

    def __init__(self):
        from fldev import hip_stub

        self.stub = hip_stub.load()
        self.stub.state.record = 1

    def arm(self, nparams):
        pass

    def record(self):
        st = self.stub.state
        return {"grid": tuple(st.grid), "block": tuple(st.block), "shared": st.shared, "stream": st.stream,
                "function": st.function, "nattrs": 0, "attrs": (), "used_params": st.used_params,
                "segment": self.stub.kernarg()}

    def same_args(self, r1, r2, kinds, layout):
        return r1["segment"] == r2["segment"]


class Gen:
    def __init__(self, rng, torch):
        self.rng, self.torch = rng, torch
        self.pool = {}
        for dt in (torch.float32, torch.float16, torch.int32, torch.bfloat16):
            base = torch.zeros(4096, dtype=dt)
            self.pool[dt] = base

    # Value pools small enough that the variants stay few (each one is a compile) and wide enough
    # that every fact Triton specializes on varies.
    def tensor(self, dtypes=None):
        dt = self.rng.choice(dtypes or [self.torch.float32] * 3 + [self.torch.float16])
        base = self.pool[dt]
        off = self.rng.choice([0, 0, 0, 0, 1, 8])  # a view 16-byte aligned or not
        return base[off:]

    def int_(self, lo=None):
        r = self.rng.random()
        v = self.rng.choice(INT_EDGES) if r < 0.3 else self.rng.randint(-(2**20), 2**20) * self.rng.choice([1, 16])
        return v if lo is None else max(lo, v)

    def n(self):
        return self.rng.choice([1, 16, 17, 100, 1000, 4096, 3000, self.rng.randint(2, 5000)])


triton = None  # imported in main(), once the stand-in driver is loaded; a global, as in users' modules


def calls(g, K):
    """(kernel, args, kwargs, grid) for one random call."""
    rng = g.rng
    which = rng.randrange(10)
    n = g.n()
    block = rng.choice([64, 128])
    lam = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731 (the common shape)
    opaque = lambda META: (max(1, len(str(n)) + META["BLOCK"] // 64),)  # noqa: E731 (called per launch)
    grid = rng.choice([lam, lam, (rng.randint(1, 70000),), opaque, (3, 2), (2, 2, 2)])
    opts = {}
    if rng.random() < 0.05:
        opts["num_warps"] = rng.choice([2, 4])
    if rng.random() < 0.03:
        opts["num_stages"] = rng.choice([1, 3])
    if which == 0:
        return K.tensors, (g.tensor(), g.tensor(), n), dict(BLOCK=block, **opts), grid
    if which == 1:
        args = (g.tensor([g.torch.float32]), g.int_(), g.int_(), rng.choice([0.5, -2.0, 1e30, 3.0]),
                rng.choice([True, False]))
        return K.scalars, args, dict(BLOCK=block, **opts), rng.choice([(rng.randint(1, 9),), (2, 3)])
    if which == 2:
        return K.no_spec, (g.tensor(), g.tensor(), g.int_(lo=0)), dict(BLOCK=block, **opts), grid
    if which == 3:
        bias = g.tensor([g.torch.float32]) if rng.random() < 0.5 else None
        return K.maybe, (g.tensor([g.torch.float32]), bias, n), dict(BLOCK=block, **opts), grid
    if which == 4:
        t = (g.tensor([g.torch.float32]), g.tensor([g.torch.float32]))
        return K.pair, (t, n), dict(BLOCK=block, **opts), grid
    if which == 5:
        kw = dict(opts)
        if rng.random() < 0.5:
            kw["scale"] = rng.choice([2, 3, 16, 1])
        if rng.random() < 0.5:
            kw["BLOCK"] = block
        else:
            block = 64
        grid = rng.choice([(lambda META: (triton.cdiv(n, META["BLOCK"]),)), (5,)])
        return K.defaults, (g.tensor([g.torch.float32]), n), kw, grid
    if which == 6:
        return K.activation, (g.tensor([g.torch.float32]), n), dict(ACT=rng.choice(["relu", "none"]),
                                                                      BLOCK=block, **opts), grid
    if which == 8:  # autotuned: the key is n and the tensors' dtypes
        dt = rng.choice([[g.torch.float32], [g.torch.float16]])
        n = rng.choice([100, 1000, 4000, 1000])
        grid = rng.choice([lambda META: (triton.cdiv(n, META["BLOCK"]),), (rng.randint(1, 9),)])
        return K.tuned, (g.tensor(dt), g.tensor(dt), n), {}, grid
    if which == 9:  # autotuned over heuristics
        rows, cols = rng.choice([1, 7]), rng.choice([64, 100, 1024])
        grid = rng.choice([lambda M: (triton.cdiv(cols, M["BLOCK_C"]),), (2,)])
        return K.tuned_heuristics, (g.tensor([g.torch.float32]), rows, cols), {}, grid
    rows, cols = g.n(), g.n()
    br, bc = rng.choice([16, 32]), rng.choice([16, 64])
    grid = rng.choice([lambda M: (triton.cdiv(rows, M["BLOCK_R"]), triton.cdiv(cols, M["BLOCK_C"])),
                       (triton.cdiv(rows, br), triton.cdiv(cols, bc))])
    return K.grid2d, (g.tensor([g.torch.float32]), rows, cols, cols), dict(BLOCK_R=br, BLOCK_C=bc, **opts), grid


def compare_call(side, i, fn, args, kwargs, grid, layouts, stats, mismatches):
    """One call through Triton's own run, then through `fn[grid](...)` with fastlaunch enabled: the
    same variant, grid, block, shared memory, stream, attributes and argument bytes (and, under an
    Autotuner, the same best_config), or the same refusal with nothing launched."""
    import fastlaunch
    from fastlaunch.triton import abi_of

    st = side.stub.state
    try:
        # The variant first (warmup compiles and launches nothing): the stand-in driver copies
        # exactly as many parameters as the launch passes.
        k0 = type(fn).run(fn, *args, grid=grid, warmup=True, **kwargs)
        if id(k0) not in layouts:
            abi = abi_of(k0)
            layouts[id(k0)] = (k0, abi.kinds, fastlaunch.layout(side.abi, abi.kinds, hidden_ptrs=abi.hidden_ptrs))
        _, kinds0, layout0 = layouts[id(k0)]
        side.arm(len(kinds0) + len(layout0["hidden"]))
        k1 = type(fn).run(fn, *args, grid=grid, warmup=False, **kwargs)
        r1 = side.record()
        r1["best"] = getattr(fn, "best_config", None)
        ok1 = True
    except Exception as exc:  # Triton refuses the call: fastlaunch must refuse it too
        ok1, err1 = False, f"{type(exc).__name__}: {exc}"[:200]
    calls0 = st.calls
    try:
        k2 = fn[grid](*args, **kwargs)
        r2 = side.record()
        r2["best"] = getattr(fn, "best_config", None)
        ok2 = True
    except Exception as exc:
        ok2, err2 = False, f"{type(exc).__name__}: {exc}"[:200]
    if ok1 != ok2:
        mismatches.append((i, getattr(fn, "__name__", fn), "one_raised", err1 if not ok1 else err2))
        return
    if not ok1:
        stats["raised_by_both"] += 1
        if st.calls != calls0:
            mismatches.append((i, getattr(fn, "__name__", "?"), "launched_although_raised", err2))
        return
    if k1 is not k2:
        mismatches.append((i, getattr(fn, "__name__", "?"), "other_variant", None))
        return
    if id(k1) not in layouts:
        abi = abi_of(k1)
        layouts[id(k1)] = (k1, abi.kinds, fastlaunch.layout(side.abi, abi.kinds, hidden_ptrs=abi.hidden_ptrs))
    _, kinds, layout = layouts[id(k1)]
    same = all(r1[f] == r2[f] for f in ("grid", "block", "shared", "stream", "function", "nattrs", "attrs"))
    same = same and r1["best"] is r2["best"] and getattr(fn, "nargs", None) is None
    if not same or not side.same_args(r1, r2, kinds, layout):
        mismatches.append((i, getattr(fn, "__name__", "?"), "launch_differs",
                           {f: (r1[f], r2[f]) for f in ("grid", "block", "shared", "stream", "function")}))
        return
    stats["identical"] += 1
    stats["fast" if not r2["used_params"] else "through_triton"] += 1


def main(n=100_000, seed=2026, target="cuda"):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
    side = HipSide() if target == "hip" else CudaSide()
    global triton
    import torch
    import triton

    import fastlaunch
    import fastlaunch.triton as flt
    from fastlaunch.triton import abi_of
    import jit_kernels as K

    flt.enable()
    rng = random.Random(seed)
    g = Gen(rng, torch)
    stats = collections.Counter()
    mismatches = []
    layouts = {}
    for i in range(n):
        fn, args, kwargs, grid = calls(g, K)
        compare_call(side, i, fn, args, kwargs, grid, layouts, stats, mismatches)
    counts = {}
    for name, c in flt_sites():
        counts[name] = c
    result = {"triton": triton.__version__, "torch": torch.__version__, "target": side.abi, "calls": n, "identical": stats["identical"],
              "fast": stats["fast"], "through_triton": stats["through_triton"],
              "raised_by_both": stats["raised_by_both"], "variants": len(layouts),
              "memo": sum(c.get("memo", 0) for c in counts.values()), "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:400] for m in mismatches[:10]], "seed": seed, "sites": counts,
              **verify.summary(counts)}
    print(json.dumps(result, indent=1, default=str))
    return 0 if not mismatches and stats["fast"] > n // 2 and not result["disagreements"] else 1


def flt_sites():
    from fastlaunch import triton_jit

    return triton_jit.sites()


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4]))
