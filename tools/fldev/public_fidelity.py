"""The JIT dispatcher against Triton's own JIT on kernels of a public project, called as that
project calls them: Liger-Kernel's forward (and some backward) ops, installed from PyPI by the test
set-up (`liger-kernel` in the Makefile's dependencies; never vendored here).

Each op runs on CPU tensors over the stand-in driver (cuda_stub.c), with random shapes and dtypes,
while a recorder on Triton's `KernelInterface.__getitem__` captures every `kernel[grid](*args,
**kwargs)` the op makes. Every captured call is then replayed as jit_fidelity does: through
Triton's own run, then through `kernel[grid](...)` with fastlaunch enabled, twice (the first call of
a variant goes to Triton, the second is the fast path). Both must hand the driver the same bytes.

    PYTHONPATH=tools python -m fldev.public_fidelity [ROUNDS] [SEED] [cuda|hip]   (JSON; exit 1 on a mismatch)

With `hip` the ops' kernels compile for gfx942 and run over the stand-in libamdhip64 with Triton's
own AMD driver (jit_fidelity's HipSide).

fla-core (flash-linear-attention) has its own run, fldev.fla_fidelity (its import asks torch's CUDA
runtime about the device, which that process answers for it).
"""

from __future__ import annotations

import collections
import json
import os
import random
import sys

from fastlaunch import _C  # noqa: E402
from fldev import verify

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def ops(torch, rng):
    """name -> a function running one Liger op with random shapes (all forward unless named)."""
    from liger_kernel.ops import (cross_entropy, dyt, fused_add_rms_norm, geglu, group_norm, jsd, kl_div,
                                  layer_norm, poly_norm, relu_squared, rms_norm, rope, softmax, swiglu, tvd)

    def rows():
        return rng.choice([1, 3, 8, 17])

    def cols():
        return rng.choice([64, 100, 256, 1000])

    def dt():
        return rng.choice([torch.float32, torch.float32, torch.float16, torch.bfloat16])

    def x2(dtype=None):
        return torch.randn(rows(), cols(), dtype=dtype or dt())

    def rms():
        x = x2()
        rms_norm.rms_norm_forward(x, torch.randn(x.shape[1], dtype=x.dtype), 1e-6, rng.choice([0.0, 1.0]),
                                  rng.choice(["llama", "gemma", "none"]), None)

    def ln():
        x = x2()
        layer_norm.layer_norm_forward(x, torch.randn(x.shape[1], dtype=x.dtype), torch.randn(x.shape[1], dtype=x.dtype),
                                      1e-6)

    def glu(mod, fwd, bwd):
        def run():
            a = x2()
            b = torch.randn_like(a)
            getattr(mod, fwd)(a, b)
            if rng.random() < 0.5:
                getattr(mod, bwd)(a, b, torch.randn_like(a))
        return run

    def ce():
        x = x2(torch.float32)
        cross_entropy.cross_entropy_forward(x, torch.randint(0, x.shape[1], (x.shape[0],)), None, -100, 0.0,
                                            rng.choice([0.0, 0.1]), rng.choice(["mean", "sum"]), None, False)

    def kld():
        x = x2(torch.float32)
        kl_div.kldiv_forward_triton(x, torch.randn_like(x), rng.choice([False, True]), "batchmean", 1e-10)

    def js():
        x = x2(torch.float32)
        jsd.jsd_forward(x.log_softmax(-1), torch.randn_like(x).log_softmax(-1), None, rng.choice([0.5, 0.1]), -100,
                        False)

    def rp():
        h, s, d = rng.choice([2, 4]), rng.choice([8, 16]), rng.choice([64, 128])
        q, k = torch.randn(1, h, s, d), torch.randn(1, h, s, d)
        rope.rope_forward(q, k, torch.randn(1, s, d), torch.randn(1, s, d))

    def gn():
        c, g = rng.choice([(8, 2), (16, 4)])
        group_norm.group_norm_forward(torch.randn(2, c, rng.choice([16, 32])), c, g, torch.randn(c), torch.randn(c), 1e-6)

    def farms():
        x = x2()
        fused_add_rms_norm.fused_add_rms_norm_forward(x, torch.randn_like(x), torch.randn(x.shape[1], dtype=x.dtype),
                                                      1e-6, 0.0, "llama")

    def pn():
        x = x2(torch.float32)
        poly_norm.poly_norm_forward(x, torch.randn(3), torch.randn(1), 1e-6)

    def tv():
        x = x2(torch.float32)
        tvd.tv_distance_forward_triton(x.softmax(-1), torch.randn_like(x).softmax(-1), None, "batchmean", -100, False)

    def dy():
        x = x2(torch.float32)
        dyt.liger_dyt_fwd(x, torch.tensor([0.5]), torch.randn(x.shape[1]), torch.randn(x.shape[1]))

    return {"rms_norm": rms, "layer_norm": ln, "swiglu": glu(swiglu, "swiglu_forward", "swiglu_backward"),
            "geglu": glu(geglu, "geglu_forward", "geglu_backward"),
            "softmax": lambda: softmax._softmax_forward(x2()), "cross_entropy": ce, "kl_div": kld, "jsd": js,
            "rope": rp, "group_norm": gn, "fused_add_rms_norm": farms, "poly_norm": pn, "tvd": tv,
            "relu_squared": lambda: relu_squared.relu_squared_forward(x2()), "dyt (autotuned)": dy}


