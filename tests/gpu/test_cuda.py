"""The cuda backend on a real GPU (the hip backend on an AMD one, through torch's ROCm build, where
the same tests run: plan_from_compiled picks the kernel's own GPU): Triton kernels launched through
fastlaunch plans, results checked against torch; the packed buffer and the parameter array; errors
after the boundary."""

import os
import subprocess
import sys

import pytest
import torch
import triton

from fastlaunch import FastLaunchError
from fastlaunch.triton import plan_from_compiled

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import triton_kernels as K  # noqa: E402  (the kernels the triton_abi tests compile for sm_90)

HIP = torch.version.hip is not None  # an AMD GPU through torch's ROCm build


def compiled(fn, signature, constexprs=None, num_warps=4):
    from triton.compiler import ASTSource

    target = triton.runtime.driver.active.get_current_target()
    ck = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}), target=target,
                        options={"num_warps": num_warps})
    ck._init_handles()
    return ck


def stream():
    return torch.cuda.current_stream().cuda_stream


@pytest.mark.parametrize("n", [1, 1000, 4096, 1 << 20])
def test_vadd_matches_torch(n):
    ck = compiled(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                  {"BLOCK": 1024})
    plan = plan_from_compiled(ck, grid_exprs=["-((n) // -(1024))", "1", "1"])
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    plan(x, y, out, n, stream=stream())
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def test_every_kind_matches_torch():
    kinds = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
    names = ["b", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "h", "bh", "f", "d"]
    ck = compiled(K.every_kind, {"out_ptr": "*fp32", **dict(zip(names, kinds))})
    plan = plan_from_compiled(ck, grid=(1,))
    values = [True, -100, -30000, -2**31, -2**40, 200, 60000, 2**32 - 1, 2**40, 0.333251953125, -1.5, 0.1, 3.5]
    out = torch.zeros(13, device="cuda")
    plan(out, *values, stream=stream())
    torch.cuda.synchronize()
    expected = torch.tensor([1.0, -100, -30000, -2**31, -2**40, 200, 60000, 2**32 - 1, 2**40,
                             torch.tensor(0.333251953125, dtype=torch.float16).item(),
                             torch.tensor(-1.5, dtype=torch.bfloat16).item(), 0.1, 3.5], dtype=torch.float32)
    assert torch.equal(out.cpu(), expected), (out.cpu(), expected)


def test_parameter_array_mode_gives_the_same_results():
    code = (
        "import sys, torch; sys.path.insert(0, %r); import test_cuda as t; t.test_vadd_matches_torch(4096); "
        "t.test_every_kind_matches_torch(); print('ok')" % os.path.dirname(__file__))
    env = dict(os.environ, FASTLAUNCH_CUDA_PARAMS="array", FASTLAUNCH_HIP_PARAMS="array")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_grid_limits_refused_before_submit():
    ck = compiled(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                  {"BLOCK": 1024})
    plan = plan_from_compiled(ck)
    x = torch.zeros(4, device="cuda")
    with pytest.raises(FastLaunchError) as e:
        plan(x, x, x, 4, stream=stream(), grid=(1, 70000, 1))
    assert e.value.reason == "grid_dim_exceeds:1" and not e.value.backend_submitted


def test_many_launches_in_order():
    ck = compiled(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                  {"BLOCK": 1024})
    plan = plan_from_compiled(ck, grid_exprs=["-((n) // -(1024))", "1", "1"])
    acc = torch.zeros(1000, device="cuda")
    one = torch.ones(1000, device="cuda")
    for _ in range(10_000):
        plan(acc, one, acc, 1000, stream=stream())
    torch.cuda.synchronize()
    assert torch.equal(acc, torch.full_like(acc, 10_000.0))


def test_a_tensor_from_elsewhere_is_refused_before_the_boundary():
    """A CPU tensor given to a CUDA plan is refused before anything reaches the driver (the stock
    launcher then raises its own error); so is a tensor on another GPU, where there is one."""
    from fastlaunch import _C

    if not _C.tensor_door()[0]:
        pytest.skip(f"tensor door not in use here: {_C.tensor_door()[1]}")
    ck = compiled(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                  {"BLOCK": 1024})
    plan = plan_from_compiled(ck, grid_exprs=["-((n) // -(1024))", "1", "1"])
    x, out = torch.randn(16, device="cuda"), torch.empty(16, device="cuda")
    with pytest.raises(FastLaunchError) as e:
        plan(x, torch.randn(16), out, 16, stream=stream())
    assert e.value.reason == "ptr_device_mismatch:1" and not e.value.backend_submitted
    assert plan.backend == ("hip" if HIP else "cuda")
    if torch.cuda.device_count() > 1:
        with pytest.raises(FastLaunchError) as e:
            plan(x, torch.randn(16, device="cuda:1"), out, 16, stream=stream())
        assert e.value.reason == "ptr_device_mismatch:1"


def test_the_jit_serves_kernels_on_this_gpu():
    """kernel[grid](...) with fastlaunch.triton.enable(): results against torch, the calls served
    (on an AMD GPU, each variant on the hip backend)."""
    import fastlaunch.triton as flt

    flt.enable()
    try:
        x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
        out = torch.empty_like(x)
        for _ in range(5):
            K.vadd[lambda META: (triton.cdiv(5000, META["BLOCK"]),)](x, y, out, 5000, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)
        assert K.vadd.run.counts["fast"] >= 3, K.vadd.run.counts
    finally:
        flt.disable()
