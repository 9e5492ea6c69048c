"""Triton JIT kernels for the JIT dispatcher's fidelity run (tools/fldev/jit_fidelity.py): between
them every kind of argument Triton specializes on and every way a call names them. Compiled for an
sm_90 target on the stand-in driver (no GPU needed)."""

import triton
import triton.language as tl

SCALE = tl.constexpr(3)  # a global the kernels read: changing it must raise Triton's RuntimeError


@triton.jit
def tensors(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def scalars(out_ptr, a, b, f, flag, BLOCK: tl.constexpr):
    v = (a + b).to(tl.float32) + f
    if flag:
        v = v * 2
    tl.store(out_ptr + tl.program_id(0), v)


@triton.jit(do_not_specialize=["n"], do_not_specialize_on_alignment=["x_ptr"])
def no_spec(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def maybe(x_ptr, bias_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m)
    if bias_ptr is not None:
        v += tl.load(bias_ptr + offs, mask=m)
    tl.store(x_ptr + offs, v, mask=m)


@triton.jit
def pair(t, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(t[1] + offs, tl.load(t[0] + offs, mask=m), mask=m)


@triton.jit
def defaults(x_ptr, n, scale=2, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)


@triton.jit
def activation(x_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m)
    if ACT == "relu":
        v = tl.maximum(v, 0)
    tl.store(x_ptr + offs, v * SCALE, mask=m)


@triton.jit
def grid2d(x_ptr, rows, cols, stride, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    m = (r < rows) & (c < cols)
    tl.store(x_ptr + r * stride + c, tl.load(x_ptr + r * stride + c, mask=m) + 1, mask=m)


# Autotuned: the stand-in driver's benchmarker (cuda_stub._benchmark) times each config by its block
# size, so tuning picks the same config on every run.
@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=8, num_stages=2)], key=["n"])
@triton.jit
def tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK_C": 16}, num_warps=1), triton.Config({"BLOCK_C": 64}, num_warps=2)],
                 key=["rows", "cols"])
@triton.heuristics({"EVEN": lambda a: a["cols"] % a["BLOCK_C"] == 0})
@triton.jit
def tuned_heuristics(x_ptr, rows, cols, BLOCK_C: tl.constexpr, EVEN: tl.constexpr):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    if EVEN:
        tl.store(x_ptr + c, tl.load(x_ptr + c) + rows)
    else:
        m = c < cols
        tl.store(x_ptr + c, tl.load(x_ptr + c, mask=m) + rows, mask=m)


def _flops(grid, metadata, args):  # Triton's launch_metadata: what the launch hooks are given
    return {"name": f"with_metadata n={args['n']}", "flops": 2 * args["n"], "grid0": grid[0]}


@triton.jit(launch_metadata=_flops)
def with_metadata(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)
