"""Seeded fuzzing of the Python API (`make fuzz` and, briefly, `make test` run it under an ASan build of
the extension): random Plan() specs, launches, layouts and grid evaluations, with values that are
wrong in every way a caller can be wrong, including callees that mutate, raise, re-enter or collect
garbage while the extension reads them. Only the documented exceptions may come out; a crash or a
sanitizer report ends the process.

    python fuzz/fuzz_python.py CALLS [SEED]      (prints "N calls, M refused, K launched")
"""

from __future__ import annotations

import gc
import random
import sys

import fastlaunch
from fastlaunch import FastLaunchError, FastLaunchPlanUnavailable, Plan, _C

EXPECTED = (TypeError, ValueError, OverflowError, FastLaunchError, FastLaunchPlanUnavailable, KeyError, IndexError,
            ZeroDivisionError, RecursionError, MemoryError, AttributeError, RuntimeError)


class Hostile:
    """An int-like / float-like / pointer-like whose hooks do something nasty to `victim`."""

    def __init__(self, rng, victim):
        self.rng, self.victim, self.value = rng, victim, rng.choice([0, 1, 7, -1, 2**40, 2**64, -2**70])

    def _mess(self):
        r = self.rng.random()
        if isinstance(self.victim, list) and r < 0.3:
            self.victim.clear()
        elif isinstance(self.victim, list) and r < 0.5:
            self.victim.extend([None] * 3)
        elif isinstance(self.victim, dict) and r < 0.5:
            self.victim.clear()
        elif r < 0.6:
            gc.collect()
        elif r < 0.7:
            raise ValueError("hostile")
        elif r < 0.75:
            _C.grid_eval("1 + 1", [], [])  # re-entering the extension

    def __index__(self):
        self._mess()
        return self.value

    def __float__(self):
        self._mess()
        return 1.5

    def data_ptr(self):
        self._mess()
        return self.value


def random_scalar(rng, victim):
    return rng.choice([0, 1, -1, 2**31, 2**63, 2**64, -2**65, 1.5, float("nan"), float("inf"), True, None, "s", b"b",
                       Hostile(rng, victim), object(), [1], 3 + 4j])


def random_text(rng):
    return rng.choice(["n", "xnumel", "-((n) // -(128))", "n\0x", "", "if", "min", "a b", "1 // 0", "n if m else 1",
                       "$0", "(" * 300, "n" * 5000, "é", "n + ", "cdiv(n, 0)", "max(n)"])


def random_kinds(rng, victim):
    pool = ["ptr", "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64", "*fp32",
            "u1", "f16", "bool", "constexpr", "q8", "", "i32\0", 3, None, Hostile(rng, victim)]
    n = rng.choice([0, 1, 2, 3, 5, 20, 300])
    kinds = [rng.choice(pool[:14]) if rng.random() < 0.9 else rng.choice(pool) for _ in range(n)]
    return kinds if rng.random() < 0.9 else rng.choice(["ptr", 5, None, (k for k in kinds)])


