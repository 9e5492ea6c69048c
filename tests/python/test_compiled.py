"""Kept Triton CompiledKernels called again, `compiled[grid](*args)` (FlagGems' LibEntry, caches of
what `kernel[grid]` or `warmup` returned), through fastlaunch (src/python/triton/compiled.c) and through
Triton alone, on the stand-in driver in a process of its own: tools/fldev/compiled_fidelity.py; and
JIT calls with launch hooks set, made in C (src/python/sequence.c): tools/fldev/hooks_fidelity.py."""

import json

import pytest
from conftest import memo_or_checked  # noqa: E402

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_triton_jit import _run  # noqa: E402


def test_compiled_kernel_calls_match_tritons_own_launcher(tmp_path):
    """compiled[grid](*args) and compiled.run(gx, gy, gz, stream, function, ...) called directly."""
    proc = _run(tmp_path, "fldev.compiled_fidelity", timeout=900)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    # Every case the same launches (function, grid, bytes), exception type and hook calls, and
    # fastlaunch served exactly the cases it must (its CompiledLaunch's fast count).
    assert result["differ"] == [] and result["serving_wrong"] == [], result
    # Too few arguments, which Triton's own launcher reads past (a crash at best): a TypeError, nothing
    # launched.
    assert result["refused_wrong"] == [] and result["refused"] >= 3, result
    assert result["cases"] >= 17 and result["served"] >= 10 and result["launches"] >= 12, result
    # Launch hooks (plain, chained, raising, with a kernel's launch_metadata) called as Triton calls
    # them, served in C: the hook calls compared are not empty.
    assert result["hooked"] >= 10, result
    # compiled.run(...) called directly: served once met, Triton's launcher back on disable() (a
    # reference held across it included), once per call when a hook disables fastlaunch mid-call.
    assert result["run_given_back"][0], result["run_given_back"]
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_jit_calls_with_hooks_match_triton_and_are_served_in_c(tmp_path):
    """kernel[grid](...) and fn.run(...) (plain, autotuned, under heuristics, an Autotuner subclass
    calling self.fn.run) with launch hooks set (plain, chained, setting each other, raising, a
    kernel's launch_metadata over a lambda grid) and with pre-run hooks (one, two, raising, setting a
    launch hook) and a Config's pre_hook, through fastlaunch and Triton alone:
    tools/fldev/hooks_fidelity.py. With compiled_fidelity's 31 cases (above), the launch forms' 69."""
    proc = _run(tmp_path, "fldev.hooks_fidelity", timeout=900)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    # The same launches, exception types and hook calls (their metadata by content), and fastlaunch
    # served exactly the cases it must (the dispatcher's fast count): a raising enter hook and a
    # raising pre-run hook launch nothing, the rest are served.
    assert result["differ"] == [] and result["serving_wrong"] == [], result
    assert result["cases"] >= 38 and result["served"] >= 36 and result["hooked"] >= 30, result
    assert len(result["forms"]) == result["cases"] and all(same for _, same, _ in result["forms"]), result
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_flaggems_ops_match_tritons_own_launcher_and_are_served(tmp_path):
    """FlagGems 5.0.2 (installed by the test set-up without its pins): 15 ops through its own
    functions, every compiled[grid] launch their LibEntry makes replayed through fastlaunch against
    Triton alone (0 differing), and each op called again with every launch served. Its timing (Triton,
    fastlaunch, FlagGems alone) is printed, not asserted: tools/fldev/flaggems_fidelity.py."""
    try:
        import flag_gems  # noqa: F401  (imported here only to see it is installed)
    except Exception as exc:  # its import probes a GPU: any failure but a missing module is the tool's
        if isinstance(exc, ImportError):
            from conftest import reference_unavailable

            reference_unavailable(f"flag-gems is not installed ({exc}); pip install --no-deps flag-gems==5.0.2 "
                                  "PyYAML SQLAlchemy")
    proc = _run(tmp_path, "fldev.flaggems_fidelity", timeout=1800)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    print(json.dumps(result["timing_ns"]))
    assert result["differ"] == [] and result["not_served"] == [], result
    assert result["ops"] >= 10 and result["kernels"] >= 15 and result["launches"] >= 15, result
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_readme_launch_forms_are_the_docs_run():
    """The README's launch-forms section and docs/launch_forms.md come from one run of
    tools/fldev/launch_forms.py (the two fidelity modules above): the same counts, every case the
    same as Triton alone."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    from fldev import launch_forms

    ok, why = launch_forms.check()
    assert ok, why
    with open(launch_forms.DOC) as f:
        doc = f.read()
    assert "| NO |" not in doc and doc.count("| yes |") >= 60, doc[:2000]


@pytest.mark.skipif(not __import__("fastlaunch.triton_plan", fromlist=["x"]).descriptors_encoded_as_3_7(),
                    reason="Triton before 3.7 (torch 2.9, 2.11): descriptors are Triton's there (refused by name), and "
                           "its own launcher crashes over the stand-in driver's maps (3.5: SIGSEGV) or lacks padding=")
def test_tensor_descriptors_match_tritons_own_launcher(tmp_path):
    """Host-side tensor descriptors (TMA) through a kept compiled kernel and kernel[grid]: 40 kernels (rank 1 to 5,
    fp8/bf16/fp16/fp32, sm_90 and sm_100), 10,000 random calls under a driver on each side of
    Triton's fix-up (13.0, 13.2), every launch's bytes (the 128-byte maps included) equal to Triton's
    launcher's over the stand-in driver, whose encode mixes every argument into the map; mutated
    descriptors and failing encodes raise Triton's error with nothing launched on both sides:
    tools/fldev/tma_fidelity.py."""
    proc = _run(tmp_path, "fldev.tma_fidelity", "10000", "20261207", timeout=1500)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["calls"] == 20_000 and result["differ"] == 0, result
    assert result["kernels"] == 40 and result["raised"] >= 200, result
    if not result["served_here"]:  # Triton 3.5 and 3.6 encode otherwise: every call Triton's, the same
        assert result["served"] == 0 and result["jit"]["served"] == 0, result
        assert proc.returncode == 0, proc.stderr[-2000:]
        return
    for v in result["versions"]:
        # Served but for what raises; a descriptor met again is encoded once (the memo's hits).
        assert v["served"] >= 9_000 and v["encodes_fastlaunch"] < v["encodes_triton"] // 2, v
    # kernel[grid](a_desc, b_desc, n) through the JIT dispatcher, the device answering sm_90, sm_100,
    # then sm_80 (each descriptor decomposed): 2,500 calls each, the same launches, served but for each
    # variant's first call and what raises; the memo takes a descriptor met again.
    jit = result["jit"]
    assert jit["archs"] == [90, 100, 80] and jit["calls"] == 7500 and jit["differ"] == 0, jit
    assert min(jit["served_by_arch"].values()) >= 1_700 and memo_or_checked(jit) >= 2_000, jit
    # One descriptor object changed in place between calls (items, its base's storage moved, base,
    # padding, TF32, block shape, a subclass, its class given a property), then a new descriptor per
    # call at a reused address: the same launches, the property read as often.
    memo = result["memo_mutations"]
    assert memo["calls"] == 54 and memo["differ"] == [] and memo_or_checked(memo) >= 10, memo
    # Hostile descriptors (a subclass, numpy sizes, mutated padding, rounding, rank, strides, a base
    # whose data_ptr() raises, sizes past int32), both forms: the same launches or errors.
    hostile = result["hostile"]
    assert hostile["cases"] == 18 and hostile["differ"] == [] and hostile["served"] >= 2, hostile
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_global_scratch_matches_tritons_launcher_and_allocator(tmp_path):
    """Kernels that need global scratch (device-side descriptors) through a kept compiled kernel and
    kernel[grid]:
    2,000 random calls (grids, values, 6 kernels) with triton.set_allocator's allocator, without one,
    with one that raises, one whose buffer has no address, one that disables and enables fastlaunch
    (its tables dropped mid-call), one that launches the kernel again from inside the call and one that points an
    argument at other memory (read again after the allocator, as Triton's launcher reads it): the same launches (the buffer's
    address in the trailing pointer) and the same allocator calls (size = programs x num_ctas x the
    metadata's size, alignment, stream, count), the same errors with nothing launched, and the calls
    that launch served: tools/fldev/scratch_fidelity.py."""
    proc = _run(tmp_path, "fldev.scratch_fidelity", "2000", "20261207", timeout=900)
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["calls"] == 2000 and result["differ"] == 0, result
    assert result["served"] >= 1700 and result["raised"] >= 40 and result["allocator_calls"] >= 1800, result
    assert result["plan_reasons"] == [None] * 6, result
    # The same 2,000 calls as kernel[grid](...): the JIT dispatcher's launches and allocator calls.
    # (An allocator that disables and enables fastlaunch drops the dispatchers: each variant's next
    # call is Triton's again, so fewer are served here than through the kept kernels.)
    assert result["jit"]["calls"] == 2000 and result["jit"]["differ"] == 0 and result["jit"]["served"] >= 1300, result
    assert proc.returncode == 0, proc.stderr[-2000:]
