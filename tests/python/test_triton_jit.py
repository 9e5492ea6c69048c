"""Triton's JIT through fastlaunch (fastlaunch.triton.enable()): `kernel[grid](...)` on the stand-in
driver (tools/fldev/cuda_stub.c), each in a process of its own (the stub becomes its libcuda).

- tools/fldev/jit_fidelity.py: 100,000 random calls over tests/python/jit_kernels.py, each through
  Triton's own run and through fastlaunch: the same compiled variant, grid, block, shared memory,
  stream, attributes and argument bytes, the same CompiledKernel returned.
- tools/fldev/grid_fidelity.py: 10,000 calls with grids of every form Triton's run takes, through
  Triton's own JIT and through fastlaunch: the same launch, return value, exception type, side effects.
- tools/fldev/heuristics_fidelity.py: @triton.heuristics over jit, over and under autotune, over an
  Autotuner subclass, through Triton and through fastlaunch, call by call.
- tools/fldev/jit_checks.py: what the dispatcher does besides launching (warmup, hooks, a changed
  global, values Triton refuses, knob changes, opaque grids, report(), disable())."""

import json
import os
import subprocess
import sys

import pytest
from conftest import memo_or_checked  # noqa: E402

triton = pytest.importorskip("triton")  # a module global, as a grid lambda's triton is in users' code
pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _run(tmp_path, *argv, timeout=1500, **extra_env):
    path = [os.path.join(ROOT, "tools")] + [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path),
               FASTLAUNCH_CACHE_DIR=str(tmp_path), **extra_env)
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def test_jit_calls_match_tritons_own_jit(tmp_path):
    proc = _run(tmp_path, "fldev.jit_fidelity", "100000", "20261201")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["calls"] == 100_000 and result["identical"] + result["raised_by_both"] == 100_000
    # Every variant's first call goes through Triton (it compiles); the rest are fastlaunch's.
    assert result["fast"] >= 90_000, result
    assert result["through_triton"] <= 3 * result["variants"], result
    # The memo (the last fast call's form and entry) took a share of them: random calls of one kernel
    # with the same keyword names, each checked against the entry the previous call found.
    assert memo_or_checked(result) >= 1_000, result


def test_every_grid_form_matches_tritons_own_jit(tmp_path):
    """10,000 calls with generated grids of every form Triton's run takes (and the ones it refuses),
    each through Triton's JIT and through fastlaunch: the same launch or none, the same return value,
    the same exception type, the same calls of the grid's own code."""
    proc = _run(tmp_path, "fldev.grid_fidelity", "10000", "20261203")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["calls"] == 10_000 and result["returned"] + result["raised"] == 10_000
    forms = result["forms"]
    # The forms read in C launch through fastlaunch, directly and as what a callable returned.
    for form in ("tuple", "list", "range", "ndarray", "Size", "dict", "lambda->list", "lambda->tuple",
                 "partial->list", "object->range"):
        assert forms[form].get("fastlaunch", 0) > 0, (form, forms[form])
    # Every form Triton refuses was generated, and raised (through Triton) under fastlaunch too.
    for form in ("NoneType", "float", "str", "int", "generator", "lambda->callable"):
        assert forms[form] == {"raised": forms[form]["raised"]}, (form, forms[form])
    assert result["launched"] >= 5_000 and result["raised"] >= 1_000, result


def test_heuristics_stacks_match_tritons_own(tmp_path):
    """3,000 calls of @triton.heuristics kernels stacked over jit, over autotune, under autotune and
    over an Autotuner subclass whose run calls super().run, through Triton and through fastlaunch:
    the same launches, variants, exceptions, best_config and calls of the project's own functions;
    the values' common forms computed in C."""
    proc = _run(tmp_path, "fldev.heuristics_fidelity", "3000", "20261203")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = result["outcomes"]
    for stack in ("plain", "over_autotune", "under_autotune", "subclass"):
        assert out.get(f"{stack}:returned", 0) > 300 and out.get(f"{stack}:raised", 0) > 0, (stack, out)
    assert result["heuristics_stock"] == 0 and result["heuristics_fast"] >= 2000, result
    assert result["values_in_c"] > 4 * result["values_called"] > 0, result
    tuners = [c for name, c in result["sites"] if name.startswith("autotune[CountingTuner]")]
    assert tuners and tuners[0]["fast"] > 300, result["sites"]  # its super().run served in C


