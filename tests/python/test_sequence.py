"""The launch sequence against Triton alone (issue 55): one check per defect, each the same scenario
run with Triton alone and with fastlaunch, compared launch by launch on the stand-in driver
(tools/fldev/sequence_checks.py). `make reentry-sanitize` runs the same under the ASan+UBSan build."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_reentry import run_checks  # noqa: E402

CHECKS = ["s01_run_enter_hook_moves_storage", "s02_compiled_enter_hook_moves_storage",
          "s03_jit_enter_hook_moves_storage", "s05_grid_sets_plain_hook", "s06_knobs_runtime_replaced",
          "s07_grid_changes_a_global", "s08_memo_scratch_allocator_toggles_and_moves",
          "s09_entry_scratch_many_map_values", "s10_grid_switches_device_then_refused",
          "s11_run_detached_inside_attach"]


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    return run_checks(tmp_path_factory.mktemp("sequence"), "fldev.sequence_checks")


def test_every_check_reported(checks):
    from fldev import sequence_checks  # tools/ is on the path (conftest.py)

    assert sorted(checks) == sorted(CHECKS) == sorted(sequence_checks.CHECKS), sorted(checks)


@pytest.mark.parametrize("name", CHECKS)
def test_check(checks, name):
    assert name in checks, (sorted(checks), "a check that did not report crashed the process")
    assert checks[name]["ok"], checks[name]["detail"]
