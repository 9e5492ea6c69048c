"""FlagGems 5.0.2's ops through fastlaunch against Triton alone, on the stand-in driver (CPU tensors
standing in for device memory; torch.cuda's device questions answered as fla_fidelity answers
them, GEMS_VENDOR=nvidia, and FlagGems' own switch turning off the block pointers Triton 3.9
removed). Prints one JSON object.

    PYTHONPATH=tools python -m fldev.flaggems_fidelity

FlagGems wraps every kernel in its LibEntry: a key computed in Python, then on a cache hit the
kept CompiledKernel launched, `kernel[grid[0:3]](*args)` (src/python/triton/compiled.c serves it); on a
miss `self.fn.run(...)`. Three parts:
- fidelity: every `compiled[grid](*args)` the ops make, captured with Triton's own __getitem__,
  launched again through Triton alone and through fastlaunch: grid, block, shared memory, stream,
  function and argument bytes equal launch by launch;
- served: each op called again with fastlaunch, every launch of the repeat served (the kernels'
  CompiledLaunch fast counts against the stand-in's launches);
- timing, per op (median of repeats): Triton alone, fastlaunch, and FlagGems alone (its LibEntry
  and the op's wrapper with the launch itself a no-op: CompiledKernel.__getitem__ handing out a
  runner that does nothing).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import sys
import time

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def setup():
    os.environ.setdefault("GEMS_VENDOR", "nvidia")
    from fldev import cuda_stub, fla_fidelity

    stub = cuda_stub.load()
    import torch

    fla_fidelity.answer_for_cuda(torch)
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda device: None

    class _Device(contextlib.nullcontext):  # torch.cuda.device(x.device) around each launch
        def __init__(self, device=None):
            super().__init__()

    torch.cuda.device = _Device
    import flag_gems
    from flag_gems.runtime.common import vendors
    from flag_gems.utils import codegen_config_utils

    codegen_config_utils.CODEGEN_COFIGS[vendors.NVIDIA].prefer_block_pointer = False
    return stub, torch, flag_gems


def ops(torch):
    import flag_gems.ops as O

    g = torch.Generator().manual_seed(2026)
    x, y = torch.randn(4099, generator=g), torch.randn(4099, generator=g)
    m = torch.randn(33, 257, generator=g)
    w, b = torch.randn(257, generator=g), torch.randn(257, generator=g)
    return {
        "add": lambda: O.add(x, y), "mul": lambda: O.mul(x, y), "sub": lambda: O.sub(x, y, alpha=2),
        "exp": lambda: O.exp(x), "abs": lambda: O.abs(x), "relu": lambda: O.relu(x), "gelu": lambda: O.gelu(x),
        "silu": lambda: O.silu(x), "softmax": lambda: O.softmax(m, -1), "sum": lambda: O.sum(x),
        "sum over a dim": lambda: O.sum_dim(m, [1]), "mean": lambda: O.mean(x), "argmax": lambda: O.argmax(m, 1),
        "rms_norm": lambda: O.rms_norm(m, [257], w), "layer_norm": lambda: O.layer_norm(m, [257], w, b),
    }


def launch_of_call(stub, shapes, call):
    """The one launch `call` makes, as the stand-in recorded it (its full buffer or parameter
    array), read by the kernel's layout: (launches, grid, block, shared, stream, function, args)."""
    from fldev import jit_fidelity as jf

    st = stub.state
    calls0 = st.calls
    st.function = 0
    call()
    kinds, layout = shapes[st.function] if st.function in shapes else ((), {"args": [], "hidden": []})
    rec = jf.record(st)
    return (st.calls - calls0, rec["grid"], rec["block"], rec["shared"], rec["stream"], rec["function"],
            jf.arg_bytes(rec, kinds, layout))


def shapes_of(cks):
    from fastlaunch.triton_plan import abi_of, plan_from_compiled

    out = {}
    for ck in cks:
        ck._init_handles()
        out[int(ck.function)] = (abi_of(ck).kinds, plan_from_compiled(ck, backend="null", function=0).layout)
    return out


