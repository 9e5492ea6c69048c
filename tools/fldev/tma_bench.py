"""Tensor descriptors and global scratch on the stand-in driver (cuda-stub), each mode n calls in a
C loop (the kernel subscripted each call, as `kernel[grid](...)` is written), medians of repeats,
side by side in one process; part of `make bench` (stub_bench.run), rows under the backend
`cuda-stub-tma`:

  triton-tma         kernel[grid](a_desc, b_desc, M, N) through Triton alone (2 host-side descriptors
                     + 2 ints, sm_90), the same descriptors met again each call
  fastlaunch-tma     the same call with fastlaunch.triton.enable()
  fastlaunch-jit     kernel[grid](x, y, M, N) of a 2-pointer + 2-int kernel with fastlaunch
  triton-scratch     kernel[grid](x, y, M, N) of a kernel with global scratch (device-side
                     descriptors), a torch allocator set with triton.set_allocator: Triton alone
  fastlaunch-scratch the same with fastlaunch
  allocator          that allocator alone, called from C with a launch's arguments

    PYTHONPATH=tools python -m fldev.tma_bench [--quick]

Prints the rows and issue 40's lines: triton-tma / fastlaunch-tma >= 20x; fastlaunch-tma <=
fastlaunch-jit + 150 ns per descriptor, with 0 encode calls on a memo hit (the stand-in's count);
fastlaunch-scratch <= (fastlaunch-jit + allocator) x 1.10.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

BACKEND = "cuda-stub-tma"
CASE = "2 descriptors + 2 ints"
MODES = ("triton-tma", "fastlaunch-tma", "fastlaunch-jit", "triton-scratch", "fastlaunch-scratch", "allocator")
SOURCE = '''import triton
import triton.language as tl


@triton.jit
def tma(a_desc, b_desc, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    b_desc.store([pid * BLOCK, 0], a_desc.load([pid * BLOCK, 0]))


@triton.jit
def ptrs(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < M * N), mask=offs < M * N)


@triton.jit
def scratch(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):
    a = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    b = tl.make_tensor_descriptor(b_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    b.store([0, 0], a.load([0, 0]))
'''


def _module(directory, tag):
    from fldev.stub_bench import module_from_source

    return module_from_source(directory, f"tma_bench_{tag}", SOURCE)


def _setup(stub=None):
    """The kernels bound, the stand-in loaded: (calls, allocator, its arguments, encodes on a memo
    hit, the served kernels)."""
    from fastlaunch import _C

    _C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)
    if stub is None:
        from fldev import cuda_stub

        stub = cuda_stub.load()
        stub.count_only()
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    import fastlaunch.triton as flt

    directory = tempfile.mkdtemp(prefix="fl-tma-bench-")
    mine, theirs = _module(directory, "fl"), _module(directory, "stock")
    for k in (theirs.tma, theirs.scratch):
        flt.exclude(k)  # Triton alone
    x = torch.zeros(256, 64, dtype=torch.float16)
    y = torch.zeros(256, 64, dtype=torch.float16)
    da, db = TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64])

    def allocator(size, align, stream):  # what users set: torch's caching allocator behind it
        return torch.empty(size, dtype=torch.int8)

    triton.set_allocator(allocator)  # left set: the bench's process ends after these rows
    flt.enable()
    grid, desc_args, ptr_args = (4,), (da, db, 256, 64), (x, y, 256, 64)
    calls = {
        "triton-tma": (theirs.tma, grid, desc_args, {"BLOCK": 64}),
        "fastlaunch-tma": (mine.tma, grid, desc_args, {"BLOCK": 64}),
        "fastlaunch-jit": (mine.ptrs, grid, ptr_args, {"BLOCK": 64}),
        "triton-scratch": (theirs.scratch, grid, ptr_args, {"BLOCK": 32}),
        "fastlaunch-scratch": (mine.scratch, grid, ptr_args, {"BLOCK": 32}),
    }
    for k, g, a, kw in calls.values():
        for _ in range(3):
            k[g](*a, **kw)  # compile, bind
    enc0 = stub.state.tmap_calls
    mine.tma[grid](*desc_args, BLOCK=64)
    memo_encodes = stub.state.tmap_calls - enc0
    seen = []  # the arguments a launch gives the allocator, for timing it alone
    triton.set_allocator(lambda s, al, st: seen.append((s, al, st)) or allocator(s, al, st))
    mine.scratch[grid](*ptr_args, BLOCK=32)
    triton.set_allocator(allocator)
    return calls, allocator, seen[0], memo_encodes, mine


def _loop(calls, allocator, alloc_args, mode, n):
    from fastlaunch import _C

    if mode == "allocator":
        return _C.bench_loop(allocator, alloc_args, {}, n)
    k, g, a, kw = calls[mode]
    return _C.bench_subscript_loop(k, g, a, kw, n)


def run_one(mode, n):
    """One mode, n calls in the C loop (the callgrind child: fldev bench --_one cuda-stub-tma ...)."""
    calls, allocator, alloc_args, _, _ = _setup()
    _loop(calls, allocator, alloc_args, mode, 50)  # warm-up outside the counted loop
    _loop(calls, allocator, alloc_args, mode, n)


def rows(quick=False, stub=None):
    """The modes' rows (bench.json's form): medians of repeats of a C loop of calls."""
    import fastlaunch.triton as flt

    calls, allocator, alloc_args, memo_encodes, mine = _setup(stub)
    repeats, n = (5, 2000) if quick else (9, 5000)
    samples = {m: [] for m in MODES}
    for _ in range(repeats):
        for m in MODES:
            nm = max(200, n // 20) if m.startswith("triton-") else n
            samples[m].append(_loop(calls, allocator, alloc_args, m, nm) / nm)
    counts = {m: dict(k.run.counts) for m, k in (("fastlaunch-tma", mine.tma), ("fastlaunch-scratch", mine.scratch))}
    flt.disable()
    out = []
    for m in MODES:
        r = {"backend": BACKEND, "case": CASE, "mode": m, "ns_median": round(statistics.median(samples[m]), 1),
             "ns_min": round(min(samples[m]), 1), "repeats": repeats, "iterations": n, "pointer_args": "torch tensors"}
        if m in counts:
            r["memo"] = counts[m]["memo"]
        if m == "fastlaunch-tma":
            r["memo_encodes"] = memo_encodes
        if m == "fastlaunch-scratch":
            r["scratch_bytes"] = alloc_args[0]
        out.append(r)
    return out


def lines(table):
    """(sentence, met) for issue 40's lines, from rows keyed (backend, case, mode)."""
    get = {m: table.get((BACKEND, CASE, m)) for m in MODES}
    if any(v is None for v in get.values()):
        return []
    ns = {m: r["ns_median"] for m, r in get.items()}
    r = ns["triton-tma"] / ns["fastlaunch-tma"]
    out = [(f"{BACKEND}, {CASE}: triton-tma >= 20x fastlaunch-tma: {r:.2f}x", r >= 20)]
    extra = ns["fastlaunch-tma"] - ns["fastlaunch-jit"]
    enc = get["fastlaunch-tma"].get("memo_encodes")
    out.append((f"{BACKEND}, {CASE}: fastlaunch-tma <= fastlaunch-jit (2 pointers + 2 ints) + 150 ns per descriptor, "
                f"0 encodes on a memo hit: {ns['fastlaunch-tma']:.1f} - {ns['fastlaunch-jit']:.1f} = {extra:.1f} ns for "
                f"2 descriptors, {enc} encodes", extra <= 300 and enc == 0))
    ins = {m: get[m].get("instructions") for m in ("fastlaunch-scratch", "fastlaunch-jit", "allocator")}
    if all(ins.values()):  # a torch allocator's time varies more than 10% run to run: its instructions do not
        what, v, unit = "in instructions", ins, ""
    else:
        what, v, unit = "in time (no instruction count)", ns, " ns"
    bound = (v["fastlaunch-jit"] + v["allocator"]) * 1.10
    r = v["fastlaunch-scratch"] / (v["fastlaunch-jit"] + v["allocator"])
    out.append((f"{BACKEND}, {CASE}: fastlaunch-scratch <= (fastlaunch-jit + allocator) x 1.10 {what}, torch.empty "
                f"behind the allocator: {v['fastlaunch-scratch']:,.0f}{unit} against {bound:,.0f}{unit} ({r:.3f}x of jit "
                f"+ allocator; {ns['fastlaunch-scratch']:.1f} ns, {ns['fastlaunch-jit']:.1f} + {ns['allocator']:.1f} ns "
                f"in time)", v["fastlaunch-scratch"] <= bound))
    return out


def main(argv):
    result = rows(quick="--quick" in argv)
    table = {(r["backend"], r["case"], r["mode"]): r for r in result}
    for r in result:
        print(f"  {r['mode']:20s} {r['ns_median']:10.1f} ns")
    for text, met in lines(table):
        print(f"  {'met' if met else 'MISSED'}: {text}")
    return 0 if all(m for _, m in lines(table)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
