"""fastlaunch.inductor against the real CachingAutotuner of the installed torch, with launchers that
Inductor itself generates (TritonCompileResult.make_launcher over a CompiledKernel compiled here for
sm_90) whose runner stands a host kernel in for the GPU: everything Inductor does runs for real, and
the kernel's executions are read back from memory."""

import functools
import os
import random
import subprocess
import sys

import pytest
import torch
import triton
from torch._inductor.runtime import triton_heuristics as th
from torch._inductor.runtime.hints import HeuristicType

import fastlaunch
import fastlaunch.host as host
from fastlaunch import FastLaunchError, FinalizedLaunch, Plan, _C
from fastlaunch import inductor

sys.path.insert(0, os.path.dirname(__file__))
import inductor_kernels as IK  # noqa: E402

pytestmark = pytest.mark.inductor

HOST_ADD1 = r"""
typedef struct { const float *in; float *out; int32_t n; } add1_args;
void add1(const void *a, const fl_host_program *p) {
  const add1_args *x = a;
  for (int32_t i = (int32_t)p->pid[0] * XBLOCK; i < ((int32_t)p->pid[0] + 1) * XBLOCK && i < x->n; i++)
    x->out[i] = x->in[i] + 1.0f;
}
"""
DEV = IK.device_props()
SIGNATURE = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
NO_STATIC_LAUNCHER = IK.compile_without_gpu()


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ik"))
    return {b: host.compile(HOST_ADD1, "add1", cflags=("-O2", f"-DXBLOCK={b}"), directory=d) for b in (128, 1024)}


@pytest.fixture(autouse=True)
def _disabled_after():
    yield
    inductor.disable()
    triton.knobs.runtime.launch_enter_hook.calls.clear()


def host_runner(kernel, stream_holder):
    """Stands in for Triton's CudaLauncher: calls the hooks, drops the constexprs Inductor passes as
    literals, binds the rest (data_ptr() per tensor) and submits to the host backend."""
    plan = Plan(kernel, ["ptr", "ptr", "i32"], name="add1-stock")

    def run(grid_0, grid_1, grid_2, stream, function, metadata, launch_metadata, enter, exit_, *args):
        if enter is not None:
            enter(launch_metadata)
        plan(*args[:3], stream=stream, grid=(grid_0, grid_1, grid_2))
        if exit_ is not None:
            exit_(launch_metadata)

    return run


def stand_in(result, host_kernels):
    """Makes one of Inductor's compile results launch a host kernel instead of the GPU binary: the
    CompiledKernel's runner (what Triton's driver would load) becomes host_runner."""
    ck = result.kernel
    ck._run = host_runner(host_kernels[result.config.kwargs["XBLOCK"]], None)
    ck._init_handles = lambda: None


def make_autotuner(host_kernels, block=1024, name="triton_poi_fused_add_0", launcher_count=1, **meta):
    cfgs = [triton.Config({"XBLOCK": b}, num_warps=4, num_stages=1) for b in ([block, 128][:launcher_count])]
    inductor_meta = {"grid_type": "Grid1D", "kernel_name": name, **meta}
    at = th.CachingAutotuner(IK.triton_poi_fused_add_0,
                             triton_meta={"signature": dict(SIGNATURE), "device": DEV, "constants": {}, "configs": [{}]},
                             configs=cfgs, save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                             heuristic_type=HeuristicType.POINTWISE, size_hints={"x": 4096}, inductor_meta=inductor_meta)
    launchers = []
    with torch._inductor.config.patch(NO_STATIC_LAUNCHER):
        for cfg in cfgs:
            result = at._precompile_config(cfg)  # Inductor's own compile step, for sm_90
            stand_in(result, host_kernels)
            at.compile_results.append(result)
            launchers.append(result.make_launcher())
    at.launchers = launchers
    return at


def site_row(name):
    rows = [r for r in fastlaunch.report(as_dict=True) if r["site"] == name]
    assert len(rows) == 1, rows
    return rows[0]


def resolver(host_kernels):
    return lambda autotuner, launcher: host_kernels[launcher.config.kwargs["XBLOCK"]]


def tensors(n):
    x = torch.arange(n, dtype=torch.float32)
    return x, torch.zeros(n)


