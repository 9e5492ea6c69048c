"""The combined reentrancy harness: every launch form, at every callback point it passes through, with
two actions in one outer call, through fastlaunch and through Triton alone (fldev.reentry's sides,
kernels, actions and comparison). Prints one JSON line: the cells run (form x point x pair), those
that fired, the ones that cannot exist (with the reason) and every difference from Triton alone.

    PYTHONPATH=tools python -m fldev.reentry_pairs [REPEATS]

Forms: kernel[grid] (jit), fn.run(..., grid=) called directly (run_grid), an Autotuner (autotune),
Heuristics over a JITFunction (heuristics), a kept CompiledKernel, compiled[grid](...) (compiled), and
compiled.run(gx, gy, gz, stream, function, packed, metadata, enter, exit, *args) called directly
(run_direct). Points Triton also calls: the driver's stream function, the grid callable, a pre-run
hook, a tensor-like's data_ptr() and dtype, Triton's binder (fastlaunch's check calls it), the launch
enter and exit hooks, the kernel's
launch_metadata function, the global-scratch allocator; points only fastlaunch has: a GC pass, a
released grid's __del__, the policy's revalidate() and bind(). An action pair runs both actions, in
order, at the point's first call. Run under the ASan build by `make reentry-sanitize`.
"""

from __future__ import annotations

import collections
import json
import sys

from fldev import reentry
from fldev.reentry import BOTH as _BOTH, FL_ONLY, OTHER_N, OUTER_N, SAME_N

POINTS_BOTH = _BOTH + ["enter_hook", "exit_hook", "launch_metadata", "allocator"]
POINTS = POINTS_BOTH + FL_ONLY
FORMS = ["jit", "run_grid", "autotune", "heuristics", "compiled", "run_direct"]
PAIRS = [("disable", "mutate"), ("disable_enable", "mutate"), ("mutate", "nested_same"), ("clear", "mutate"),
         ("disable", "nested_same"), ("set_hook", "mutate"), ("nested_same", "disable_enable"),
         ("clear", "nested_other"), ("mutate", "set_hook"), ("disable_enable", "nested_same"),
         ("set_hook", "nested_same"), ("clear", "disable")]
# What each form launches: a plain kernel (A), the autotuned one (T), heuristics over a JITFunction (H);
# the allocator point on a kernel with global scratch (S), launch_metadata on one that has it (M).
KERNEL = {"autotune": "T", "heuristics": "H"}
COMPILED = ("compiled", "run_direct")


def impossible(form, point):
    """Why a point cannot exist for a form (None: it can)."""
    if form in COMPILED:
        if point in ("grid", "grid_del"):
            return "a compiled kernel's grid is three ints, never a callable"
        if point in ("pre_run_hook", "revalidate", "bind", "binder"):
            return "Triton's launcher calls no pre-run hook and no binder; no JIT dispatcher or policy runs"
        if point == "dtype":
            return "Triton's launcher reads no dtype (only data_ptr())"
        if point == "stream" and form == "run_direct":
            return "the stream is the call's own argument"
        if point == "launch_metadata" and form == "run_direct":
            return "the metadata is the call's own argument"
    if point == "grid_del" and form != "jit":
        return "only kernel[grid] keeps a spare call holding the grid"
    if point in ("allocator", "launch_metadata") and form in ("autotune", "heuristics"):
        return "the tuned kernels here have neither global scratch nor a launch_metadata function"
    return None


class Env(reentry.Env):
    def make_kernels(self):
        triton, tl = self.triton, self.tl
        kernels = super().make_kernels()

        def guarded(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        kernels["H"] = triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})(triton.jit(guarded))

        def scratch(a_ptr, b_ptr, N, BLOCK: tl.constexpr):
            a = tl.make_tensor_descriptor(a_ptr, shape=[N], strides=[1], block_shape=[BLOCK])
            b = tl.make_tensor_descriptor(b_ptr, shape=[N], strides=[1], block_shape=[BLOCK])
            pid = tl.program_id(0)
            b.store([pid * BLOCK], a.load([pid * BLOCK]))
        kernels["S"] = triton.jit(scratch)

        def meta(grid, metadata, args):
            if self.on_metadata is not None:
                self.on_metadata()
            return {"name": "md"}

        def add_md(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 2, mask=offs < n)
        kernels["M"] = triton.jit(launch_metadata=meta)(add_md)
        return kernels

    on_metadata = None


def read_metadata(md):
    """An enter hook that reads the launch metadata, as a profiler's does (Triton's is lazy)."""
    if md is not None and hasattr(md, "get"):
        md.get()


def kernel_for(form, point):
    if point == "allocator":
        return "S"
    if point == "launch_metadata":
        return "M"
    return KERNEL.get(form, "A")


