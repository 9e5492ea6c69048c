"""A Triton fastlaunch has never met never gets a wrong launch (fastlaunch.triton_check).

tools/fldev/next_triton.py patches the installed Triton, in a process of its own on the stand-in
driver, to specialize on something fastlaunch's key does not hold (seven changes of different kinds:
a new integer attribute, a new tensor property, a float and a bool specialized on their values, an
option derived from an argument's value, a new constexpr rule, a key computation reading state
fastlaunch does not watch), and runs the same calls through Triton alone and through fastlaunch, the
far side of each new rule first appearing after 40 calls of the near side. With the check (the
patched Triton is not in the proven set): no wrong launch, the kernel handed back with the argument
or option named. With the check disabled (the patched Triton put in the proven set for the run): at
least one wrong launch, so each test can fail."""

import os
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_triton_jit import ROOT, _run, json_lines  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools"))
from fldev.next_triton import CHANGES, NEAR_FIRST  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("next_triton")  # FASTLAUNCH_VERIFY set or not: the tool decides per mode
    return {mode: json_lines(_run(tmp, "fldev.next_triton", mode, timeout=900, FASTLAUNCH_VERIFY="0"), "change")
            for mode in ("checked", "unchecked")}


def test_five_or_more_changes_of_different_kinds():
    assert len(CHANGES) >= 5
    assert len({what for _, _, what in CHANGES.values()}) >= 4  # arguments, an option, the key's computation


def _result(runs, mode, change):
    """One change's line in one mode: skipped by name where this Triton has no such piece to patch."""
    r = runs[mode][change]
    if "unavailable" in r:
        pytest.skip(f"{change}: this Triton has no such piece to patch: {r['unavailable']}")
    assert "error" not in r, r.get("error")
    return r


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_checked_no_wrong_launch_and_the_difference_named(runs, change):
    r = _result(runs, "checked", change)
    assert r["first_far"] == NEAR_FIRST  # the far side first met after the near side was bound and served
    assert r["wrong"] == 0, r
    assert r["raised"] == [], r
    assert r["named"], r  # report() names what differs (the argument, the option, or the key computation)
    assert r["checked_calls"] >= NEAR_FIRST - 1, r  # the near side's calls were fastlaunch's, each checked
    assert r["handed_back"] >= 1, r  # after the disagreement: Triton's


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_unchecked_the_same_change_gives_wrong_launches(runs, change):
    r = _result(runs, "unchecked", change)
    assert r["checked_calls"] == 0, r
    assert r["wrong"] >= 1, r
    assert r["first_wrong"] >= NEAR_FIRST, r  # only once the far side appears
