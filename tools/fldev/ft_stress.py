"""Threads launching at once (issue 41), on the stand-in driver: 8 threads for SECONDS through plans
over integer addresses, Inductor entries (torch's CachingAutotuner, bound and promoted) and
`kernel[grid]` (a plain kernel, an autotuned one, one under heuristics over autotune), on the same and
on different kernels, with one more thread toggling `fastlaunch.triton.enable()/disable()` and one
setting and clearing a Triton launch hook (a knob the dispatchers watch). Every kernel is compiled
before the threads start: Triton's compiler does not declare itself safe without the GIL.

Checked: no call raises, and the stand-in driver saw exactly one launch per call made (its count is
an atomic add). Meant for a free-threaded interpreter with PYTHON_GIL=0 (it says which GIL it ran
under); it runs with the GIL too. Prints one JSON line; exit 1 on a failure.

    PYTHONPATH=tools python -m fldev.ft_stress [SECONDS] [--no-torch] [--daemons]

--no-torch: only what needs no torch (plans over integer addresses, `kernel[grid]` over objects with
data_ptr()), for an interpreter torch does not import under (ThreadSanitizer's).
--daemons: then 4 daemon threads go on calling kernel[grid] while the interpreter exits (fastlaunch still
enabled): their per-thread kernel[grid] caches are released by the finalizing thread, after those
threads may have exited (a free-threaded build; the exit status says the shutdown was clean).
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

from fastlaunch import _C

_C.accept_host_memory()  # host memory stands in for device memory (a testing build's door)

SRC = '''
import triton
import triton.language as tl


@triton.jit
def plain(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def other(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) - 1.0, mask=m)


@triton.heuristics({"EVEN": lambda args: args["n"] % 64 == 0})
@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def heur(x_ptr, y_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))
    else:
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
'''


class Buf:
    """A tensor-like over host memory: data_ptr() and a dtype, as Triton's JIT takes them."""

    def __init__(self, n, dtype):
        import ctypes

        self._mem = (ctypes.c_float * n)()
        self.dtype = dtype
        self._ptr = ctypes.addressof(self._mem)

    def data_ptr(self):
        return self._ptr


def _jit_calls(stub, use_torch):
    """Callables, each one launch: kernel[grid] on the plain, autotuned and heuristics kernels."""
    import triton

    from fldev.stub_bench import module_from_source

    mod = module_from_source(os.environ.get("FASTLAUNCH_CACHE_DIR") or "/tmp", "fl_ft_stress_kernels", SRC)
    if use_torch:
        import torch

        x, y = torch.zeros(4096), torch.zeros(4096)
    else:
        x, y = Buf(4096, triton.language.float32), Buf(4096, triton.language.float32)
    calls = {
        "jit_plain": lambda: mod.plain[(4,)](x, y, 256, BLOCK=64),
        "jit_other": lambda: mod.other[(lambda meta: (2,))](x, y, 100, BLOCK=64),
        "jit_autotune": lambda: mod.tuned[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, y, 256),
        "jit_heuristics": lambda: mod.heur[lambda meta: (triton.cdiv(192, meta["BLOCK"]),)](x, y, 192),
    }
    return calls


def _plan_calls(stub):
    """Plans over integer addresses (the kernel compiled here for sm_90, its handle the stand-in's)."""
    import triton.language as tl

    from fldev import cuda_stub
    from fastlaunch.triton import plan_from_compiled

    @__import__("triton").jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))

    ck = cuda_stub.compile(k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 64})
    shared = plan_from_compiled(ck, grid=(2,))
    own = [plan_from_compiled(ck, grid=(1,)) for _ in range(8)]
    base = 0x7F3A_0000_0000
    s = cuda_stub.STREAM
    return {"plan_shared": lambda i: shared(base + 256 * i, base + 4096 + 256 * i, 64, stream=s),
            "plan_own": lambda i: own[i](base, base + 8192, 64 + i, stream=s)}


def _inductor_calls(stub):
    """Inductor entries: torch's CachingAutotuner over two kernels as Inductor writes them, each bound
    and promoted (fldev.stub_bench's Case, as make bench measures them)."""
    from fldev import cuda_stub
    from fldev.stub_bench import Case

    d = os.environ.get("FASTLAUNCH_CACHE_DIR") or "/tmp"
    s = cuda_stub.STREAM
    cases = [Case("ft_a", 2, 1, d), Case("ft_b", 3, 2, d)]
    return {f"inductor_{c.name}": (lambda c: lambda i: c.dyn.run(*c.args, stream=s))(c) for c in cases}