def test_enable_makes_generated_calls_take_the_fast_path(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    assert isinstance(vars(at)["run"], fastlaunch.bind.BoundLaunch)
    s = host.Stream()
    outs = []
    for n in (1000, 4096, 5000, 1, 3000):
        x, out = tensors(n)
        at.run(x, out, n, stream=s.handle)  # the call Inductor's wrapper makes: kernel.run(..., stream=stream0)
        outs.append((x, out))
    s.synchronize()
    for x, out in outs:
        assert torch.equal(out, x + 1)
    entry = vars(at)["run"]
    assert isinstance(entry, FinalizedLaunch) and entry.calls == 4
    assert entry.plan.grid_mode == "program" and entry.plan.resolve_grid(None, None, 5000) == (5, 1, 1)
    row = site_row("triton_poi_fused_add_0")
    assert (row["fast"], row["stock"], row["promotions"]) == (4, 1, 1)
    s.close()


def test_autotuning_runs_in_the_stock_path_first(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, launcher_count=2)
    benched = []
    at.bench = lambda launcher, *a, **k: (benched.append(launcher), [1.0 if launcher.config.kwargs["XBLOCK"] == 128 else 2.0])[1][0]
    s = host.Stream()
    x, out = tensors(3000)
    at.run(x, out, 3000, stream=s.handle)
    assert len(at.launchers) == 1 and at.launchers[0].config.kwargs["XBLOCK"] == 128 and len(benched) == 2
    at.run(x, out, 3000, stream=s.handle)
    s.synchronize()
    assert isinstance(vars(at)["run"], FinalizedLaunch) and vars(at)["run"].calls == 1
    assert torch.equal(out, x + 1)
    s.close()


def test_profiler_sees_every_kernel(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, name="triton_poi_profiled_7")
    s = host.Stream()
    x, out = tensors(100)
    at.run(x, out, 100, stream=s.handle)
    at.run(x, out, 100, stream=s.handle)
    entry = vars(at)["run"]
    with torch.profiler.profile() as prof:
        at.run(x, out, 100, stream=s.handle)
        at.run(x, out, 100, stream=s.handle)
    at.run(x, out, 100, stream=s.handle)
    s.synchronize()
    names = [e.name for e in prof.events()]
    assert names.count("triton_poi_profiled_7") == 2  # the stock run's record function, for both calls
    assert entry.fallbacks == 2 and entry.calls == 2 and vars(at)["run"] is entry
    s.close()


def test_benchmark_runs_hooks_and_debug_flags_take_the_stock_path(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    s = host.Stream()
    x, out = tensors(100)
    at.run(x, out, 100, stream=s.handle)
    entry = vars(at)["run"]
    at.run(x, out, 100, stream=s.handle, benchmark_run=True)
    seen = []
    triton.knobs.runtime.launch_enter_hook.add(seen.append)
    at.run(x, out, 100, stream=s.handle)
    triton.knobs.runtime.launch_enter_hook.remove(seen.append)
    at.run(x, out, 100, stream=s.handle)
    s.synchronize()
    assert len(seen) == 1  # the hook saw its call, through the stock launcher
    assert entry.calls == 1 and vars(at)["run"] is entry
    fallbacks = entry.bound.counts()["fallbacks"]
    assert fallbacks["runtime_kwargs"] == 1 and fallbacks["launch_hooks"] == 1
    s.close()


def test_saving_binaries_and_coordinate_descent_complete_before_promotion(host_kernels, monkeypatch):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, coordinate_descent_tuning=True)
    launcher = at.launchers[0]
    launcher.store_cubin = True
    saved, tuned = [], []
    monkeypatch.setattr(at, "save_gpu_kernel", lambda stream, l: (saved.append(l), setattr(at, "cuda_kernel_saved", True)))

    def coordesc(l, *a, **k):
        tuned.append(l)
        l.config.found_by_coordesc = True
        return l

    monkeypatch.setattr(at, "coordinate_descent_tuning", coordesc)
    s = host.Stream()
    x, out = tensors(100)
    at.run(x, out, 100, stream=s.handle)
    assert saved == [launcher] and tuned == [launcher]
    at.run(x, out, 100, stream=s.handle)
    s.synchronize()
    assert isinstance(vars(at)["run"], FinalizedLaunch) and vars(at)["run"].calls == 1
    s.close()


def test_dump_launch_params_always_stock(host_kernels, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_DUMP_LAUNCH_PARAMS", "1")
    # Inductor appends each call's parameters to "<sys.argv[0]>.launch_params".
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "prog")])
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, name="triton_poi_dumped_1")
    s = host.Stream()
    x, out = tensors(100)
    for _ in range(3):
        at.run(x, out, 100, stream=s.handle)
    s.synchronize()
    assert not isinstance(vars(at)["run"], FinalizedLaunch)
    assert site_row("triton_poi_dumped_1")["fallbacks"] == {"dump_launch_params": 3}
    assert len((tmp_path / "prog.launch_params").read_text().splitlines()) == 3  # the stock run dumped each
    assert torch.equal(out, x + 1)
    s.close()