@pytest.mark.parametrize("verify", ["0", "1"])
def test_public_project_kernels_match_tritons_own_jit(tmp_path, verify):
    """Liger-Kernel's ops (from PyPI, installed by the test set-up), each kernel[grid] call they make
    replayed through Triton's run and through fastlaunch: at least 15 kernels, 0 differing. Again
    with FASTLAUNCH_VERIFY=1: every call fastlaunch launched first asked Triton which compiled kernel
    it would run (fastlaunch.triton_check), and Triton's answer was always the one bound: 0
    disagreements."""
    try:
        import liger_kernel  # noqa: F401
    except ImportError as exc:
        from conftest import reference_unavailable

        reference_unavailable(f"liger-kernel is not installed ({exc}); pip install liger-kernel")
    proc = _run(tmp_path, "fldev.public_fidelity", "12", "20261201", FASTLAUNCH_VERIFY=verify)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["kernels"] >= 15, result["kernel_names"]
    assert result["identical"] + result["raised_by_both"] == result["compared"], result
    assert result["fast"] >= result["compared"] // 2, result
    assert result["disagreements"] == {}, result["disagreements"]
    if verify == "1":  # each call fastlaunch launched was checked first
        assert result["verify"] and result["checked"] >= result["fast"], result


def test_fla_kernels_match_tritons_own_jit(tmp_path):
    """flash-linear-attention's forward ops (fla-core from PyPI, installed by the test set-up), each
    kernel[grid] call they make replayed through fastlaunch against Triton's own launch: at least 10
    kernels (heuristics over CachedAutotuner, over Autotuner, over jit), 0 differing."""
    try:
        import fla  # noqa: F401
    except ImportError as exc:
        from conftest import reference_unavailable

        reference_unavailable(f"fla-core is not installed ({exc}); pip install fla-core==0.6.0 einops")
    proc = _run(tmp_path, "fldev.fla_fidelity", "2", "20261203", timeout=2400)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["kernels"] >= 10, result["stacks"]
    assert "Heuristics>CachedAutotuner>JITFunction" in result["stacks"].values(), result["stacks"]
    assert result["identical"] == result["compared"] and result["fast"] >= result["compared"] // 2, result


CHECK_NAMES = ["steady_state_is_fast_and_grid_programs_run_in_c", "registered_c_sources_read_the_stream",
               "autotuned_keys_launch_the_tuned_config_and_the_rest_goes_to_triton",
               "subclass_super_run_reads_the_keywords_dict",
               "warmup_goes_to_triton_and_launches_nothing",
               "pre_run_hooks_and_launch_hooks_are_called_in_c", "run_called_directly_is_served_from_its_first_call", "a_changed_global_raises_tritons_error",
               "values_triton_refuses_raise_the_same_and_launch_nothing",
               "unknown_keywords_and_missing_arguments_as_triton_says", "declined_tensors_are_checked_where_they_live", "knob_change_forgets_bound_variants",
               "opaque_grid_called_once_per_launch_with_tritons_mapping", "memo_takes_repeats_of_a_form_and_only_its_variant",
               "report_lists_jit_sites", "namedtuple_and_tensor_extents_are_served",
               "grid_lambdas_compiled_when_first_met",
               "disable_gives_the_kernels_back"]


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    return json_lines(_run(tmp_path_factory.mktemp("jit"), "fldev.jit_checks", timeout=900), "check")


def json_lines(proc, key):
    """A tool's one JSON line per item, by the item's `key`; at least one, else its stderr."""
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r[key]] = r
    assert out, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", CHECK_NAMES)
def test_jit_behaviour(checks, name):
    assert name in checks, sorted(checks)
    assert checks[name]["ok"], checks[name]["detail"]