def capture(torch, rng, rounds):
    """Runs every op `rounds` times with Triton's own dispatch, recording each kernel[grid] call."""
    from triton.runtime.jit import KernelInterface

    calls = []
    stock = KernelInterface.__getitem__

    def recording(self, grid):
        def call(*args, **kwargs):
            calls.append((self, grid, args, kwargs))
            return stock(self, grid)(*args, **kwargs)
        return call

    KernelInterface.__getitem__ = recording
    try:
        table = ops(torch, rng)
        for _ in range(rounds):
            for name, op in table.items():
                op()
    finally:
        KernelInterface.__getitem__ = stock
    return calls


def main(rounds=12, seed=2026, target="cuda"):
    from fldev.jit_fidelity import CudaSide, HipSide, compare_call

    side = HipSide() if target == "hip" else CudaSide()
    import torch
    import triton

    import fastlaunch.triton as flt
    from fastlaunch import triton_jit

    rng = random.Random(seed)
    torch.manual_seed(seed)
    if target == "hip":
        # Liger asks torch whether it runs on ROCm (torch.version.hip) to size its blocks for 64-lane
        # wavefronts: answered as torch's ROCm build answers, for this process.
        torch.version.hip = torch.version.hip or "7.2.0"
    calls = capture(torch, rng, rounds)
    kernels = {}
    for fn, *_ in calls:
        base = getattr(fn, "base_fn", None) or getattr(fn, "fn", fn)
        kernels[getattr(base, "__name__", repr(base))] = f"{type(fn).__module__}.{type(fn).__name__}"
    flt.enable()
    stats = collections.Counter()
    mismatches, layouts = [], {}
    for i, (fn, grid, args, kwargs) in enumerate(calls):
        for _ in range(2):  # the first call of a variant goes to Triton; the second is the fast path
            compare_call(side, i, fn, args, kwargs, grid, layouts, stats, mismatches)
    sites = {n: c for n, c in triton_jit.sites()}
    flt.disable()
    result = {"project": "liger-kernel", "target": side.abi, "triton": triton.__version__, "torch": torch.__version__,
              "kernels": len(kernels), "kernel_names": sorted(kernels), "captured_calls": len(calls),
              "compared": 2 * len(calls), "identical": stats["identical"], "fast": stats["fast"],
              "through_triton": stats["through_triton"], "raised_by_both": stats["raised_by_both"],
              "variants": len(layouts), "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:400] for m in mismatches[:10]], "seed": seed,
              "sites": sites, **verify.summary(sites)}
    print(json.dumps(result, indent=1, default=str))
    return 0 if not mismatches and stats["fast"] >= len(calls) // 2 and not result["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4]))
