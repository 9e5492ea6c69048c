"""Kernels that need global scratch (device-side tensor descriptors, `tl.make_tensor_descriptor`)
through a kept compiled kernel, fastlaunch against Triton alone on the stand-in driver: each call's
launch (function, grid, parameter bytes, the scratch buffer's address among them) and the calls
of the allocator Triton would call (triton.set_allocator's: size, alignment, stream, count) must be
the same; without an allocator, with one that raises, and with one whose buffer has no address,
the same error and nothing launched; with one that disables and enables fastlaunch, one that launches
the kernel again, and one that points an argument at other memory (`set_`: Triton's launcher reads the
arguments after the allocator), the same launches. Prints one JSON line.

    PYTHONPATH=tools python -m fldev.scratch_fidelity [CALLS] [SEED]
"""

from __future__ import annotations

import json
import random
import sys

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def _kernels(triton, tl):
    @triton.jit
    def copy2(a_ptr, b_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        a = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
        b = tl.make_tensor_descriptor(b_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
        pid = tl.program_id(0)
        b.store([pid * BLOCK_M, 0], a.load([pid * BLOCK_M, 0]))

    @triton.jit
    def copy1(a_ptr, b_ptr, N, BLOCK: tl.constexpr):
        a = tl.make_tensor_descriptor(a_ptr, shape=[N], strides=[1], block_shape=[BLOCK])
        b = tl.make_tensor_descriptor(b_ptr, shape=[N], strides=[1], block_shape=[BLOCK])
        pid = tl.program_id(0)
        b.store([pid * BLOCK], a.load([pid * BLOCK]))

    return copy1, copy2


def main(argv):
    calls = int(argv[0]) if argv else 2000
    rng = random.Random(int(argv[1]) if len(argv) > 1 else 20261207)
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import _allocation

    import fastlaunch.triton as flt
    from fastlaunch import triton_compiled as tc

    copy1, copy2 = _kernels(triton, tl)
    allocs = []
    pool = [torch.empty(1 << 16, dtype=torch.int8) for _ in range(3)]

    def allocator(size, align, stream):
        allocs.append((size, align, stream))
        return pool[len(allocs) % 3]

    def raising(size, align, stream):
        allocs.append(("raises", size))
        raise MemoryError("the allocator is out of memory")

    def toggles(size, align, stream):  # disables fastlaunch mid-call (its tables dropped), then enables it
        allocs.append(("toggles", size))
        from fastlaunch import triton_jit

        if triton_jit._state["enabled"]:
            flt.disable()
            flt.enable()
        return pool[0]

    def launches(size, align, stream):  # launches another kernel from inside the call
        allocs.append(("launches", size))
        inner = _allocation._allocator.set(allocator)  # the nested kernel needs scratch too
        try:
            ck, args = nested[0]  # the call's own kernel, once more (its parameters as recorded)
            ck[(1, 1, 1)](*args)
        finally:
            _allocation._allocator.reset(inner)
        return pool[1]

    def mutates(size, align, stream):  # points the call's first tensor at other memory: read after it
        allocs.append(("mutates", size))
        t = nested[0][1][0]
        t.set_(alt[t.dtype])
        return pool[2]

    def addressless(size, align, stream):
        allocs.append(("no address", size))
        return object()

    triton.set_allocator(allocator)
    null = getattr(_allocation, "_NULL_ALLOCATOR", None) or _allocation.NullAllocator()  # what "no allocator" is
    x = {dt: torch.zeros(256, 64, dtype=dt) for dt in (torch.float16, torch.float32)}
    y = {dt: torch.zeros(256, 64, dtype=dt) for dt in (torch.float16, torch.float32)}
    alt = {dt: torch.zeros(256, 64, dtype=dt) for dt in (torch.float16, torch.float32)}  # "mutates"' memory
    home = {dt: t.view_as(t) for dt, t in x.items()}  # x's own memory, put back after each call
    nested = [None]  # the kernel the "launches" allocator launches (a kept one, set below)
    kernels, jit_calls = [], {}  # each compiled kernel, and its kernel[grid] form
    for dt in (torch.float16, torch.float32):
        for bm, bn in ((16, 64), (64, 32)):
            kernels.append((copy2[(1,)](x[dt], y[dt], 256, 64, BLOCK_M=bm, BLOCK_N=bn), 2, dt))
            jit_calls[id(kernels[-1][0])] = (copy2, {"BLOCK_M": bm, "BLOCK_N": bn})
        kernels.append((copy1[(1,)](x[dt], y[dt], 256, BLOCK=64), 1, dt))
        jit_calls[id(kernels[-1][0])] = (copy1, {"BLOCK": 64})
    sizes = {1: [8, 8, 4, 8, 8], 2: [8, 8, 4, 4, 8, 8]}
    plan = []
    for i in range(calls):
        ck, rank, dt = rng.choice(kernels)
        grid = (rng.choice([0, 1, 3, 8, 100]), rng.choice([1, 2]), 1)
        how = rng.choices(["plain", "none", "raises", "addressless", "toggles", "launches", "mutates"],
                          [0.88, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02])[0]
        scalars = [rng.choice([16, 255, 256, 17])] * rank  # not 1: the JIT drops an int 1
        plan.append((ck, rank, dt, grid, scalars, how))

    def run_one(item, jit=False):
        ck, rank, dt, grid, scalars, how = item
        del allocs[:]
        token = _allocation._allocator.set({"plain": allocator, "raises": raising, "addressless": addressless,
                                            "toggles": toggles, "launches": launches, "mutates": mutates,
                                            "none": null}[how])
        nested[0] = (ck, (x[dt], y[dt], *scalars, *jit_calls[id(ck)][1].values()))
        stub.record(0, sizes[rank])
        before = stub.state.calls
        exc = None
        try:
            fn, consts = jit_calls[id(ck)]
            if jit:
                fn[grid](x[dt], y[dt], *scalars, **consts)
            else:  # every parameter, constexprs too: Triton 3.5's and 3.6's launchers take no fewer
                ck[grid](x[dt], y[dt], *scalars, *consts.values())
        except Exception as e:  # noqa: BLE001  (compared by type and message)
            exc = f"{type(e).__name__}: {e}"
        _allocation._allocator.reset(token)
        x[dt].set_(home[dt])
        launched = stub.state.calls - before
        return launched, exc, stub.param_bytes() if launched else b"", list(allocs)

    def counted(item, jit=False):
        """The call, and whether fastlaunch served it (its counter's object may be new: the "toggles"
        allocator disables and enables fastlaunch, which drops every launch and dispatcher)."""
        def fast():
            if jit:
                run = vars(jit_calls[id(item[0])][0]).get("run")
                return (id(run), dict(run.counts)["fast"]) if hasattr(run, "counts") else (None, 0)
            launch = tc.launch_of(item[0])
            return (id(launch), launch.counts()["fast"]) if launch is not None else (None, 0)
        before = fast()
        out = run_one(item, jit)
        after = fast()
        served_calls[0] += after[1] - (before[1] if after[0] == before[0] else 0) > 0
        return out

    served_calls = [0]
    flt.disable()
    triton_side = [run_one(item) for item in plan]
    flt.enable()
    fast_side = [counted(item) for item in plan]
    served, served_calls[0] = served_calls[0], 0
    for k, _, dt in kernels:  # each kernel's launch made now (the "toggles" allocator may have dropped it)
        if tc.launch_of(k) is None:
            tc._attach(k)
    reasons = [tc.launch_of(k).reason for k, _, _ in kernels]
    flt.disable()
    differ = [(item[5], a, b) for item, a, b in zip(plan, triton_side, fast_side) if a != b]
    # kernel[grid] of the same kernels: the JIT dispatcher's launches against Triton's JIT alone.
    jit_triton = [run_one(item, jit=True) for item in plan]
    flt.enable()
    for item in plan[:40]:
        run_one(item, jit=True)  # each variant's first call is Triton's (it compiles), made first
    jit_fast = [counted(item, jit=True) for item in plan]
    jit_served = served_calls[0]
    flt.disable()
    jit_differ = [(item[5], a, b) for item, a, b in zip(plan, jit_triton, jit_fast) if a != b]
    out = {"calls": len(plan), "differ": len(differ), "first_differ": [repr(d)[:400] for d in differ[:3]],
           "served": served, "raised": sum(1 for a in triton_side if a[1]),
           "allocator_calls": sum(len(a[3]) for a in triton_side), "plan_reasons": reasons,
           "scratch_sizes": sorted({int(k.metadata.global_scratch_size) for k, _, _ in kernels}),
           "jit": {"calls": len(plan), "differ": len(jit_differ), "first_differ": [repr(d)[:400] for d in jit_differ[:3]],
                   "served": jit_served}}
    print(json.dumps(out))
    return 0 if not differ and not jit_differ and served > 0 and jit_served > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
