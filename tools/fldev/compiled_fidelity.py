"""Kept CompiledKernels called again, `compiled[grid](*args, stream=...)`, through fastlaunch and
through Triton alone, launch by launch on the stand-in driver (its launch log: function, grid,
argument bytes and hidden slots; the last launch's stream, block, shared memory and attributes),
with exceptions and launch-hook calls compared by content. Prints one JSON line.

    PYTHONPATH=tools python -m fldev.compiled_fidelity

Each case runs twice in this process: with fastlaunch.triton disabled (Triton's own
CompiledKernel.__getitem__ and runner) and enabled. A case names whether fastlaunch must serve it
(its CompiledLaunch's fast count) or hand it to Triton.
"""

from __future__ import annotations

import json
import os
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import numpy as np
    import torch
    import triton

    import fastlaunch.triton as flt
    import jit_kernels as K
    from fastlaunch import triton_compiled
    from fastlaunch.triton_plan import abi_of, plan_from_compiled

    x, y = torch.zeros(4096), torch.zeros(4096)
    out = torch.zeros(64)
    grid = lambda META: (triton.cdiv(1000, META["BLOCK"]),)  # noqa: E731
    # The compiled kernels, as a cache of what kernel[grid] or warmup returned keeps them.
    ck_t = K.tensors[grid](x, y, 1000, BLOCK=128)
    ck_s = K.scalars[(1,)](out, 3, 4, 1.5, True, BLOCK=32)
    ck_w = K.tensors.warmup(x, y, 77, BLOCK=64, grid=(1,))
    ck_c = cuda_stub.compile(K.tensors,
                             {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                             constexprs={"BLOCK": 256})
    ck_m = K.with_metadata[(4,)](x, y, 100, BLOCK=64)  # its launch_metadata feeds the hooks
    hook_calls = []
    shapes = {}
    # Triton 3.5 and 3.6 parse a launch's arguments by a format first: exactly one per parameter (a
    # trailing constexpr left out raises TypeError there, nothing launched), scalars before the hooks.
    parse_first = triton_compiled._parses_first(ck_t)
    for ck in (ck_t, ck_s, ck_w, ck_c, ck_m):
        ck._init_handles()  # a warmup's kernel is loaded at its first subscript
        abi = abi_of(ck)
        layout = plan_from_compiled(ck, backend="null", function=0).layout
        shapes[int(ck.function)] = (abi.kinds, layout)

    def enter(meta):
        hook_calls.append(("enter", dict(meta.get())))

    def leave(meta):
        hook_calls.append(("exit", dict(meta.get()) if meta is not None else None))

    def enter_second(meta):
        hook_calls.append(("enter 2", dict(meta.get())))

    def raises(meta):
        hook_calls.append(("raises", None))
        raise RuntimeError("a hook that raises")

    hooks = lambda call, **kw: _with_hooks(triton, call, **kw)  # noqa: E731

    # `compiled.run(...)` called directly: Triton's launcher's own form (grid, stream, function,
    # packed metadata, launch metadata, enter, exit, then the arguments), served once fastlaunch has
    # met the kernel (ck_t at the first case below), with the hooks passed called around the launch.
    S = 0x7F3A5C0099A0

    def run_t(*args, grid=(2, 1, 1), function=None, md=None, enter=None, exit=None, packed=None):
        return ck_t.run(*grid, S, ck_t.function if function is None else function,
                        ck_t.packed_metadata if packed is None else packed, md, enter, exit, *args)

    def run_enter(md):
        hook_calls.append(("run enter", {"md": md}))

    def run_exit(md):
        hook_calls.append(("run exit", {"md": md}))

    def run_raises(md):
        hook_calls.append(("run raises", {"md": md}))
        raise RuntimeError("a hook that raises")

    held = {}
    cases = [  # (name, served, call)
        ("tuple grid", True, lambda: ck_t[(8, 1, 1)](x, y, 1000, 128)),
        ("list grid", True, lambda: ck_t[[3, 2, 1]](x, y, 999, 128)),
        ("grid of four", True, lambda: ck_t[(2, 1, 1, 9)](x, y, 5, 128)),
        ("zero grid", True, lambda: ck_t[(0, 1, 1)](x, y, 5, 128)),
        ("explicit stream", True, lambda: ck_t[(1, 1, 1)](x, y, 7, 128, stream=0x7F3A5C0099A0)),
        ("stream None", True, lambda: ck_t[(1, 1, 1)](x, y, 7, 128, stream=None)),
        ("scalars", True, lambda: ck_s[(1, 1, 1)](out, 5, -6, 2.25, False, 32)),
        ("warmup kernel", True, lambda: ck_w[(4, 1, 1)](x, y, 77, 64)),
        ("triton.compile kernel", True, lambda: ck_c[(2, 1, 1)](x, y, 500, 256)),
        ("int64 value", False, lambda: ck_t[(1, 1, 1)](x, y, 2**40, 128)),
        ("numpy grid", False, lambda: ck_t[(np.int64(3), 1, 1)](x, y, 5, 128)),
        ("negative grid", False, lambda: ck_t[(-1, 1, 1)](x, y, 5, 128)),
        ("grid of two", False, lambda: ck_t[(2, 1)](x, y, 5, 128)),
        ("trailing constexpr left out", not parse_first, lambda: ck_t[(1, 1, 1)](x, y, 5)),
        ("too many args", False, lambda: ck_t[(1, 1, 1)](x, y, 5, 128, 7)),
        ("unknown keyword", False, lambda: ck_t[(1, 1, 1)](x, y, 5, 128, num_warps=4)),
        ("float for a pointer", False, lambda: ck_t[(1, 1, 1)](1.5, y, 5, 128)),
        ("held runners", True, lambda: (held.update(a=ck_t[(5, 1, 1)], b=ck_t[(6, 1, 1)]),
                                        held["a"](x, y, 1, 128), held["b"](x, y, 2, 128))),
        # Launch hooks: called in C around the plan's launch, with the kernel's own launch_metadata.
        ("enter hook", True, lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, 3, 128), enter=enter)),
        ("enter and exit hooks", True, lambda: hooks(lambda: ck_t[(2, 1, 1)](x, y, 3, 128), enter=enter, exit=leave)),
        ("exit hook alone", True, lambda: hooks(lambda: ck_t[(2, 1, 1)](x, y, 3, 128), exit=leave)),
        ("hook chains", True, lambda: hooks(lambda: ck_s[(1, 1, 1)](out, 1, 2, 0.5, True, 32),
                                            chain=[(enter, leave), (enter_second, leave)])),
        ("launch_metadata kernel", True, lambda: hooks(lambda: ck_m[(3, 1, 1)](x, y, 90, 64), enter=enter, exit=leave)),
        ("hooked, explicit stream", True, lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, 3, 128, stream=0x7F3A5C0099A0),
                                                        enter=enter)),
        ("enter hook raises", False, lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, 3, 128), enter=raises, exit=leave)),
        ("exit hook raises", True, lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, 3, 128), enter=enter, exit=raises)),
        ("hooked, value refused", False, lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, 2**40, 128), enter=enter,
                                                       exit=leave)),
        ("hooked, stream given", True, lambda: hooks(lambda: ck_t[(2, 1, 1)](x, y, 3, 128, stream=0x7F3A5C0099A0),
                                                     enter=enter, exit=leave)),
        ("hooked, value refused, stream given", False,
         lambda: hooks(lambda: ck_t[(1, 1, 1)](x, y, -2**40, 128, stream=0x7F3A5C0099A0), enter=enter, exit=leave)),
        ("run called directly", True, lambda: run_t(x, y, 5, 128)),
        ("run, grid and stream", True, lambda: run_t(x, y, 1000, 128, grid=(8, 2, 1))),
        ("run, trailing constexpr left out", not parse_first, lambda: run_t(x, y, 5)),
        ("run with hooks passed", True, lambda: run_t(x, y, 3, 128, md="metadata", enter=run_enter, exit=run_exit)),
        ("run, exit hook alone", True, lambda: run_t(x, y, 3, 128, md=7, exit=run_exit)),
        ("run, enter hook raises", False, lambda: run_t(x, y, 3, 128, md=1, enter=run_raises, exit=run_exit)),
        ("run, value refused", False, lambda: run_t(x, y, 2**40, 128)),
        ("run, value refused, hooks passed", False, lambda: run_t(x, y, 2**40, 128, md=2, enter=run_enter)),
        ("run, pointer refused, hooks passed", False, lambda: run_t(1.5, y, 3, 128, md=3, enter=run_enter)),
        ("run, another kernel's function", False, lambda: run_t(x, y, 3, 128, function=ck_w.function)),
        ("run, float grid", False, lambda: run_t(x, y, 3, 128, grid=(1.0, 1, 1))),
        ("run, too many args", False, lambda: run_t(x, y, 5, 128, 7)),
        ("hooked, pointer refused", False, lambda: hooks(lambda: ck_t[(1, 1, 1)](1.5, y, 3, 128), enter=enter,
                                                         exit=leave)),
        ("hooked, trailing constexpr left out", not parse_first, lambda: hooks(lambda: ck_m[(1, 1, 1)](x, y, 9), enter=enter)),
    ]

    # Calls Triton's own launcher reads past its arguments for (3.9 checks no count: uninitialised
    # stack read as objects, a crash or a launch of garbage), so not run through it: fastlaunch raises
    # TypeError and launches nothing.
    past_end = [("too few args", lambda: ck_t[(1, 1, 1)](x, y)),
                ("one arg", lambda: ck_s[(1, 1, 1)](out)),
                ("none at all, stream given", lambda: ck_t[(1, 1, 1)](stream=0x7F3A5C0099A0))]

    flt.disable()
    triton_side = [run_one(call, stub, hook_calls, shapes) for _, _, call in cases]
    flt.enable()
    kernels = (ck_t, ck_s, ck_w, ck_c, ck_m)
    fast_side, served_ok = [], []
    reasons = []
    for name, served, call in cases:
        before, r0 = _fast_total(triton_compiled, kernels), _reasons(triton_compiled, kernels)
        fast_side.append(run_one(call, stub, hook_calls, shapes))
        served_ok.append((name, served, _fast_total(triton_compiled, kernels) - before))
        r1 = _reasons(triton_compiled, kernels)
        reasons.append(sorted(k for k, v in r1.items() if v > r0.get(k, 0)))
    refused_wrong = []
    for name, call in past_end:
        got = run_one(call, stub, hook_calls, shapes)
        if got[0] or got[2] != "TypeError":
            refused_wrong.append(f"{name}: {got}")
    run_ok, run_detail = run_given_back_check(K, flt, lambda: stub.state.calls, x, y)
    flt.disable()
    diffs = [name for (name, _, _), a, b in zip(cases, triton_side, fast_side) if a != b]
    if os.environ.get("FLDEV_SHOW"):
        for (name, _, _), a, b in zip(cases, triton_side, fast_side):
            if a != b:
                print(name, a, b, sep="\n  ", file=sys.stderr)
    wrong = [f"{n}: served {g}" for n, s, g in served_ok if (g > 0) != s]
    launches = sum(len(r[0]) for r in triton_side)
    hooked = sum(1 for r in triton_side if r[3])  # cases whose hooks Triton called (so the compare is not empty)
    forms = [[name, a == b, "served" if g else f"raised {b[2]}, nothing launched" if b[2] and not b[0]
              else f"Triton's runner ({', '.join(why)})" if why else "Triton's runner"]
             for (name, _, _), a, b, (_, _, g), why in zip(cases, triton_side, fast_side, served_ok, reasons)]
    forms += [[name, True, "raised TypeError, nothing launched (Triton's launcher reads past its arguments)"]
              for name, _ in past_end]
    print(json.dumps({"cases": len(cases), "launches": launches, "differ": diffs, "serving_wrong": wrong,
                      "refused_wrong": refused_wrong, "refused": len(past_end),
                      "served": sum(1 for _, s, _ in served_ok if s), "hooked": hooked, "forms": forms,
                      "run_given_back": [run_ok, repr(run_detail)]}))
    return 0 if not diffs and not wrong and not refused_wrong and launches >= 12 and hooked >= 10 and run_ok else 1


