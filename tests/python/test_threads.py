"""Threads launching at once (issue 41): 8 threads through plans, Inductor entries and kernel[grid]
(plain, autotuned, heuristics), one more toggling fastlaunch.triton.enable()/disable() and one setting
and clearing a launch hook, over the stand-in driver: no call raises in fastlaunch's code and the
driver saw one launch per call made (tools/fldev/ft_stress.py). With the GIL the threads take turns;
`make test-freethreaded` runs this with the GIL off for 10 s. Also: two threads with their own entries
against one (tools/fldev/ft_scaling.py), which must not lose launches or fall back."""

import json
import sys

import pytest

from test_hip import _run

pytest.importorskip("triton")
pytest.importorskip("torch")

FREE_THREADED = hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled()


def test_eight_threads_launch_every_call_once(tmp_path):
    seconds = "10" if FREE_THREADED else "3"
    proc = _run(tmp_path, "fldev.ft_stress", seconds, timeout=1200)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert proc.returncode == 0 and not result["errors"], result
    assert result["calls"] == result["launches"] > 0, result
    assert result["gil"] == ("off" if FREE_THREADED else "on"), result
    assert all(n > 0 for n in result["by_kind"].values()), result
    assert set(result["by_kind"]) >= {"plan_shared", "plan_own", "jit_plain", "jit_autotune", "jit_heuristics"}


def test_two_threads_with_their_own_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("FLDEV_SCALING_NO_WAIT", "1")  # read by the child: no wait for a quiet machine here
    proc = _run(tmp_path, "fldev.ft_scaling", "0.5", "1", timeout=600)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert proc.returncode == 0 and result["one_thread_per_s"] > 0 and result["two_threads_per_s"] > 0, result


def test_daemon_threads_launching_while_the_interpreter_exits(tmp_path):
    """Their per-thread kernel[grid] caches are released at shutdown by the finalizing thread."""
    proc = _run(tmp_path, "fldev.ft_stress", "0.5", "--daemons", timeout=600)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):].splitlines()[0])
    assert proc.returncode == 0 and not result["errors"], (proc.returncode, result, proc.stderr[-2000:])
    assert result["calls"] == result["launches"] > 0, result
