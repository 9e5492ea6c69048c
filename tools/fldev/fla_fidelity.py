"""The JIT dispatcher against Triton's own on flash-linear-attention's kernels, called as fla calls
them: fla-core from PyPI (installed by the test set-up; never vendored here), its forward ops run on
CPU tensors over the stand-in driver (cuda_stub.c).

fla's import asks torch's CUDA runtime about the device (fla/utils/hardware.py), which cannot answer
without a driver: this process answers for it, before fla is imported, with what an H100 reports
(torch.cuda.get_device_properties, through which get_device_name and get_device_capability answer
too, and device_count). fla's code is imported as installed.

Every `kernel[grid](*args, **kwargs)` the ops make is recorded with Triton alone, with the launch it
made (grid, block, argument bytes, the variant); then fastlaunch is enabled and each recorded call is
made again, twice: the same launch, the same variant returned, the same best_config. Most fla
kernels are `@triton.heuristics({...: lambda args: args[x] is not None})` over `fla_cache_autotune`
(CachedAutotuner, an Autotuner subclass whose run builds a key and calls super().run) or
`@triton.autotune`, over `@triton.jit(do_not_specialize=[...])`.

    PYTHONPATH=tools python -m fldev.fla_fidelity [ROUNDS] [SEED]   (JSON; exit 1 on a mismatch)
"""

from __future__ import annotations

import collections
import json
import os
import random
import statistics
import sys
import time

os.environ.setdefault("FLA_CACHE_MODE", "disabled")  # CachedAutotuner reads no config file
os.environ.setdefault("FLA_CACHE_RESULTS", "0")  # Triton's autotune cache: nothing read or written

from fastlaunch import _C  # noqa: E402
from fldev import verify  # noqa: E402

_C.accept_host_memory()


class _H100:
    """What torch.cuda.get_device_properties says of one H100 (the fields fla reads)."""
    name = "NVIDIA H100 80GB HBM3"
    major, minor = 9, 0
    multi_processor_count = 132
    shared_memory_per_block = 49152
    shared_memory_per_block_optin = 232448
    total_memory = 80 * 2**30
    warp_size = 32


def answer_for_cuda(torch):
    torch.cuda.get_device_properties = lambda device=None: _H100
    torch.cuda.device_count = lambda: 1