def run_given_back_check(K, flt, launches, x, y):
    """`compiled.run(gx, gy, gz, stream, function, packed, md, enter, exit, *args)` called directly:
    served on a kernel met as compiled[grid] and on what a served kernel[grid] returned (attached at
    its first direct call); a kernel of an excluded JITFunction stays Triton's launcher; a reference
    held across disable() is Triton's launcher from then on; an enter hook that disables fastlaunch
    mid-call and one that drops the kernel's launch: each call launches once."""
    import triton

    from fastlaunch import triton_compiled as tc

    ck = K.tensors[(1,)](x, y, 100, BLOCK=64)
    ck[(1, 1, 1)](x, y, 100, 64)
    returned = K.tensors[(1,)](x, y, 100, BLOCK=32)  # what kernel[grid] returned, never subscripted
    excluded = triton.jit(K.tensors.fn)
    flt.exclude(excluded)
    theirs = excluded[(1,)](x, y, 100, BLOCK=16)

    def run(kernel, held=None, enter=None):
        r = held or kernel.run
        r(2, 1, 1, 0x7F3A5C0099A0, kernel.function, kernel.packed_metadata, None, enter, None, x, y, 9, 64)

    def fast(kernel):
        return tc.launch_of(kernel).counts()["fast"] if tc.launch_of(kernel) else 0

    def slot(kernel):
        return type(vars(kernel).get("_run", vars(kernel).get("run"))).__name__

    before, f0 = launches(), fast(ck)
    for _ in range(3):
        run(ck)
        run(returned)
        run(theirs)
    served = (launches() - before, fast(ck) - f0, fast(returned), fast(theirs), slot(theirs))
    held = ck.run
    flt.disable()
    before = launches()
    run(ck, held)
    run(ck)
    run(returned)
    given_back = (launches() - before, type(held).__name__, held.launch is None, slot(ck), slot(returned))
    flt.enable()
    ck[(1, 1, 1)](x, y, 100, 64)  # met again: served again
    before = launches()
    run(ck, enter=lambda md: flt.disable())  # the launch's CompiledLaunch dropped in the hook
    flt.enable()
    ck[(1, 1, 1)](x, y, 100, 64)
    run(ck, enter=lambda md: vars(ck).pop("_fastlaunch_launch", None))
    mid_call = launches() - before
    ok = (served == (9, 3, 3, 0, "CudaLauncher") and given_back == (3, "CompiledRun", True, "CudaLauncher", "CudaLauncher")
          and mid_call == 3)
    return ok, (served, given_back, mid_call)


