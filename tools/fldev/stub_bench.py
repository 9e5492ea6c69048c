"""The `cuda-stub` bench backend: every launch path users run, over the stub libcuda
(cuda_stub.c), side by side, in a process of its own (the stub becomes its libcuda).

Modes, each launching one real Triton kernel (compiled here for sm_90) of the case's shape:
  floor              C extraction of the arguments with data_ptr() per tensor; submits nothing
  floor-unpack       the same through the tensor door (torch's C++ object)
  fastlaunch         the finalized C entry over a cuda plan with a static grid
  fastlaunch-dyngrid Inductor's real autotuner with fastlaunch enabled: the entry in the call slot,
                     grid program from Inductor's Grid1D
  triton-run         Triton's CompiledKernel.run as Inductor's launcher calls it
  inductor-stock     torch's CachingAutotuner.run with the launcher Inductor generates over
                     Triton's launcher
  triton-jit         Triton's JIT: kernel[grid](*args, XBLOCK=128) with the common lambda grid
                     (lambda META: (triton.cdiv(xnumel, META["XBLOCK"]),)), subscript included
  fastlaunch-jit     the same call with fastlaunch.triton.enable(): fastlaunch's C dispatcher
  triton-autotune    the kernel under @triton.autotune (two configs, key=["xnumel"]), kernel[grid](*args)
                     on a tuned key: Triton's Autotuner.run over Triton's JIT
  fastlaunch-autotune the same call served by fastlaunch (the Autotuner's and the JIT's dispatchers)
  fastlaunch-jit-kw  a plain @triton.jit kernel with two more int parameters (ka, kb), its last 10
                     arguments (all when it has fewer) given by keyword, with fastlaunch
  triton-heuristics  the same kernel under @triton.heuristics (2 lambdas: `args[...] is not None`,
                     `args["xnumel"] % 16 == 0`) over @triton.autotune (4 configs, key of 3 ints)
                     over @triton.jit, called the same way on a tuned key: Triton alone
  fastlaunch-heuristics the same call with fastlaunch (the three dispatchers, in C)
  triton-compiled    a kept CompiledKernel (what kernel[grid] returned) called again,
                     compiled[(1, 1, 1)](*args): Triton's own CompiledKernel.__getitem__ and runner
  fastlaunch-compiled the same call with fastlaunch.triton.enable() (compiled.c)
  triton-hooks       triton-jit's call with triton.knobs.runtime.launch_enter_hook and launch_exit_hook
                     set (plain functions that do nothing, as a profiler's cheapest): Triton alone
  fastlaunch-hooks   the same with fastlaunch (the hooks called in C around the launch)
  triton-declined    triton-jit's call with its extent an IntEnum member (an int subclass, which
                     Triton specializes as an int), through Triton's own JITFunction.__getitem__
  fastlaunch-declined the same call with fastlaunch, which hands an int subclass to Triton
                     (stock reason arg_type): what a declined call costs over Triton alone
  seed               the seed's layering (Python checks, then the C plan)
"""

from __future__ import annotations

import enum
import importlib.util
import os
import statistics
import sys
import tempfile

# FLDEV_REAL_CUDA=1 (tools/gpu-check): the same modes over the real driver, on a GPU, tensors in its memory.
REAL = os.environ.get("FLDEV_REAL_CUDA") == "1"
BACKEND = "cuda" if REAL else "cuda-stub"
if not REAL:
    from fastlaunch import _C as _fl_C

    _fl_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

CASES = [("2 tensors + 1 int", 2, 1), ("4 tensors + 2 ints", 4, 2), ("19 args", 12, 7), ("64 args", 40, 24)]
MODES = ["floor", "floor-unpack", "fastlaunch", "fastlaunch-dyngrid", "triton-run", "inductor-stock", "triton-jit",
         "fastlaunch-jit", "triton-autotune", "fastlaunch-autotune", "fastlaunch-jit-kw", "triton-heuristics",
         "fastlaunch-heuristics", "triton-compiled", "fastlaunch-compiled", "triton-hooks", "fastlaunch-hooks",
         "triton-declined", "fastlaunch-declined", "seed"]
