"""Errors people can act on: a sentence naming the argument (by name where the plan has names) and
what was expected, the stable code as `reason` with `code`, `index` and `name` beside it; and the
command line's manners (a closed pipe ends it quietly)."""

import os
import subprocess
import sys

import pytest

import fastlaunch
from fastlaunch import FastLaunchError, _C


@pytest.fixture
def stream():
    s = _C.stream_create("null")
    yield s
    _C.stream_destroy(s, "null")


def test_launch_errors_are_sentences_naming_the_argument(stream):
    named = fastlaunch.Plan(None, ["ptr", "i32", "fp32"], backend="null", grid=(1,), arg_names=["x", "n", "alpha"])
    with pytest.raises(FastLaunchError) as e:
        named(None, 2**40, 1.0, stream=stream)
    assert str(e.value) == "argument 'n' (index 1) does not fit in its kind, i32 [int_out_of_range:1:i32]"
    assert (e.value.reason, e.value.code, e.value.index, e.value.name) == ("int_out_of_range:1:i32", "int_out_of_range", 1, "n")
    assert not e.value.backend_submitted
    with pytest.raises(FastLaunchError) as e:
        named(None, 1, "fast", stream=stream)
    assert str(e.value).startswith("argument 'alpha' (index 2) must be a float or an int (its kind is fp32), not str")
    unnamed = fastlaunch.Plan(None, ["ptr", "u32"], backend="null", grid=(1,))
    with pytest.raises(FastLaunchError) as e:
        unnamed(None, -1, stream=stream)
    assert str(e.value).startswith("argument 1 is negative, but its kind, u32, is unsigned")
    assert (e.value.index, e.value.name) == (1, None)
    assert _C.stream_count(stream, "null") == 0  # nothing launched by any of them


def test_a_missing_stream_says_so():
    plan = fastlaunch.Plan(None, ["i32"], backend="null", grid=(1,))
    with pytest.raises(FastLaunchError) as e:
        plan(1)
    assert str(e.value).startswith("stream= is missing or 0: pass stream=<handle>")
    assert e.value.reason == "stream_invalid:0x0" and e.value.index is None
    with pytest.raises(FastLaunchError, match=r"stream= must be an int handle, not str \[stream_invalid_type:str\]"):
        plan(1, stream="s")


def test_unknown_codes_and_errors_raised_from_python_keep_their_code():
    e = FastLaunchError("arg_kind_unsupported:x:tensordesc")
    assert (e.reason, e.code, e.index, e.name) == ("arg_kind_unsupported:x:tensordesc", "arg_kind_unsupported", None, None)


def test_layout_errors_carry_the_entry_index():
    with pytest.raises(ValueError) as e:
        fastlaunch.layout("cuda", ["ptr", "i33"])
    assert e.value.index == 1 and e.value.reason == "kinds[1]: kind_unknown:i33"
    assert str(e.value).startswith("kinds[1]: 'i33' is not a kind: ptr, i1, i8")


def test_grid_exprs_take_one_to_three_expressions(stream):
    plan = fastlaunch.Plan(None, ["i32"], backend="null", arg_names=["n"], grid_exprs=["(n + 63) // 64"])
    assert plan.resolve_grid(1000) == (16, 1, 1)
    with pytest.raises(ValueError, match="grid_exprs: expected 1 to 3 expressions"):
        fastlaunch.Plan(None, ["i32"], backend="null", arg_names=["n"], grid_exprs=["1"] * 4)


def test_layout_into_a_closed_pipe_ends_quietly():
    cmd = [sys.executable, "-m", "fastlaunch", "layout", "--abi", "host", "--indent", "400", *["i32"] * 200]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    first = proc.stdout.readline()  # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and first.startswith(b"{")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
