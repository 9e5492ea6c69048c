"""`@triton.heuristics` through fastlaunch and through Triton, call by call.

Kernels stacked the ways projects stack them: heuristics over jit, heuristics over autotune,
autotune over heuristics, heuristics over an Autotuner subclass whose own run calls super().run (as
flash-linear-attention's CachedAutotuner does). Their values take every form the C dispatcher reads
(`args[x] is not None`, `is None`, `%` and comparisons, `triton.next_power_of_2`, `triton.cdiv`,
`min`, a constant, a value read from an earlier one) and some it does not (a function of the
project's own, counted, raising for some inputs; a value read from a tensor's shape). Calls vary the
arguments so that the forms sometimes do not hold (None, bools, ints past 64 bits, negative ints,
absent keywords). Each call runs through Triton on one copy of the kernel that fastlaunch never
sees, and through `kernel[grid](...)` with fastlaunch enabled on another copy of the same functions;
both must make the same launches (grid, block, argument bytes), return the same variant, raise the
same exception type, call the project's functions as often, and leave the same `best_config`.

    PYTHONPATH=tools python -m fldev.heuristics_fidelity [N] [SEED]   (JSON; exit 1 on a mismatch)
"""

from __future__ import annotations

import collections
import json
import random
import sys

from fastlaunch import _C
from fldev import grid_fidelity

_C.accept_host_memory()

COUNTS = collections.Counter()
triton = None  # imported in main() once the stand-in driver is loaded; a module global, as in projects' code


def project_value(args):
    """A heuristic of the project's own: Python, counted, raising for some inputs."""
    COUNTS["project_value"] += 1
    if args["n"] == 13:
        raise ValueError("13 is refused")
    return 4 if args["n"] > 100 else 2


def shape_value(args):
    COUNTS["shape_value"] += 1
    return args["x_ptr"].shape[0] % 3


def stacks(tl):
    """name -> (kernel for Triton alone, kernel for fastlaunch): the same functions, built twice."""
    from triton.runtime.autotuner import Autotuner

    class CountingTuner(Autotuner):
        def run(self, *args, **kwargs):
            COUNTS["tuner_run"] += 1
            return super().run(*args, **kwargs)

    def body(x_ptr, b_ptr, n, flag, BLOCK: tl.constexpr, HAS_B: tl.constexpr, A: tl.constexpr, B: tl.constexpr,
             C: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n)
        if HAS_B:
            v += tl.load(b_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, v * (A + B + C), mask=offs < n)

    configs = [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]
    common = {"HAS_B": lambda args: args["b_ptr"] is not None}
    forms = {
        "plain": {"A": lambda args: args["n"] % args["BLOCK"] == 0, "B": lambda args: args["b_ptr"] is None,
                  "C": lambda args: min(args["n"], 128) > 64},
        "tuned": {"A": lambda args: triton.next_power_of_2(args["n"]) // 64, "B": lambda args: triton.cdiv(args["n"], 256),
                  "C": lambda args: args["A"] * 2 + 1},
        "project": {"A": project_value, "B": lambda args: args["flag"] % 2, "C": shape_value},
        "inner": {"A": lambda args: args["n"] % args["BLOCK"] == 0, "B": lambda args: 3, "C": lambda args: args["flag"] > 0},
    }

    def build(kind):
        fn = triton.jit(body)
        if kind == "plain":
            return triton.heuristics({**common, **forms["plain"]})(fn)
        if kind == "over_autotune":
            return triton.heuristics({**common, **forms["tuned"]})(triton.autotune(configs, key=["n"])(fn))
        if kind == "under_autotune":
            return triton.autotune(configs, key=["n"])(triton.heuristics({**common, **forms["inner"]})(fn))
        tuner = CountingTuner(fn, fn.arg_names, configs, ["n"], None, None)
        return triton.heuristics({**common, **forms["project"]})(tuner)

    return {k: (build(k), build(k)) for k in ("plain", "over_autotune", "under_autotune", "subclass")}


def best_of(k):
    while k is not None:
        if hasattr(k, "best_config"):
            c = k.best_config
            return None if c is None else (tuple(sorted(c.kwargs.items())), c.num_warps)
        k = getattr(k, "fn", None)
    return None


def main(n=4000, seed=2026):
    from fldev import cuda_stub

    stub = cuda_stub.load()
    global triton
    import torch
    import triton
    import triton.language as tl

    import fastlaunch.triton as flt
    from fastlaunch import triton_jit

    flt.enable()
    rng = random.Random(seed)
    ks = stacks(tl)
    for ref, _ in ks.values():
        flt.exclude(ref)  # Triton alone: `ref.fn.run` would otherwise attach its kernel
    xs = [torch.zeros(4096), torch.zeros(2048)]
    b = torch.zeros(4096)
    stats, mismatches = collections.Counter(), []
    for i in range(n):
        name = rng.choice(list(ks))
        ref, fl = ks[name]
        size = rng.choice([64, 100, 1000, 1000, 4096, 13, 2**40, -5])
        flag = rng.choice([1, 0, 3, True, None, 2**70])
        kwargs = {} if name in ("over_autotune", "subclass", "under_autotune") else {"BLOCK": rng.choice([64, 128])}
        bb = rng.choice([b, None])
        x = rng.choice(xs)
        args = (x, bb, size, flag) if rng.random() < 0.7 else (x, bb)
        if len(args) == 2:
            kwargs.update(n=size, flag=flag)
        grid = rng.choice([(4,), [2, 1], lambda META: (triton.cdiv(4096, META["BLOCK"]),)])
        nparams = 4 + 2
        COUNTS.clear()
        a = grid_fidelity.run_one(stub, lambda: type(ref).run(ref, *args, grid=grid, warmup=False, **kwargs), nparams)
        ca = dict(COUNTS)
        COUNTS.clear()
        bres = grid_fidelity.run_one(stub, lambda: fl[grid](*args, **kwargs), nparams)
        cb = dict(COUNTS)
        same = a[1:3] == bres[1:3] and a[0][0] == bres[0][0] and ca == cb and best_of(ref) == best_of(fl)
        if same and a[0][0] == "raised":
            same = a[0][1] is bres[0][1]
        elif same:
            ra, rb = a[0][1], bres[0][1]
            same = (ra is None) == (rb is None) and (ra is None or ra.hash == rb.hash)
        stats[f"{name}:{a[0][0]}"] += 1
        if not same:
            mismatches.append((i, name, args[2:], sorted(kwargs), a[:3], bres[:3], ca, cb, best_of(ref), best_of(fl)))
    sites = triton_jit.sites()  # every kernel is named body: a list, not a dict
    served = {f"{k}#{j}": v for j, (k, v) in enumerate(sites) if k.startswith("heuristics:")}
    result = {"triton": triton.__version__, "calls": n, "seed": seed, "outcomes": dict(stats),
              "mismatches": len(mismatches), "first_mismatches": [repr(m)[:700] for m in mismatches[:8]],
              "values_in_c": sum(v["values_in_c"] for v in served.values()),
              "values_called": sum(v["values_called"] for v in served.values()),
              "heuristics_fast": sum(v["fast"] for v in served.values()),
              "heuristics_stock": sum(v["stock"] for v in served.values()), "sites": sites,
              "not_bound": triton_jit.not_bound()}
    print(json.dumps(result, indent=1, default=str))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
