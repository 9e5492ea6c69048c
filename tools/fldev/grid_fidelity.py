"""Every grid Triton's JIT accepts, through fastlaunch and through Triton, call by call.

`JITFunction.run` calls a callable grid once with the bound arguments, then reads `len(grid)`,
`grid[0]`, `grid[1]` and `grid[2]` (as far as the length goes), and its launcher converts each to a
C int. So a grid may be a tuple, a list, a range, a numpy array, a torch tensor, a dict keyed 0..2,
any object with `__len__` and `__getitem__`, its items ints or anything with `__index__`, and a
callable returning any of those. This run generates grids of all those forms (and the ones Triton
refuses: empty, None, floats, strings, a bare int, out-of-range values, a callable that raises),
wrapped directly or in a callable (a lambda, a function, a callable object, functools.partial), over
a plain kernel, a 2-D kernel and an autotuned one. Each call runs through Triton's own JIT on a copy
of the kernel that fastlaunch never sees and through `kernel[grid](...)` with fastlaunch enabled on
another copy (the same function, so the same compiled variants), and must agree: the same launch
(grid, block, stream, argument bytes), none when Triton launches none, the same return value (the
same variant's CompiledKernel, or None), the same exception type, and the same side effects (how
often the grid callable, `__index__` and `__getitem__` ran).

    PYTHONPATH=tools python -m fldev.grid_fidelity [N] [SEED]   (JSON summary; exit 1 on a mismatch)
"""

from __future__ import annotations

import collections
import functools
import json
import random
import sys

from fastlaunch import _C
from fldev import jit_fidelity

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

COUNTS = collections.Counter()  # side effects of grids and their items, by kind


class Index:
    """An int-like defined in Python: Triton's launcher calls its __index__ once per dimension."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        COUNTS["index"] += 1
        if isinstance(self.v, BaseException):
            raise self.v
        return self.v


class Seq:
    """A sequence of the caller's own: len() and [i] counted."""

    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        COUNTS["len"] += 1
        return len(self.items)

    def __getitem__(self, i):
        COUNTS["getitem"] += 1
        return self.items[i]


class GridFn:
    """A callable object grid."""

    def __init__(self, value):
        self.value = value

    def __call__(self, meta):
        COUNTS["call"] += 1
        return self.value


def _fn_grid(value, meta):
    COUNTS["call"] += 1
    if isinstance(value, BaseException):
        raise value
    return value


def values(rng, np, torch):
    """One grid dimension's value: mostly what real callers pass, sometimes what Triton refuses."""
    r = rng.random()
    small = rng.choice([1, 2, 3, 7, 64, 1000, rng.randint(1, 70000)])
    if r < 0.45:
        return small
    if r < 0.55:
        return rng.choice([np.int64, np.int32, np.uint16, np.intp])(min(small, 65535))
    if r < 0.60:
        return torch.tensor(min(small, 65535))
    if r < 0.63:
        return rng.choice([True, False])
    if r < 0.68:
        return rng.choice([0, -1, -5, 2**31 - 1, 2**31, 2**32 + 1, 2**63, -(2**31) - 1, 65535, 65536])
    if r < 0.72:
        return Index(rng.choice([small, 0, -3, ValueError("index refuses")]))
    if r < 0.75:
        return rng.choice([2.0, 1.5, None, "3", np.float32(2), np.bool_(True), torch.tensor(2.0)])
    return small


def container(rng, np, torch, dims):
    """The grid's sequence (or a non-sequence) over `dims`."""
    r = rng.random()
    ints = [int(d) if isinstance(d, int) else 2 for d in dims]
    if r < 0.35:
        return tuple(dims)
    if r < 0.60:
        return list(dims)
    if r < 0.64:
        return range(ints[0], ints[0] + len(ints)) if ints and ints[0] >= 0 else range(len(ints))
    if r < 0.68:
        return np.array([min(max(i, 0), 65535) for i in ints], dtype=rng.choice([np.int64, np.int32]))
    if r < 0.71:
        return torch.tensor([min(max(i, 0), 65535) for i in ints])
    if r < 0.74:
        return torch.Size([max(i, 0) for i in ints])
    if r < 0.77:
        return collections.namedtuple("G", "x y z"[: 2 * len(dims)])(*dims) if 0 < len(dims) <= 3 else tuple(dims)
    if r < 0.80:
        return {i: d for i, d in enumerate(dims)}
    if r < 0.86:
        return Seq(dims)
    return rng.choice([None, 5, "12", (x for x in dims), 2.0, object(), frozenset(ints)])