SLOW = ("triton-jit", "triton-autotune", "triton-heuristics", "triton-hooks", "triton-declined", "fastlaunch-declined")  # tens of microseconds a call: fewer calls, the same per-call time
TARGETS = ("cuda-stub targets: fastlaunch <= 2x floor-unpack (2 and 4 tensors), <= 1.5x (19, 64 args); "
           "inductor-stock >= 10x fastlaunch; triton-run >= 5x fastlaunch; triton-jit >= 30x fastlaunch-jit; "
           "fastlaunch-jit <= 2x fastlaunch; triton-autotune >= 30x fastlaunch-autotune; "
           "triton-heuristics >= 10x fastlaunch-heuristics; fastlaunch-heuristics <= 3x fastlaunch-jit-kw; "
           "triton-compiled >= 10x fastlaunch-compiled; triton-hooks >= 5x fastlaunch-hooks; "
           "fastlaunch-declined <= 1.05x triton-declined (callgrind instructions: --instructions)")
KW_MODES = ("fastlaunch-jit-kw", "triton-heuristics", "fastlaunch-heuristics")
HOOK_MODES = ("triton-hooks", "fastlaunch-hooks")
DECLINED_MODES = ("triton-declined", "fastlaunch-declined")
triton = None  # set when a case is built (after the stub is loaded); a module global, as in users' code


AUTOTUNE = ('@triton.autotune(configs=[triton.Config({"XBLOCK": 64}, num_warps=2), '
            'triton.Config({"XBLOCK": 128}, num_warps=4)], key=["xnumel"])\n')


def module_from_source(directory, name, src):
    """A module written to directory/name.py and imported from there (Triton's JIT reads its source)."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel_module(ntensors, nints, directory, tag="", autotune=False):
    """A pointwise kernel as Inductor writes them, with the case's arguments, in a module file (the
    JIT reads its source); under @triton.autotune when asked."""
    params = [f"in_ptr{i}" for i in range(ntensors)] + ["xnumel"] + [f"ks{i}" for i in range(nints - 1)]
    src = ("import triton\nimport triton.language as tl\n\n\n" + (AUTOTUNE if autotune else "") + "@triton.jit\n"
           f"def kernel({', '.join(params)}, XBLOCK: tl.constexpr):\n"
           "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
           "    xmask = xindex < xnumel\n"
           "    tl.store(in_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) + 1.0, xmask)\n")
    return module_from_source(directory, f"k_{ntensors}_{nints}{tag}", src).kernel, params


HEURISTICS = ('@triton.heuristics({"HAS_B": lambda args: args["in_ptr0"] is not None,\n'
              '                   "EVEN": lambda args: args["xnumel"] % 16 == 0})\n'
              '@triton.autotune(configs=[triton.Config({"XBLOCK": b}, num_warps=w) for b, w in '
              '((32, 1), (64, 2), (128, 4), (256, 8))], key=["xnumel", "ka", "kb"])\n')


def _kw_kernel_module(ntensors, nints, directory, tag, heuristics):
    """The case's kernel with two more int parameters, plain or under heuristics over autotune."""
    params = [f"in_ptr{i}" for i in range(ntensors)] + ["xnumel"] + [f"ks{i}" for i in range(nints - 1)] + ["ka", "kb"]
    consts = "HAS_B: tl.constexpr, EVEN: tl.constexpr, " if heuristics else ""
    src = ("import triton\nimport triton.language as tl\n\n\n" + (HEURISTICS if heuristics else "") + "@triton.jit\n"
           f"def kernel({', '.join(params)}, {consts}XBLOCK: tl.constexpr):\n"
           "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
           "    xmask = xindex < xnumel\n"
           "    tl.store(in_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) + 1.0, xmask)\n")
    return module_from_source(directory, f"kw_{ntensors}_{nints}{tag}", src).kernel, params


def _stock_all(k):
    """Leaves a kernel and every wrapper in it to Triton (fastlaunch.triton.exclude)."""
    import fastlaunch.triton as flt
    from fastlaunch import triton_jit

    flt.exclude(k)
    return triton_jit


