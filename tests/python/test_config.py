"""fastlaunch.config: every FASTLAUNCH_* variable the package reads is in its table (checked against
the sources), read with warnings that name a bad value or a misspelt name; the README's table is
the table's own."""

import os
import re
import subprocess
import sys
import warnings

import pytest

from fastlaunch import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_variable_the_sources_read_is_in_the_table():
    found = set()
    for top in ("src", "python", "include"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".cpp", ".h", ".py")):
                    found |= set(re.findall(r"FASTLAUNCH_[A-Z_]+", open(os.path.join(d, f)).read()))
    guards = {n for n in found if n.endswith("_H")}  # include guards
    assert found - guards - set(config.TOOL_VARIABLES) == {v.name for v in config.VARIABLES}


def test_values_are_typed_and_bad_ones_named():
    c = config.read({"FASTLAUNCH_TRITON": "yes", "FASTLAUNCH_CACHE_DIR": "/x", "FASTLAUNCH_TENSOR_DOOR": "off"})
    assert c.triton and not c.inductor and c.cache_dir == "/x" and not c.tensor_door and c.cuda_params == "packed"
    with pytest.warns(UserWarning, match=r"FASTLAUNCH_LOG='maybe' is not a switch"):
        assert config.read({"FASTLAUNCH_LOG": "maybe"}).log is False
    with pytest.warns(UserWarning, match="FASTLAUNCH_TRTION is not a fastlaunch variable; did you mean FASTLAUNCH_TRITON"):
        config.read({"FASTLAUNCH_TRTION": "1"})
    with pytest.warns(UserWarning, match="FASTLAUNCH_CUDA_PARAMS='list': use array or packed"):
        assert config.read({"FASTLAUNCH_CUDA_PARAMS": "list"}).cuda_params == "packed"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.read({"FASTLAUNCH_REQUIRE_REFERENCES": "1"})  # the tests' own variable: no warning


def test_the_tensor_door_switch_is_read_as_config_reads_it():
    code = ("import torch, fastlaunch\nfrom fastlaunch import _C\n"
            "fastlaunch.Plan(None, ['ptr'], backend='null', grid=(1,))\nprint(_C.tensor_door()[1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, FASTLAUNCH_TENSOR_DOOR="Off"))
    assert out.returncode == 0 and out.stdout.strip() == "switched off by FASTLAUNCH_TENSOR_DOOR=Off", out.stderr


def test_the_readme_holds_the_table():
    with open(os.path.join(ROOT, "README.md")) as f:
        assert config.markdown_table() in f.read()


def test_a_driver_named_by_fastlaunch_libcuda_is_the_cuda_backends_library():
    assert ("cuda", "library", "/opt/drv/libcuda.so.1") in config.backend_settings(
        config.read({"FASTLAUNCH_LIBCUDA": "/opt/drv/libcuda.so.1"}))
    # Unset: the loader's libcuda.so.1, so no setting (Triton's launcher takes the loader's too).
    assert not [s for s in config.backend_settings(config.read({})) if s[:2] == ("cuda", "library")]
    # A driver that does not load names the file and the loader's words, and nothing launches.
    code = ("import fastlaunch\nfrom fastlaunch import _C\n"
            "try:\n    _C.backend_load('cuda')\nexcept fastlaunch.FastLaunchPlanUnavailable as e:\n    print(e.reason)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, FASTLAUNCH_LIBCUDA="/nonexistent/libcuda.so.1"))
    assert out.returncode == 0 and out.stdout.startswith("backend_unavailable:cuda:/nonexistent/libcuda.so.1"), \
        (out.stdout, out.stderr)
