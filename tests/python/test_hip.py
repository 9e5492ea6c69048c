"""The hip backend (AMD GPUs) without an AMD GPU: its declarations against the HIP header Triton's
wheel ships, its kernarg layout against the metadata of real hsaco kernels (Triton's own codegen for
gfx942), the layout command and the configuration, and plans launched through the project's
stand-in libamdhip64 (tools/fldev/hip_stub.c), whose kernarg segment is laid out from the hsaco's
metadata as the HIP runtime lays it out. Nothing here ran on an AMD GPU."""

import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

import fastlaunch
from fastlaunch import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _hip_include():
    d = os.path.join(os.path.dirname(triton.__file__), "backends", "amd", "include")
    return d if os.path.isfile(os.path.join(d, "hip", "hip_runtime_api.h")) else None


def test_declarations_match_hip_runtime_api_h(tmp_path):
    inc = _hip_include()
    if inc is None:
        from conftest import reference_unavailable

        reference_unavailable(f"triton {triton.__version__} ships no HIP headers (backends/amd/include)")
    src = tmp_path / "check.c"
    src.write_text(textwrap.dedent("""\
        #define __HIP_PLATFORM_AMD__
        #include <hip/hip_runtime_api.h>
        #include "backends/hip_api.h"
        _Static_assert(FL_HIP_SUCCESS == hipSuccess, "hipSuccess");
        _Static_assert(FL_HIP_ERROR_INVALID_VALUE == hipErrorInvalidValue, "hipErrorInvalidValue");
        _Static_assert(FL_HIP_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK == hipDeviceAttributeMaxSharedMemoryPerBlock,
                       "max shared");
        _Static_assert(FL_HIP_DEVICE_ATTRIBUTE_WARP_SIZE == hipDeviceAttributeWarpSize, "warp size");
        _Static_assert(sizeof(fl_hipError_t) == sizeof(hipError_t), "hipError_t");
        _Static_assert(sizeof(fl_hipFunction_t) == sizeof(hipFunction_t), "hipFunction_t");
        int main(void) {
          return !(FL_HIP_LAUNCH_PARAM_BUFFER_POINTER == HIP_LAUNCH_PARAM_BUFFER_POINTER &&
                   FL_HIP_LAUNCH_PARAM_BUFFER_SIZE == HIP_LAUNCH_PARAM_BUFFER_SIZE &&
                   FL_HIP_LAUNCH_PARAM_END == HIP_LAUNCH_PARAM_END &&
                   FL_HIP_VERSION_MAJOR(60443482) == 6);
        }
        """))
    exe = tmp_path / "check"
    proc = subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-I", inc, "-I", os.path.join(ROOT, "src"),
                           "-o", str(exe), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert subprocess.run([str(exe)]).returncode == 0


@triton.jit
def k_ints(p, a, b, c, d, e):
    tl.store(p, (a + b + c + d + e).to(tl.float32))


@triton.jit
def k_uints(a, b, c, d, p):
    tl.store(p, (a + b + c + d).to(tl.float32))


@triton.jit
def k_floats(a, b, c, d, p):
    tl.store(p, a.to(tl.float32) + b.to(tl.float32) + c + d.to(tl.float32))


@triton.jit
def k_mixed(a, p, b, c, q, d):
    tl.store(p, tl.load(q) + a + b + c + d)


SIGS = {
    "k_ints": (k_ints, {"p": "*fp32", "a": "i1", "b": "i8", "c": "i16", "d": "i32", "e": "i64"}),
    "k_uints": (k_uints, {"a": "u8", "b": "u16", "c": "u32", "d": "u64", "p": "*fp32"}),
    "k_floats": (k_floats, {"a": "fp16", "b": "bf16", "c": "fp32", "d": "fp64", "p": "*fp32"}),
    "k_mixed": (k_mixed, {"a": "i8", "p": "*fp32", "b": "i8", "c": "i64", "q": "*fp16", "d": "i1"}),
}


@pytest.fixture(scope="module")
def stub():
    from fldev import hip_stub

    return hip_stub, hip_stub.Stub(hip_stub.build())


