"""What the Python modules keep, when threads use it at once (issue 41). A bound launch's promotion:
one plan is built for a launcher however many threads reach it, a call that finds a promotion under way takes the stock path
instead of waiting, disable() never waits for a plan being built and the slot is never refilled after
it, and no count is lost. Real host kernels count their own executions: "launched once" is read back
from memory. With the GIL the threads interleave at the adapter's sleep; `make test-freethreaded`
runs the same with the GIL off."""

import threading
import time

from fastlaunch import FinalizedLaunch
from fastlaunch.bind import bind
from fastlaunch.triton_tuners import watchable_dict
from test_lifecycle import CountingAdapter, CountingAutotuner, launcher_for

THREADS, CALLS = 8, 40


class SlowAdapter(CountingAdapter):
    """Builds plans slowly (the window another thread's call falls into), counting each build; a
    build may also wait for an event (the test's disable() runs meanwhile)."""

    def __init__(self, delay=0.02, gate=None):
        super().__init__()
        self.delay, self.gate = delay, gate
        self.builds = 0
        self.building = threading.Event()
        self._lock = threading.Lock()

    def build_plan(self, autotuner, launcher, args):
        with self._lock:
            self.builds += 1
        self.building.set()
        if self.gate is not None:
            assert self.gate.wait(30), "the test never opened the gate"
        time.sleep(self.delay)
        return super().build_plan(autotuner, launcher, args)


def _calls_at_once(at, counts, stream):
    """THREADS threads, each making CALLS calls with ids of its own, started together."""
    start, errors = threading.Barrier(THREADS), []

    def work(t):
        try:
            start.wait()
            for i in range(CALLS):
                at.run(counts.arg, t * CALLS + i, 1000, stream=stream.handle)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    assert not errors, errors


def test_threads_promote_once_and_launch_every_call_once(kernels, buf, stream):
    counts = buf(THREADS * CALLS)
    at = CountingAutotuner([launcher_for(kernels)], name="threads")
    adapter = SlowAdapter()
    bound = bind(at, adapter)
    _calls_at_once(at, counts, stream)
    stream.synchronize()
    assert counts.tolist() == [1] * (THREADS * CALLS)  # every call launched, none twice
    c = bound.counts()
    assert adapter.builds == 1 and c["promotions"] == 1, (adapter.builds, c)
    assert isinstance(vars(at)["run"], FinalizedLaunch)
    # Nothing lost: every call was either the entry's or a stock one, and each stock one has its reason.
    assert c["fast"] + c["stock"] == THREADS * CALLS, c
    assert sum(c["fallbacks"].values()) == c["stock"] - adapter.direct_calls, (c, adapter.direct_calls)


def test_threads_meet_a_refused_launcher_once(kernels, buf, stream):
    counts = buf(THREADS * CALLS)
    launcher = launcher_for(kernels, workspace_size=64)  # refused (stable): negative-cached
    at = CountingAutotuner([launcher], name="refused")
    adapter = SlowAdapter()
    bound = bind(at, adapter)
    _calls_at_once(at, counts, stream)
    stream.synchronize()
    assert counts.tolist() == [1] * (THREADS * CALLS)
    c = bound.counts()
    assert c["refusals"] == {"launcher_workspace_required": 1} and c["negative"] == "launcher_workspace_required", c
    assert c["fast"] == 0 and c["stock"] == THREADS * CALLS, c


def test_disable_during_a_promotion_leaves_the_slot_alone(kernels, buf, stream):
    counts = buf(4)
    gate = threading.Event()
    at = CountingAutotuner([launcher_for(kernels)], name="disabled")
    adapter = SlowAdapter(delay=0, gate=gate)
    bound = bind(at, adapter)
    first = threading.Thread(target=lambda: at.run(counts.arg, 0, 1000, stream=stream.handle))
    first.start()  # its stock run, then its promotion, which waits at the gate
    assert adapter.building.wait(30)
    done = threading.Event()
    remover = threading.Thread(target=lambda: (bound.uninstall(), done.set()))
    remover.start()
    assert done.wait(10), "uninstall() waited for the plan being built"
    assert "run" not in vars(at)
    at.run(counts.arg, 1, 1000, stream=stream.handle)  # Triton's... the autotuner's own run now
    gate.set()
    first.join(30)
    remover.join(30)
    assert not first.is_alive()
    stream.synchronize()
    assert "run" not in vars(at) and bound.entry is None and bound.plan is None
    assert counts.tolist()[:2] == [1, 1] and at.stock_runs == 2
    assert bound.counts()["promotions"] == 0


class _SlowDict:
    """An object whose __dict__ is replaced slowly (a property over the real one): the window in which
    a second thread would replace it too, and watch a dict the object no longer has."""

    def __init__(self):
        self._d = {"debug": False}

    @property
    def __dict__(self):
        return self._d

    @__dict__.setter
    def __dict__(self, d):
        time.sleep(0.02)
        self._d = d


def test_watchable_dict_is_the_objects_own_in_every_thread():
    import sys

    if sys.version_info < (3, 13):
        import pytest

        pytest.skip("below 3.13 an object's dict is watched as it is (no replacement)")
    obj, got, start = _SlowDict(), [], threading.Barrier(4)

    def work():
        start.wait()
        got.append(watchable_dict(obj))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert len(got) == 4 and all(d is vars(obj) for d in got), [id(d) for d in got] + [id(vars(obj))]
    assert got[0] == {"debug": False}