def test_grid_tracer_refuses_what_it_cannot_read_per_launch():
    """A grid callable becomes a grid program only when its body is arithmetic over META, int
    closure cells, module ints and Triton's cdiv; anything else is called per launch."""
    from fastlaunch.grid_trace import NotTraceable as _NotTraceable, trace_grid

    class P:
        def __init__(self, name, const):
            self.name, self.is_constexpr = name, const

    class F:
        params = [P("x", False), P("n", False), P("BLOCK", True)]

    n = 1000
    exprs, sources, _ = trace_grid(lambda META: (triton.cdiv(META["n"], META["BLOCK"]), 2), F, {"x": object(), "n": 5,
                                                                                                  "BLOCK": 128})
    assert exprs in (("(($0 + 127) // 128)", "2", "1"), ("((($0 + 128) - 1) // 128)", "2", "1")), exprs
    assert sources == (("arg", 1),)
    exprs, sources, _ = trace_grid(lambda META: (max(n // META["BLOCK"], 1),), F, {"x": 0, "n": 5, "BLOCK": 64})
    assert sources == (("cell", 0),) and exprs[0].startswith("max(")
    for bad in (lambda META: (len(str(n)),), lambda META: (META["x"].numel(),), lambda META: (n / 2,),
                lambda META: (1 if n > 3 else 2,), lambda META, k=3: (k,), lambda META: (abs(n),),
                lambda META: (f"{n}",), lambda META: (hash(n),), lambda META: (triton,),
                lambda META: (META["missing"],)):
        with pytest.raises(_NotTraceable):
            trace_grid(bad, F, {"x": 0, "n": 5, "BLOCK": 64})


def test_jit_subscript_takes_the_class_slot_and_gives_it_back():
    """take_slot makes a class's mapping slot call its JitSubscript directly; classes derived
    later find it through their MRO (or their own __getitem__), and assigning __getitem__ again
    gives the class CPython's own slot back."""
    from fastlaunch import _C

    class K:
        def __getitem__(self, g):
            return ("stock", g)

    stock = K.__getitem__
    attached = []
    sub = _C.JitSubscript(stock, attached.append)
    K.__getitem__ = sub
    assert sub.take_slot(K) is True
    k = K()
    assert k[5] == ("stock", 5) and attached == [k]  # no dispatcher attached: Triton's own subscript

    class Derived(K):
        pass

    class Own(K):
        def __getitem__(self, g):
            return ("own", g)

    d = Derived()
    assert d[6] == ("stock", 6) and attached == [k, d]
    assert Own()[7] == ("own", 7) and len(attached) == 2
    # The slot remembers its last lookup under the class's version tag: a change to the class or a
    # base is seen at the next subscript.
    K.unrelated = 1
    assert d[9] == ("stock", 9) and len(attached) == 3
    Derived.__getitem__ = lambda self, g: ("new", g)
    assert d[10] == ("new", 10) and len(attached) == 3
    del Derived.__getitem__
    assert d[11] == ("stock", 11) and len(attached) == 4
    K.__getitem__ = stock
    assert k[8] == ("stock", 8) and len(attached) == 4  # the JitSubscript is out of the way
    assert sub.take_slot(K) is False  # not K's __getitem__ any more
    assert sub.take_slot(int) is False
    with pytest.raises(TypeError, match="take_slot: expected a class"):
        sub.take_slot(5)


def test_a_loop_at_module_level_is_served_without_revalidating(tmp_path):
    """`for i in range(N): add[grid](x, y, n, BLOCK=128)` at a module's top level, the grid lambda
    reading a module global: every call served, no revalidation although each iteration writes the
    module's globals (tools/fldev/module_loop.py; its timings are printed, not asserted)."""
    proc = _run(tmp_path, "fldev.module_loop", "2000", "3", timeout=900)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    print(result)
    assert result["fastlaunch_calls"] == 3 * 3 * 2000 and result["fastlaunch_stock"] == 0, result
    assert result["revalidations"] == 0, result
    assert proc.returncode == 0, proc.stderr[-2000:]
