"""The `npu-stub` bench backend: the npu backend as Triton-Ascend kernels use it (a registered stub
through rtKernelLaunch, the 3.2.0 packed struct with an FFTS slot), over the stand-ins of CANN's
runtime and of torch_npu's task queue (tools/fldev/ascend_standin.py), in a process of its own.
The stand-in runtime only counts launches here (no recording, no lock).

Modes, each case the same call shape as the cuda-stub backend's:
  floor             C extraction of the arguments with data_ptr() per tensor; submits nothing
  floor-unpack      the same through the tensor door
  fastlaunch        the finalized C entry over an npu plan, torch_npu's queue off (raw launch)
  fastlaunch-queue  the same with the queue on: a copy of the packed bytes enqueued through
                    RunAclCall per launch, run by the stand-in queue's thread
  seed              the seed's layering (Python checks, then the C plan), queue off
  cuda-stub-fastlaunch the cuda backend's finalized entry over the same call shape (a Triton kernel
                    compiled for sm_90, its plan over the stub libcuda), in this process, measured in
                    turn with the others: the npu / cuda ratio side by side
"""

from __future__ import annotations

import os
import statistics
import sys

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

from fldev.stub_bench import CASES  # noqa: E402  (the same call shapes as cuda-stub)

MODES = ["floor", "floor-unpack", "fastlaunch", "fastlaunch-queue", "seed", "cuda-stub-fastlaunch"]
TARGETS = ("npu-stub targets: fastlaunch (queue off) <= 1.3x cuda-stub fastlaunch for the same call shape, "
           "measured side by side in one process; "
           "queue on: the copy and enqueue measured and stated")
STREAM = 0x77


class _NoFallback:
    def entry_fallback(self, reason, stable, args, kwargs):
        raise AssertionError(f"fell back: {reason}")


class _Autotuner:
    """What the seed's finalized object checks around its direct call: one launcher."""

    def __init__(self, launcher):
        self.launchers = [launcher]

    def run(self, *args, **kwargs):
        raise AssertionError("the seed fell back")


class Case:
    def __init__(self, name, ntensors, nints):
        import torch

        from fastlaunch import FinalizedLaunch, Plan, _C
        from fldev.seed import SeedFinalized, SeedPlannedLaunch, profiler_flag as _profiler_flag

        self.name = name
        kinds = ["ptr"] * ntensors + ["i32"] * nints
        self.tensors = [torch.zeros(64) for _ in range(ntensors)]
        self.args = tuple(self.tensors) + (64,) + tuple(range(2, nints + 1))
        self.kwargs = {"stream": STREAM}
        plan = Plan(0x5100, kinds, backend="npu", abi="npu", options={"ffts": True, "rt_stub": True},
                    grid=(1, 1, 1), name=f"triton_poi_fused_{ntensors}_{nints}")
        self.entry = FinalizedLaunch(_NoFallback(), plan)
        launcher = object()
        self.seed = SeedFinalized(_Autotuner(launcher), SeedPlannedLaunch(plan, launcher, len(kinds)), (),
                                  _profiler_flag())
        self.floor = _C.Floor(kinds, unpack=False)
        self.floor_unpack = _C.Floor(kinds)
        self.cuda_entry = _cuda_entry(ntensors, nints, _NoFallback())

    def call(self, mode):
        """(callable, args, kwargs, queue mode) for one mode."""
        return {
            "floor": (self.floor, self.args, {}, 0),
            "floor-unpack": (self.floor_unpack, self.args, {}, 0),
            "fastlaunch": (self.entry, self.args, self.kwargs, 0),
            "fastlaunch-queue": (self.entry, self.args, self.kwargs, 1),
            "seed": (self.seed, self.args, self.kwargs, 0),
            "cuda-stub-fastlaunch": (self.cuda_entry, self.args, {"stream": _CUDA_STREAM[0]}, 0),
        }[mode]


_CUDA_STREAM = [0]


