"""The JIT dispatcher against callbacks that call back in (issue 38), in the release build with the
tensor door: one check per defect (tools/fldev/reentry_checks.py), a shorter run of the reentrancy
harness (tools/fldev/reentry.py) and the threads run. `make reentry-sanitize` runs the same under
the ASan+UBSan build, the harness at 2,000 runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

DEFECTS = ["d01_disable_in_attach", "d02_stream_function_clears_the_table", "d03_global_eq_clears_the_table",
           "d04_tuner_warmup_bool_renames", "d05_spare_grid_del_launches", "d06_insert_bad_grid_spec",
           "d07_grid_moves_storage", "d08_param_const_bool_raises", "d09_grid_sets_launch_hook",
           "d10_grid_writes_mapping", "d11_data_ptr_then_raises", "d12_watch_detector",
           "d13_launch_hook_clears_and_relaunches", "d14_pre_run_hook_clears_and_relaunches",
           "d15_config_pre_hook_clears_and_relaunches"]


def _run(tmp, *argv, timeout=1200):
    path = [os.path.join(ROOT, "tools")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), FASTLAUNCH_CACHE_DIR=str(tmp))
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def run_checks(tmp, module):
    """A checks module (fldev.jit_checks.run_checks' form) run in a process of its own: its reports
    by check name (a check that crashed the process has none)."""
    proc = _run(tmp, module)
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if "ok" in r:
                out[r["check"]] = r
    assert out, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    return run_checks(tmp_path_factory.mktemp("reentry"), "fldev.reentry_checks")


@pytest.mark.parametrize("name", DEFECTS)
def test_defect(checks, name):
    assert name in checks, (sorted(checks), "a check that did not report crashed the process")
    assert checks[name]["ok"], checks[name]["detail"]


def test_combined_harness_every_form_point_and_pair_as_triton(tmp_path):
    """fldev.reentry_pairs: every launch form (kernel[grid], fn.run, Autotuner, Heuristics, a kept
    compiled kernel, compiled.run called directly) at every callback point it passes through (Triton's
    binder among them: fastlaunch's check calls it), under
    12 action pairs (two actions in one outer call), each call the same as Triton alone; every cell
    fired, the ones that cannot exist named."""
    proc = _run(tmp_path, "fldev.reentry_pairs")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    r = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert r["different"] == 0 and r["same"] == r["cells"], r["first_differences"]
    assert r["never_fired"] == [] and r["pairs"] >= 10 and r["cells"] >= 600, r
    assert all(n == r["pairs"] for n in r["pairs_fired_per_form"].values()), r["pairs_fired_per_form"]
    assert len(r["forms"]) == 6 and len(r["points"]) == 14 and "binder" in r["points"] and r["cannot_exist"], r
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_harness_every_point_and_action_as_triton(tmp_path):
    proc = _run(tmp_path, "fldev.reentry", "400", "7")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    r = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert r["different"] == 0 and r["same"] == 400, r["first_differences"]
    if hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled():
        # A free-threaded CPython 3.13 schedules a collection from the young objects' count seen at an
        # eval breaker (gc_should_collect), not at the allocation: inside one launch it may not come,
        # so the harness's "gc" point is not required to fire there; every other point is.
        assert [c for c in r["never_fired"] if not c.startswith("gc/")] == [], r
    else:
        assert r["never_fired"] == [], r


def test_threads_toggling_enable_launch_every_call_once(tmp_path):
    proc = _run(tmp_path, "fldev.reentry", "--threads", "3")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    r = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert r["errors"] == [] and r["calls"] == r["launches"] > 0, r