class _NoFallback:
    """The bound launch of the static entry: the measured calls never fall back."""

    def entry_fallback(self, reason, stable, args, kwargs):
        raise AssertionError(f"fell back: {reason}")


class Case:
    def __init__(self, name, ntensors, nints, directory):
        import torch
        import triton
        from torch._inductor.runtime import triton_heuristics as th
        from torch._inductor.runtime.hints import HeuristicType

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
        import inductor_kernels as IK
        from fastlaunch import FinalizedLaunch, _C, inductor
        from fastlaunch.triton import plan_from_compiled
        from fldev.seed import SeedFinalized, SeedPlannedLaunch, profiler_flag as _profiler_flag

        global triton
        triton = triton_mod = sys.modules["triton"]
        no_static = IK.compile_without_gpu()
        self.name = name
        fn, params = _kernel_module(ntensors, nints, directory)
        kinds = ["ptr"] * ntensors + ["i32"] * nints
        signature = {p: ("*fp32" if i < ntensors else "i32") for i, p in enumerate(params)}
        signature["XBLOCK"] = "constexpr"
        self.tensors = [torch.zeros(64, device="cuda" if REAL else "cpu") for _ in range(ntensors)]
        self.args = tuple(self.tensors) + (64,) + tuple(range(2, nints + 1))
        from fldev import cuda_stub

        # Realistic handles: a stream of the size real ones have (0x7f...), as the stand-in
        # driver's current stream is.
        self.stream = torch.cuda.current_stream().cuda_stream if REAL else cuda_stub.STREAM
        self.kwargs = {"stream": self.stream}

        def autotuner(tag, static_ok=False):
            cfg = triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
            at = th.CachingAutotuner(fn, triton_meta={"signature": dict(signature), "device": IK.device_props(),
                                                      "constants": {}, "configs": [{}]},
                                     configs=[cfg], save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                                     heuristic_type=HeuristicType.POINTWISE, size_hints={"x": 64},
                                     inductor_meta={"grid_type": "Grid1D", "kernel_name": f"{tag}_{ntensors}_{nints}"})
            # Inductor's static launcher where this torch has it (what users run; on the stand-in
            # driver too, which exports what it loads cubins with).
            with torch._inductor.config.patch({} if static_ok else no_static):
                result = at._precompile_config(cfg)
            at.compile_results = [result]
            at.launchers = [result.make_launcher()]
            return at, result.kernel

        self.stock, stock_kernel = autotuner("stock", static_ok=True)
        _, binary = autotuner("binary")  # a CompiledKernel for the plan, Triton's run and the seed
        # The class's own run: never a slot fastlaunch may have filled for an earlier case.
        self.stock_run = th.CachingAutotuner.run.__get__(self.stock)
        for _ in range(3):  # torch 2.15 builds its cached launcher after the first run
            self.stock_run(*self.args, **{"stream": self.stream})
        cached = getattr(self.stock, "_cached_launcher", None)
        runner = (getattr(cached, "__globals__", {}) if cached else
                  getattr(self.stock.launchers[0], "__globals__", {})).get("runner")
        self.stock_path = (f"torch {torch.__version__}: CachingAutotuner.run"
                           + (" (cached launcher)" if cached else "") + " -> Inductor's launcher -> "
                           + (type(runner).__name__ if type(runner).__name__ != "method" else
                              f"{type(runner.__self__).__name__}.run"))
        self.binary = binary
        # The bound autotuner keeps its slot after this: only new autotuners are affected by enable().
        inductor.enable(inductor.InductorAdapter(backend="cuda"))
        self.dyn, _ = autotuner("fast", static_ok=REAL)
        for _ in range(2):
            self.dyn.run(*self.args, stream=self.stream)
        entry = vars(self.dyn).get("run")
        assert type(entry).__name__ == "FinalizedLaunch", f"{name}: fastlaunch did not promote: {entry}"
        assert entry.plan.grid_mode == "program"
        self.dyn_entry = entry
        plan = plan_from_compiled(binary, grid=(1,))
        self.static_entry = FinalizedLaunch(_NoFallback(), plan)
        seed_at, _ = autotuner("seed")
        seed_launcher = seed_at.launchers[0]
        hooks = (triton.knobs.runtime.launch_enter_hook.calls, triton.knobs.runtime.launch_exit_hook.calls)
        self.seed = SeedFinalized(seed_at, SeedPlannedLaunch(plan, seed_launcher, len(kinds)), hooks, _profiler_flag())
        self.floor = _C.Floor(kinds, unpack=False)
        self.floor_unpack = _C.Floor(kinds)
        self.run_prefix = (1, 1, 1, self.stream, binary.function, binary.packed_metadata, None, None, None)
        # Triton's JIT, kernel[grid](...): one JITFunction left to Triton (its call slot holds
        # Triton's own run, so fastlaunch's subscript hands the call to Triton's __getitem__), one
        # served by fastlaunch, both from the same source.
        import fastlaunch.triton as flt

        flt.enable()
        stock_fn, _ = _kernel_module(ntensors, nints, directory, tag="_stock")
        flt.exclude(stock_fn)  # Triton alone
        xnumel = 64
        self.jit_grid = _grid(xnumel)
        self.jit_stock, self.jit_fl = stock_fn, fn
        self.jit_kwargs = {"XBLOCK": 128}
        for _ in range(3):
            fn[self.jit_grid](*self.args, XBLOCK=128)
            stock_fn[self.jit_grid](*self.args, XBLOCK=128)
        c = fn.run.counts
        assert c["fast"] == 2 and c["grid_calls"] == 0, f"{name}: the JIT dispatcher did not serve: {c}"
        assert not hasattr(stock_fn.run, "counts"), f"{name}: Triton's side is fastlaunch's"
        # The autotuned pair: one Autotuner (and its JITFunction) left to Triton, one served.
        at_stock, _ = _kernel_module(ntensors, nints, directory, tag="_at_stock", autotune=True)
        flt.exclude(at_stock)  # and its JITFunction
        at_fl, _ = _kernel_module(ntensors, nints, directory, tag="_at", autotune=True)
        self.at_stock, self.at_fl = at_stock, at_fl
        for _ in range(3):
            at_fl[self.jit_grid](*self.args)
            at_stock[self.jit_grid](*self.args)
        c = at_fl.run.counts
        assert c["fast"] == 2, f"{name}: the autotune dispatcher did not serve: {c}"
        assert at_fl.best_config.kwargs == at_stock.best_config.kwargs
        # Keywords: the plain kernel with fastlaunch, and heuristics over autotune with and without.
        kw_fn, kw_params = _kw_kernel_module(ntensors, nints, directory, "_jit", heuristics=False)
        values = self.args + (3, 5)
        nkw = min(10, len(values))
        self.kw_args = values[:len(values) - nkw]
        # Interned, as the compiler interns a call site's keyword names.
        self.kw_kwargs = {sys.intern(k): v for k, v in zip(kw_params[len(values) - nkw:], values[len(values) - nkw:])}
        h_stock, _ = _kw_kernel_module(ntensors, nints, directory, "_h_stock", heuristics=True)
        _stock_all(h_stock)
        h_fl, _ = _kw_kernel_module(ntensors, nints, directory, "_h", heuristics=True)
        self.kw_jit, self.h_stock, self.h_fl = kw_fn, h_stock, h_fl
        for _ in range(3):
            kw_fn[self.jit_grid](*self.kw_args, **self.kw_kwargs, XBLOCK=128)
            h_fl[self.jit_grid](*self.kw_args, **self.kw_kwargs)
            h_stock[self.jit_grid](*self.kw_args, **self.kw_kwargs)
        c = h_fl.run.counts
        assert c["fast"] == 3 and c["values_called"] == 0, f"{name}: the heuristics dispatcher did not serve: {c}"
        assert h_fl.fn.run.counts["fast"] == 2, f"{name}: the autotune dispatcher under heuristics: {h_fl.fn.run.counts}"
        assert kw_fn.run.counts["fast"] == 2, f"{name}: the JIT dispatcher with keywords: {kw_fn.run.counts}"
        assert h_fl.fn.best_config.kwargs == h_stock.fn.best_config.kwargs
        # Kept compiled kernels: what kernel[grid] returned, called again with every parameter. The
        # Triton side's class is CompiledKernel with Triton's own __getitem__ (fastlaunch's is on the
        # base class while it serves Triton).
        from fastlaunch import triton_compiled

        ck_fl = fn[self.jit_grid](*self.args, XBLOCK=128)
        ck_stock = stock_fn[self.jit_grid](*self.args, XBLOCK=128)
        ck_stock.__class__ = type("TritonCompiledKernel", (type(ck_stock),),
                                  {"__getitem__": triton_compiled._state["getitem"][2]})
        self.ck_stock, self.ck_fl, self.ck_args = ck_stock, ck_fl, self.args + (128,)
        for _ in range(3):
            ck_fl[1, 1, 1](*self.ck_args)
            ck_stock[1, 1, 1](*self.ck_args)
        c = triton_compiled.launch_of(ck_fl).counts()
        assert c["fast"] == 3, f"{name}: the compiled kernel was not served: {c}"
        # Declined: the extent as an IntEnum member. The Triton side is its own class, whose
        # __getitem__ is Triton's (fastlaunch's subscript is on the base class while it serves).
        from fastlaunch import triton_jit

        dec_fn, _ = _kernel_module(ntensors, nints, directory, tag="_dstock")
        stock_getitem = next(g for c, _, g in triton_jit._state["getitems"] if isinstance(dec_fn, c))
        dec_fn.__class__ = type("TritonJITFunction", (type(dec_fn),), {"__getitem__": stock_getitem})
        flt.exclude(dec_fn)
        self.dec_stock, self.dec_args = dec_fn, tuple(_Extent.N if type(a) is int and a == 64 else a for a in self.args)
        s0 = fn.run.counts["stock_reasons"].get("arg_type", 0)
        for _ in range(3):
            fn[self.jit_grid](*self.dec_args, XBLOCK=128)
            dec_fn[self.jit_grid](*self.dec_args, XBLOCK=128)
        assert fn.run.counts["stock_reasons"].get("arg_type", 0) == s0 + 3, f"{name}: not declined: {fn.run.counts}"
        h0 = fn.run.counts["hooked"]
        with _hooks():
            for _ in range(3):
                fn[self.jit_grid](*self.args, **self.jit_kwargs)
        assert fn.run.counts["hooked"] == h0 + 3, f"{name}: a hooked call was not served: {fn.run.counts}"

    def loop(self, mode, n):
        """n calls of one mode in a C loop: nanoseconds."""
        from fastlaunch import _C

        if mode in ("triton-jit", "fastlaunch-jit"):
            k = self.jit_stock if mode == "triton-jit" else self.jit_fl
            return _C.bench_subscript_loop(k, self.jit_grid, self.args, self.jit_kwargs, n)
        if mode in DECLINED_MODES:
            k = self.dec_stock if mode == "triton-declined" else self.jit_fl
            return _C.bench_subscript_loop(k, self.jit_grid, self.dec_args, self.jit_kwargs, n)
        if mode in HOOK_MODES:
            with _hooks():
                k = self.jit_stock if mode == "triton-hooks" else self.jit_fl
                return _C.bench_subscript_loop(k, self.jit_grid, self.args, self.jit_kwargs, n)
        if mode in ("triton-autotune", "fastlaunch-autotune"):
            k = self.at_stock if mode == "triton-autotune" else self.at_fl
            return _C.bench_subscript_loop(k, self.jit_grid, self.args, {}, n)
        if mode in KW_MODES:
            k, kw = self.kw_call(mode)
            return _C.bench_subscript_loop(k, self.jit_grid, self.kw_args, kw, n)
        if mode in ("triton-compiled", "fastlaunch-compiled"):
            k = self.ck_stock if mode == "triton-compiled" else self.ck_fl
            return _C.bench_subscript_loop(k, (1, 1, 1), self.ck_args, {}, n)
        fn, a, kw = self.call(mode)
        return _C.bench_loop(fn, a, kw, n)

    def once(self, mode, times=1):
        """Calls of one mode from Python (outside the C loops callgrind counts)."""
        for _ in range(times):
            if mode in ("triton-jit", "fastlaunch-jit"):
                k = self.jit_stock if mode == "triton-jit" else self.jit_fl
                k[self.jit_grid](*self.args, **self.jit_kwargs)
            elif mode in DECLINED_MODES:
                (self.dec_stock if mode == "triton-declined" else self.jit_fl)[self.jit_grid](*self.dec_args,
                                                                                          **self.jit_kwargs)
            elif mode in HOOK_MODES:
                with _hooks():
                    (self.jit_stock if mode == "triton-hooks" else self.jit_fl)[self.jit_grid](*self.args, **self.jit_kwargs)
            elif mode in ("triton-autotune", "fastlaunch-autotune"):
                k = self.at_stock if mode == "triton-autotune" else self.at_fl
                k[self.jit_grid](*self.args)
            elif mode in KW_MODES:
                k, kw = self.kw_call(mode)
                k[self.jit_grid](*self.kw_args, **kw)
            elif mode in ("triton-compiled", "fastlaunch-compiled"):
                (self.ck_stock if mode == "triton-compiled" else self.ck_fl)[1, 1, 1](*self.ck_args)
            else:
                fn, a, kw = self.call(mode)
                fn(*a, **kw)

    def kw_call(self, mode):
        if mode == "fastlaunch-jit-kw":
            return self.kw_jit, dict(self.kw_kwargs, XBLOCK=128)
        return (self.h_stock if mode == "triton-heuristics" else self.h_fl), self.kw_kwargs

    def call(self, mode):
        """(callable, args, kwargs) for one mode."""
        return {
            "floor": (self.floor, self.args, {}),
            "floor-unpack": (self.floor_unpack, self.args, {}),
            "fastlaunch": (self.static_entry, self.args, self.kwargs),
            "fastlaunch-dyngrid": (self.dyn_entry, self.args, self.kwargs),
            "triton-run": (self.binary.run, self.run_prefix + self.args, {}),
            "inductor-stock": (self.stock_run, self.args, self.kwargs),
            "seed": (self.seed, self.args, self.kwargs),
        }[mode]