def grid_of(rng, np, torch, block_key, n):
    """A grid in one of the forms Triton's run takes, often computed from the launch's metadata."""
    ndims = rng.choice([1, 1, 1, 2, 2, 3, 3, 0, 4])
    dims = [values(rng, np, torch) for _ in range(ndims)]
    value = container(rng, np, torch, dims)
    kind = type(value).__name__
    r = rng.random()
    if r < 0.4:
        return value, kind
    if r < 0.55:  # the common lambda, over the launch's metadata
        form = rng.choice([tuple, list])
        return (lambda META: form([(n + META[block_key] - 1) // META[block_key]] + [1] * (ndims - 1 if ndims > 1 else 0)),
                f"lambda->{form.__name__}")
    if r < 0.70:
        return lambda META: value, f"lambda->{kind}"
    if r < 0.80:
        return functools.partial(_fn_grid, rng.choice([value, value, ValueError("grid refuses")])), f"partial->{kind}"
    if r < 0.90:
        return GridFn(value), f"object->{kind}"
    if r < 0.93:
        return lambda META: GridFn(value), "lambda->callable"  # Triton takes the len() of what it returns
    return lambda META: Seq([META[block_key] // 32]), "lambda->Seq"


_LAYOUTS = {}


def launch_record(st, kernel):
    """What the driver saw of the last launch, its argument bytes read by the kernel's layout
    (Triton's launcher passes a parameter array, fastlaunch one buffer)."""
    import fastlaunch
    from fastlaunch.triton import abi_of

    rec = jit_fidelity.record(st)
    if kernel is None:
        return rec["grid"], rec["block"], rec["stream"], rec["function"]
    if id(kernel) not in _LAYOUTS:
        abi = abi_of(kernel)
        _LAYOUTS[id(kernel)] = (kernel, abi.kinds, fastlaunch.layout("cuda", abi.kinds, hidden_ptrs=abi.hidden_ptrs))
    _, kinds, layout = _LAYOUTS[id(kernel)]
    args, hidden = jit_fidelity.arg_bytes(rec, kinds, layout)
    return rec["grid"], rec["block"], rec["stream"], rec["function"] == kernel.function, tuple(args), tuple(hidden)


def run_one(stub, call, nparams):
    """(outcome, launches, record, side effects) of one call."""
    st = stub.state
    before, counts = st.calls, COUNTS.copy()
    stub.record(nparams)
    try:
        out = ("returned", call())
    except Exception as exc:  # the exception type is what must agree
        out = ("raised", type(exc))
    launches = st.calls - before
    effects = tuple(sorted((COUNTS - counts).items()))
    kernel = out[1] if out[0] == "returned" else None
    return out, launches, launch_record(st, kernel) if launches else None, effects, bool(st.used_params)


def kernels(triton, tl):
    """Two copies of each kernel from the same function: one for Triton alone, one for fastlaunch."""

    def plain(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

    def two_d(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) + tl.program_id(1) + tl.program_id(2)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    configs = [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]

    def pair(fn, tune=False):
        make = (lambda: triton.autotune(configs=configs, key=["n"])(triton.jit(fn))) if tune else (lambda: triton.jit(fn))
        return make(), make()

    return {"plain": pair(plain), "two_d": pair(two_d), "tuned": pair(tuned, tune=True)}


def main(n=10_000, seed=2026):
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    import fastlaunch.triton as flt
    from fastlaunch import triton_jit

    flt.enable()
    rng = random.Random(seed)
    ks = kernels(triton, tl)
    for ref, _ in ks.values():
        flt.exclude(ref)  # Triton alone: an Autotuner's `self.fn.run` would otherwise attach its kernel
    x, y = torch.zeros(8192), torch.zeros(8192)
    stats = collections.Counter()
    mismatches = []
    forms = {}  # grid form -> how its calls went: launched by fastlaunch or by Triton, none, raised
    for i in range(n):
        name = rng.choice(["plain", "plain", "two_d", "tuned"])
        ref, fl = ks[name]
        size = rng.choice([1000, 4096, 77])
        kwargs = {} if name == "tuned" else {"BLOCK": rng.choice([64, 128])}
        args = (x, size) if name == "two_d" else (x, y, size)
        grid, kind = grid_of(rng, np, torch, "BLOCK", size)
        nparams = len(args) + 2
        a = run_one(stub, lambda: type(ref).run(ref, *args, grid=grid, warmup=False, **kwargs), nparams)
        b = run_one(stub, lambda: fl[grid](*args, **kwargs), nparams)
        stats[a[0][0]] += 1
        same = a[1:4] == b[1:4] and a[0][0] == b[0][0]
        if same and a[0][0] == "raised":
            same = a[0][1] is b[0][1]
        elif same:
            ra, rb = a[0][1], b[0][1]
            same = (ra is None) == (rb is None) and (ra is None or (ra.hash == rb.hash and type(ra) is type(rb)))
        if not same:
            mismatches.append((i, name, kind, repr(grid)[:80], a, b))
        stats["launched" if a[1] else "not_launched"] += 1
        outcome = "raised" if a[0][0] == "raised" else "not_launched" if not b[1] else "triton" if b[4] else "fastlaunch"
        forms.setdefault(kind, collections.Counter())[outcome] += 1
    sites = dict(triton_jit.sites())
    fast = sum(c.get("fast", 0) for c in sites.values())
    result = {"triton": triton.__version__, "torch": torch.__version__, "calls": n, "seed": seed,
              "returned": stats["returned"], "raised": stats["raised"], "launched": stats["launched"],
              "not_launched": stats["not_launched"], "fast": fast, "mismatches": len(mismatches),
              "first_mismatches": [repr(m)[:600] for m in mismatches[:10]],
              "forms": {k: dict(v) for k, v in sorted(forms.items())}, "sites": sites}
    print(json.dumps(result, indent=1, default=str))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