def test_refusals_are_stable_and_counted(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, name="triton_poi_extra_2", extra_launcher_args=["_grid_0"])
    s = host.Stream()
    x, out = tensors(100)
    for _ in range(3):
        at.run(x, out, 100, 1, stream=s.handle)  # the call site passes the extra launcher argument
    s.synchronize()
    row = site_row("triton_poi_extra_2")
    assert row["negative"] == "extra_launcher_args_unsupported" and row["promotions"] == 0
    assert row["refusals"] == {"extra_launcher_args_unsupported": 1} and row["stock"] == 3
    assert torch.equal(out, x + 1)
    s.close()


def test_debug_autotuner_is_not_bound(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, profile_bandwidth=True)
    assert "run" not in vars(at)


@pytest.mark.parametrize("torch_npu_fast_launch", [False, True])
def test_npu_autotuners_keep_one_owner(host_kernels, monkeypatch, torch_npu_fast_launch):
    """torch_npu's autotuners subclass CachingAutotuner (NPUCachingAutotuner calls its __init__), so
    enable() sees them and hands them to the npu adapter: with torch_npu's own fast launch on, that
    owns the call slot and nothing is bound; an autotuner whose run() fastlaunch does not know (this
    model: a device type and the super().__init__ call, not torch_npu's class) is left to its stock
    launcher; report() says who owns them. torch_npu's real autotuner: test_npu_inductor.py."""
    import io

    from fastlaunch import bind as fl_bind

    monkeypatch.setenv("TORCHINDUCTOR_NPU_FAST_LAUNCH", "1" if torch_npu_fast_launch else "0")
    monkeypatch.setattr(fl_bind, "_not_bound", {})

    class NPUCachingAutotuner(th.CachingAutotuner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.best_runtime_blocks = ()

    npu_dev = DEV._replace(type="npu") if hasattr(DEV, "_replace") else DEV
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = NPUCachingAutotuner(IK.triton_poi_fused_add_0,
                             triton_meta={"signature": dict(SIGNATURE), "device": npu_dev, "constants": {},
                                          "configs": [{}]},
                             configs=[triton.Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)],
                             save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                             heuristic_type=HeuristicType.POINTWISE, size_hints={"x": 4096},
                             inductor_meta={"grid_type": "Grid1D", "kernel_name": "triton_npu_0"})
    assert "run" not in vars(at)  # the class's own run: one owner
    reason = "npu:torch_npu_fast_launch_owns" if torch_npu_fast_launch else "npu:autotuner_unrecognised"
    assert fl_bind.not_bound() == {reason: 1}
    out = io.StringIO()
    fastlaunch.report(out)
    owner = "torch_npu's own fast launch" if torch_npu_fast_launch else "the stock launcher"
    assert f"not bound ({owner} keeps these call slots): {reason}=1" in out.getvalue()
    # A CUDA autotuner made alongside is still bound.
    assert "run" in vars(make_autotuner(host_kernels))


def test_disable_leaves_no_trace(host_kernels):
    init, getstate = th.CachingAutotuner.__dict__["__init__"], th.CachingAutotuner.__dict__.get("__getstate__")
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    s = host.Stream()
    x, out = tensors(100)
    at.run(x, out, 100, stream=s.handle)
    at.run(x, out, 100, stream=s.handle)
    assert "run" in vars(at)
    inductor.disable()
    assert th.CachingAutotuner.__dict__["__init__"] is init
    assert th.CachingAutotuner.__dict__.get("__getstate__") is getstate
    assert "run" not in vars(at) and not inductor.enabled()
    at.run(x, out, 100, stream=s.handle)  # the class method again
    fresh = make_autotuner(host_kernels)
    assert "run" not in vars(fresh)
    s.synchronize()
    assert torch.equal(out, x + 1)
    s.close()