def _leave_daemons(calls):
    """Daemon threads calling kernel[grid] on, never joined: the interpreter exits under them."""
    started = threading.Barrier(5)

    def daemon(i):
        started.wait()
        names = ["jit_plain", "jit_autotune", "jit_heuristics", "jit_other"]
        while True:
            calls[names[i % 4]](i)

    for i in range(4):
        threading.Thread(target=daemon, args=(i,), daemon=True).start()
    started.wait()
    time.sleep(0.2)


def main(seconds=10.0, use_torch=True, daemons=False):
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import triton

    import fastlaunch.triton as flt

    flt.enable()
    calls = {}
    calls.update({k: (lambda f: (lambda i: f()))(f) for k, f in _jit_calls(stub, use_torch).items()})
    calls.update(_plan_calls(stub))
    if use_torch:
        calls.update(_inductor_calls(stub))
    for name, f in calls.items():  # compiled, tuned and promoted before any thread starts
        for _ in range(4):
            f(0)
    stub.count_only()
    names = sorted(calls)
    before = stub.state.calls
    done = threading.Event()
    made = [0] * 8
    per_kind = [dict.fromkeys(names, 0) for _ in range(8)]
    errors = []
    hook_calls = [0]
    triton_own = [0] * 8  # calls Triton's Autotuner.run raised on (its self.nargs, replaced by another thread)

    def worker(i):
        import traceback

        rng = random.Random(i)
        mine = names if i % 2 == 0 else [n for n in names if n != "jit_other"]  # same and different kernels
        while not done.is_set():
            n = rng.choice(mine)
            try:
                calls[n](i)
            except Exception as exc:  # noqa: BLE001
                frames = traceback.extract_tb(exc.__traceback__)
                where = [f"{os.path.basename(f.filename)}:{f.lineno}" for f in frames]
                # Raised inside Triton's Autotuner.run: it keeps a call's arguments in self.nargs, which
                # another thread's call of it replaces (while the toggler has fastlaunch off, kernel[grid]
                # is Triton's own; fastlaunch hands some calls to it too). Raised before any launch, in
                # Triton's code: counted, not failed.
                if frames and frames[-1].filename.endswith(os.path.join("triton", "runtime", "autotuner.py")):
                    triton_own[i] += 1
                    continue
                errors.append(f"{type(exc).__name__}: {exc} at " + " | ".join(where[-5:]))
                return
            made[i] += 1
            per_kind[i][n] += 1

    def toggler():
        try:
            while not done.is_set():
                flt.disable()
                time.sleep(0.0005)
                flt.enable()
                time.sleep(0.002)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"toggler: {type(exc).__name__}: {exc}"[:300])

    def knobs():
        def hook(*args, **kwargs):
            hook_calls[0] += 1

        try:
            while not done.is_set():
                triton.knobs.runtime.launch_enter_hook = hook
                time.sleep(0.001)
                triton.knobs.runtime.launch_enter_hook = None
                time.sleep(0.003)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"knobs: {type(exc).__name__}: {exc}"[:300])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=toggler), threading.Thread(target=knobs)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    done.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    launched = stub.state.calls - before
    total = sum(made)
    kinds = {n: sum(p[n] for p in per_kind) for n in names}
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    result = {"seconds": round(elapsed, 2), "gil": "on" if gil else "off", "python": sys.version.split()[0],
              "threads": 8, "calls": total, "launches": launched, "by_kind": kinds, "hook_calls": hook_calls[0],
              "raised_in_tritons_autotuner": sum(triton_own),
              "errors": errors[:5], "torch": use_torch}
    print(json.dumps(result), flush=True)
    if daemons:
        _leave_daemons(calls)
    else:
        flt.disable()
    ok = not errors and launched == total and total > 0 and all(v > 0 for v in kinds.values())
    return 0 if ok else 1


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(float(argv[0]) if argv else 10.0, use_torch="--no-torch" not in sys.argv,
                  daemons="--daemons" in sys.argv))
