"""Tensors the tensor door declines (a meta tensor, a subclass with __torch_function__, a
FakeTensor on another device or on this one): a plan's call checks where each lives as torch says
and refuses before anything is submitted with a reason naming the argument, or launches with the
tensor's own data_ptr() when its memory is the plan's. Never a NULL or foreign pointer handed on.
The JIT's slow path reads the same answer (tools/fldev/jit_checks.py)."""

import ctypes

import pytest

torch = pytest.importorskip("torch")

from fastlaunch import FastLaunchError, Plan  # noqa: E402


class Sub(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def _fake(device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        return torch.empty(64, device=device)


KINDS = {  # kind -> (the tensor, the reason it is refused with, or None: it launches)
    "plain": (lambda: torch.zeros(64), None),
    "meta": (lambda: torch.empty(64, device="meta"), "ptr_meta_tensor"),
    "subclass": (lambda: torch.zeros(64).as_subclass(Sub), None),
    "fake_cuda": (lambda: _fake("cuda"), "ptr_device_mismatch"),
    "fake_meta": (lambda: _fake("meta"), "ptr_meta_tensor"),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("position", [0, 2])
def test_declined_tensor_in_a_plan_call(kernels, stream, kind, position):
    make, refused = KINDS[kind]
    plan = Plan(kernels["vadd"], ["ptr", "ptr", "ptr", "i32", "i32"], fixed_args=[16],
                arg_names=["x", "y", "out", "n", "B"], name="vadd", grid_exprs=["-((n) // -(B))", "1", "1"])
    args = [torch.ones(64), torch.ones(64), torch.zeros(64)]
    try:
        odd = make()
    except Exception as exc:  # noqa: BLE001 - a torch without this kind
        pytest.skip(f"{kind}: {type(exc).__name__}: {exc}")
    args[position] = odd
    out = args[2]
    if refused:
        with pytest.raises(FastLaunchError) as info:
            plan(*args, 64, stream=stream.handle)
        assert info.value.reason == f"{refused}:{position}", info.value.reason
        assert ["x", "y", "out"][position] in str(info.value)
        assert not info.value.backend_submitted
        if position != 2:
            assert out.abs().sum().item() == 0  # nothing ran
    else:
        plan(*args, 64, stream=stream.handle)
        stream.synchronize()
        assert out.sum().item() == 64 * (2 if position == 2 else 1), (kind, out[:4])  # x + y, x zeros at 0