def launched(entry, shapes):
    """(function, grid, argument bytes, hidden slots) of a logged launch, whichever way the
    arguments were passed (a parameter array's slots are logged 8 bytes each)."""
    from fldev.jit_fidelity import SIZES

    function, grid, used_params, raw = entry
    kinds, layout = shapes[function]
    if used_params:
        args = [raw[8 * j:8 * j + SIZES[k]] for j, k in enumerate(kinds)]
        hidden = [raw[8 * (len(kinds) + h):8 * (len(kinds) + h) + 8] for h in range(len(layout["hidden"]))]
    else:
        args = [raw[off:off + SIZES[k]] for off, k in zip(layout["args"], kinds)]
        hidden = [raw[off:off + 8] for off in layout["hidden"]]
    return function, grid, args, hidden


def run_one(call, stub, hook_calls, shapes):
    """(launches, the last one's settings, exception type or None, hook calls) of one call."""
    stub.state.stream = 0
    stub.log(8)
    del hook_calls[:]
    try:
        call()
        exc = None
    except Exception as e:  # noqa: BLE001  (compared by type)
        exc = type(e).__name__
    st = stub.state
    log = [launched(e, shapes) for e in stub.take_log()]
    last = (st.stream, tuple(st.block), st.shared, st.nattrs) if log else None  # the last launch's
    return log, last, exc, [(k, sorted(v.items()) if v is not None else None) for k, v in hook_calls]