@pytest.fixture(scope="module")
def compiled(stub):
    hs, _ = stub
    return {name: hs.compile(fn, sig) for name, (fn, sig) in SIGS.items()}


@pytest.mark.parametrize("name", list(SIGS))
def test_layout_is_the_hsaco_kernarg_segment(stub, compiled, name):
    """fastlaunch.layout('hip') against the code object metadata of the kernel Triton compiled for
    gfx942: every argument's offset, Triton's two scratch pointers after them, the segment's size."""
    _, s = stub
    ck = compiled[name]
    size, args = s.kernel_info(ck.asm["hsaco"], ck.name)
    sig = list(SIGS[name][1].values())
    lay = fastlaunch.layout("hip", sig, hidden_ptrs=2, warp_size=64)
    assert len(args) == len(sig) + 2, (args, sig)
    assert [o for o, _ in args] == lay["args"] + lay["hidden"]
    assert lay["size"] == size
    # The sizes the metadata gives are the kinds' natural ones (i1 one byte, as Triton's launcher passes it).
    widths = {"i1": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "fp16": 2, "bf16": 2, "i32": 4, "u32": 4, "fp32": 4}
    assert [n for _, n in args] == [widths.get(t, 8) for t in sig] + [8, 8]
    assert ck.metadata.warp_size == 64