def ops(torch, rng):
    """name -> one fla forward op with random shapes (kernels whose configs compile in minutes)."""
    import torch.nn.functional as F

    from fla.ops.delta_rule import fused_recurrent_delta_rule
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    from fla.ops.gla import fused_recurrent_gla
    from fla.ops.hgrn import fused_recurrent_hgrn
    from fla.ops.kda import fused_recurrent_kda
    from fla.ops.simple_gla import fused_recurrent_simple_gla
    from fla.modules.causal_conv1d.ops import causal_conv1d_fwd
    from fla.ops.gated_delta_rule.gate import gdn_gate_chunk_cumsum
    from fla.ops.kda.gate import kda_gate_chunk_cumsum
    from fla.ops.utils import chunk_local_cumsum, logsumexp_fwd, mean_pooling, softmax_fwd, solve_tril

    K = V = 64

    def shape():
        return rng.choice([1, 2]), rng.choice([64, 128]), rng.choice([2, 4])

    def qkv(dtype):
        B, T, H = shape()
        q, k, v = (torch.randn(B, T, H, d, dtype=dtype) for d in (K, K, V))
        return B, T, H, q, F.normalize(k.float(), dim=-1).to(dtype), v

    def dt():
        return rng.choice([torch.float32, torch.bfloat16])

    def varlen(B, T):
        if B != 1 or rng.random() < 0.5:
            return None
        return torch.tensor([0, rng.choice([16, T // 2]), T], dtype=torch.int32)

    def state(B, H):
        return (torch.randn(B, H, K, V) if rng.random() < 0.5 else None), rng.random() < 0.5

    def fr_gla():
        d = dt()
        B, T, H, q, k, v = qkv(d)
        h0, final = state(B, H)
        fused_recurrent_gla(q, k, v, F.logsigmoid(torch.randn(B, T, H, K)).to(d), initial_state=h0,
                            output_final_state=final)

    def fr_sgla():
        d = dt()
        B, T, H, q, k, v = qkv(d)
        fused_recurrent_simple_gla(q, k, v, F.logsigmoid(torch.randn(B, T, H)), output_final_state=rng.random() < .5)

    def fr_delta():
        d = dt()
        B, T, H, q, k, v = qkv(d)
        fused_recurrent_delta_rule(q, k, v, torch.rand(B, T, H, dtype=d), output_final_state=rng.random() < .5)

    def fr_gdn():
        d = dt()
        B, T, H, q, k, v = qkv(d)
        h0, final = state(B, H)
        fused_recurrent_gated_delta_rule(q, k, v, F.logsigmoid(torch.randn(B, T, H)), beta=torch.rand(B, T, H, dtype=d),
                                         initial_state=h0, output_final_state=final)

    def fr_kda():
        d = dt()
        B, T, H, q, k, v = qkv(d)
        fused_recurrent_kda(q, k, v, F.logsigmoid(torch.randn(B, T, H, K)), torch.rand(B, T, H, dtype=d),
                            output_final_state=rng.random() < .5)

    def hgrn():
        B, T, H = shape()
        fused_recurrent_hgrn(torch.randn(B, T, H * 64), F.logsigmoid(torch.randn(B, T, H * 64)),
                             output_final_state=rng.random() < .5)

    def cumsum():
        B, T, H = shape()
        g = torch.randn(B, T, H) if rng.random() < 0.5 else torch.randn(B, T, H, K)
        chunk_local_cumsum(g, chunk_size=64, reverse=rng.random() < .5, cu_seqlens=varlen(B, T))

    def gates():
        B, T, H = shape()
        cu = varlen(B, T)
        gdn_gate_chunk_cumsum(torch.randn(B, T, H), torch.randn(H), 64, scale=rng.choice([None, 0.5]),
                              dt_bias=torch.randn(H) if rng.random() < .5 else None, cu_seqlens=cu)
        kda_gate_chunk_cumsum(torch.randn(B, T, H, K), torch.randn(H), 64, dt_bias=torch.randn(H * K) if rng.random() < .5
                              else None, cu_seqlens=cu)

    def conv():
        B, T, H = shape()
        D, W = H * 32, rng.choice([3, 4])
        x = torch.randn(B, T, D)
        causal_conv1d_fwd(x, torch.randn(D, W), torch.randn(D) if rng.random() < .5 else None,
                          torch.randn(B, T, D) if rng.random() < .5 else None, activation=rng.choice([None, "silu"]),
                          cu_seqlens=varlen(B, T))

    def tril():
        B, T, H = shape()
        A = torch.randn(B, T, H, rng.choice([16, 32, 64])).tril(-1)
        solve_tril(A, cu_seqlens=varlen(B, T))

    def misc():
        x = torch.randn(rng.choice([3, 8, 17]), rng.choice([64, 128]))
        softmax_fwd(x)
        logsumexp_fwd(x)
        B, T, H = shape()
        mean_pooling(torch.randn(B, T, H, K), chunk_size=rng.choice([16, 64]))

    return {"fused_recurrent_gla": fr_gla, "fused_recurrent_simple_gla": fr_sgla, "fused_recurrent_delta_rule": fr_delta,
            "fused_recurrent_gated_delta_rule": fr_gdn, "fused_recurrent_kda": fr_kda, "fused_recurrent_hgrn": hgrn,
            "chunk_local_cumsum": cumsum, "gdn/kda gate cumsum": gates, "causal_conv1d": conv, "solve_tril": tril, "softmax/logsumexp/mean_pooling": misc}


def normal(rec, kernel, layouts):
    """A launch record with its argument bytes read by the variant's layout."""
    import fastlaunch
    from fastlaunch.triton import abi_of
    from fldev import jit_fidelity as jf

    if id(kernel) not in layouts:
        abi = abi_of(kernel)
        layouts[id(kernel)] = (kernel, abi.kinds, fastlaunch.layout("cuda", abi.kinds, hidden_ptrs=abi.hidden_ptrs))
    _, kinds, layout = layouts[id(kernel)]
    args, hidden = jf.arg_bytes(rec, kinds, layout)
    return rec["grid"], rec["block"], rec["shared"], rec["stream"], rec["function"], tuple(args), tuple(hidden)


def nparams(kernel, layouts):
    normal({"used_params": 0, "buffer": b"", "params": [], "grid": 0, "block": 0, "shared": 0, "stream": 0,
            "function": 0}, kernel, layouts)
    _, kinds, layout = layouts[id(kernel)]
    return len(kinds) + len(layout["hidden"])


def best_of(k):
    while k is not None:
        if hasattr(k, "best_config"):
            c = k.best_config
            return None if c is None else (tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages)
        k = getattr(k, "fn", None)
    return None


def stack_of(fn):
    out = []
    while fn is not None:
        out.append(type(fn).__name__)
        fn = getattr(fn, "fn", None) if not type(fn).__name__ == "JITFunction" else None
    return ">".join(out)


def main(rounds=2, seed=2026):
    from fldev import cuda_stub
    from fldev import jit_fidelity as jf

    stub = cuda_stub.load()
    import torch
    import triton
    from triton.runtime.jit import KernelInterface

    answer_for_cuda(torch)
    import fastlaunch.triton as flt
    from fastlaunch import triton_jit

    rng = random.Random(seed)
    torch.manual_seed(seed)
    calls, layouts = [], {}
    stock = KernelInterface.__getitem__

    def recording(self, grid):
        def call(*args, **kwargs):
            calls.append((self, grid, args, kwargs))
            return stock(self, grid)(*args, **kwargs)
        return call

    KernelInterface.__getitem__ = recording
    try:
        table = ops(torch, rng)
        with torch.no_grad():
            for _ in range(rounds):
                for op in table.values():
                    op()
    finally:
        KernelInterface.__getitem__ = stock
    # Each call again through Triton alone, its variant now known (and tuned): the launch recorded
    # with as many parameters as the variant's launch passes (the stand-in driver copies that many).
    for i, (fn, grid, args, kwargs) in enumerate(calls):
        r = stock(fn, grid)(*args, **kwargs)
        stub.record(nparams(r, layouts))
        r = stock(fn, grid)(*args, **kwargs)
        calls[i] = (fn, grid, args, kwargs, r, normal(jf.record(stub.state), r, layouts), best_of(fn))
    flt.enable()
    stats, mismatches, kernels = collections.Counter(), [], {}
    for i, (fn, grid, args, kwargs, r0, rec0, best0) in enumerate(calls):
        name = getattr(getattr(fn, "base_fn", None) or fn, "__name__", None) or stack_of(fn)
        kernels.setdefault(jf_name(fn), stack_of(fn))
        for _ in range(2):  # the first call of a variant goes to Triton; the second is the fast path
            stub.record(nparams(r0, layouts))
            try:
                r = fn[grid](*args, **kwargs)
                rec = normal(jf.record(stub.state), r, layouts)
            except Exception as exc:  # noqa: BLE001
                mismatches.append((i, name, "raised", f"{type(exc).__name__}: {exc}"[:300]))
                break
            if r is not r0 or rec != rec0 or best_of(fn) != best0:
                mismatches.append((i, name, "differs", (r is r0, rec0[:5], rec[:5], best0, best_of(fn))))
                break
            stats["identical"] += 1
            stats["fast" if not stub.state.used_params else "through_triton"] += 1
    timing = time_fla(calls, stub, stock)
    sites = triton_jit.sites()
    flt.disable()
    result = {"project": "fla-core", "triton": triton.__version__, "torch": torch.__version__,
              "kernels": len(kernels), "stacks": kernels, "captured_calls": len(calls), "compared": 2 * len(calls),
              "identical": stats["identical"], "fast": stats["fast"], "through_triton": stats["through_triton"],
              "mismatches": len(mismatches), "first_mismatches": [repr(m)[:500] for m in mismatches[:8]],
              "timing": timing, "sites": sites, "not_bound": triton_jit.not_bound(), "seed": seed,
              **verify.summary(sites)}
    print(json.dumps(result, indent=1, default=str))
    return 0 if not mismatches and not result["disagreements"] else 1


def jf_name(fn):
    while hasattr(fn, "fn") and type(fn).__name__ != "JITFunction":
        fn = fn.fn
    return getattr(fn, "__name__", "?")


def time_fla(calls, stub, stock, repeats=7):
    """Every heuristics-over-CachedAutotuner kernel, one recorded call each as fla made it, timed as fla
    calls it (`kernel[grid](...)`) through fastlaunch and through Triton alone (the stock
    `__getitem__`, every wrapper's own Python run), alternating: medians of `repeats` rounds."""
    from fastlaunch import triton_jit

    picked, seen = [], set()
    for fn, grid, args, kwargs, *_ in calls:
        if stack_of(fn).startswith("Heuristics>CachedAutotuner>JITFunction") and id(fn) not in seen:
            seen.add(id(fn))
            picked.append((fn, grid, args, kwargs))
    if not picked:
        return None
    stub.count_only()
    rows = []
    for fn, grid, args, kwargs in picked:
        at = fn.fn
        triton_run = triton_jit._stock_run(at.fn)

        def through_triton(fn=fn, at=at, grid=grid, args=args, kwargs=kwargs):
            # As with fastlaunch disabled: Triton's `__getitem__`, Heuristics.run, the subclass's run,
            # Triton's Autotuner.run (the slot's, for an instance without a dispatcher), JITFunction.run.
            saved = at.__dict__.pop("_fastlaunch_run", None)
            inner = at.fn.__dict__.get("run")
            at.fn.__dict__["run"] = triton_run  # Triton's own (an empty slot would attach fastlaunch)
            try:
                return stock(fn, grid)(*args, **kwargs)
            finally:
                if saved is not None:
                    at.__dict__["_fastlaunch_run"] = saved
                if inner is not None:
                    at.fn.__dict__["run"] = inner

        def through_fastlaunch(fn=fn, grid=grid, args=args, kwargs=kwargs):
            return fn[grid](*args, **kwargs)

        floor_run, floor_kw = fla_floor(fn, grid, args, kwargs)

        def fla_alone(run=floor_run, args=args, kw=floor_kw):
            return run(*args, **kw)

        samples = {"triton": [], "fastlaunch": [], "fla_alone": []}
        for _ in range(repeats):
            for name, f in (("triton", through_triton), ("fastlaunch", through_fastlaunch), ("fla_alone", fla_alone)):
                n = 100 if name == "triton" else 1000
                t = time.perf_counter_ns()
                for _ in range(n):
                    f()
                samples[name].append((time.perf_counter_ns() - t) / n)
        t, f = statistics.median(samples["triton"]), statistics.median(samples["fastlaunch"])
        a = statistics.median(samples["fla_alone"])
        rows.append({"kernel": jf_name(fn), "args": len(args), "keywords": len(kwargs), "triton_ns": round(t),
                     "fastlaunch_ns": round(f), "ratio": round(t / f, 2), "fla_alone_ns": round(a),
                     "fastlaunch_own_ns": round(f - a), "ceiling": round(t / a, 2)})
    ratios = sorted(r["ratio"] for r in rows)
    return {"stack": "Heuristics>CachedAutotuner>JITFunction", "kernels": rows,
            "median_ratio": statistics.median(ratios), "min_ratio": ratios[0], "max_ratio": ratios[-1],
            "max_ceiling": max(r["ceiling"] for r in rows),
            "fla_alone": "CachedAutotuner.run as fla wrote it, its super().run a no-op, called with the "
                         "heuristics' values already computed: what any launcher that runs fla's code costs "
                         "at least; ceiling = triton_ns / fla_alone_ns"}


def fla_floor(fn, grid, args, kwargs):
    """fla's own Python alone: a copy of the CachedAutotuner whose super().run returns at once (a class
    between CachedAutotuner and Autotuner in its MRO), and the keywords Triton's Heuristics.run hands
    it (grid=, warmup=, the caller's, the heuristics' values), computed once."""
    from triton.runtime.autotuner import Autotuner

    at = fn.fn

    class NoLaunch(Autotuner):
        def run(self, *args, **kwargs):
            return None

    floor = object.__new__(type("FlaAlone", (type(at), NoLaunch), {}))
    floor.__dict__.update({k: v for k, v in at.__dict__.items() if k != "_fastlaunch_run"})
    kw = {"grid": grid, "warmup": False, **kwargs}
    for name, value in fn.values.items():
        kw[name] = value({**dict(zip(fn.arg_names, args)), **kw})
    return floor.run, kw


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
