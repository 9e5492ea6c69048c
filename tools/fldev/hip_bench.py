"""The `hip-stub` bench backend: the launch paths of AMD GPUs over the stand-in libamdhip64
(hip_stub.c), side by side, in a process of its own (the stand-in becomes its libamdhip64 and
Triton's AMD driver is active over it). Each mode launches one real Triton kernel of the case's
shape compiled here for gfx942 (an hsaco from Triton's wheel):
  floor              the runtime alone: hipModuleLaunchKernel in a C loop over a prepared parameter
                     array (no argument read); a lower bound no launcher reaches
  floor-unpack       the arguments read through the tensor door, nothing submitted (as cuda-stub's)
  fastlaunch-c       the C library alone: fl_launch over the same plan in a C loop (values read once),
                     what a C caller pays; beside floor, the cost of fastlaunch's C core over the runtime
  fastlaunch         the finalized C entry over a hip plan with a static grid
  fastlaunch-dyngrid torch's CachingAutotuner for an MI300X with fastlaunch enabled: the promoted
                     entry, its grid program from Inductor's Grid1D
  triton-run         Triton's AMD launcher alone: CompiledKernel.run as Inductor's launcher calls it
  triton-jit         Triton's JIT, kernel[grid](*args, XBLOCK=128) with the common lambda grid
  fastlaunch-jit     the same call with fastlaunch.triton.enable()
  triton-autotune    the kernel under @triton.autotune (two configs, key=["xnumel"]) on a tuned key
  fastlaunch-autotune the same call served by fastlaunch
torch's ROCm stock path (its static launcher, C++ over HIP) is not measured: torch's ROCm wheels
are not on PyPI, so it cannot run here.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

# FLDEV_REAL_HIP=1 (tools/gpu-check on an AMD GPU): the same modes over the real runtime, tensors in
# the GPU's memory, torch's current stream.
REAL = os.environ.get("FLDEV_REAL_HIP") == "1"
BACKEND = "hip" if REAL else "hip-stub"
if not REAL:
    from fastlaunch import _C as _fl_C

    _fl_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)
CASES = [("2 tensors + 1 int", 2, 1), ("4 tensors + 2 ints", 4, 2), ("19 args", 12, 7), ("64 args", 40, 24)]
MODES = ["floor", "floor-unpack", "fastlaunch-c", "fastlaunch", "fastlaunch-dyngrid", "triton-run", "triton-jit", "fastlaunch-jit",
         "triton-autotune", "fastlaunch-autotune"]
SLOW = ("triton-jit", "triton-autotune")
TARGETS = ("hip-stub targets: triton-jit >= 30x fastlaunch-jit (every case); fastlaunch <= 1.5x floor; "
           "triton-run >= 10x fastlaunch; fastlaunch <= 800 instructions per launch (2 tensors + 1 int)")


class Case:
    def __init__(self, name, ntensors, nints, directory):
        import torch

        from fastlaunch import FinalizedLaunch, _C, inductor
        from fastlaunch.triton import plan_from_compiled
        from fldev import hip_inductor, hip_stub, stub_bench
        from fldev.stub_bench import _NoFallback, _grid, _kernel_module

        stub_bench.triton = sys.modules["triton"]  # the module global the grid lambda reads
        self.name = name
        fn, params = _kernel_module(ntensors, nints, directory, tag="_hip")
        kinds = ["ptr"] * ntensors + ["i32"] * nints
        signature = {p: ("*fp32" if i < ntensors else "i32") for i, p in enumerate(params)}
        self.tensors = [torch.zeros(64, device="cuda" if REAL else "cpu") for _ in range(ntensors)]
        self.args = tuple(self.tensors) + (64,) + tuple(range(2, nints + 1))
        self.stream = torch.cuda.current_stream().cuda_stream if REAL else hip_stub.STREAM
        self.kwargs = {"stream": self.stream}
        if REAL:
            from triton.compiler import ASTSource

            ck = sys.modules["triton"].compile(ASTSource(fn=fn, signature=dict(signature, XBLOCK="constexpr"),
                                                         constexprs={"XBLOCK": 128}),
                                               target=sys.modules["triton"].runtime.driver.active.get_current_target())
        else:
            ck = hip_stub.compile(fn, dict(signature, XBLOCK="constexpr"), {"XBLOCK": 128})
        ck._init_handles()
        self.binary = ck
        plan = plan_from_compiled(ck, backend="hip", grid=(1,))
        self.plan = plan
        self.static_entry = FinalizedLaunch(_NoFallback(), plan)
        self.floor_unpack = _C.Floor(kinds)
        self.run_prefix = (1, 1, 1, self.stream, ck.function, ck.packed_metadata, None, None, None)
        # A per-kernel generated AMD launcher (Triton 3.5) takes the constexprs too, as its JIT passes them.
        from triton.backends.amd import driver as amd_driver

        self.run_suffix = (128,) if hasattr(amd_driver, "make_launcher") else ()
        # Inductor's autotuner for an MI300X (this GPU's, on one), bound and promoted by fastlaunch.
        inductor.enable(inductor.InductorAdapter())
        self.dyn = hip_inductor.autotuner(fn, dict(signature, XBLOCK="constexpr"), f"dyn_{ntensors}_{nints}", 64,
                                          real=REAL)[0]
        for _ in range(2):
            self.dyn.run(*self.args, stream=self.stream)
        entry = vars(self.dyn).get("run")
        assert type(entry).__name__ == "FinalizedLaunch" and entry.plan.backend == "hip", f"{name}: not promoted"
        self.dyn_entry = entry
        # Triton's JIT: one JITFunction left to Triton, one served, from the same source.
        import fastlaunch.triton as flt

        flt.enable()
        stock_fn, _ = _kernel_module(ntensors, nints, directory, tag="_hip_stock")
        flt.exclude(stock_fn)  # Triton alone
        self.jit_grid = _grid(64)
        self.jit_stock, self.jit_fl = stock_fn, fn
        for _ in range(3):
            fn[self.jit_grid](*self.args, XBLOCK=128)
            stock_fn[self.jit_grid](*self.args, XBLOCK=128)
        c = fn.run.counts
        assert c["fast"] >= 2 and c["grid_calls"] == 0, f"{name}: the JIT dispatcher did not serve: {c}"
        assert not hasattr(stock_fn.run, "counts"), f"{name}: Triton's side is fastlaunch's"
        at_stock, _ = _kernel_module(ntensors, nints, directory, tag="_hip_at_stock", autotune=True)
        flt.exclude(at_stock)  # and its JITFunction
        at_fl, _ = _kernel_module(ntensors, nints, directory, tag="_hip_at", autotune=True)
        self.at_stock, self.at_fl = at_stock, at_fl
        for _ in range(3):
            at_fl[self.jit_grid](*self.args)
            at_stock[self.jit_grid](*self.args)
        assert at_fl.run.counts["fast"] == 2, f"{name}: the autotune dispatcher did not serve: {at_fl.run.counts}"

    def loop(self, mode, n):
        """n calls of one mode in a C loop: nanoseconds."""
        from fastlaunch import _C

        if mode == "floor":
            return _C.bench_launch_loop(self.plan, self.args, self.stream, n)
        if mode == "fastlaunch-c":
            return _C.bench_c_launch_loop(self.plan, self.args, self.stream, n)
        if mode in ("triton-jit", "fastlaunch-jit"):
            k = self.jit_stock if mode == "triton-jit" else self.jit_fl
            return _C.bench_subscript_loop(k, self.jit_grid, self.args, {"XBLOCK": 128}, n)
        if mode in ("triton-autotune", "fastlaunch-autotune"):
            k = self.at_stock if mode == "triton-autotune" else self.at_fl
            return _C.bench_subscript_loop(k, self.jit_grid, self.args, {}, n)
        fn, a, kw = {
            "floor-unpack": (self.floor_unpack, self.args, {}),
            "fastlaunch": (self.static_entry, self.args, self.kwargs),
            "fastlaunch-dyngrid": (self.dyn_entry, self.args, self.kwargs),
            "triton-run": (self.binary.run, self.run_prefix + self.args + self.run_suffix, {}),
        }[mode]
        return _C.bench_loop(fn, a, kw, n)


def _cases(names=None):
    directory = tempfile.mkdtemp(prefix="fl-hip-bench-")
    return [Case(n, t, i, directory) for n, t, i in CASES if names is None or n in names]


def run(quick=False, progress=True):
    from fldev import hip_stub

    stub = None if REAL else hip_stub.load()
    if stub:
        stub.state.record = 0
    results = []
    repeats = 5 if quick else 9
    for ci, case in enumerate(_cases()):
        if progress:
            print(f"[{BACKEND}] {case.name} ({ci + 1}/{len(CASES)})", file=sys.stderr, flush=True)
        t = case.loop("triton-run", 2000) / 2000
        n = max(2000, int((0.010 if quick else 0.025) / (t * 1e-9)))
        samples = {m: [] for m in MODES}
        calls0, slow_calls = stub.state.calls if stub else 0, 0
        for _ in range(repeats):
            for m in MODES:
                nm = max(200, n // 20) if m in SLOW else n
                samples[m].append(case.loop(m, nm) / nm)
                slow_calls += nm if m in SLOW else 0
        if REAL:
            import torch

            torch.cuda.synchronize()
        else:  # every mode but floor-unpack reached the runtime once per call
            launched = stub.state.calls - calls0
            assert launched == repeats * n * (len(MODES) - 1 - len(SLOW)) + slow_calls, (launched, repeats, n)
        floor, fast = statistics.median(samples["floor"]), statistics.median(samples["fastlaunch"])
        for m in MODES:
            med = statistics.median(samples[m])
            results.append({"backend": BACKEND, "case": case.name, "mode": m, "ns_median": round(med, 1),
                            "ns_min": round(min(samples[m]), 1), "repeats": repeats, "iterations": n,
                            "vs_floor": round(med / floor, 3), "vs_fastlaunch": round(med / fast, 3),
                            "pointer_args": "torch tensors",
                            "stock_path": "Triton's AMD launcher (driver.c) over "
                                          + ("the GPU's HIP runtime" if REAL else "the stand-in libamdhip64")})
    return results


def table(results, out=sys.stdout):
    by = {}
    for r in results:
        by.setdefault(r["case"], {})[r["mode"]] = r
    print(f"{BACKEND:20} " + " ".join(f"{m:>19}" for m in MODES), file=out)
    for case, row in by.items():
        print(f"{case:20} " + " ".join(f"{row[m]['ns_median']:>16.1f} ns" for m in MODES), file=out)
    print("\nratios (medians):", file=out)
    print(f"{'case':20} {'c/floor':>8} {'fast/floor':>11} {'fast/unpack':>12} {'dyn/fast':>9} {'run/fast':>9} {'jit/fljit':>10} "
          f"{'at/flat':>8}", file=out)
    for case, row in by.items():
        f = row["fastlaunch"]["ns_median"]
        print(f"{case:20} {row['fastlaunch-c']['ns_median'] / row['floor']['ns_median']:>7.2f}x "
              f"{f / row['floor']['ns_median']:>10.2f}x {f / row['floor-unpack']['ns_median']:>11.2f}x "
              f"{row['fastlaunch-dyngrid']['ns_median'] / f:>8.2f}x {row['triton-run']['ns_median'] / f:>8.2f}x "
              f"{row['triton-jit']['ns_median'] / row['fastlaunch-jit']['ns_median']:>9.2f}x "
              f"{row['triton-autotune']['ns_median'] / row['fastlaunch-autotune']['ns_median']:>7.2f}x", file=out)
    print(f"\n{TARGETS}", file=out)


def run_one(case_name, mode, n):
    """One mode of one case, n calls in the C loop (the callgrind child)."""
    from fldev import hip_stub

    hip_stub.load().state.record = 0
    (case,) = _cases([case_name])
    case.loop(mode, 50)  # warm-up outside the counted loop
    case.loop(mode, n)
