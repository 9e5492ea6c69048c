"""The main job: what one launch costs through each path, side by side, in one run.

Modes (each submitting to the same backend):
  floor              a C function that only extracts the arguments (the least any launch from
                     Python can cost); it submits nothing
  stock              the stock path: Inductor's own CachingAutotuner.run (when torch is installed;
                     otherwise the same shapes in plain Python) with a launcher generated the way
                     Inductor generates them (grid computed in Python) whose runner binds the args
                     as Triton's launcher does (hooks, data_ptr() per tensor) and submits
  seed               the seed's layering: a Python finalized object whose __call__ makes the seed's
                     checks and calls a Python planned-launch object, which calls the C plan
  fastlaunch         the finalized C entry in the call slot, static grid
  fastlaunch-dyngrid the same with a grid program evaluated in C
Times are medians of repeats of a C loop of calls (so no mode pays Python's loop overhead).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from fastlaunch import _C
from fastlaunch._C import FastLaunchError, Floor, Plan
import fastlaunch.host as host
from fldev import standins
from fldev.seed import SeedFinalized, SeedPlannedLaunch, profiler_flag as _profiler_flag
from fastlaunch.bind import bind

try:
    import torch
except ImportError:  # the plain-Python shapes stand in
    torch = None

CASES = [
    ("2 tensors + 1 int", 2, 1),
    ("4 tensors + 2 ints", 4, 2),
    ("19 args", 12, 7),
    ("64 args", 40, 24),
]
MODES = ["floor", "floor-unpack", "stock-model", "seed", "fastlaunch", "fastlaunch-dyngrid"]
NOOP = "void noop(const void *args, const fl_host_program *p) { (void)args; (void)p; }\n"


# ---- building one case ----
class _Adapter(standins.HostAdapter):
    def profiler_flag(self):
        return _profiler_flag()


def _inductor_autotuner(launcher, name):
    """Inductor's real CachingAutotuner around our launcher, built the way Inductor builds it
    (device properties, one config) with the launcher list set, as precompile would leave it."""
    import triton
    from torch._inductor.runtime.hints import DeviceProperties, HeuristicType
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    def fn():
        pass

    fn.__name__ = name
    dev = DeviceProperties(type="cuda", index=0, multi_processor_count=1, cc=90, major=9,
                           max_threads_per_block=1024, warp_size=32)
    cfg = triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
    at = CachingAutotuner(fn, triton_meta={"signature": {}, "device": dev, "constants": {}, "configs": [{}]},
                          configs=[cfg], save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                          heuristic_type=HeuristicType.POINTWISE, size_hints={"x": 1024},
                          inductor_meta={"grid_type": "Grid1D", "kernel_name": name})
    launcher.config = cfg
    launcher.cache_hash = name
    launcher.store_cubin = False
    launcher.n_regs = launcher.n_spills = 0
    launcher.shared = 0
    at.launchers = [launcher]
    return at


def _have_inductor():
    if torch is None:
        return False
    try:
        import triton  # noqa: F401
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner  # noqa: F401
    except Exception:
        return False
    return True


class Case:
    def __init__(self, name, ntensors, nints, backend, kernel, stream, args="tensor"):
        self.name = name
        self.backend = backend
        kinds = ["ptr"] * ntensors + ["i32"] * nints
        names = [f"in_ptr{i}" for i in range(ntensors)] + ["xnumel"] + [f"ks{i}" for i in range(nints - 1)]
        if torch is not None and args == "tensor":
            self.tensors = [torch.empty(16) for _ in range(ntensors)]
            ptr_args = self.tensors
        else:
            self.tensors = [bytearray(64) for _ in range(ntensors)]
            import ctypes
            ptr_args = [ctypes.addressof((ctypes.c_char * 64).from_buffer(t)) for t in self.tensors]
        self.args = tuple(ptr_args) + (100,) + tuple(range(1, nints))
        self.kwargs = {"stream": stream}
        sig = kinds + ["i32"]  # XBLOCK, fixed per launcher (Inductor passes it as a literal)
        static_grid = ("1", "1", "1")
        dyn_grid = ("-((xnumel) // -(XBLOCK))", "1", "1")
        use_inductor = _have_inductor()
        self.stock_kind = "Inductor CachingAutotuner.run" if use_inductor else "plain-Python autotuner"

        def site(grid, tag):
            launcher = standins.make_launcher(kernel, sig, def_args=names, grid=grid, constants={"XBLOCK": 128},
                                          backend=backend, name=f"{tag}")
            at = _inductor_autotuner(launcher, tag) if use_inductor else standins.Autotuner([launcher], name=tag)
            return at, launcher

        self.floor = Floor(kinds, unpack=False)
        self.floor_unpack = Floor(kinds)
        self.stock, _ = site(static_grid, "stock")
        # fastlaunch: bound, warmed through the stock path, promoted: the C entry is in the slot.
        self.fast, _ = site(static_grid, "fast")
        bind(self.fast, _Adapter(), site=f"bench:{name}:static")
        self.dyn, _ = site(dyn_grid, "dyn")
        bind(self.dyn, _Adapter(), site=f"bench:{name}:dyngrid")
        for at in (self.stock, self.fast, self.dyn):
            at.run(*self.args, **self.kwargs)
            at.run(*self.args, **self.kwargs)
        assert type(vars(self.fast)["run"]).__name__ == "FinalizedLaunch", "fastlaunch did not promote"
        assert vars(self.fast)["run"].plan.grid_mode == "static"
        assert vars(self.dyn)["run"].plan.grid_mode == "program"
        # seed: its finalized object around a plan of the same kernel with a static grid.
        seed_at, seed_launcher = site(static_grid, "seed")
        seed_at.run(*self.args, **self.kwargs)
        plan = Plan(kernel, sig, backend=backend, fixed_args=[128], grid=(1, 1, 1), owner=seed_launcher)
        hooks = (standins.hooks.launch_enter_hook.calls, standins.hooks.launch_exit_hook.calls)
        self.seed = SeedFinalized(seed_at, SeedPlannedLaunch(plan, seed_launcher, len(kinds)), hooks,
                                  _profiler_flag())

    def callable(self, mode):
        return {
            "floor": self.floor,
            "floor-unpack": self.floor_unpack,
            "stock-model": self.stock.run,
            "seed": self.seed,
            "fastlaunch": self.fast.run,
            "fastlaunch-dyngrid": self.dyn.run,
        }[mode]


def _measure(fn, args, kwargs, n, sync):
    ns = _C.bench_loop(fn, args, kwargs, n)
    sync()
    return ns / n


def run(backends=("host",), quick=False, progress=True, args="tensor"):
    """Measures every case and mode on each backend; returns a list of result dicts. args="tensor"
    passes torch tensors where torch is installed (each costs a data_ptr() call in every mode);
    args="int" passes raw addresses, which shows the launch path alone."""
    kernel = host.compile(NOOP, "noop")
    results = []
    for backend in backends:
        stream = host.Stream(backend)
        sync = stream.synchronize
        cases = [Case(name, t, i, backend, kernel, stream.handle, args) for name, t, i in CASES]
        arg_kind = "torch tensors" if torch is not None and args == "tensor" else "integer addresses"
        # The host worker drains a bounded ring: batches stay below its size so the launching
        # thread never waits for the worker inside a timed loop.
        if backend == "host":
            batch, repeats = 200, (15 if quick else 41)
        else:
            batch, repeats = 0, (5 if quick else 9)
        for ci, case in enumerate(cases):
            if progress:
                print(f"[{backend}] {case.name} ({ci + 1}/{len(cases)})", file=sys.stderr, flush=True)
            n = batch
            if not n:
                # Calibrate on the slowest mode to about 10 ms (quick) or 25 ms per repeat.
                t = _measure(case.callable("stock-model"), case.args, case.kwargs, 2000, sync)
                n = max(2000, int((0.010 if quick else 0.025) / (t * 1e-9)))
            samples = {m: [] for m in MODES}
            for _ in range(repeats):
                # Modes take turns inside each repeat, so drift hits all of them alike.
                for m in MODES:
                    samples[m].append(_measure(case.callable(m), case.args, case.kwargs, n, sync))
            floor = statistics.median(samples["floor-unpack"])
            fast = statistics.median(samples["fastlaunch"])
            for m in MODES:
                med = statistics.median(samples[m])
                results.append({
                    "backend": backend, "case": case.name, "mode": m, "ns_median": round(med, 1),
                    "ns_min": round(min(samples[m]), 1), "repeats": repeats, "iterations": n,
                    "vs_floor_unpack": round(med / floor, 3), "vs_fastlaunch": round(med / fast, 3),
                    "stock_path": case.stock_kind if m == "stock-model" else None, "pointer_args": arg_kind,
                })
        stream.close()
    return results


TARGETS = ("null backend targets: fastlaunch <= 2x floor-unpack (2 and 4 tensors), <= 1.5x (19, 64 args); "
           "seed >= 2x fastlaunch (1.5x at 64 args); dyngrid <= 1.1x static")


def table(results, out=sys.stdout):
    by = {}
    for r in results:
        by.setdefault((r["backend"], r["case"]), {})[r["mode"]] = r
    print(f"{'backend':8} {'case':20} " + " ".join(f"{m:>18}" for m in MODES), file=out)
    for (backend, case), row in by.items():
        cells = " ".join(f"{row[m]['ns_median']:>9.1f} ns{'':5}" for m in MODES)
        print(f"{backend:8} {case:20} {cells}", file=out)
    print("\nratios (medians):", file=out)
    print(f"{'backend':8} {'case':20} {'fast/unpack':>12} {'model/fast':>11} {'seed/fast':>10} {'dyn/static':>11}",
          file=out)
    for (backend, case), row in by.items():
        f = row["fastlaunch"]["ns_median"]
        print(f"{backend:8} {case:20} {f / row['floor-unpack']['ns_median']:>11.2f}x "
              f"{row['stock-model']['ns_median'] / f:>10.2f}x "
              f"{row['seed']['ns_median'] / f:>9.2f}x {row['fastlaunch-dyngrid']['ns_median'] / f:>10.2f}x", file=out)
    stock = next((r["stock_path"] for r in results if r["mode"] == "stock-model"), None)
    ptrs = next((r["pointer_args"] for r in results), None)
    print(f"\nstock path: {stock}; pointer arguments: {ptrs}\n{TARGETS}", file=out)


def unpack_rows(quick=False):
    """The C benchmark row of the tensor door: ns per tensor to read a data pointer in a C loop,
    through the door and through data_ptr() (medians of repeats over 64 tensors)."""
    if torch is None:
        return []
    tensors = tuple(torch.zeros(4) for _ in range(64))
    runs = [_C.bench_unpack(tensors, 5000 if quick else 20000) for _ in range(5 if quick else 9)]
    if runs[0][0] is None:
        return []
    return [{"backend": "c", "case": "per tensor", "mode": mode, "ns_median": round(statistics.median(r[i] for r in runs), 2),
             "repeats": len(runs)} for i, mode in ((0, "tensor-door"), (1, "data_ptr"))]


def write_json(results, path):
    backends = sorted({r["backend"] for r in results}, key=[r["backend"] for r in results].index)
    doc = {"backend": ",".join(backends), "results": results,
           "python": sys.version.split()[0], "torch": getattr(torch, "__version__", None),
           "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def plot(results, path):
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit(f"--plot: matplotlib is not installed ({exc}); pip install matplotlib") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in results if r["backend"] != "c"]  # the per-tensor row is no launch path
    backends = list(dict.fromkeys(r["backend"] for r in results))
    fig, axes = plt.subplots(1, len(backends), figsize=(7 * len(backends), 4.8), squeeze=False)
    colors = {"floor": "#999999", "floor-unpack": "#cccccc", "stock-model": "#d62728", "seed": "#ff7f0e",
              "fastlaunch": "#2ca02c", "fastlaunch-dyngrid": "#1f77b4", "triton-run": "#9467bd",
              "inductor-stock": "#8c564b", "triton-jit": "#e377c2", "fastlaunch-queue": "#17becf",
              "fastlaunch-jit": "#bcbd22", "triton-autotune": "#f7b6d2", "fastlaunch-autotune": "#dbdb8d",
              "fastlaunch-jit-kw": "#aec7e8", "triton-heuristics": "#c5b0d5", "fastlaunch-heuristics": "#98df8a",
              "cuda-stub-fastlaunch": "#ffbb78"}
    for ax, backend in zip(axes[0], backends):
        # Each backend's own cases and modes: a backend measures one case (cuda-stub-tma) or a mode
        # only some cases have; a missing row draws no bar.
        ns = {(r["case"], r["mode"]): r["ns_median"] for r in results if r["backend"] == backend}
        cases = list(dict.fromkeys(c for c, _ in ns))
        modes = list(dict.fromkeys(m for _, m in ns))
        width = 0.8 / len(modes)
        stock = "inductor-stock" if "inductor-stock" in modes else "stock-model"
        for mi, m in enumerate(modes):
            xs = [ci + (mi - (len(modes) - 1) / 2) * width for ci, c in enumerate(cases) if (c, m) in ns]
            drawn = [c for c in cases if (c, m) in ns]
            bars = ax.bar(xs, [ns[c, m] for c in drawn], width, label=m, color=colors.get(m, "#7f7f7f"))
            if m == stock:
                for b, c in zip(bars, drawn):
                    fast = ns.get((c, "fastlaunch"))
                    if not fast:
                        continue
                    ax.annotate(f"{b.get_height() / fast:.1f}x", (b.get_x() + b.get_width() / 2, b.get_height()),
                                ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=9)
        ax.set_ylabel("ns per launch (median)")
        ax.set_yscale("log")
        ax.set_title(f"{backend}: cost per launch" + (f" (label: {stock} / fastlaunch)" if stock in modes else ""))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _with_tools_path():
    """The environment for a child that imports fldev: tools/ on its path."""
    tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=tools + (os.pathsep + path if path else ""))


def instructions(backend="null", cases=None):
    """Instructions per launch for each mode, counted by callgrind (repeatable on noisy machines):
    the collection is toggled on the extension's C loop only."""
    import shutil
    import subprocess
    import tempfile

    if not shutil.which("valgrind"):
        raise SystemExit("--instructions: valgrind is not installed")
    out = {}
    n = 2000
    if backend == "cuda-stub":
        from fldev import stub_bench

        modes, all_cases = stub_bench.MODES, [c[0] for c in stub_bench.CASES]
    elif backend == "cuda-stub-tma":
        from fldev import tma_bench

        modes, all_cases = list(tma_bench.MODES), [tma_bench.CASE]
    elif backend == "cuda-stub-latency":
        from fldev import latency_bench

        # The fastlaunch forms the lines compare (Triton's own take minutes each under callgrind).
        modes, all_cases = ["fastlaunch-jit", "fastlaunch-jit-kw", "fastlaunch-run"], [c[0] for c in latency_bench.CASES]
    elif backend == "npu-stub":
        from fldev import npu_bench

        modes, all_cases = npu_bench.MODES, [c[0] for c in npu_bench.CASES]
    elif backend == "hip-stub":
        from fldev import hip_bench

        # floor and fastlaunch-c are C loops of their own (bench_launch_loop, bench_c_launch_loop), outside
        # the counted ones.
        modes = [m for m in hip_bench.MODES if m not in ("floor", "fastlaunch-c")]
        all_cases = [c[0] for c in hip_bench.CASES]
    else:
        modes, all_cases = MODES, [c[0] for c in CASES]
    only = [m for m in os.environ.get("FLDEV_INSTR_MODES", "").split(",") if m]  # a shorter run
    for case in (cases or all_cases):
        for mode in [m for m in modes if not only or m in only]:
            with tempfile.TemporaryDirectory() as d:
                cg = os.path.join(d, "cg.out")
                cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=fl_bench_loop",
                       "--toggle-collect=fl_bench_loop_subscript",
                       f"--callgrind-out-file={cg}", sys.executable, "-m", "fldev", "bench", "--_one", backend,
                       case, mode, str(n)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=_with_tools_path())
                if proc.returncode != 0:
                    raise SystemExit(f"callgrind run failed: {proc.stderr[-2000:]}")
                total = 0
                with open(cg) as f:
                    for line in f:
                        if line.startswith("summary:") or line.startswith("totals:"):
                            total = int(line.split()[1])
                out[(case, mode)] = total / n
                print(f"[instructions] {case} / {mode}: {total / n:.0f}", file=sys.stderr, flush=True)
    return out


def run_one(backend, case_name, mode, n):
    """One mode of one case, n launches in the C loop (the callgrind child)."""
    kernel = host.compile(NOOP, "noop")
    stream = host.Stream(backend)
    (name, t, i), = [c for c in CASES if c[0] == case_name]
    case = Case(name, t, i, backend, kernel, stream.handle)
    fn = case.callable(mode)
    for _ in range(50):  # warm-up outside the counted C loop
        fn(*case.args, **case.kwargs)
    stream.synchronize()
    step = 200 if backend == "host" else n
    done = 0
    while done < n:
        _C.bench_loop(fn, case.args, case.kwargs, min(step, n - done))
        stream.synchronize()
        done += step
    stream.close()
