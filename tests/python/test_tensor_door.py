"""The tensor door (fastlaunch._tensor, the one C++ file): plain tensors and Parameters read from
torch's C++ object, everything else through data_ptr() as before, and the fallback when the door
is absent, switched off, or built against another torch."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import fastlaunch  # noqa: E402
from fastlaunch import FastLaunchError, _C  # noqa: E402


def door_or_skip():
    in_use, why = _C.tensor_door()
    if not in_use:
        pytest.skip(f"the tensor door is not in use here: {why}")


def test_plain_tensors_and_parameters_through_the_door():
    door_or_skip()
    for t in (torch.arange(8.0), torch.nn.Parameter(torch.ones(3)), torch.zeros(0), torch.arange(10.0)[3:]):
        _, _, door_sum, dp_sum = _C.bench_unpack((t,), 1)
        assert door_sum == dp_sum == t.data_ptr()  # the door took it, and read data_ptr()'s pointer
    assert "fastlaunch._tensor" in _report()


def _report():
    import io

    buf = io.StringIO()
    fastlaunch.report(file=buf)
    return buf.getvalue()


def test_subclasses_and_meta_tensors_go_the_slow_way():
    door_or_skip()

    class Shifted(torch.Tensor):
        def data_ptr(self):  # a subclass may say something else: the slow way asks it
            return super().data_ptr() + 64

    base = torch.zeros(64)
    sub = torch.Tensor._make_subclass(Shifted, base)
    floor = _C.Floor(["ptr"])
    floor(sub)  # extracted without error
    # The door declines the subclass and the meta tensor; data_ptr() answers for them.
    meta = torch.empty(4, device="meta")
    _, _, door_sum, dp_sum = _C.bench_unpack((sub, meta), 1)
    assert door_sum == 0 and dp_sum == base.data_ptr() + 64 + meta.data_ptr()

    class Refusing(torch.Tensor):
        def data_ptr(self):
            raise RuntimeError("no storage here")

    s = _C.stream_create("null")
    plan = fastlaunch.Plan(None, ["ptr"], backend="null", grid=(1,))
    plan(sub, stream=s)
    with pytest.raises(FastLaunchError) as e:  # the slow way's refusal, as before
        plan(torch.Tensor._make_subclass(Refusing, base), stream=s)
    assert e.value.reason.startswith("ptr_extract_failed:0") and not e.value.backend_submitted
    assert _C.stream_count(s, "null") == 1
    _C.stream_destroy(s, "null")


def run_child(code, **env):
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **env), cwd=tools)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


CHILD = """
import torch
{prelude}
import fastlaunch
from fastlaunch import _C
s = _C.stream_create("null")
plan = fastlaunch.Plan(None, ["ptr", "i32"], backend="null", grid=(1,))
plan(torch.zeros(4), 3, stream=s)
print(_C.stream_count(s, "null"), *_C.tensor_door(), sep="|")
"""


def test_fallback_when_switched_off_or_built_for_another_torch():
    off = run_child(CHILD.format(prelude=""), FASTLAUNCH_TENSOR_DOOR="0").strip().split("|")
    assert off == ["1", "False", "switched off by FASTLAUNCH_TENSOR_DOOR=0"]
    other = run_child(CHILD.format(prelude="torch.__version__ = '0.0.0+other'")).strip().split("|")
    built = _C.tensor_door()[1] != "fastlaunch._tensor was not built (no torch headers at build time)"
    assert other[:2] == ["1", "False"]
    assert other[2].endswith("running 0.0.0+other") if built else other[2] == _C.tensor_door()[1]
    built = run_child("import fastlaunch._tensor as t; print(t.torch_version)") if _C.tensor_door()[0] else None
    if built is not None:
        assert built.strip() == torch.__version__