def call(env, side, form, kname, grid, args, kw, run_hooks=(None, None, None)):
    """The outer call in one form, on one side (Triton alone: its own run, runner and launcher)."""
    k = side.kernels[kname]
    if form in ("jit", "autotune", "heuristics"):
        return side.launch(kname, grid, *args, **kw)
    if form == "run_grid":
        return k.run(*args, grid=grid, warmup=False, **kw) if side.fl else type(k).run(k, *args, grid=grid,
                                                                                        warmup=False, **kw)
    ck = side.compiled[kname]
    full = tuple(args) + tuple(kw.values())  # every parameter, the constexprs too
    if form == "compiled":
        if side.fl:
            return ck[(4, 1, 1)](*full)
        return env.flt_compiled._state["getitem"][2](ck, (4, 1, 1))(*full)
    md, enter, exit_ = run_hooks
    return ck.run(4, 1, 1, env.cuda_stub.STREAM, ck.function, ck.packed_metadata, md, enter, exit_, *full)


def one_call(env, side, form, point, pair, armed):
    """(outcome, launches, hook calls, nested, fired) of the outer call with the point set up."""
    kname = kernel_for(form, point)
    side.fresh()
    fns = [reentry.action_fn(env, side, a, kname, None) for a in pair] if armed else []

    def both(meta=None):
        for f in fns:
            f(meta)
    inj = reentry.Injector(both)
    kw = {} if kname == "T" else {"BLOCK": 64}
    restore, run_hooks = [], (None, None, None)
    args = [side.x, side.y, OUTER_N]
    grid = (4,)
    knobs = env.triton.knobs.runtime
    if point in ("enter_hook", "exit_hook") and form == "run_direct":
        run_hooks = (None, inj, None) if point == "enter_hook" else (None, None, inj)
    elif point in ("enter_hook", "exit_hook"):
        setattr(knobs, "launch_" + point, lambda md: inj())
        restore.append(lambda: setattr(knobs, "launch_" + point, None))
    elif point == "launch_metadata":
        env.on_metadata = inj
        knobs.launch_enter_hook = read_metadata  # the metadata is made only while a hook is set, read by it
        restore.append(lambda: setattr(env, "on_metadata", None))
    elif point == "allocator":
        from triton.runtime import _allocation

        def allocator(size, align, stream):
            inj()
            return env.pool
        token = _allocation._allocator.set(allocator)
        restore.append(lambda: _allocation._allocator.reset(token))
    out = reentry.set_point(env, side, point, inj, kname, args, kw, restore)
    if out is not None:
        grid = out
    return reentry.run_outer(env, side, point, inj, restore,
                             lambda: call(env, side, form, kname, grid, args, kw, run_hooks))


def compare(env, form, point, pair):
    both = point in POINTS_BOTH
    a = one_call(env, env.sides[False], form, point, pair, armed=both)
    b = one_call(env, env.sides[True], form, point, pair, armed=True)
    return reentry.judge(both, a, b, "mutate" in pair), a, b


def prepare(env):
    import torch

    env.pool = torch.empty(1 << 16, dtype=torch.int8)
    from triton.runtime import _allocation

    token = _allocation._allocator.set(lambda size, align, stream: env.pool)
    try:
        for side in env.sides.values():  # compiled and bound before the runs; each kernel's compiled kernel kept
            side.fresh()
            side.compiled = {}
            for _ in range(3):
                for name in ("A", "B", "M", "S"):
                    for n in (OUTER_N, SAME_N, OTHER_N):
                        side.launch(name, (2,), side.x, side.y, n, BLOCK=64)
                side.launch("T", (4,), side.x, side.y, OUTER_N)
                side.launch("H", (4,), side.x, side.y, OUTER_N, BLOCK=64)
            for name in ("A", "M", "S"):
                side.compiled[name] = side.launch(name, (4,), side.x, side.y, OUTER_N, BLOCK=64)
    finally:
        _allocation._allocator.reset(token)
    env.stub.take_log()


def main(repeats=1):
    env = Env()
    from fastlaunch import triton_compiled
    from fldev import cuda_stub

    env.flt_compiled, env.cuda_stub = triton_compiled, cuda_stub
    prepare(env)
    cells = [(f, p, pair) for f in FORMS for p in POINTS if not impossible(f, p) for pair in PAIRS]
    cannot = sorted({f"{f}/{p}: {impossible(f, p)}" for f in FORMS for p in POINTS if impossible(f, p)})
    stats, fired, differences = collections.Counter(), collections.Counter(), []
    for _ in range(repeats):
        for form, point, pair in cells:
            ok, a, b = compare(env, form, point, pair)
            stats["same" if ok else "different"] += 1
            fired[(form, point, pair)] += b[4]
            if not ok and len(differences) < 8:
                differences.append((form, point, pair, a[:4], b[:4]))
    never = sorted(f"{f}/{p}/{'+'.join(pair)}" for f, p, pair in cells if not fired[(f, p, pair)])
    pairs_per_form = {f: len({pair for ff, p, pair in cells if ff == f and fired[(ff, p, pair)]}) for f in FORMS}
    result = {"cells": len(cells), "fired": len(cells) - len(never), "same": stats["same"],
              "different": stats["different"], "forms": FORMS, "points": POINTS, "pairs": len(PAIRS),
              "pairs_fired_per_form": pairs_per_form, "never_fired": never, "cannot_exist": cannot,
              "first_differences": repr(differences)[:4000]}
    print(json.dumps(result))
    return 0 if not stats["different"] and stats["same"] else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:2])))
