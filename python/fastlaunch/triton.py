"""fastlaunch.triton: Triton's side of fastlaunch.

`enable()` serves every `@triton.jit` kernel's `kernel[grid](...)` through fastlaunch's C dispatcher
(fastlaunch.triton_jit); `abi_of(compiled)` and `plan_from_compiled(compiled, ...)` build plans from
Triton compiled kernels (fastlaunch.triton_plan, which the dispatcher uses too: this module only
gathers them).
"""

from __future__ import annotations

from fastlaunch.triton_plan import (  # noqa: F401  (the public names)
    TritonABI,
    _meta,
    abi_from_signature,
    abi_of,
    function_handle,
    launch_options_of,
    plan_from_compiled,
)


def enable(*, backend=None, verify=None) -> None:
    """Serves every `@triton.jit` kernel's `kernel[grid](...)` through fastlaunch's C dispatcher
    (fastlaunch.triton_jit); `FASTLAUNCH_TRITON=1` does the same at import. backend None: each
    variant on the GPU it was compiled for (cuda for NVIDIA, hip for AMD). verify True (or
    FASTLAUNCH_VERIFY=1): every call first asks Triton which compiled kernel it would run, as calls
    on a Triton outside the proven set always do (fastlaunch.triton_check)."""
    from fastlaunch import triton_jit

    triton_jit.enable(backend=backend, verify=verify)


def disable() -> None:
    """Gives every `@triton.jit` kernel back to Triton's own dispatch."""
    from fastlaunch import triton_jit

    triton_jit.disable()


def register_c_sources(get_current_device, device_capsule, get_current_stream, stream_capsule) -> None:
    """C equivalents of a non-torch driver's current device and stream, so the JIT dispatcher makes
    no Python call for them (fastlaunch.triton_jit.register_c_sources says the contract)."""
    from fastlaunch import triton_jit

    triton_jit.register_c_sources(get_current_device, device_capsule, get_current_stream, stream_capsule)


def exclude(kernel) -> None:
    """Leaves one kernel (a `@triton.jit` function, or an autotuned or heuristics one, with the
    kernels it wraps) to Triton's own dispatch, whatever enable() serves."""
    from fastlaunch import triton_jit

    triton_jit.exclude(kernel)
