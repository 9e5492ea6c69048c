"""The first loop a new user writes: `for i in range(N): kernel[grid](x, y, n, BLOCK=128)` at a
module's top level (a script, a notebook cell), its loop variable a global of the module whose
globals the grid lambda reads (`grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)`, `n` a module
global), against the same loop inside a function, with fastlaunch and with Triton alone, on the
stand-in driver. Prints one JSON line: per-call medians (ns) and how often the dispatcher
revalidated during the module-level loops.

    PYTHONPATH=tools python -m fldev.module_loop [N] [REPEATS]
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

from fastlaunch import _C

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


n = 1000
grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731
'''
AT_TOP = '''
for i in range(N):
    add[grid](x, y, n, BLOCK=128)
'''
IN_FUNCTION = '''
def loop(N):
    k, g, a, b, m = add, grid, x, y, n
    for i in range(N):
        k[g](a, b, m, BLOCK=128)
'''
IN_FUNCTION_GLOBALS = '''
def loop_globals(N):
    for i in range(N):
        add[grid](x, y, n, BLOCK=128)
'''


def _module(torch, name, directory):
    """The kernel and its grid in a module file of their own (Triton reads the kernel's source)."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(SOURCE + IN_FUNCTION + IN_FUNCTION_GLOBALS)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.x, mod.y = torch.zeros(4096), torch.zeros(4096)
    return mod


class _Nothing:
    def __getitem__(self, grid):
        return _nothing


def _nothing(*args, **kwargs):
    pass


def _time(fn, n):
    t = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t) / n


def main(n=20000, repeats=7):
    from fldev import cuda_stub

    stub = cuda_stub.load()
    stub.count_only()
    import torch

    import fastlaunch.triton as flt

    from fastlaunch import triton_jit

    revalidations = [0]
    stock_revalidate = triton_jit._Policy.revalidate

    def counted(self):
        revalidations[0] += 1
        return stock_revalidate(self)

    triton_jit._Policy.revalidate = counted
    top = compile(AT_TOP, "<module loop>", "exec")
    out = {}
    for side in ("python", "triton", "fastlaunch"):
        (flt.enable if side == "fastlaunch" else flt.disable)()
        mod = _module(torch, f"fl_module_loop_{side}", tempfile.mkdtemp(prefix="fl-module-loop-"))
        if side == "python":  # the loops' own cost: a subscript and a call that do nothing
            mod.add = _Nothing()
        m = n if side != "triton" else max(200, n // 50)
        mod.N = 3
        exec(top, mod.__dict__)  # the variant compiled (and bound)
        runs = {"top": [], "function": [], "function_globals": []}
        counts0 = dict(mod.add.run.counts) if side == "fastlaunch" else None
        r0 = revalidations[0]
        for _ in range(repeats):
            mod.N = m
            t = time.perf_counter_ns()
            exec(top, mod.__dict__)
            runs["top"].append((time.perf_counter_ns() - t) / m)
            runs["function"].append(_time(mod.loop, m))
            runs["function_globals"].append(_time(mod.loop_globals, m))
        out[side] = {k: round(statistics.median(v), 1) for k, v in runs.items()}
        if counts0 is not None:
            c = dict(mod.add.run.counts)
            out["fastlaunch_calls"] = c["fast"] - counts0["fast"]
            out["fastlaunch_stock"] = c["stock"] - counts0["stock"]
            out["revalidations"] = revalidations[0] - r0  # in every loop above, module level or not
    flt.disable()
    fl = out["fastlaunch"]
    out["top_over_function_ns"] = round(fl["top"] - fl["function_globals"], 1)
    out["top_over_local_function_ns"] = round(fl["top"] - fl["function"], 1)
    py = out["python"]
    out["python_top_over_function_ns"] = round(py["top"] - py["function_globals"], 1)  # Python's own share
    out["triton_top_over_fastlaunch_top"] = round(out["triton"]["top"] / fl["top"], 1)
    out["version"] = sys.version.split()[0]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
