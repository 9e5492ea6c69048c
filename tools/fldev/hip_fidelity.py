"""Bit-identical with Triton's own AMD launcher: random launches of one Triton kernel taking every
scalar kind, compiled for gfx942 (a real hsaco from Triton's wheel), each made twice over the
stand-in libamdhip64 (hip_stub.c) -- through Triton's launcher (its driver.c compiled against the
stand-in, a parameter array that the stand-in lays out as the kernarg segment by the hsaco's
metadata) and through a fastlaunch plan on the hip backend (the packed buffer) -- comparing the
segment byte for byte, the grid, block, LDS and stream. A fastlaunch launch must hand the runtime
exactly Triton's bytes, or be refused before the boundary; it must never launch a call Triton
refuses.

    PYTHONPATH=tools python -m fldev.hip_fidelity [N] [SEED]   (a JSON summary; exit 1 on a mismatch)

Runs in a process of its own: the stand-in becomes that process's libamdhip64.
"""

from __future__ import annotations

import collections
import json
import math
import os
import random
import sys

from fastlaunch import _C  # noqa: E402

from fldev.fidelity import KINDS, value

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def main(n=100_000, seed=2026):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
    from fldev import hip_stub

    stub = hip_stub.load()
    import torch
    import triton

    import triton_kernels as K
    from fastlaunch import FastLaunchError
    from fastlaunch.triton import plan_from_compiled

    signature = {"out_ptr": "*fp32", "b": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8",
                 "u16": "u16", "u32": "u32", "u64": "u64", "h": "fp16", "bh": "bf16", "f": "fp32", "d": "fp64"}
    ck = hip_stub.compile(K.every_kind, signature)
    ck._init_handles()
    plan = plan_from_compiled(ck, backend="hip")
    size, meta_args = stub.kernel_info(ck.asm["hsaco"], ck.name)
    layout_ok = [o for o, _ in meta_args] == plan.layout["args"] + plan.layout["hidden"] and plan.layout["size"] == size
    # A per-kernel generated AMD launcher (Triton 3.5's make_launcher) converts an fp16 argument
    # beyond the format's range without a check and crashes the process (later launchers raise
    # OverflowError): such a call is not handed to it; fastlaunch must still refuse it unlaunched.
    from triton.backends.amd import driver as amd_driver

    crashes_on_big_half = hasattr(amd_driver, "make_launcher")
    out = torch.zeros(16)
    rng = random.Random(seed)
    st = stub.state
    st.record = 1
    stats, refusals, mismatches = collections.Counter(), collections.Counter(), []
    for i in range(n):
        args = [out] + [value(rng, k) for k in KINDS]
        stream = rng.choice([0, hip_stub.STREAM, 2**63 + 5])
        grid = rng.randint(1, 70000)
        st.kernarg_size = 0
        try:
            h = args[1 + KINDS.index("fp16")]
            if crashes_on_big_half and math.isfinite(h) and abs(h) >= 65520:  # rounds past the largest half
                stats["not_given_to_tritons_launcher"] += 1
                raise OverflowError("fp16 out of range (not handed to this Triton's launcher, which crashes on it)")
            ck.run(grid, 1, 1, stream, ck.function, ck.packed_metadata, None, None, None, *args)
            theirs = (stub.kernarg(), tuple(st.grid), tuple(st.block), st.shared, st.stream, st.used_params)
            triton_ok = True
        except (OverflowError, TypeError, ValueError, SystemError, RuntimeError) as exc:
            triton_ok, triton_error = False, f"{type(exc).__name__}: {str(exc)[:120]}"
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
            if "unsigned byte integer is less than minimum" in triton_error and isinstance(args[2], int) and args[2] < 0:
                # Triton <= 3.6 parses i8 with PyArg_ParseTuple's "b", which refuses every negative
                # value: a defect of that launcher (as on CUDA), not a value fastlaunch should refuse.
                stats["triton_refuses_negative_i8"] += 1
                continue
            stats["launched_where_triton_raises"] += 1
            mismatches.append((i, "launched_where_triton_raises", triton_error, repr(args[1:])))
            continue
        ours = (stub.kernarg(), tuple(st.grid), tuple(st.block), st.shared, st.stream, st.used_params)
        # The one difference by design: Triton hands a parameter array, fastlaunch the packed segment.
        if ours[:5] != theirs[:5] or (theirs[5], ours[5]) != (1, 0):
            mismatches.append((i, "bytes", theirs[0].hex(), ours[0].hex(), theirs[1:], ours[1:], repr(args[1:])))
        else:
            stats["identical"] += 1
    result = {"triton": triton.__version__, "target": "hip gfx942", "launches": n, "identical": stats["identical"],
              "refused_before_boundary": stats["refused"], "refusal_reasons": dict(refusals),
              "layout_matches_metadata": layout_ok,
              "not_given_to_tritons_launcher": stats["not_given_to_tritons_launcher"],
              "triton_refuses_negative_i8": stats["triton_refuses_negative_i8"], "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:400] for m in mismatches[:10]], "seed": seed}
    print(json.dumps(result, indent=1))
    served = stats["identical"] + stats["triton_refuses_negative_i8"]
    return 0 if not mismatches and layout_ok and served > n // 3 else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
