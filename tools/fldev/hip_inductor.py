"""Inductor on ROCm, without ROCm: torch's own CachingAutotuner for an AMD GPU (DeviceProperties of
an MI300X, type "hip", gfx942), its compile step (Triton's AMD codegen) and its generated launcher
over Triton's AMD driver and the stand-in libamdhip64. The same kernel runs through the stock
autotuner and through one that `fastlaunch.inductor.enable()` bound and promoted (the InductorAdapter
users get, the hip backend underneath); each call's kernarg segment, grid, block and stream are
compared.

    PYTHONPATH=tools python -m fldev.hip_inductor [CALLS]   (a JSON summary; exit 1 on a mismatch)
"""

from __future__ import annotations

import json
import os
import sys

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)


def device_props():
    from torch._inductor.runtime.hints import DeviceProperties

    want = dict(type="hip", index=0, multi_processor_count=304, cc="gfx942", major=9, regs_per_multiprocessor=65536,
                max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=64)
    return DeviceProperties(**{k: v for k, v in want.items() if k in DeviceProperties._fields})


def autotuner(fn, signature, tag, size_hint, no_static=None, real=False):
    """torch's CachingAutotuner for `fn` on an MI300X, compiled by its own compile step: (autotuner,
    its CompiledKernel). Triton's AMD driver must be active (hip_stub.load()); real: on this
    machine's AMD GPU, its own DeviceProperties and Inductor's own static-launcher settings."""
    import torch
    import triton
    from torch._inductor.runtime import triton_heuristics as th
    from torch._inductor.runtime.hints import HeuristicType

    if real:
        from torch._inductor import config
        from torch._inductor.runtime.hints import DeviceProperties

        # Inductor's own launcher, not torch's ROCm static launcher (which fastlaunch leaves to the
        # stock path: hip_static_launcher_unsupported).
        props = DeviceProperties.create(torch.device("cuda"))
        no_static = {k: False for k in ("use_static_cuda_launcher", "use_static_triton_launcher") if hasattr(config, k)}
    else:
        props = device_props()
    if no_static is None:
        tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        import inductor_kernels as IK

        no_static = IK.compile_without_gpu()
    cfg = triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
    at = th.CachingAutotuner(fn, triton_meta={"signature": dict(signature), "device": props,
                                              "constants": {}, "configs": [{}]},
                             configs=[cfg], save_cache_hook=None, mutated_arg_names=[], optimize_mem=True,
                             heuristic_type=HeuristicType.POINTWISE, size_hints={"x": size_hint},
                             inductor_meta={"grid_type": "Grid1D", "kernel_name": f"{tag}_hip"})
    with torch._inductor.config.patch(no_static):
        result = at._precompile_config(cfg)
    at.compile_results = [result]
    at.launchers = [result.make_launcher()]
    return at, result.kernel


def main(ncalls=200):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
    from fldev import hip_stub

    stub = hip_stub.load()
    import torch
    import triton

    import inductor_kernels as IK
    from fastlaunch import inductor
    from fldev.stub_bench import _kernel_module

    no_static = IK.compile_without_gpu()
    fn, params = _kernel_module(3, 2, os.environ.get("FASTLAUNCH_CACHE_DIR") or "/tmp", tag="_hip")
    signature = {p: ("*fp32" if i < 3 else "i32") for i, p in enumerate(params)}
    signature["XBLOCK"] = "constexpr"

    stock, binary = autotuner(fn, signature, "stock", 4096, no_static)
    inductor.enable(inductor.InductorAdapter())
    fast, fast_binary = autotuner(fn, signature, "fast", 4096, no_static)
    functions = (int(binary.function), int(fast_binary.function))  # each autotuner loaded its own module
    st = stub.state
    st.record = 1
    tensors = [torch.zeros(4096) for _ in range(3)]
    mismatches, identical, promoted = [], 0, None
    for i in range(ncalls):
        n = [4096, 1000, 1, 77, 2048][i % 5]
        args = tuple(tensors) + (n, 3 * i + 1)
        got = []
        for at, function in zip((stock, fast), functions):
            at.run(*args, stream=hip_stub.STREAM)
            got.append((stub.kernarg(), tuple(st.grid), tuple(st.block), st.shared, st.stream, st.function == function))
        if i == 2:
            promoted = vars(fast).get("run")
        if got[0] != got[1] or not got[0][5]:
            mismatches.append((i, n, got[0][1:], got[1][1:], got[0][0].hex(), got[1][0].hex()))
        else:
            identical += 1
    inductor.disable()
    plan = getattr(promoted, "plan", None)
    result = {"torch": torch.__version__, "triton": triton.__version__, "target": str(binary.metadata.target),
              "calls": ncalls, "identical": identical, "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:400] for m in mismatches[:5]],
              "promoted": type(promoted).__name__, "plan_backend": getattr(plan, "backend", None),
              "plan_abi": getattr(plan, "abi", None), "grid_mode": getattr(plan, "grid_mode", None)}
    print(json.dumps(result, indent=1))
    ok = not mismatches and result["promoted"] == "FinalizedLaunch" and result["plan_backend"] == "hip"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:2])))
