"""Inductor's TMA templates (torch 2.15's persistent TMA matmul, device-side descriptors and host-side
TMA, and Blackwell's warp-specialized form) compiled by torch's own compile step for sm_90 and sm_100
and launched through the Inductor adapter, against torch's static launcher on the stand-in driver, with
hostile allocators among the calls: tools/fldev/inductor_tma.py."""

import json

import pytest
import torch

from test_hip import _run

pytestmark = pytest.mark.inductor


def _torch_at_least(major, minor):
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (major, minor)


@pytest.mark.skipif(not _torch_at_least(2, 15), reason="host-side TMA in the launcher and global scratch in the "
                    "static launcher are torch 2.15's (before: descriptors in the wrapper, scratch refused)")
def test_tma_templates_launch_as_torchs_static_launcher_does(tmp_path):
    proc = _run(tmp_path, "fldev.inductor_tma", "200", "20261207", timeout=900)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0 and proc.returncode == 0, result["first_mismatches"]
    for kind in ("device", "host", "device_sm100"):
        r = result[kind]
        assert r["calls"] == 200 and r["identical"] == 200, r
        assert r["promoted"] == "FinalizedLaunch" and "backend=cuda" in r["plan"], r
        assert r["stock_runner"] == "StaticallyLaunchedCudaKernel", r
        assert r["entry_calls"] >= 150, r  # served but for the first call and what goes back
        # A grid value that is no int goes back to the stock launcher, which raises: nothing launched.
        assert r["launched_by_case"].get("float_grid", 0) == 0, r
    # Device-side descriptors: global scratch from Triton's allocator, per call; none set: Triton's
    # error, nothing launched (counted on both sides, compared).
    for kind in ("device", "device_sm100"):
        assert result[kind]["no_allocator_checked"] >= 1 and result[kind]["global_scratch_size"] > 0, result[kind]
    # Hostile allocators, compared like every call: one pointing the first tensor at other memory (the
    # entry reads the arguments again after it, as torch's launcher reads them after allocating), one
    # launching the same kernel from inside the call (two launches, each once).
    # And the pair of both in one allocator call (it launches, then moves the storage).
    hostile = {how: sum(result[k]["launched_by_case"].get(how, 0) for k in ("device", "device_sm100"))
               for how in ("mutates", "launches", "launches_mutates")}
    assert hostile["mutates"] >= 3 and hostile["launches"] >= 6 and hostile["launches_mutates"] >= 6, hostile
    # Blackwell's form (the tile loop warp-specialized) compiled for sm_100, the others for sm_90.
    assert result["device_sm100"]["compiled_for"] == "sm_100" and result["device"]["compiled_for"] == "sm_90"
    # Host-side TMA: the maps encoded by the core's memo, no more often than torch's per-address cache;
    # a tensor that is not 16-byte aligned goes to torch's launcher (which copies it), launched once.
    host = result["host"]
    assert host["encodes_fastlaunch"] <= host["encodes_stock"], host
    assert host["fallbacks_expected"] >= 1 and host["launched_by_case"]["unaligned"] == host["fallbacks_expected"], host
    assert host["launched_by_case"].get("none_arg", 0) == 0, host
    bad = result["bad_inputs"]
    for case in ("geometry_rank", "geometry_inner_stride", "geometry_count", "geometry_not_a_pair",
                 "geometry_zero_dim"):
        assert bad[case] and bad[case].startswith("ValueError: tensor_map_geometry"), (case, bad[case])
    for case in ("grid_args_not_ignored", "grid_args_two", "grid_args_out_of_range"):
        assert bad[case] and bad[case].startswith("ValueError: grid_args"), (case, bad[case])
    assert bad["scratch_not_a_contextvar"].startswith("TypeError: scratch"), bad
    assert bad["caller_grid_without_grid_args"].startswith("ValueError: plan:"), bad
