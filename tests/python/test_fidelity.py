"""Bit-identical with the stock launcher (tools/fldev/fidelity.py): 100,000 random launches of a
Triton kernel taking every scalar kind (edges included: rounding ties, subnormals, inf and NaN,
out-of-range ints Triton wraps, i1 values other than 0 and 1), each through Triton's own launcher
and through a fastlaunch plan over one stub libcuda, every parameter byte, the grid, block, shared
memory, stream and launch attributes compared. Each launch through fastlaunch gave exactly
Triton's bytes or was refused before the boundary; none was launched where Triton raised."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_every_kind_bit_identical_with_tritons_launcher(tmp_path):
    # A process of its own: the stub becomes that process's libcuda.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tools"), os.environ.get("PYTHONPATH", "")]), FASTLAUNCH_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "fldev.fidelity", "100000", "20261130"], capture_output=True,
                          text=True, timeout=900, env=env, cwd=ROOT)
    out = proc.stdout[proc.stdout.index("{"):]
    result = json.loads(out)
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["launches"] == 100_000
    # Most launches are compared byte for byte; the refusals are the out-of-range values. (Triton
    # <= 3.6 refuses every negative i8 itself: those launches have no stock bytes to compare.)
    assert result["identical"] + result["triton_refuses_negative_i8"] >= 60_000, result
    assert set(result["refusal_reasons"]) <= {"int_out_of_range", "uint_negative", "float_out_of_range"}, result