def main():
    stub, torch, flag_gems = setup()
    from triton.compiler.compiler import CompiledKernel

    import fastlaunch.triton as flt
    from fastlaunch import triton_compiled

    table = ops(torch)
    stock_getitem = CompiledKernel.__getitem__
    captured = []

    def capturing(self, grid):
        runner = stock_getitem(self, grid)

        def call(*args, **kwargs):
            captured.append((op_name[0], self, grid, args, kwargs))
            return runner(*args, **kwargs)
        return call

    op_name = [None]
    for name, op in table.items():  # compiles, tunes and fills LibEntry's caches: Triton alone
        op_name[0] = name
        op()
    CompiledKernel.__getitem__ = capturing
    try:
        for name, op in table.items():
            op_name[0] = name
            op()
    finally:
        CompiledKernel.__getitem__ = stock_getitem
    kernels = {id(c[1]): c[1] for c in captured}
    shapes = shapes_of(kernels.values())
    stub.record(max(len(k) + len(lay["hidden"]) for k, lay in shapes.values()))
    triton_side = [launch_of_call(stub, shapes, lambda: stock_getitem(ck, grid)(*args, **kwargs))
                   for _, ck, grid, args, kwargs in captured]
    flt.enable()
    differ = []
    for (name, ck, grid, args, kwargs), want in zip(captured, triton_side):
        got = launch_of_call(stub, shapes, lambda: ck[grid](*args, **kwargs))
        if got != want or got[0] != 1:
            differ.append(f"{name}: {ck.name}")
            if os.environ.get("FLDEV_SHOW"):
                print(name, args, want, got, sep="\n  ", file=sys.stderr)
    # Served: each op again, every launch of the repeat fastlaunch's.
    served = {}
    for name, op in table.items():
        before, calls0 = fast_total(triton_compiled, gc.get_objects()), stub.state.calls
        op()
        served[name] = (fast_total(triton_compiled, gc.get_objects()) - before, stub.state.calls - calls0)
    timing = time_ops(table, flt, CompiledKernel, stock_getitem)
    from fastlaunch import triton_jit
    from fldev import verify

    checks = verify.summary(triton_jit.sites())
    flt.disable()
    not_served = [f"{n}: {f} of {c}" for n, (f, c) in served.items() if f != c or c == 0]
    over = [n for n, t in timing.items() if t["fastlaunch"] > 1.10 * t["flaggems_alone"]]
    import triton

    print(json.dumps({"flag_gems": flag_gems.__version__, "triton": triton.__version__, "ops": len(table),
                      "kernels": len(kernels), "compiled_calls": len(captured),
                      "launches": sum(t[0] for t in triton_side), "differ": differ, "served": served,
                      "not_served": not_served, "timing_ns": timing, "over_10_percent": over, **checks}, indent=1))
    return 0 if not differ and not not_served and not checks["disagreements"] else 1


def fast_total(tc, objects):
    total = 0
    for o in objects:
        if type(o).__name__ == "CompiledKernel":
            launch = tc.launch_of(o)
            total += launch.counts()["fast"] if launch is not None else 0
    return total


def _ns(op, n=100):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        op()
    return (time.perf_counter_ns() - t0) / n


def time_ops(table, flt, CompiledKernel, stock_getitem, repeats=9):
    """ns per op call (medians of repeats, the three ways interleaved in each): fastlaunch, Triton
    alone, FlagGems alone (the launch a no-op)."""
    def nothing(*args, **kwargs):
        return None

    samples = {name: {"fastlaunch": [], "triton": [], "flaggems_alone": []} for name in table}
    for _ in range(repeats):
        for name, op in table.items():
            flt.enable()
            op()  # the kernels' CompiledLaunch made again (disable() dropped them)
            samples[name]["fastlaunch"].append(_ns(op))
            flt.disable()
            op()
            samples[name]["triton"].append(_ns(op))
            CompiledKernel.__getitem__ = lambda self, grid: nothing
            try:
                op()
                samples[name]["flaggems_alone"].append(_ns(op))
            finally:
                CompiledKernel.__getitem__ = stock_getitem
    flt.enable()
    return {n: {k: round(statistics.median(v), 1) for k, v in t.items()} for n, t in samples.items()}


if __name__ == "__main__":
    sys.exit(main())
