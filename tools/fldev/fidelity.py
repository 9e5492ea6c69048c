"""Bit-identical with the stock launcher: random launches of one Triton kernel taking every scalar
kind, each made twice over the stub driver (cuda_stub.c) -- through Triton's own launcher and
through a fastlaunch plan -- comparing every parameter byte, the grid, block, shared memory,
stream and launch attributes. A fastlaunch launch must give the driver exactly Triton's bytes, or
be refused before the boundary (the stock launcher then runs the call); it must never launch a
call that Triton refuses.

    PYTHONPATH=tools python -m fldev.fidelity [N] [SEED]     (prints a JSON summary; exit 1 on a mismatch)

Runs in a process of its own: the stub becomes that process's libcuda.
"""

from __future__ import annotations

import collections
import json
import math
import os
import random
import struct
import sys

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

KINDS = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
INT_RANGE = {"i1": (0, 1), "i8": (-2**7, 2**7 - 1), "i16": (-2**15, 2**15 - 1), "i32": (-2**31, 2**31 - 1),
             "i64": (-2**63, 2**63 - 1), "u8": (0, 2**8 - 1), "u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1),
             "u64": (0, 2**64 - 1)}


def int_value(rng, kind):
    lo, hi = INT_RANGE[kind]
    r = rng.random()
    if r < 0.6:
        return rng.randint(lo, hi)
    if r < 0.85:
        return rng.choice([lo, hi, 0, 1, -1 if lo < 0 else 0])
    if r < 0.98:
        return rng.choice([True, False])
    if r < 0.99:  # just outside the range: Triton wraps or raises, fastlaunch refuses
        return rng.choice([lo - 1, hi + 1, hi * 2 + 5, -hi - 7, 2**64, -2**63 - 1, 2**70])
    return rng.choice([2, -2, 3, 255, 256]) if kind == "i1" else rng.randint(lo, hi)


def half_midpoint(rng, bits):
    """A double exactly between two adjacent values of a 16-bit float format (a rounding tie)."""
    while True:
        b = rng.randrange(0, 0x7c00 if bits == "fp16" else 0x7f80)
        if bits == "fp16":
            a, c = struct.unpack("<e", struct.pack("<H", b))[0], struct.unpack("<e", struct.pack("<H", b + 1))[0]
        else:
            a = struct.unpack("<f", struct.pack("<I", b << 16))[0]
            c = struct.unpack("<f", struct.pack("<I", (b + 1) << 16))[0]
        if math.isfinite(a) and math.isfinite(c):
            return (a + c) / 2 * rng.choice([1, -1])


def float_value(rng, kind):
    r = rng.random()
    if r < 0.4:
        return rng.uniform(-1, 1) * 10 ** rng.randint(-10, 10)
    if r < 0.55 and kind in ("fp16", "bf16"):
        return half_midpoint(rng, kind)
    if r < 0.65:
        return rng.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 1.005859375, 65504.0, 65519.99, 6e-8,
                           2.98e-8, -1.0, 5e-324, 1e-40, 3.4e38])
    if r < 0.66:  # past a format's range: Triton raises (fp16) or gives inf, fastlaunch refuses
        return rng.choice([65520.0, 3.5e38, 1e308, -1e300])
    if r < 0.75:  # subnormals of each format
        return rng.choice([2**-24, 2**-25, 3 * 2**-26, 2**-133, 2**-149, 2**-150, 1e-310]) * rng.choice([1, -1])
    if r < 0.85:
        return rng.randint(-2**40, 2**40) if kind != "fp16" else rng.randint(-60000, 60000)  # ints are numbers
    if r < 0.9:
        return rng.choice([True, False, 2**64, -(2**70)]) if kind in ("fp32", "fp64") else rng.choice([True, False])
    return rng.uniform(-65000, 65000)


def value(rng, kind):
    return float_value(rng, kind) if kind.startswith(("fp", "bf")) else int_value(rng, kind)