def _fast_total(tc, kernels):
    return sum(tc.launch_of(k).counts()["fast"] for k in kernels if tc.launch_of(k) is not None)


def _reasons(tc, kernels):
    """Every stock reason the kernels' CompiledLaunch counted, added up."""
    out = {}
    for k in kernels:
        launch = tc.launch_of(k)
        for reason, n in (launch.counts().get("stock_reasons", {}) if launch is not None else {}).items():
            out[reason] = out.get(reason, 0) + n
    return out


def _with_hooks(triton, call, enter=None, exit=None, chain=()):
    """call() with plain enter / exit hooks set, or with (enter, exit) pairs added to Triton's hook
    chains (HookChain.add, as profilers do); everything as it was afterwards."""
    knobs = triton.knobs.runtime
    old = knobs.launch_enter_hook, knobs.launch_exit_hook
    if enter is not None:
        knobs.launch_enter_hook = enter
    if exit is not None:
        knobs.launch_exit_hook = exit
    for e, x in chain:
        knobs.launch_enter_hook.add(e)
        knobs.launch_exit_hook.add(x)
    try:
        call()
    finally:
        for e, x in chain:
            knobs.launch_enter_hook.remove(e)
            knobs.launch_exit_hook.remove(x)
        knobs.launch_enter_hook, knobs.launch_exit_hook = old


if __name__ == "__main__":
    sys.exit(main())