def test_scope_binds_only_the_autotuners_created_inside_it(host_kernels):
    adapter = inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels))
    before = make_autotuner(host_kernels, name="before_scope")
    with inductor.scope(adapter):
        inside = make_autotuner(host_kernels, name="inside_scope")
        assert not inductor.enabled()  # a scope is not enable()
    after = make_autotuner(host_kernels, name="after_scope")
    assert "run" not in vars(before) and "run" not in vars(after)
    assert isinstance(vars(inside)["run"], fastlaunch.bind.BoundLaunch)
    s = host.Stream()
    x, out = tensors(300)
    for _ in range(3):
        inside.run(x, out, 300, stream=s.handle)  # still bound after the block
    s.synchronize()
    assert torch.equal(out, x + 1)
    row = site_row("inside_scope")
    assert (row["fast"], row["stock"]) == (2, 1)
    # An exception leaves the block as well; the next autotuner is not bound.
    with pytest.raises(KeyError):
        with inductor.scope(adapter):
            raise KeyError("x")
    assert "run" not in vars(make_autotuner(host_kernels, name="after_error"))
    s.close()


def test_pickling_leaves_the_slot_behind(host_kernels):
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    at.launchers = []  # CachingAutotuner pickles only without launchers
    state = at.__getstate__()
    assert "run" not in state and "run" in vars(at)


def test_fastlaunch_inductor_env_enables_at_import():
    code = ("import fastlaunch, fastlaunch.inductor as i; from torch._inductor.runtime import triton_heuristics as th; "
            "print(i.enabled(), getattr(th.CachingAutotuner.__init__, '_fastlaunch', False))")
    on = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, FASTLAUNCH_INDUCTOR="1"),
                        capture_output=True, text=True, timeout=300)
    off = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in os.environ.items()
                                                              if k != "FASTLAUNCH_INDUCTOR"},
                         capture_output=True, text=True, timeout=300)
    assert on.stdout.split() == ["True", "True"], on.stderr
    assert off.stdout.split() == ["False", "False"], off.stderr


# ---- the grid compiler against Python, over Inductor's own grid expressions ----
GRIDS = ["Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow", "BatchMatmulGrid3D", "CooperativeReductionGrid",
         "SplitScanGrid"]


def _config(rng, cls):
    blocks = [1, 2, 8, 16, 32, 64, 128, 256, 512, 1024]
    cfg = {"XBLOCK": rng.choice(blocks), "YBLOCK": rng.choice(blocks), "ZBLOCK": rng.choice(blocks),
           "R0_BLOCK": rng.choice(blocks), "RSPLIT": rng.choice([2, 4, 8, 16])}
    return cfg


def test_grid_programs_match_python_on_inductor_grids():
    rng = random.Random(2026)
    checked = 0
    kinds = set()
    available = {g for g in GRIDS if isinstance(getattr(th, g, None), type)}  # older Inductor has fewer
    assert {"Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow"} <= available
    tries = 0
    while checked < 10_000 and tries < 40_000:
        tries += 1
        cls = rng.choice(sorted(available))
        meta = {"grid_type": cls}
        cfg = _config(rng, cls)
        try:
            grid = th.GridExpr.from_meta(meta, cfg)
        except Exception:
            continue
        exprs = inductor.grid_exprs_of(meta, cfg)
        scale = rng.choice([1, 10, 1000, 70000, 2**20, 2**31 - 1])
        env = {n: rng.randint(0, scale) for n in ("xnumel", "ynumel", "znumel", "r0_numel")}
        names, values = list(env), list(env.values())
        try:
            expected = grid.eval_slow(dict(env))
        except ZeroDivisionError:
            # Inductor before 2.13 divides by a zero ynumel in the y/z split; so does the grid
            # program, which then refuses the launch (the stock launcher raises the same way).
            with pytest.raises(FastLaunchError, match="grid_div_by_zero"):
                for e in exprs:
                    _C.grid_eval(e, names, values)
            continue
        got = tuple(_C.grid_eval(e, names, values) for e in exprs)
        assert got == tuple(expected), (cls, cfg, env, exprs)
        checked += 1
        kinds.add(cls)
    assert checked >= 10_000 and kinds == available


def test_y_overflow_split_is_inlined():
    grid = th.GridExpr.from_meta({"grid_type": "Grid2DWithYZOverflow"}, {"XBLOCK": 64, "YBLOCK": 32})
    assert grid.prefix  # Inductor writes temporaries for this one
    exprs = inductor.grid_exprs_of({"grid_type": "Grid2DWithYZOverflow"}, {"XBLOCK": 64, "YBLOCK": 32})
    for y in (0, 1, 32, 65535 * 32, 65535 * 32 + 1, 10**9):
        env = {"xnumel": 77, "ynumel": y}
        try:
            expected = grid.eval_slow(dict(env))
        except ZeroDivisionError:  # Inductor before 2.13 (see above)
            assert y == 0
            with pytest.raises(FastLaunchError, match="grid_div_by_zero"):
                [_C.grid_eval(e, list(env), list(env.values())) for e in exprs]
            continue
        assert tuple(_C.grid_eval(e, list(env), list(env.values())) for e in exprs) == expected