def _cuda_entry(ntensors, nints, fallback):
    """The cuda backend's finalized entry for the same call shape, over the stub libcuda."""
    import tempfile

    from fastlaunch import FinalizedLaunch
    from fastlaunch.triton import plan_from_compiled
    from fldev import cuda_stub
    from fldev.stub_bench import _kernel_module

    stub = cuda_stub.load()
    stub.count_only()
    _CUDA_STREAM[0] = cuda_stub.STREAM
    fn, params = _kernel_module(ntensors, nints, tempfile.mkdtemp(prefix="fl-npu-cuda-"))
    signature = {p: ("*fp32" if i < ntensors else "i32") for i, p in enumerate(params)}
    signature["XBLOCK"] = "constexpr"
    return FinalizedLaunch(fallback, plan_from_compiled(cuda_stub.compile(fn, signature, {"XBLOCK": 128}), grid=(1,)))


def _standins():
    from fldev import ascend_standin

    rt = ascend_standin.load(queue=True)
    rt.count_only(True)
    return rt


def run(quick=False, progress=True):
    rt = _standins()
    from fastlaunch import _C

    results = []
    repeats = 5 if quick else 9
    for ci, (name, t, i) in enumerate(CASES):
        if progress:
            print(f"[npu-stub] {name} ({ci + 1}/{len(CASES)})", file=sys.stderr, flush=True)
        case = Case(name, t, i)
        n = 5000 if quick else 20000
        samples = {m: [] for m in MODES}
        launched0 = rt.launches()
        for _ in range(repeats):
            for m in MODES:
                fn, a, k, qmode = case.call(m)
                rt.set_mode(qmode)
                samples[m].append(_C.bench_loop(fn, a, k, n) / n)
                rt.drain()
        # Every npu mode but the floors reached the runtime once per call (cuda's went to its stub).
        assert rt.launches() - launched0 == repeats * n * (len(MODES) - 3), (rt.launches() - launched0, n)
        floor = statistics.median(samples["floor-unpack"])
        fast = statistics.median(samples["fastlaunch"])
        for m in MODES:
            med = statistics.median(samples[m])
            results.append({"backend": "npu-stub", "case": name, "mode": m, "ns_median": round(med, 1),
                            "ns_min": round(min(samples[m]), 1), "repeats": repeats, "iterations": n,
                            "vs_floor_unpack": round(med / floor, 3), "vs_fastlaunch": round(med / fast, 3),
                            "pointer_args": "torch tensors"})
    rt.set_mode(1)
    return results


def table(results, cuda=None, out=sys.stdout):
    by = {}
    for r in results:
        by.setdefault(r["case"], {})[r["mode"]] = r
    cuda_fast = {r["case"]: r["ns_median"] for r in results if r["mode"] == "cuda-stub-fastlaunch"}
    print(f"{'npu-stub':20} " + " ".join(f"{m:>18}" for m in MODES), file=out)
    for case, row in by.items():
        print(f"{case:20} " + " ".join(f"{row[m]['ns_median']:>15.1f} ns" for m in MODES), file=out)
    print("\nratios (medians):", file=out)
    print(f"{'case':20} {'fast/unpack':>12} {'queue/fast':>11} {'seed/fast':>10} {'fast/cuda-stub fast':>20} "
          "(the cuda-stub entry measured in this process, in turn)", file=out)
    for case, row in by.items():
        f = row["fastlaunch"]["ns_median"]
        vs_cuda = f"{f / cuda_fast[case]:>19.2f}x" if case in cuda_fast else f"{'-':>20}"
        print(f"{case:20} {f / row['floor-unpack']['ns_median']:>11.2f}x "
              f"{row['fastlaunch-queue']['ns_median'] / f:>10.2f}x {row['seed']['ns_median'] / f:>9.2f}x {vs_cuda}",
              file=out)
    print(f"\n{TARGETS}", file=out)


def run_one(case_name, mode, n):
    """One mode of one case, n calls in the C loop (the callgrind child)."""
    rt = _standins()
    from fastlaunch import _C

    (name, t, i), = [c for c in CASES if c[0] == case_name]
    fn, a, k, qmode = Case(name, t, i).call(mode)
    rt.set_mode(qmode)
    _C.bench_loop(fn, a, k, 50)  # warm-up outside the counted loop
    _C.bench_loop(fn, a, k, n)
    rt.drain()