def _cases(names=None):
    directory = tempfile.mkdtemp(prefix="fl-stub-bench-")
    return [Case(n, t, i, directory) for n, t, i in CASES if names is None or n in names]


def run(quick=False, progress=True):
    from fldev import cuda_stub
    from fastlaunch import _C

    stub = None if REAL else cuda_stub.load()
    if stub:
        stub.count_only()
    results = []
    cases = _cases()
    repeats = 5 if quick else 9
    for ci, case in enumerate(cases):
        if progress:
            print(f"[{BACKEND}] {case.name} ({ci + 1}/{len(cases)})", file=sys.stderr, flush=True)
        t = case.loop("inductor-stock", 2000) / 2000
        n = max(2000, int((0.010 if quick else 0.025) / (t * 1e-9)))
        samples = {m: [] for m in MODES}
        calls0 = stub.state.calls if stub else 0
        jit_calls = [0]
        for _ in range(repeats):
            for m in MODES:
                # Triton's JIT costs tens of microseconds a call: fewer calls, the same per-call time.
                nm = max(200, n // 20) if m in SLOW else n
                samples[m].append(case.loop(m, nm) / nm)
                if m in SLOW:
                    jit_calls[0] += nm
        if REAL:
            import torch

            torch.cuda.synchronize()
        else:
            launched = stub.state.calls - calls0
            # Every mode but the floors reached the driver once per call.
            assert launched == repeats * n * (len(MODES) - 2 - len(SLOW)) + jit_calls[0], (launched, repeats, n)
        floor = statistics.median(samples["floor-unpack"])
        fast = statistics.median(samples["fastlaunch"])
        for m in MODES:
            med = statistics.median(samples[m])
            results.append({"backend": BACKEND, "case": case.name, "mode": m, "ns_median": round(med, 1),
                            "ns_min": round(min(samples[m]), 1), "repeats": repeats, "iterations": n,
                            "vs_floor_unpack": round(med / floor, 3), "vs_fastlaunch": round(med / fast, 3),
                            "pointer_args": "torch tensors", "stock_path": case.stock_path})
    return results


def table(results, out=sys.stdout):
    by = {}
    for r in results:
        by.setdefault(r["case"], {})[r["mode"]] = r
    print(f"{BACKEND:20} " + " ".join(f"{m:>18}" for m in MODES), file=out)
    for case, row in by.items():
        print(f"{case:20} " + " ".join(f"{row[m]['ns_median']:>15.1f} ns" for m in MODES), file=out)
    print("\nratios (medians):", file=out)
    print(f"{'case':20} {'fast/unpack':>12} {'dyn/unpack':>11} {'stock/fast':>11} {'run/fast':>9} {'jit/fljit':>10} "
          f"{'fljit/fast':>11} {'at/flat':>8} {'h/flh':>7} {'flh/jitkw':>10} {'ck/flck':>8} {'hk/flhk':>8} "
          f"{'fldec/dec':>10} {'seed/fast':>10} {'floor/unpack':>13}",
          file=out)
    for case, row in by.items():
        f = row["fastlaunch"]["ns_median"]
        u = row["floor-unpack"]["ns_median"]
        print(f"{case:20} {f / u:>11.2f}x {row['fastlaunch-dyngrid']['ns_median'] / u:>10.2f}x "
              f"{row['inductor-stock']['ns_median'] / f:>10.2f}x {row['triton-run']['ns_median'] / f:>8.2f}x "
              f"{row['triton-jit']['ns_median'] / row['fastlaunch-jit']['ns_median']:>9.2f}x "
              f"{row['fastlaunch-jit']['ns_median'] / f:>10.2f}x "
              f"{row['triton-autotune']['ns_median'] / row['fastlaunch-autotune']['ns_median']:>7.2f}x "
              f"{row['triton-heuristics']['ns_median'] / row['fastlaunch-heuristics']['ns_median']:>6.2f}x "
              f"{row['fastlaunch-heuristics']['ns_median'] / row['fastlaunch-jit-kw']['ns_median']:>9.2f}x "
              f"{row['triton-compiled']['ns_median'] / row['fastlaunch-compiled']['ns_median']:>7.2f}x "
              f"{row['triton-hooks']['ns_median'] / row['fastlaunch-hooks']['ns_median']:>7.2f}x "
              f"{row['fastlaunch-declined']['ns_median'] / row['triton-declined']['ns_median']:>9.3f}x "
              f"{row['seed']['ns_median'] / f:>9.2f}x "
              f"{row['floor']['ns_median'] / u:>12.2f}x", file=out)
    print(f"\n{TARGETS}", file=out)


def run_one(case_name, mode, n):
    """One mode of one case, n calls in the C loop (the callgrind child)."""
    from fldev import cuda_stub
    from fastlaunch import _C

    cuda_stub.load().count_only()
    (case,) = _cases([case_name])
    case.once(mode, 50)  # warm-up outside the counted C loop
    case.loop(mode, n)


class _Extent(enum.IntEnum):
    """An extent as an enum member: Triton takes it as an int; fastlaunch hands it to Triton."""
    N = 64


class _hooks:
    """triton.knobs.runtime's launch hooks set to functions that do nothing, while in the block."""

    def __enter__(self):
        knobs = triton.knobs.runtime
        self.old = knobs.launch_enter_hook, knobs.launch_exit_hook
        knobs.launch_enter_hook = knobs.launch_exit_hook = _no_hook

    def __exit__(self, *exc):
        triton.knobs.runtime.launch_enter_hook, triton.knobs.runtime.launch_exit_hook = self.old


def _no_hook(metadata):
    pass


def _grid(xnumel):
    """The grid users write for a 1-D kernel: a lambda over META and a local, reading the module's
    triton."""
    return lambda META: (triton.cdiv(xnumel, META["XBLOCK"]),)
