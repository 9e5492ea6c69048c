"""Triton kernels compiled for an sm_90 target by the triton_abi tests (no GPU needed)."""

import triton
import triton.language as tl


@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def every_kind(out_ptr, b, i8, i16, i32, i64, u8, u16, u32, u64, h, bh, f, d):
    tl.store(out_ptr + 0, b.to(tl.float32))
    tl.store(out_ptr + 1, i8.to(tl.float32))
    tl.store(out_ptr + 2, i16.to(tl.float32))
    tl.store(out_ptr + 3, i32.to(tl.float32))
    tl.store(out_ptr + 4, i64.to(tl.float32))
    tl.store(out_ptr + 5, u8.to(tl.float32))
    tl.store(out_ptr + 6, u16.to(tl.float32))
    tl.store(out_ptr + 7, u32.to(tl.float32))
    tl.store(out_ptr + 8, u64.to(tl.float32))
    tl.store(out_ptr + 9, h.to(tl.float32))
    tl.store(out_ptr + 10, bh.to(tl.float32))
    tl.store(out_ptr + 11, f)
    tl.store(out_ptr + 12, d.to(tl.float32))


@triton.jit
def constexpr_between(a_ptr, B: tl.constexpr, n, C: tl.constexpr, m, s):
    offs = tl.arange(0, B)
    tl.store(a_ptr + offs, (offs * C + n + m).to(tl.float32) * s, mask=offs < n)


@triton.jit
def nested(x_ptr, t, n):
    """A tuple holding a tuple: Triton's launcher expands it depth first."""
    a = t[0]
    b = t[1][0]
    c = t[1][1]
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, tl.load(a + offs) + b + c + n)
