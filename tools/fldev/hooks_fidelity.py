"""Hooks on the JIT path, `kernel[grid](...)` and `fn.run(...)` (plain, autotuned, under heuristics)
with triton.knobs.runtime.launch_enter_hook / launch_exit_hook set (plain callables, or functions
added to Triton's hook chains) and with pre-run hooks (JITFunction.add_pre_run_hook), through
fastlaunch and through Triton alone, launch by launch on the stand-in driver, with the hooks' calls
and what they were given (the launch metadata, the kernel's own launch_metadata included; a pre-run
hook's positional arguments and keywords; a Config's pre_hook's mapping) compared by content. Prints
one JSON line.

    PYTHONPATH=tools python -m fldev.hooks_fidelity

Each case runs twice in this process: with fastlaunch.triton disabled and enabled, every variant
compiled beforehand (so both sides launch it from the cache). A case names whether fastlaunch
must serve it in C (its dispatcher's fast count) or hand it to Triton.
"""

from __future__ import annotations

import collections
import json
import os
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
    from fldev import cuda_stub
    from fldev.compiled_fidelity import _with_hooks, run_one

    stub = cuda_stub.load()
    import torch
    import triton
    import triton.language as tl

    import fastlaunch.triton as flt
    import jit_kernels as K
    from fastlaunch.triton_plan import abi_of, plan_from_compiled

    x, y, out = torch.zeros(4096), torch.zeros(4096), torch.zeros(64)
    calls = []

    def enter(meta):
        calls.append(("enter", dict(meta.get())))

    def leave(meta):
        calls.append(("exit", dict(meta.get()) if meta is not None else None))

    def enter_second(meta):
        calls.append(("enter 2", dict(meta.get())))

    def raises(meta):
        calls.append(("raises", None))
        raise RuntimeError("a hook that raises")

    knobs = triton.knobs.runtime

    def enter_sets_exit(meta):  # Triton read both hooks before the launcher called this one
        calls.append(("enter, setting exit", dict(meta.get())))
        knobs.launch_exit_hook = leave

    def grid_sets_enter(meta):
        knobs.launch_enter_hook = enter
        return (triton.cdiv(1000, meta["BLOCK"]),)

    def value(v):  # a tensor by its address (both sides pass the same tensors)
        return ("tensor", v.data_ptr()) if hasattr(v, "data_ptr") else v

    def pre_rec(*a, **k):  # what Triton's run passes a pre-run hook, by content
        calls.append(("pre", {"args": tuple(value(v) for v in a), **{n: value(v) for n, v in k.items()}}))

    def pre_rec2(*a, **k):
        calls.append(("pre 2", {"nargs": len(a), "keys": tuple(sorted(k))}))

    def pre_raises(*a, **k):
        calls.append(("pre raises", None))
        raise ValueError("a pre-run hook that raises")

    def pre_sets_enter(*a, **k):  # Triton reads the launch hooks after the pre-run hooks
        calls.append(("pre sets enter", None))
        knobs.launch_enter_hook = enter

    Grid = collections.namedtuple("Grid", "x y")
    from triton.runtime.autotuner import Autotuner

    class OwnRun(Autotuner):  # FlagGems' LibTuner's shape: picks its config, then calls self.fn.run
        def run(self, *args, **kwargs):
            return self.fn.run(*args, **kwargs, **self.configs[0].all_kwargs())

    own = OwnRun(K.tuned.fn, K.tuned.fn.arg_names, K.tuned.configs, ["n"], None, None)

    def config_pre_hook(nargs):  # a Config's pre_hook: Triton's mapping, by content
        calls.append(("config pre_hook", {n: value(v) for n, v in nargs.items()}))

    def body(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    hooked_configs = [triton.Config({"BLOCK": 64}, num_warps=2, pre_hook=config_pre_hook),
                      triton.Config({"BLOCK": 128}, num_warps=4, pre_hook=config_pre_hook)]
    with_pre_hook = triton.autotune(configs=hooked_configs, key=["n"])(triton.jit(body))
    one_pre_hook = triton.autotune(configs=hooked_configs[:1], key=[])(triton.jit(body))
    hooks = lambda call, **kw: _with_hooks(triton, call, **kw)  # noqa: E731
    lam = lambda META: (triton.cdiv(1000, META["BLOCK"]),)  # noqa: E731
    cases = [  # (name, kernel whose dispatcher counts, served, call)
        ("tuple grid, enter", K.tensors, True, lambda: hooks(lambda: K.tensors[(8,)](x, y, 1000, BLOCK=128),
                                                              enter=enter)),
        ("lambda grid, enter and exit", K.tensors, True,
         lambda: hooks(lambda: K.tensors[lam](x, y, 1000, BLOCK=128), enter=enter, exit=leave)),
        ("exit alone", K.tensors, True, lambda: hooks(lambda: K.tensors[(2, 3)](x, y, 99, BLOCK=128), exit=leave)),
        ("fn.run(grid=)", K.tensors, True,
         lambda: hooks(lambda: K.tensors.run(x, y, 1000, grid=(3,), warmup=False, BLOCK=128), enter=enter, exit=leave)),
        ("hook chains", K.scalars, True,
         lambda: hooks(lambda: K.scalars[(1,)](out, 3, 4, 1.5, True, BLOCK=32),
                       chain=[(enter, leave), (enter_second, leave)])),
        ("launch_metadata, lambda grid", K.with_metadata, True,
         lambda: hooks(lambda: K.with_metadata[lam](x, y, 90, BLOCK=64), enter=enter, exit=leave)),
        ("launch_metadata, list grid", K.with_metadata, True,
         lambda: hooks(lambda: K.with_metadata[[5, 1]](x, y, 90, BLOCK=64), enter=enter)),
        ("defaults and keywords", K.activation, True,
         lambda: hooks(lambda: K.activation[(2,)](n=100, x_ptr=x, ACT="relu", BLOCK=64), enter=enter, exit=leave)),
        ("autotuned", K.tuned.fn, True, lambda: hooks(lambda: K.tuned[lam](x, y, 1000), enter=enter, exit=leave)),
        ("autotuned over heuristics", K.tuned_heuristics.fn.fn, True,
         lambda: hooks(lambda: K.tuned_heuristics[(4,)](x, 3, 64), enter=enter)),
        ("enter sets the exit hook", K.tensors, True,
         lambda: hooks(lambda: K.tensors[(1,)](x, y, 7, BLOCK=128), enter=enter_sets_exit)),
        ("grid sets the enter hook", K.tensors, True,
         lambda: hooks(lambda: K.tensors[grid_sets_enter](x, y, 1000, BLOCK=128), exit=leave)),
        ("enter raises", K.tensors, False,
         lambda: hooks(lambda: K.tensors[(1,)](x, y, 7, BLOCK=128), enter=raises, exit=leave)),
        ("exit raises", K.tensors, True,
         lambda: hooks(lambda: K.tensors[(1,)](x, y, 7, BLOCK=128), enter=enter, exit=raises)),
        ("hooks and a pre-run hook", K.tensors, True,
         lambda: _with_pre(K.tensors, [pre_rec], lambda: hooks(lambda: K.tensors[(1,)](x, y, 7, BLOCK=128), enter=enter))),
        ("a pre-run hook", K.tensors, True, lambda: _with_pre(K.tensors, [pre_rec], lambda: K.tensors[(1,)](x, y, 7, BLOCK=128))),
        ("two pre-run hooks, lambda grid", K.tensors, True,
         lambda: _with_pre(K.tensors, [pre_rec, pre_rec2], lambda: K.tensors[lam](x, y, 1000, BLOCK=128))),
        ("a pre-run hook, keywords and defaults", K.activation, True,
         lambda: _with_pre(K.activation, [pre_rec], lambda: K.activation[(2,)](n=100, x_ptr=x, ACT="relu", BLOCK=64))),
        ("a pre-run hook, fn.run(grid=)", K.tensors, True,
         lambda: _with_pre(K.tensors, [pre_rec], lambda: K.tensors.run(x, y, 1000, grid=(3,), warmup=False, BLOCK=128))),
        ("a pre-run hook, autotuned", K.tuned.fn, True,
         lambda: _with_pre(K.tuned.fn, [pre_rec], lambda: K.tuned[lam](x, y, 1000))),
        ("a pre-run hook, under heuristics", K.tuned_heuristics.fn.fn, True,
         lambda: _with_pre(K.tuned_heuristics.fn.fn, [pre_rec], lambda: K.tuned_heuristics[(4,)](x, 3, 64))),
        ("a pre-run hook and exit hook", K.tensors, True,
         lambda: _with_pre(K.tensors, [pre_rec], lambda: hooks(lambda: K.tensors[(2, 3)](x, y, 99, BLOCK=128), exit=leave))),
        ("a pre-run hook that raises", K.tensors, False,
         lambda: _with_pre(K.tensors, [pre_rec, pre_raises], lambda: K.tensors[(1,)](x, y, 7, BLOCK=128))),
        ("a pre-run hook sets the enter hook", K.tensors, True,
         lambda: _with_pre(K.tensors, [pre_sets_enter], lambda: hooks(lambda: K.tensors[(1,)](x, y, 7, BLOCK=128),
                                                                     exit=leave))),
        ("namedtuple grid, hooks", K.tensors, True,
         lambda: hooks(lambda: K.tensors[Grid(3, 1)](x, y, 1000, BLOCK=128), enter=enter, exit=leave)),
        ("0-d tensor extent", K.tensors, True, lambda: K.tensors[(torch.tensor(5),)](x, y, 1000, BLOCK=128)),
        ("an Autotuner subclass's own run calling self.fn.run", own.fn, True,
         lambda: own.run(x, y, 1000, grid=(4,), warmup=False)),
        ("the same, a pre-run hook", own.fn, True,
         lambda: _with_pre(own.fn, [pre_rec], lambda: own.run(x, y, 1000, grid=(4,), warmup=False))),
        ("a config's pre_hook", with_pre_hook.fn, True, lambda: with_pre_hook[lam](x, y, 1000)),
        ("a config's pre_hook, keywords", with_pre_hook.fn, True, lambda: with_pre_hook[(3,)](x, n=1000, y_ptr=y)),
        ("a config's pre_hook, .run(grid=)", with_pre_hook.fn, True,
         lambda: with_pre_hook.run(x, y, 1000, grid=(2,), warmup=False)),
        ("a config's pre_hook, one config, launch hooks", one_pre_hook.fn, True,
         lambda: hooks(lambda: one_pre_hook[lam](x, y, 1000), enter=enter, exit=leave)),
        ("a config's pre_hook and a pre-run hook", with_pre_hook.fn, True,
         lambda: _with_pre(with_pre_hook.fn, [pre_rec], lambda: with_pre_hook[(1,)](x, y, 1000))),
        ("autotuned, .run(grid=)", K.tuned.fn, True, lambda: K.tuned.run(x, y, 1000, grid=lam, warmup=False)),
        ("heuristics, .run(grid=)", K.tuned_heuristics.fn.fn, True,
         lambda: K.tuned_heuristics.run(x, 3, 64, grid=(4,), warmup=False)),
        ("autotuned, .run(grid=), hooks", K.tuned.fn, True,
         lambda: hooks(lambda: K.tuned.run(x, y, 1000, grid=lam, warmup=False), enter=enter, exit=leave)),
        ("an int64 value, its variant bound", K.tensors, True,
         lambda: hooks(lambda: K.tensors[(1,)](x, y, 2**40 + 1, BLOCK=128), enter=enter)),
        ("no hooks after hooks", K.tensors, True, lambda: K.tensors[(1,)](x, y, 7, BLOCK=128)),
    ]

    flt.disable()
    for _, _, _, call in cases:  # every variant compiled, on Triton's side
        try:
            call()
        except (RuntimeError, ValueError):
            pass
    shapes = {}
    for fn in (K.tensors, K.scalars, K.with_metadata, K.activation, K.tuned.fn, K.tuned_heuristics.fn.fn,
               with_pre_hook.fn, one_pre_hook.fn):
        for cache in fn.device_caches.values():
            for ck in cache[0].values():
                ck._init_handles()
                shapes[int(ck.function)] = (abi_of(ck).kinds, plan_from_compiled(ck, backend="null", function=0).layout)
    triton_side = [run_one(call, stub, calls, shapes) for _, _, _, call in cases]
    flt.enable()
    for _, _, _, call in cases:  # once each, so the fast side's tables hold every variant
        try:
            call()
        except (RuntimeError, ValueError):
            pass
    fast_side, served_wrong, outcomes = [], [], []
    for name, fn, served, call in cases:
        before = dict(fn.run.counts)
        fast_side.append(run_one(call, stub, calls, shapes))
        after = dict(fn.run.counts)
        got = after["fast"] - before["fast"]
        if (got > 0) != served:
            served_wrong.append(f"{name}: served {got}, stock {after['stock_reasons']}")
        reasons = sorted(k for k, v in after["stock_reasons"].items() if v > before["stock_reasons"].get(k, 0))
        outcomes.append("served" if got else f"Triton's ({', '.join(reasons)})" if reasons else
                        f"raised {fast_side[-1][2]}, nothing launched" if fast_side[-1][2] and not fast_side[-1][0]
                        else "Triton's")
    flt.disable()
    diffs = [name for (name, *_), a, b in zip(cases, triton_side, fast_side) if a != b]
    if os.environ.get("FLDEV_SHOW"):
        for (name, *_), a, b in zip(cases, triton_side, fast_side):
            if a != b:
                print(name, a, b, sep="\n  ", file=sys.stderr)
    launches = sum(len(r[0]) for r in triton_side)
    hooked = sum(1 for r in triton_side if r[3])
    forms = [[name, a == b, o] for (name, *_), a, b, o in zip(cases, triton_side, fast_side, outcomes)]
    print(json.dumps({"cases": len(cases), "launches": launches, "differ": diffs, "serving_wrong": served_wrong,
                      "served": sum(1 for c in cases if c[2]), "hooked": hooked, "forms": forms}))
    return 0 if not diffs and not served_wrong and launches >= 24 and hooked >= 12 else 1


def _with_pre(fn, hooks, call):
    """call() with pre-run hooks added to fn (JITFunction.add_pre_run_hook), removed after."""
    for hook in hooks:
        fn.add_pre_run_hook(hook)
    try:
        call()
    finally:
        for hook in hooks:
            fn.pre_run_hooks.remove(hook)


if __name__ == "__main__":
    sys.exit(main())
