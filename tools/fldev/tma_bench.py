"""Tensor descriptors and global scratch on the stand-in driver, per call from a Python loop (median
of repeats, ns), side by side in one process:

  triton-tma        kernel[grid](a_desc, b_desc, M, N) through Triton alone (2 host-side descriptors
                    + 2 ints, sm_90), the descriptors met again each call
  fastlaunch-tma    the same call with fastlaunch.triton.enable()
  fastlaunch-jit    kernel[grid](x, y, M, N) of a 2-pointer + 2-int kernel with fastlaunch
  triton-scratch    kernel[grid](x, y, M, N) of a kernel with global scratch (device-side
                    descriptors), triton.set_allocator's allocator set, through Triton alone
  fastlaunch-scratch the same with fastlaunch
  allocator         the allocator alone, called as a launch calls it

    PYTHONPATH=tools python -m fldev.tma_bench [CALLS] [REPEATS]

Prints the table and the lines of issue 40 it measures: triton-tma / fastlaunch-tma >= 20x;
fastlaunch-tma <= fastlaunch-jit + 150 ns per descriptor, with 0 encodes on the memo's hits;
fastlaunch-scratch <= (fastlaunch-jit + allocator) x 1.10. Not make bench's: a loop in Python.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from fastlaunch import _C

_C.accept_host_memory()


def _time(fn, calls, repeats):
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / calls)
    return statistics.median(out)


def main(argv):
    calls = int(argv[0]) if argv else 2000
    repeats = int(argv[1]) if len(argv) > 1 else 7
    from fldev import cuda_stub

    stub = cuda_stub.load()
    stub.count_only()
    import torch
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    import fastlaunch.triton as flt

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

    x = torch.zeros(256, 64, dtype=torch.float16)
    y = torch.zeros(256, 64, dtype=torch.float16)
    da, db = TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64])
    buf = torch.empty(1 << 16, dtype=torch.int8)

    def allocator(size, align, stream):
        return buf

    triton.set_allocator(allocator)
    excluded = {name: triton.jit(f.fn) for name, f in (("tma", tma), ("scratch", scratch))}
    for f in excluded.values():
        flt.exclude(f)
    flt.enable()
    modes = {
        "triton-tma": lambda: excluded["tma"][(4,)](da, db, 256, 64, BLOCK=64),
        "fastlaunch-tma": lambda: tma[(4,)](da, db, 256, 64, BLOCK=64),
        "fastlaunch-jit": lambda: ptrs[(4,)](x, y, 256, 64, BLOCK=64),
        "triton-scratch": lambda: excluded["scratch"][(4,)](x, y, 256, 64, BLOCK=32),
        "fastlaunch-scratch": lambda: scratch[(4,)](x, y, 256, 64, BLOCK=32),
        "allocator": lambda: allocator(4 * 256, 128, 0x7F3A5C001230),
    }
    for fn in modes.values():
        for _ in range(3):
            fn()  # compile, bind
    enc0 = stub.state.tmap_calls
    modes["fastlaunch-tma"]()
    memo_encodes = stub.state.tmap_calls - enc0
    ns = {m: _time(fn, calls, repeats) for m, fn in modes.items()}
    served = {"fastlaunch-tma": dict(tma.run.counts)["fast"], "fastlaunch-jit": dict(ptrs.run.counts)["fast"],
              "fastlaunch-scratch": dict(scratch.run.counts)["fast"]}
    flt.disable()
    lines = [
        ("triton-tma / fastlaunch-tma >= 20x", ns["triton-tma"] / ns["fastlaunch-tma"], ns["triton-tma"] / ns["fastlaunch-tma"] >= 20),
        ("fastlaunch-tma - fastlaunch-jit <= 150 ns per descriptor (2)", ns["fastlaunch-tma"] - ns["fastlaunch-jit"],
         ns["fastlaunch-tma"] - ns["fastlaunch-jit"] <= 300),
        ("encode calls on a memo hit == 0", memo_encodes, memo_encodes == 0),
        ("fastlaunch-scratch <= (fastlaunch-jit + allocator) x 1.10",
         ns["fastlaunch-scratch"] / (ns["fastlaunch-jit"] + ns["allocator"]),
         ns["fastlaunch-scratch"] <= 1.10 * (ns["fastlaunch-jit"] + ns["allocator"])),
    ]
    for m, v in ns.items():
        print(f"  {m:20s} {v:10.1f} ns")
    for text, value, met in lines:
        print(f"  {text}: {value:.2f} ({'met' if met else 'missed'})")
    print(json.dumps({"ns": ns, "served": served, "memo_encodes": memo_encodes,
                      "lines": [[t, v, m] for t, v, m in lines]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