def test_size_one_arguments_folded_by_triton_are_skipped(host_kernels):
    """Inductor passes a size specialized to 1 at the call site; Triton folded it into the binary."""
    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    launcher = at.launchers[0]
    # The launcher Inductor writes for it (its own generator): ks0 passed on to Triton's launcher, which
    # drops it (folded into the binary): the stand-in runner drops it likewise.
    scope = dict(launcher.__globals__)
    inner = scope["runner"]
    scope["runner"] = lambda *a: inner(*a[:11], *a[12:])
    wrapped = at.compile_results[0]._gen_launcher_code(
        scope, ["in_ptr0", "out_ptr0", "ks0", "xnumel"],
        ["grid_0", "grid_1", "grid_2", "stream", "function", "metadata", "None", "launch_enter_hook",
         "launch_exit_hook", "in_ptr0", "out_ptr0", "ks0", "xnumel"])
    for attr in ("config", "cache_hash", "store_cubin", "n_regs", "n_spills", "shared"):
        setattr(wrapped, attr, getattr(launcher, attr, None))
    at.triton_meta["signature"] = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "ks0": "i32", "xnumel": "i32",
                                   "XBLOCK": "constexpr"}
    at.triton_meta["constants"] = {"ks0": 1}
    at.launchers = [wrapped]
    bound = vars(at)["run"]
    s = host.Stream()
    x, out = tensors(3000)
    at.run(x, out, 1, 3000, stream=s.handle)
    at.run(x, out, 1, 3000, stream=s.handle)
    s.synchronize()
    entry = vars(at)["run"]
    assert isinstance(entry, FinalizedLaunch), bound.counts()
    assert entry.calls == 1 and entry.plan.call_arg_count == 4 and torch.equal(out, x + 1)
    at.triton_meta["constants"] = {}
    at.triton_meta["signature"]["ks0"] = "constexpr"
    assert bound.promote((x, out, 1, 3000), wrapped) is False
    assert bound.counts()["negative"] == "runtime_arg_not_in_abi:ks0"
    s.close()


# ---- autotuners compiled in Inductor's worker processes ----
@pytest.fixture(scope="module")
def worker_pool():
    """Inductor's own compile worker pool (a separate Python process, tasks and results pickled),
    the one parallel compile uses."""
    from torch._inductor.compile_worker.subproc_pool import SubprocPool

    pool = SubprocPool(1)
    yield pool
    pool.shutdown()


def test_autotuners_from_compile_workers_are_bound_and_promoted(host_kernels, worker_pool):
    """Parallel compile: the worker builds and precompiles the autotuner from Inductor-generated
    source and pickles it back; the parent restores it as Inductor's AsyncCompile does. The parent's
    own precompile would load the binary on the GPU, so here its launchers come from the same
    compile results through make_launcher, with a host kernel standing in for the GPU."""
    from torch._inductor.runtime.compile_tasks import _worker_compile_triton

    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    names = [f"triton_poi_fused_add_worker_{i}" for i in range(3)]
    futures = [worker_pool.submit(_worker_compile_triton, functools.partial(IK.load_in_worker, n, IK.kernel_source(n)),
                                  {}, dict(NO_STATIC_LAUNCHER)) for n in names]
    s = host.Stream()
    kept = []
    for name, future in zip(names, futures):
        kernel, _elapsed_us = future.result(timeout=600)
        assert kernel.launchers == [] and kernel.compile_results, "not what a worker sends back"
        # Bound on arrival: the slot exists before the parent does anything with it.
        assert isinstance(vars(kernel).get("run"), fastlaunch.bind.BoundLaunch), name
        kernel.restore_after_unpickle(old_values=None)  # what AsyncCompile does next
        launchers = []
        for result in kernel.compile_results:
            stand_in(result, host_kernels)
            launchers.append(result.make_launcher())
        kernel.launchers = launchers
        for n in (1000, 3000, 4096):
            x, out = tensors(n)
            kernel.run(x, out, n, stream=s.handle)
            kept.append((x, out))
    s.synchronize()
    for x, out in kept:
        assert torch.equal(out, x + 1)
    for name in names:
        row = site_row(name)
        assert (row["promotions"], row["fast"], row["stock"]) == (1, 2, 1), row
    s.close()