def test_layout_command_prints_hip():
    proc = subprocess.run([sys.executable, "-m", "fastlaunch", "layout", "--abi", "hip", "--hidden-ptrs", "2",
                           "*fp32", "i1", "i64"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"size": 40, "align": 8, "args": [0, 8, 16], "grid": None, "ffts": None,
                                       "hidden": [24, 32]}
    bad = subprocess.run([sys.executable, "-m", "fastlaunch", "layout", "--abi", "hip", "--hidden-ptrs", "3", "i32"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "hidden_ptrs" in bad.stderr


def test_the_runtime_library_setting_and_its_precedence(tmp_path):
    assert config.read({"FASTLAUNCH_LIBHIP": "/a/libamdhip64.so", "TRITON_LIBHIP_PATH": "/b/libamdhip64.so"}).libhip \
        == "/a/libamdhip64.so"
    assert config.read({"TRITON_LIBHIP_PATH": "/b/libamdhip64.so"}).libhip == "/b/libamdhip64.so"
    cfg = config.read({"TRITON_LIBHIP_PATH": "/b/libamdhip64.so"})
    assert ("hip", "library", "/b/libamdhip64.so") in config.backend_settings(cfg)
    # A path that does not load: the backend says so by name, nothing is launched.
    code = textwrap.dedent("""\
        import fastlaunch
        try:
            fastlaunch.Plan(0x1000, ["ptr"], backend="hip", grid=(1,))
        except fastlaunch.FastLaunchPlanUnavailable as e:
            print("refused", e.reason)
        """)
    env = dict(os.environ, FASTLAUNCH_LIBHIP=str(tmp_path / "libamdhip64.so"), FASTLAUNCH_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused backend_unavailable:hip:" in proc.stdout and "libamdhip64.so: cannot open" in proc.stdout


LAUNCH = """
import json, struct, sys
sys.path.insert(0, {tools!r})
import fastlaunch
from fastlaunch import _C
from fldev import hip_stub
from test_hip import SIGS
if {array}:
    _C.backend_configure("hip", "params", "array")
s = hip_stub.Stub({lib!r})
s.state.record = 1
out = {{}}
for name, (fn, sig) in SIGS.items():
    ck = hip_stub.compile(fn, sig, num_warps=2)
    f = s.load_function(ck.asm["hsaco"], ck.name)
    kinds = list(sig.values())
    plan = fastlaunch.Plan(f, kinds, backend="hip", abi="hip", grid=(3, 2, 1),
                           options={{"hidden_ptrs": 2, "num_warps": 2, "warp_size": 64}})
    vals = [0x7f3a00001000 + 64 * i if t.startswith("*") else (1 if t == "i1" else 0.5 if t[0] in "fb" else 7 + i)
            for i, t in enumerate(kinds)]
    plan(*vals, stream=hip_stub.STREAM)
    size, args = s.kernel_info(ck.asm["hsaco"], ck.name)
    out[name] = {{"kernarg": s.kernarg().hex(), "size": size, "args": args, "vals": vals, "kinds": kinds,
                 "grid": list(s.state.grid), "block": list(s.state.block), "stream": s.state.stream,
                 "known": s.state.known_function, "used_params": s.state.used_params, "calls": s.state.calls}}
print(json.dumps(out))
"""

FORMATS = {"i1": "b", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q", "u64": "Q",
           "fp16": "e", "fp32": "f", "fp64": "d"}


def _expected(rec):
    seg = bytearray(rec["size"])
    for (off, n), kind, v in zip(rec["args"], rec["kinds"], rec["vals"]):
        if kind.startswith("*"):
            seg[off:off + 8] = struct.pack("<Q", v)
        elif kind == "bf16":
            seg[off:off + 2] = struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:]
        else:
            seg[off:off + n] = struct.pack("<" + FORMATS[kind], v)
    return bytes(seg)


@pytest.mark.parametrize("array", [False, True], ids=["packed", "param_array"])
def test_plans_launch_the_kernarg_segment_through_the_stand_in(stub, tmp_path, array):
    """A plan per kernel on the hip backend over the stand-in: the segment the runtime would build
    (from a parameter array by the metadata's offsets, or the packed buffer as is) holds each value
    where the hsaco's metadata puts it and zeroed scratch pointers; block = 64 lanes x 2 warps."""
    _, s = stub
    env = dict(os.environ, FASTLAUNCH_LIBHIP=s.path, FASTLAUNCH_CACHE_DIR=str(tmp_path))
    code = LAUNCH.format(tools=os.path.join(ROOT, "tools"), lib=s.path, array=array)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out) == len(SIGS)
    for name, rec in out.items():
        assert rec["known"] == 1 and rec["used_params"] == int(array), (name, rec)
        assert rec["grid"] == [3, 2, 1] and rec["block"] == [128, 1, 1] and rec["stream"] == 0x7F3A_5C00_1230
        assert bytes.fromhex(rec["kernarg"]) == _expected(rec), name
    assert out["k_mixed"]["calls"] == len(SIGS)


def _run(tmp_path, *argv, timeout=1500):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tools")] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), FASTLAUNCH_CACHE_DIR=str(tmp_path))
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def test_compiled_kernels_launch_as_tritons_amd_launcher_does(tmp_path):
    """100,000 random launches of a kernel taking every scalar kind, compiled for gfx942: through
    Triton's own AMD launcher (driver.c built against the stand-in) and through
    plan_from_compiled(ck, backend="hip"), the same kernarg segment, grid, block, LDS and stream,
    or refused before the boundary (never launched where Triton raises)."""
    proc = _run(tmp_path, "fldev.hip_fidelity", "100000", "20261203")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert result["layout_matches_metadata"] and proc.returncode == 0, result
    # Triton <= 3.6's AMD launchers refuse negative i8 (a defect) and 3.5's crashes on an fp16 out of
    # range (not handed to it): those calls are counted apart.
    assert result["identical"] + result["triton_refuses_negative_i8"] > 40_000, result
    assert result["identical"] + result["refused_before_boundary"] + result["triton_refuses_negative_i8"] == 100_000


@pytest.mark.skipif(not __import__("fastlaunch.triton_plan", fromlist=["x"]).descriptors_encoded_as_3_7(),
                    reason="Triton before 3.7 (torch 2.9, 2.11): descriptors are Triton's there (refused by name), and "
                           "its own launcher crashes over the stand-in driver's maps (3.5: SIGSEGV) or lacks padding=")
def test_descriptor_kernels_through_kernel_grid_as_tritons_amd_launcher(tmp_path):
    """kernel[grid] with host-side TensorDescriptors, kernels of rank 1 to 5 compiled for gfx942 (no
    TDM: each descriptor passed decomposed): 2,000 random calls through Triton's own AMD launcher and
    through fastlaunch's dispatcher on the hip backend, the same kernarg bytes and grid each call,
    served after each variant's first call: tools/fldev/hip_tma_fidelity.py."""
    proc = _run(tmp_path, "fldev.hip_tma_fidelity", "2000", "20261207")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["differ"] == 0 and proc.returncode == 0, result["first_differ"]
    assert result["calls"] == 2000 and result["launched"] > 1900, result
    assert result["served"] > 1500, result


def test_a_plan_for_another_target_is_refused(stub, compiled):
    from fastlaunch.triton import plan_from_compiled

    ck = compiled["k_ints"]
    with pytest.raises(fastlaunch.FastLaunchPlanUnavailable, match="compiled_for_another_target:hip:cuda"):
        plan_from_compiled(ck, backend="cuda", function=1)
    plan = plan_from_compiled(ck, backend="null")  # the same layout, measured without a GPU
    assert plan.layout == fastlaunch.layout("hip", list(SIGS["k_ints"][1].values()), hidden_ptrs=2)


def test_jit_calls_on_amd_match_tritons_own_jit(tmp_path):
    """100,000 random kernel[grid](...) calls over the JIT fidelity kernels (every kind, every
    specialization edge, tuples, autotuned and heuristics kernels) compiled for gfx942, Triton's AMD
    driver active: through Triton's own run and through fastlaunch.triton.enable() (each variant on
    the hip backend), the same variant, grid, block, LDS, stream and kernarg segment."""
    proc = _run(tmp_path, "fldev.jit_fidelity", "100000", "20261201", "hip")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0 and result["target"] == "hip", proc.stderr[-2000:]
    assert result["identical"] + result["raised_by_both"] == 100_000 and result["fast"] > 90_000, result


def test_liger_kernel_ops_on_amd_match_tritons_own_jit(tmp_path):
    """Every Liger-Kernel op the CUDA fidelity run calls, its kernels compiled for gfx942 and sized
    as Liger sizes them for ROCm: each captured call replayed through Triton's JIT and through
    fastlaunch, 0 differing."""
    pytest.importorskip("liger_kernel")
    proc = _run(tmp_path, "fldev.public_fidelity", "12", "20261203", "hip")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0 and result["target"] == "hip" and result["kernels"] >= 15, result
    assert result["identical"] == result["compared"] and result["fast"] >= result["compared"] // 2, result


def test_inductor_on_rocm_binds_and_promotes_onto_the_hip_backend(tmp_path):
    """torch's own CachingAutotuner for an MI300X (DeviceProperties type "hip", gfx942), compiled by
    its own compile step, run through Inductor's generated launcher and through the autotuner that
    fastlaunch.inductor.enable() bound: promoted to a FinalizedLaunch on the hip backend (its grid a
    C program), each of 200 calls the same kernarg segment, grid, block and stream as the stock one."""
    proc = _run(tmp_path, "fldev.hip_inductor", "200")
    assert "{" in proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["mismatches"] == 0, result["first_mismatches"]
    assert proc.returncode == 0, result
    assert (result["promoted"], result["plan_backend"], result["plan_abi"], result["grid_mode"]) == \
        ("FinalizedLaunch", "hip", "hip", "program")
    assert result["identical"] == 200


def test_the_hip_stub_bench_section_runs(tmp_path):
    """`fldev bench --backend hip-stub` (what make bench runs for AMD) builds every mode and launches
    each call once (its own count check); no time is asserted here: the numbers are the bench's."""
    out = tmp_path / "hip.json"
    proc = _run(tmp_path, "fldev", "bench", "--backend", "hip-stub", "--quick", "--json", str(out), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    modes = {(r["case"], r["mode"]) for r in rows if r["backend"] == "hip-stub"}
    from fldev import hip_bench

    assert modes == {(c, m) for c, _, _ in hip_bench.CASES for m in hip_bench.MODES}
    assert "hip-stub targets:" in proc.stdout