def random_plan_kwargs(rng, nkinds):
    kw = {}
    victim = []
    if rng.random() < 0.9:
        kw["backend"] = rng.choice(["null", "null", "null", "host", "cuda", "npu", "gpu", "null\0", 3])
    if rng.random() < 0.3:
        kw["abi"] = rng.choice(["host", "cuda", "npu", "gpu", None, 1])
    if rng.random() < 0.3:
        opts = {rng.choice(["num_warps", "ffts", "scratch", "simt_only", "hidden_ptrs", "clamp_blocks", "bogus", 3]):
                random_scalar(rng, victim) for _ in range(rng.randint(1, 3))}
        kw["options"] = opts if rng.random() < 0.9 else rng.choice([[1], "x", None])
    r = rng.random()
    if r < 0.4:
        kw["grid"] = rng.choice([(1,), (2, 3), (1, 1, 1), (2**40,), (-1,), (), (1, 2, 3, 4), [5], "x", (1.5,),
                                 (Hostile(rng, victim),)])
    elif r < 0.8:
        names = [f"a{i}" for i in range(nkinds)]
        kw["grid_exprs"] = victim = [random_text(rng) if rng.random() < 0.3 else rng.choice(names or ["1"])
                                     for _ in range(rng.choice([3, 3, 3, 2, 4]))]
        if rng.random() < 0.8:
            kw["arg_names"] = names if rng.random() < 0.8 else [random_text(rng) for _ in range(nkinds)]
    if rng.random() < 0.2 and nkinds:
        kw["fixed_args"] = [random_scalar(rng, victim) for _ in range(rng.randint(0, nkinds))]
    if rng.random() < 0.15:
        victim = []
        victim.extend(rng.choice([Hostile(rng, victim), 0, 1, -1, 10**30]) for _ in range(rng.randint(0, 3)))
        kw["ignore"] = victim
    if rng.random() < 0.1:
        kw["name"] = random_text(rng)
    return kw


def main(calls=100_000, seed=1):
    rng = random.Random(seed)
    _C.fault_wrap("null")  # its plans can be armed with fault_inject
    stream = _C.stream_create("null")
    counts = {"calls": 0, "refused": 0, "launched": 0}
    plans = []

    def call(fn, *a, **k):
        counts["calls"] += 1
        try:
            out = fn(*a, **k)
        except EXPECTED:
            counts["refused"] += 1
            return None
        return out

    while counts["calls"] < calls:
        r = rng.random()
        if r < 0.35 or not plans:
            victim = []
            kinds = random_kinds(rng, victim)
            nk = len(kinds) if isinstance(kinds, list) else 0
            plan = call(Plan, None, kinds, **random_plan_kwargs(rng, nk))
            if plan is not None:
                plans.append(plan)
                if len(plans) > 50:
                    plans.pop(rng.randrange(len(plans)))
        elif r < 0.8:
            plan = rng.choice(plans)
            victim = []
            n = plan.call_arg_count + rng.choice([0, 0, 0, 0, 1, -1])
            args = victim
            args.extend(random_scalar(rng, victim) if rng.random() < 0.1 else
                        rng.choice([0x1000, 7, 0]) for _ in range(max(n, 0)))
            kw = {"stream": stream if rng.random() < 0.9 else random_scalar(rng, victim)}
            if plan.grid_mode == "caller" or rng.random() < 0.05:
                kw["grid"] = rng.choice([(1,), (3, 1, 1), (0,), (-1,), (2**40,), "g"])
            if rng.random() < 0.02:
                kw["bogus"] = 1
            before = _C.stream_count(stream, "null")
            call(plan, *args, **kw)
            after = _C.stream_count(stream, "null")
            if after - before > 1:
                raise AssertionError("launched twice")
            counts["launched"] += after - before
            if rng.random() < 0.05:
                call(plan.resolve_grid, *args)
        elif r < 0.9:
            victim = []
            kinds = random_kinds(rng, victim)
            opts = {} if rng.random() < 0.7 else {rng.choice(["ffts", "hidden_ptrs", "x"]): random_scalar(rng, victim)}
            call(_C.layout, rng.choice(["host", "cuda", "npu", "x", 1]), kinds, opts)
        else:
            names = [random_text(rng) for _ in range(rng.randint(0, 4))]
            values = [random_scalar(rng, names) for _ in range(rng.randint(0, 4))]
            call(_C.grid_eval, random_text(rng), names, values)
        if rng.random() < 0.001:
            plan = rng.choice(plans)
            call(_C.fault_inject, rng.choice(["none", "pack", "submit_lost", "bogus"]), 2, rng.randrange(99), plan)
            if rng.random() < 0.5:
                plans.remove(plan)
                del plan
                gc.collect()
    _C.fault_inject("none")
    _C.stream_destroy(stream, "null")
    print(f"{counts['calls']} calls, {counts['refused']} refused, {counts['launched']} launched")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
