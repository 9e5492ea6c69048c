"""The steady-state launch through a finalized call slot enters no Python function and allocates
nothing (tracemalloc over 100,000 launches)."""

import sys
import tracemalloc

import fastlaunch.host as host
from fldev import standins
from fastlaunch import FinalizedLaunch
from fastlaunch.bind import bind

SIG = ["ptr", "i64", "i32", "i32"]
GRID = ("-((xnumel) // -(XBLOCK))", "1", "1")


def promoted_site(kernels):
    launcher = standins.make_launcher(kernels["count_launch"], SIG, def_args=["counts", "cid", "xnumel"], grid=GRID,
                                  constants={"XBLOCK": 64}, name="steady")
    at = standins.Autotuner([launcher], name="steady")
    bind(at, standins.HostAdapter())
    return at


def python_calls_during(fn):
    events = []

    def prof(frame, event, arg):
        if event == "call" and frame.f_code is not fn.__code__:
            events.append(frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name)

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return events


def test_steady_state_enters_no_python_function(kernels, stream, buf):
    at = promoted_site(kernels)
    counts = buf(4)
    at.run(counts.arg, 0, 100, stream=stream.handle)  # warm-up through the stock path, then promotion
    assert isinstance(vars(at)["run"], FinalizedLaunch)

    def loop():
        run = at.run
        for _ in range(1000):
            run(counts.arg, 1, 100, stream=stream.handle)

    assert python_calls_during(loop) == []
    stream.synchronize()
    assert counts.tolist()[:2] == [1, 1000]
    # The probe itself can fail: the stock path does enter Python functions.
    vars(at).pop("run")
    calls = python_calls_during(loop)
    assert "Autotuner.run" in calls or (sys.version_info < (3, 11) and "run" in calls)  # co_qualname: 3.11+


def _launch_many(run, arg, h, n):
    """The measured loop, alone in its function: every allocation made while launching is traced
    to these lines (tracemalloc attributes C allocations to the running Python line)."""
    for _ in range(n):
        run(arg, 1, 100, stream=h)


def test_steady_state_allocates_nothing(kernels, stream, buf):
    at = promoted_site(kernels)
    counts = buf(4)
    at.run(counts.arg, 0, 100, stream=stream.handle)
    run = at.run
    arg = counts.arg
    h = stream.handle
    # Warm the measured function itself: CPython 3.12 allocates once (72 bytes, on the def line) the
    # first time a function runs, which is not the launch's doing.
    _launch_many(run, arg, h, 1000)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        snap0 = tracemalloc.take_snapshot()
        _launch_many(run, arg, h, 100_000)
        after, peak = tracemalloc.get_traced_memory()
        snap1 = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    stream.synchronize()
    assert counts.tolist()[1] == 101_000
    # What the measuring itself keeps (the snapshot, the loop variable, the result tuple) is
    # allocated on this file's lines; everything else must not have grown at all.
    first = _launch_many.__code__.co_firstlineno
    loop_lines = range(first, first + 6)
    grown = [s for s in snap1.compare_to(snap0, "lineno") if s.size_diff > 0 and (
        s.traceback[0].filename != __file__ or s.traceback[0].lineno in loop_lines)
        and s.traceback[0].filename != tracemalloc.__file__]
    assert grown == [], grown[:5]
    # The rest is what the measuring keeps on this file's lines (about 1 KB; 1.4 KB on Python 3.10).
    assert after - before < 2048
    # Nothing even transient for plain integer arguments: a torch tensor's data_ptr() returns a
    # fresh int each call (freed at once), which only shows as a few bytes of peak.
    assert peak - before < 2048


def test_entry_follows_every_change_to_what_it_reads():
    """The entry skips its lookups of a module flag and of the autotuner's launchers while their
    dicts are unchanged (dict watchers on CPython 3.12+, version tags before): every change a
    caller can make is still seen on the next call."""
    import types

    from fastlaunch import _C, Plan

    s = _C.stream_create("null")
    try:
        plan = Plan(None, ["i32"], backend="null", grid=(1,))
        mod = types.ModuleType("flags_owner")
        mod.on = False

        class Autotuner:
            pass

        class Bound:
            reasons = []

            def entry_fallback(self, reason, stable, args, kwargs):
                Bound.reasons.append(reason)
                return "stock"

        launcher = object()
        at = Autotuner()
        at.launchers = [launcher]
        entry = FinalizedLaunch(Bound(), plan, autotuner=at, launcher=launcher, flags=((mod, "on", "flagged"),))

        def call():
            before = _C.stream_count(s, "null")
            out = entry(1, stream=s)
            ran = _C.stream_count(s, "null") - before
            assert (out, ran) in ((None, 1), ("stock", 0))
            return "fast" if out is None else Bound.reasons[-1]

        assert [call() for _ in range(3)] == ["fast"] * 3
        mod.on = True  # the flag set: every call goes stock while it is
        assert [call(), call()] == ["flagged", "flagged"]
        mod.on = False
        assert call() == "fast"
        mod.on = 1  # not a bool: read each time
        assert call() == "flagged"
        mod.on = 0
        assert [call(), call()] == ["fast", "fast"]
        del mod.on  # a missing flag is off
        assert call() == "fast"
        mod.on = True
        assert call() == "flagged"
        mod.__dict__["on"] = False
        assert call() == "fast"
        mod.unrelated = 5  # another change to the module's dict: still fast
        assert call() == "fast"
        mod.on = []  # false, but its truth can change in place: read on every call
        assert call() == "fast"
        mod.on.append(1)
        assert call() == "flagged"
        mod.on.clear()
        assert call() == "fast"
        mod.on = False
        assert [call(), call()] == ["fast", "fast"]

        at.launchers.append(object())  # the list mutated in place: not the dict
        assert call() == "launcher_changed"
        at.launchers.pop()
        assert call() == "fast"
        at.launchers = [object()]  # replaced
        assert call() == "launcher_changed"
        at.launchers = [launcher]
        assert call() == "fast"
        del at.launchers
        assert call() == "launcher_changed"
        at.__dict__["launchers"] = [launcher]
        assert call() == "fast"
        at.__dict__ = {"launchers": [object()]}  # a new dict altogether
        assert call() == "launcher_changed"
        at.__dict__ = {"launchers": [launcher]}
        assert call() == "fast"
    finally:
        _C.stream_destroy(s, "null")
