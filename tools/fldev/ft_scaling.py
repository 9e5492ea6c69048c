"""Launches per second from one thread and from two (issue 41): each thread has its own entry (a
FinalizedLaunch over a null-backend plan of 2 tensors and an int), its own tensors and stream, and
calls the entry from a Python loop. On a free-threaded interpreter with the GIL off the two threads
run at once; with the GIL they take turns. Median of REPEATS runs of SECONDS each; the load average
is recorded before each, and the run waits (up to a minute) for it to fall below 0.3.

    PYTHONPATH=tools python -m fldev.ft_scaling [SECONDS] [REPEATS] [--jit]   (prints one JSON line)

--jit: `kernel[grid]` instead, on the stand-in driver (fastlaunch.triton served, cuda plans): one thread,
two threads on two kernels of their own, and two threads on the same kernel, whose calls take turns on
its dispatcher's critical section (docs/internals.md, "Threads without the GIL").
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time


class _NoFallback:
    def entry_fallback(self, reason, stable, args, kwargs):
        raise AssertionError(f"fell back: {reason}")


def _entry(torch):
    """(entry, its arguments, its own null-backend stream)."""
    from fastlaunch import FinalizedLaunch, Plan, _C

    plan = Plan(0, ["ptr", "ptr", "i32"], backend="null", grid=(1,))
    return FinalizedLaunch(_NoFallback(), plan), (torch.zeros(64), torch.zeros(64), 64), _C.stream_create("null")


def _loop(entry, args, stream, stop, out, i):  # noqa: PLR0913
    n = 0
    while not stop[0]:
        for _ in range(1000):
            entry(*args, stream=stream)
        n += 1000
    out[i] = n


def _rate(entries, seconds):
    stop, out = [False], [0] * len(entries)
    threads = [threading.Thread(target=_loop, args=(e, a, s, stop, out, i)) for i, (e, a, s) in enumerate(entries)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop[0] = True
    for t in threads:
        t.join()
    return sum(out) / (time.perf_counter() - t0)


def _quiet(limit=0.3, wait=60.0):
    if os.environ.get("FLDEV_SCALING_NO_WAIT") == "1":  # a test's quick run: the load is only recorded
        return round(os.getloadavg()[0], 2)
    t0 = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - t0 < wait:
        time.sleep(2)
    return round(os.getloadavg()[0], 2)


_JIT_SRC = '''
import triton
import triton.language as tl


@triton.jit
def first(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def second(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
'''


def main_jit(seconds, repeats):
    """kernel[grid] from one thread, two threads on kernels of their own, two on the same kernel."""
    from fldev import cuda_stub
    from fldev.stub_bench import module_from_source

    stub = cuda_stub.load()
    import torch

    import fastlaunch.triton as flt
    from fastlaunch import _C

    flt.enable()
    mod = module_from_source(os.environ.get("FASTLAUNCH_CACHE_DIR") or "/tmp", "fl_ft_scaling_kernels", _JIT_SRC)
    stub.count_only()

    class _Call:  # entry(*args, stream=...) as _loop calls it: kernel[grid](x, y, n, BLOCK=64)
        def __init__(self, kernel):
            self.kernel, self.x, self.y = kernel, torch.zeros(256), torch.zeros(256)

        def __call__(self, *args, stream=None):
            self.kernel[(4,)](self.x, self.y, 256, BLOCK=64)

    calls = {"first": [_Call(mod.first), _Call(mod.first)], "second": [_Call(mod.second)]}
    for c in calls["first"] + calls["second"]:  # compiled, bound and in the memo before any thread starts
        for _ in range(100):
            c()
    shapes = {"one_thread": [calls["first"][0]], "two_own_kernels": [calls["first"][0], calls["second"][0]],
              "two_same_kernel": calls["first"]}
    rates, loads = {k: [] for k in shapes}, []
    before = stub.state.calls
    made = 0
    for _ in range(repeats):
        loads.append(_quiet())
        for name, cs in shapes.items():
            r = _rate([(c, (), None) for c in cs], seconds)
            rates[name].append(r)
    made = stub.state.calls - before
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    med = {k: statistics.median(v) for k, v in rates.items()}
    fast = {n: dict(vars(getattr(mod, n))["run"].counts)["fast"] for n in ("first", "second")}
    print(json.dumps({"python": sys.version.split()[0], "gil": "on" if gil else "off", "torch": torch.__version__,
                      "door": _C.tensor_door()[0], "per_s": {k: round(v) for k, v in med.items()},
                      "two_own_kernels_scaling": round(med["two_own_kernels"] / med["one_thread"], 3),
                      "two_same_kernel_scaling": round(med["two_same_kernel"] / med["one_thread"], 3),
                      "launched": made, "served_fast": fast, "load_before": loads, "repeats": repeats,
                      "seconds": seconds}))
    flt.disable()
    return 0


def main(seconds=2.0, repeats=5):
    import torch

    from fastlaunch import _C

    _C.tensor_door()  # loaded before the threads: both read tensors through it
    entries = [_entry(torch) for _ in range(2)]
    for e, a, s in entries:  # warm
        for _ in range(1000):
            e(*a, stream=s)
    one, two, loads = [], [], []
    for _ in range(repeats):
        loads.append(_quiet())
        one.append(_rate(entries[:1], seconds))
        two.append(_rate(entries, seconds))
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    r1, r2 = statistics.median(one), statistics.median(two)
    print(json.dumps({"python": sys.version.split()[0], "gil": "on" if gil else "off", "torch": torch.__version__,
                      "door": _C.tensor_door()[0], "one_thread_per_s": round(r1), "two_threads_per_s": round(r2),
                      "scaling": round(r2 / r1, 3), "load_before": loads, "repeats": repeats, "seconds": seconds,
                      "ones": [round(x) for x in one], "twos": [round(x) for x in two]}))
    return 0


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    nums = [float(a) if i == 0 else int(a) for i, a in enumerate(argv[:2])]
    sys.exit(main_jit(*(nums + [2.0, 5][len(nums):])) if "--jit" in sys.argv else main(*nums))
