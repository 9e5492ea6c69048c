"""Launches per second from one thread and from two (issue 41): each thread has its own entry (a
FinalizedLaunch over a null-backend plan of 2 tensors and an int), its own tensors and stream, and
calls the entry from a Python loop. On a free-threaded interpreter with the GIL off the two threads
run at once; with the GIL they take turns. Median of REPEATS runs of SECONDS each; the load average
is recorded before each, and the run waits (up to a minute) for it to fall below 0.3.

    PYTHONPATH=tools python -m fldev.ft_scaling [SECONDS] [REPEATS]    (prints one JSON line)
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
    sys.exit(main(*(float(a) if i == 0 else int(a) for i, a in enumerate(sys.argv[1:3]))))