def main(n=100_000, seed=2026):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import torch

    import triton_kernels as K
    from fastlaunch import FastLaunchError
    from fastlaunch.triton import plan_from_compiled

    signature = {"out_ptr": "*fp32", "b": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8",
                 "u16": "u16", "u32": "u32", "u64": "u64", "h": "fp16", "bh": "bf16", "f": "fp32", "d": "fp64"}
    ck = cuda_stub.compile(K.every_kind, signature)
    plan = plan_from_compiled(ck)  # the caller's grid, as Triton's launcher takes it
    layout = plan.layout
    sizes = [8] + [{"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8, "fp16": 2,
                    "bf16": 2, "fp32": 4, "fp64": 8}[k] for k in KINDS]
    nparams = 1 + len(KINDS) + len(layout["hidden"])
    out = torch.zeros(16)
    rng = random.Random(seed)
    st = stub.state
    stats = collections.Counter()
    refusals = collections.Counter()
    mismatches = []
    stub.record(nparams)
    for i in range(n):
        args = [out] + [value(rng, k) for k in KINDS]
        stream = rng.choice([0, 0x77, 2**63 + 5])
        grid = rng.randint(1, 70000)
        try:
            ck.run(grid, 1, 1, stream, ck.function, ck.packed_metadata, None, None, None, *args)
            triton_params = [bytes(st.params[j])[:sizes[j]] for j in range(1 + len(KINDS))]
            triton_hidden = [bytes(st.params[1 + len(KINDS) + h]) for h in range(len(layout["hidden"]))]
            triton_launch = (tuple(st.grid), tuple(st.block), st.shared, st.stream, st.nattrs)
            triton_ok = True
        except (OverflowError, TypeError, ValueError, SystemError) as exc:
            triton_ok = False
            triton_error = f"{type(exc).__name__}: {str(exc)[:120]}"
        calls = st.calls
        try:
            plan(*args, stream=stream, grid=(grid, 1, 1))
        except FastLaunchError as e:
            if e.backend_submitted:
                mismatches.append((i, "submitted_error", e.reason, args))
            refusals[e.reason.split(":")[0]] += 1
            stats["refused"] += 1
            if st.calls != calls:
                mismatches.append((i, "refused_but_launched", e.reason, args))
            continue
        if not triton_ok:
            if "unsigned byte integer is less than minimum" in triton_error and any(
                    isinstance(v, int) and v < 0 for v in (args[2],)):
                # Triton <= 3.6 parses i8 with PyArg_ParseTuple's "b", which refuses every negative
                # value: a defect of that launcher, not a value fastlaunch should refuse.
                stats["triton_refuses_negative_i8"] += 1
                continue
            stats["launched_where_triton_raises"] += 1
            mismatches.append((i, "launched_where_triton_raises", triton_error, repr(args[1:])))
            continue
        buf = bytes(st.buffer[:st.buffer_size])
        ours = [buf[off:off + size] for off, size in zip(layout["args"], sizes)]
        ours_hidden = [buf[off:off + 8] for off in layout["hidden"]]
        launch = (tuple(st.grid), tuple(st.block), st.shared, st.stream, st.nattrs)
        if ours != triton_params or ours_hidden != triton_hidden or launch != triton_launch:
            diff = [(KINDS[j - 1] if j else "ptr", repr(args[j]), triton_params[j].hex(), ours[j].hex())
                    for j in range(len(ours)) if ours[j] != triton_params[j]]
            mismatches.append((i, "bytes", diff or (launch, triton_launch), None))
        else:
            stats["identical"] += 1
    import triton

    result = {"triton": triton.__version__, "launches": n, "identical": stats["identical"],
              "refused_before_boundary": stats["refused"],
              "triton_refuses_negative_i8": stats["triton_refuses_negative_i8"],
              "refusal_reasons": dict(refusals), "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:300] for m in mismatches[:10]], "seed": seed}
    print(json.dumps(result, indent=1))
    return 0 if not mismatches and stats["identical"] + stats["triton_refuses_negative_i8"] > n // 2 else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