def test_unpickled_autotuner_without_enable_has_no_slot(host_kernels):
    import pickle

    setstate = th.CachingAutotuner.__dict__.get("__setstate__")
    at = th.CachingAutotuner(IK.triton_poi_fused_add_0,
                             triton_meta={"signature": dict(SIGNATURE), "device": DEV, "constants": {}, "configs": [{}]},
                             configs=[triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1)], save_cache_hook=None,
                             mutated_arg_names=[], optimize_mem=True, heuristic_type=HeuristicType.POINTWISE,
                             size_hints={"x": 4096}, inductor_meta={"grid_type": "Grid1D", "kernel_name": "plain_3"})
    old = at.prepare_for_pickle()  # what the worker does (it clears the shared JITFunction's state)
    try:
        again = pickle.loads(pickle.dumps(at))
        assert "run" not in vars(again)
        inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
        again = pickle.loads(pickle.dumps(at))
        assert isinstance(vars(again).get("run"), fastlaunch.bind.BoundLaunch)
        inductor.disable()
        assert th.CachingAutotuner.__dict__.get("__setstate__") is setstate
        assert "run" not in vars(pickle.loads(pickle.dumps(at)))
    finally:
        at.restore_after_unpickle(old)


def test_debug_mode_takes_the_stock_path(host_kernels):
    dm = inductor._debug_mode_module()
    if dm is None:
        pytest.skip(f"torch {torch.__version__} has no DebugMode")
    from torch.utils._debug_mode import DebugMode

    inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels, name="triton_poi_debugged_4")
    s = host.Stream()

    class HostDevice:  # DebugMode synchronizes the kernel's device after a recorded launch
        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def synchronize(device=None):
            s.synchronize()

    at.get_device_interface = lambda: HostDevice
    x, out = tensors(100)
    at.run(x, out, 100, stream=s.handle)
    at.run(x, out, 100, stream=s.handle)
    with DebugMode() as mode:
        assert dm._ACTIVE_DEBUG_MODE_COUNT > 0
        at.run(x, out, 100, stream=s.handle)
    at.run(x, out, 100, stream=s.handle)
    s.synchronize()
    row = site_row("triton_poi_debugged_4")
    assert row["fast"] == 2 and row["fallbacks"].get("debug_mode") == 1, row
    if hasattr(mode, "debug_string"):
        assert "triton_poi_debugged_4" in mode.debug_string() or "triton_poi_fused_add_0" in mode.debug_string()
    s.close()


def test_a_static_launcher_that_allocates_global_scratch_gets_it_per_call():
    """torch 2.15's static CUDA launcher allocates global scratch per launch (Inductor's TMA templates
    make device-side descriptors there): the plan takes the launcher's trailing pointers as its last
    arguments and the entry allocates as the launcher does (Triton's allocator ContextVar, bytes per
    program, the alignment), never launching with the scratch pointer null; a launcher without
    scratch keeps null slots. Calls compared with torch's launcher: tests/python/test_inductor_tma.py."""
    import types

    from triton.runtime import _allocation

    from fastlaunch import FastLaunchPlanUnavailable
    from fastlaunch.inductor_abi import launch_target

    class Static:  # what static_kernel finds behind a static launcher's runner
        arg_tys, function, has_profile_scratch, num_warps, shared, global_scratch_align = "O", 1, True, 4, 0, 128

        def __init__(self, size, has=True):
            self.global_scratch_size, self.has_global_scratch = size, has

        def run(self, *args):
            raise AssertionError("not launched here")

    autotuner = types.SimpleNamespace(triton_meta={"device_type": "cuda"})

    def target(static):
        return launch_target("cuda", autotuner, types.FunctionType((lambda: None).__code__, {"runner": static.run}))

    options, abi, backend, trailing, scratch = target(Static(256))
    assert options["hidden_ptrs"] == 0 and trailing == ["ptr", "ptr"] and (abi, backend) == ("cuda", "cuda")
    assert scratch == (_allocation._allocator, 256, 128, 1, 2)
    for size in (0, None):
        options, _, _, trailing, scratch = target(Static(size))
        assert options["hidden_ptrs"] == 2 and trailing == [] and scratch is None
    with pytest.raises(FastLaunchPlanUnavailable, match="global_scratch_required:256"):
        target(Static(256, has=False))  # a size and no slot: not a launcher fastlaunch knows
