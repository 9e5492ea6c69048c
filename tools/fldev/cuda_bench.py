"""CUDA launch paths side by side on a real GPU (`PYTHONPATH=tools python -m fldev bench --backend cuda`, run by
tools/gpu-check): the driver's floor
(cuLaunchKernel in a C loop), fastlaunch with the packed buffer and with a parameter array,
Triton's CompiledKernel launch, PyTorch's static launcher where the installed torch has one, and
CUDA graph replay. Writes JSON to the path given as argument and prints a table."""

import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import triton
import triton.language as tl
from triton.compiler import ASTSource

from fastlaunch import _C
from fastlaunch.triton import plan_from_compiled

N = 2000
REPEATS = 15


@triton.jit
def add1(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def compiled():
    target = triton.runtime.driver.active.get_current_target()
    ck = triton.compile(ASTSource(fn=add1, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                                      "BLOCK": "constexpr"}, constexprs={"BLOCK": 128}),
                        target=target, options={"num_warps": 4})
    ck._init_handles()
    return ck


def timed(fn, n=N):
    samples = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        ns = fn(n)
        torch.cuda.synchronize()
        samples.append(ns / n)
    return statistics.median(samples)


def main(out_path=None):
    if not torch.cuda.is_available():
        raise SystemExit("--backend cuda: no NVIDIA GPU is visible to torch here")
    ck = compiled()
    x = torch.zeros(128, device="cuda")
    out = torch.empty_like(x)
    args = (x, out, 128)
    s = torch.cuda.current_stream().cuda_stream
    plan = plan_from_compiled(ck, grid=(1,))
    results = {}
    results["driver cuLaunchKernel C loop"] = timed(lambda n: _C.bench_launch_loop(plan, args, s, n))
    results["fastlaunch plan"] = timed(lambda n: _C.bench_loop(plan, args, {"stream": s}, n))
    # The parameter-array variant runs in a child (the mode is read once, when libcuda loads).
    if os.environ.get("FASTLAUNCH_CUDA_PARAMS") != "array":
        child = subprocess.run([sys.executable, "-m", "fldev.cuda_bench", "--array-only"], capture_output=True, text=True,
                               env=dict(os.environ, FASTLAUNCH_CUDA_PARAMS="array", PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.pathsep + os.environ.get("PYTHONPATH", "")), timeout=300)
        if child.returncode == 0:
            results["fastlaunch plan (parameter array)"] = float(child.stdout.strip().splitlines()[-1])
        else:
            results["fastlaunch plan (parameter array)"] = f"failed: {child.stderr[-300:]}"
    # Triton's launchers take the declared constexprs too (ignored by the ABI) from 3.3 on.
    targs = args + (128,)

    def optional(name, fn):
        try:
            results[name] = timed(fn)
        except Exception as exc:  # a Triton version that calls these differently
            results[name] = f"failed: {type(exc).__name__}: {exc}"[:200]

    runner = ck[(1, 1, 1)]
    optional("triton CompiledKernel[grid](...)", lambda n: _C.bench_loop(runner, targs, {}, n))
    optional("triton CompiledKernel.run (launcher)", lambda n: _C.bench_loop(
        ck.run, (1, 1, 1, s, ck.function, ck.packed_metadata, None, None, None) + targs, {}, n))
    try:
        from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel

        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(ck.asm["cubin"])
        ck._cubin_path = f.name
        sk = StaticallyLaunchedCudaKernel(ck)
        sk.load_kernel(torch.cuda.current_device())
        results["torch static launcher"] = timed(lambda n: _C.bench_loop(sk.run, (1, 1, 1, s) + args, {}, n))
    except Exception as exc:  # the installed torch may not have it, or name it differently
        results["torch static launcher"] = f"unavailable: {type(exc).__name__}: {exc}"[:200]
    # CUDA graph replay: the host cost per kernel of replaying a captured sequence.
    k = 200
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        with torch.cuda.graph(g, stream=side):
            cs = torch.cuda.current_stream().cuda_stream
            for _ in range(k):
                plan(*args, stream=cs)
    torch.cuda.synchronize()

    def replay(n):
        reps = max(1, n // k)
        t0 = _C.bench_loop(g.replay, (), {}, reps)
        return t0 * (n / (reps * k))

    results["cuda graph replay (per kernel)"] = timed(replay)
    out.zero_()
    plan(*args, stream=s)
    torch.cuda.synchronize()
    correct = bool(torch.equal(out, x + 1))
    floor = results["driver cuLaunchKernel C loop"]
    fast = min(v for k2, v in results.items() if k2.startswith("fastlaunch") and isinstance(v, float))
    tri = results["triton CompiledKernel[grid](...)"]
    tri = tri if isinstance(tri, float) else float("nan")
    summary = {"fastlaunch_vs_driver": fast / floor, "triton_vs_fastlaunch": tri / fast, "results_ns": results,
               "correct": correct, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "triton": triton.__version__, "faster_mode": "parameter array" if results.get(
                   "fastlaunch plan (parameter array)", 1e9) == fast else "packed buffer"}
    for k2, v in results.items():
        print(f"{k2:42} {v if isinstance(v, str) else f'{v:9.1f} ns'}")
    print(f"fastlaunch / driver floor: {summary['fastlaunch_vs_driver']:.2f}x (target <= 1.25)")
    print(f"triton / fastlaunch:       {summary['triton_vs_fastlaunch']:.2f}x (target >= 3)")
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"backend": "cuda", "results": [{"case": "2 tensors + 1 int", "mode": k, "ns_median": v}
                                                      for k, v in results.items() if isinstance(v, float)],
                       "summary": summary}, f, indent=1)
    return 0 if correct else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--array-only"]:
        ck = compiled()
        x = torch.zeros(128, device="cuda")
        out = torch.empty_like(x)
        s = torch.cuda.current_stream().cuda_stream
        plan = plan_from_compiled(ck, grid=(1,))
        print(timed(lambda n: _C.bench_loop(plan, (x, out, 128), {"stream": s}, n)))
        sys.exit(0)
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
