"""The seed's binding and promotion lifecycle, rebuilt against real host kernels: each case launches
a kernel that counts its own executions, so "fast path", "stock path" and "never twice" are facts
read back from memory, not from mocks."""

import ctypes
import os
import subprocess
import sys

import pytest

import fastlaunch
import fastlaunch.host as host
from fldev import standins
from fastlaunch import FastLaunchError, FinalizedLaunch, _C
from fastlaunch.bind import bind

SIG = ["ptr", "i64", "i32", "i32"]  # counts, call id, xnumel | XBLOCK (fixed)
GRID = ("-((xnumel) // -(XBLOCK))", "1", "1")


class CountingAutotuner(standins.Autotuner):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.stock_runs = 0

    def run(self, *args, stream=None, benchmark_run=False, **kwargs):
        self.stock_runs += 1
        return super().run(*args, stream=stream, benchmark_run=benchmark_run, **kwargs)


class CountingAdapter(standins.HostAdapter):
    def __init__(self, stock_reason=None, profiler=None):
        super().__init__()
        self.direct_calls = 0
        self.stock_reason = stock_reason
        self.profiler = profiler

    def static_stock_reason(self, autotuner):
        return self.stock_reason

    def profiler_flag(self):
        return self.profiler

    def call_launcher(self, autotuner, launcher, args, stream):
        self.direct_calls += 1
        return super().call_launcher(autotuner, launcher, args, stream)


def launcher_for(kernels, block=64, **extra):
    return standins.make_launcher(kernels["count_launch"], SIG, def_args=["counts", "cid", "xnumel"], grid=GRID,
                              constants={"XBLOCK": block}, name="count", **extra)


class Site:
    """One generated call site: an autotuner in a module global, called as kernel.run(...)."""

    made = 0

    def __init__(self, kernels, buf, stream, launchers=None, adapter=None, n=64):
        Site.made += 1
        self.counts = buf(n)
        self.at = CountingAutotuner(launchers or [launcher_for(kernels)], name=f"count{Site.made}")
        self.adapter = adapter or CountingAdapter()
        self.bound = bind(self.at, self.adapter)
        self.stream = stream
        self.next_id = 0

    def call(self, xnumel=1000, **kw):
        cid = self.next_id
        self.next_id += 1
        self.at.run(self.counts.arg, cid, xnumel, stream=self.stream.handle, **kw)
        return cid

    def executions(self):
        self.stream.synchronize()
        return self.counts.tolist()[:self.next_id]

    @property
    def slot(self):
        return vars(self.at).get("run")


def test_warmup_then_promotion(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    assert site.at.stock_runs == 1 and isinstance(site.slot, FinalizedLaunch)
    site.call()
    site.call()
    assert site.at.stock_runs == 1 and site.slot.calls == 2
    assert site.executions() == [1, 1, 1]
    counts = site.bound.counts()
    assert (counts["fast"], counts["stock"], counts["promotions"]) == (2, 1, 1)


def test_autotune_then_promotion(kernels, buf, stream):
    site = Site(kernels, buf, stream, launchers=[launcher_for(kernels, 32), launcher_for(kernels, 128)])
    site.call()
    assert site.at.autotuned == 1 and len(site.at.launchers) == 1
    assert site.slot.plan.owner is site.at.launchers[0]
    site.call()
    assert site.at.stock_runs == 1 and site.slot.calls == 1
    assert site.executions() == [1, 1]


def test_plan_kinds_owner_and_fixed_args(kernels, buf, stream):
    log, pos = buf(50, ctypes.c_int64), buf(1, ctypes.c_int64)
    launcher = standins.make_launcher(kernels["record"], ["ptr", "ptr", "i64", "i32", "i32"],
                                  def_args=["log", "pos", "value", "xnumel"], grid=GRID, constants={"XBLOCK": 8})
    at = standins.Autotuner([launcher])
    bind(at, standins.HostAdapter())
    for v in range(4):
        at.run(log.arg, pos.arg, 100 + v, 17 * v + 1, stream=stream.handle)
    stream.synchronize()
    entry = vars(at)["run"]
    assert entry.plan.kinds == ["ptr", "ptr", "i64", "i32", "i32"] and entry.plan.owner is launcher
    rows = [log.tolist()[5 * k:5 * k + 5] for k in range(4)]
    # value, grid (cdiv(17v, 8), 1, 1) — computed by the grid program for fast calls — and the fixed XBLOCK.
    assert rows == [[100 + v, -(-(17 * v + 1) // 8), 1, 1, 8] for v in range(4)]


def test_static_stock_reason_forces_stock(kernels, buf, stream):
    site = Site(kernels, buf, stream, adapter=CountingAdapter(stock_reason="dump_launch_params"))
    for _ in range(5):
        site.call()
    assert site.at.stock_runs == 5 and site.bound.counts()["fallbacks"] == {"dump_launch_params": 5}
    assert not isinstance(site.slot, FinalizedLaunch)
    assert site.executions() == [1] * 5


def test_missing_metadata_is_negative_cached(kernels, buf, stream):
    plain = launcher_for(kernels)
    del plain.fastlaunch_spec
    site = Site(kernels, buf, stream, launchers=[plain])
    for _ in range(4):
        site.call()
    assert site.at.stock_runs == 1 and site.adapter.direct_calls == 3
    assert site.bound.counts()["negative"] == "launcher_metadata_missing"
    assert site.executions() == [1] * 4


def test_workspace_refused_before_any_plan(kernels, buf, stream, monkeypatch):
    made = []
    launcher = launcher_for(kernels, workspace_size=64)
    monkeypatch.setattr(standins, "Plan", lambda *a, **k: made.append(a))
    site = Site(kernels, buf, stream, launchers=[launcher])
    site.call()
    site.call()
    assert made == [] and site.bound.counts()["refusals"] == {"launcher_workspace_required": 1}
    assert site.executions() == [1, 1]


def test_grouped_autotuner_is_not_bound(kernels):
    at = standins.Autotuner([launcher_for(kernels)])
    at.best_launcher_map = {}
    assert bind(at, standins.HostAdapter()) is None
    assert "run" not in vars(at)


def test_negative_cache_calls_launcher_directly(kernels, buf, stream):
    site = Site(kernels, buf, stream, launchers=[launcher_for(kernels, workspace_size=64)])
    for _ in range(3):
        site.call()
    assert site.bound.counts()["negative"] == "launcher_workspace_required"
    assert site.at.stock_runs == 1 and site.adapter.direct_calls == 2
    assert site.executions() == [1, 1, 1]


def test_category_mismatch_is_a_stable_refusal(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    launcher = site.at.launchers[0]
    assert site.bound.promote((site.counts.arg, 0, 1.5), launcher) is False
    assert site.bound.counts()["negative"] == "runtime_arg_category_mismatch:2:i32"
    assert site.bound.promote((site.counts.arg, 0, 7), launcher) is True


def test_negative_cache_invalidated_when_launcher_changes(kernels, buf, stream):
    plain = launcher_for(kernels)
    del plain.fastlaunch_spec
    site = Site(kernels, buf, stream, launchers=[plain])
    site.call()
    site.call()
    assert site.bound.counts()["negative"] == "launcher_metadata_missing"
    site.at.launchers = [launcher_for(kernels, 16)]
    site.call()
    site.call()
    # The call that promotes launches through the new entry too: both calls are the entry's.
    assert isinstance(site.slot, FinalizedLaunch) and site.slot.calls == 2
    assert site.bound.counts()["negative"] is None and site.bound.counts()["fast"] == 2
    assert site.executions() == [1] * 4


def test_launcher_change_repromotes(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call()
    first = site.slot
    new = launcher_for(kernels, 256)
    site.at.launchers = [new]
    site.call()
    assert site.slot is not first and site.slot.plan.owner is new
    site.call()
    assert site.bound.counts()["fast"] == 3 and site.bound.counts()["promotions"] == 2
    assert site.executions() == [1] * 4


def test_profiler_forces_stock_while_on(kernels, buf, stream):
    class Flags:
        enabled = False

    site = Site(kernels, buf, stream, adapter=CountingAdapter(profiler=(Flags, "enabled")))
    site.call()
    site.call()
    Flags.enabled = True
    site.call()
    site.call()
    Flags.enabled = False
    site.call()
    assert site.at.stock_runs == 3 and site.slot.calls == 2 and site.slot.fallbacks == 2
    assert site.bound.counts()["fallbacks"]["profiler"] == 2
    assert site.executions() == [1] * 5


def test_active_hooks_use_the_launcher_for_that_call_only(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call()
    entry = site.slot
    seen = []
    hook = seen.append
    standins.hooks.launch_enter_hook.add(hook)
    standins.hooks.launch_exit_hook.add(hook)
    site.call()
    site.call()
    assert len(seen) == 4 and site.adapter.direct_calls == 2
    standins.hooks.launch_enter_hook.remove(hook)
    standins.hooks.launch_exit_hook.remove(hook)
    site.call()
    assert site.slot is entry and entry.calls == 2 and site.at.stock_runs == 1
    assert site.executions() == [1] * 5


class SetHookAdapter(CountingAdapter):
    """Launch hooks that are active while set (a plain function, as Triton's older hooks): the C
    entry reads them from a dict, as Inductor's adapter reads a launcher's globals."""

    def __init__(self, scope):
        super().__init__()
        self.scope = scope

    def hook_flags(self, launcher):  # as Inductor's adapter: a name holding a hook list is not a flag
        return [(self.scope, n, "launch_hooks") for n in ("launch_enter_hook", "launch_exit_hook")
                if not isinstance(getattr(self.scope.get(n), "calls", None), list)]

    def legacy_hooks_active(self, launcher):
        return any(self.scope.get(n) is not None and not isinstance(getattr(self.scope[n], "calls", None), list)
                   for n in ("launch_enter_hook", "launch_exit_hook"))


def test_hooks_active_while_set_are_decided_by_the_entry(kernels, buf, stream):
    """The entry is installed whatever the hooks; while one is set, each call goes through the
    launcher (its hooks run), and once it is unset the same entry launches again, fast."""
    scope = {"launch_enter_hook": None}
    site = Site(kernels, buf, stream, adapter=SetHookAdapter(scope))
    site.call()
    site.call()
    entry = site.slot
    assert isinstance(entry, FinalizedLaunch) and entry.calls == 1
    scope["launch_enter_hook"] = print
    site.call()
    site.call()
    assert entry.calls == 1 and entry.fallbacks == 2 and site.adapter.direct_calls == 2
    assert site.bound.counts()["fallbacks"]["launch_hooks"] == 2
    scope["launch_exit_hook"] = print
    del scope["launch_enter_hook"]
    site.call()
    assert entry.calls == 1 and site.adapter.direct_calls == 3
    scope["launch_exit_hook"] = None
    site.call()
    assert site.slot is entry and entry.calls == 2 and site.at.stock_runs == 1
    assert site.executions() == [1] * 6


def test_a_list_hook_installed_where_none_was_gets_a_new_entry(kernels, buf, stream):
    """A hook name read as a flag (nothing set at promotion) that later holds an empty hook list:
    the entry hands the call back, and the bound launch promotes again for the hooks as they are."""
    scope = {}
    site = Site(kernels, buf, stream, adapter=SetHookAdapter(scope))
    site.call()
    site.call()
    first = site.slot
    scope["launch_enter_hook"] = standins.hooks.launch_enter_hook  # an object: the flag is on
    site.call()
    assert site.adapter.direct_calls == 0 and site.slot is not first
    assert isinstance(site.slot, FinalizedLaunch) and site.bound.counts()["promotions"] == 2
    site.call()
    assert site.slot.calls == 2
    assert site.executions() == [1] * 4


def test_flags_and_hooks_that_disagree_do_not_loop(kernels, buf, stream):
    """An adapter whose hook flag stays on while it reports no active hook: one re-promotion, then
    the launcher runs the calls (no recursion), each once."""
    scope = {}

    class Disagreeing(SetHookAdapter):
        def hook_flags(self, launcher):
            return [(self.scope, "launch_enter_hook", "launch_hooks")]

        def legacy_hooks_active(self, launcher):
            return False

    site = Site(kernels, buf, stream, adapter=Disagreeing(scope))
    site.call()
    site.call()
    scope["launch_enter_hook"] = print
    site.call()
    site.call()
    assert site.adapter.direct_calls == 2 and site.bound.counts()["promotions"] == 2
    assert site.executions() == [1] * 4


def test_empty_hook_chain_does_not_block(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    assert standins.hooks.launch_enter_hook.calls == []
    for _ in range(3):
        site.call()
    assert site.slot.calls == 2 and site.adapter.direct_calls == 0


def test_grid_failure_falls_back_without_poisoning(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    entry = site.slot
    _C.fault_inject("grid", 1, 0, entry.plan)
    site.call()  # the fast path refuses (not stable): the stock path runs this call
    _C.fault_inject("none")
    site.call()
    assert site.slot is entry and entry.calls == 1 and site.at.stock_runs == 2
    assert site.bound.counts()["fallbacks"]["fault_injected:grid"] == 1
    # A negative grid fails both ways, and raises without having launched anything.
    with pytest.raises(FastLaunchError) as e:
        site.call(xnumel=-5000)
    assert not e.value.backend_submitted
    site.call()
    assert site.slot is entry
    assert site.executions() == [1, 1, 1, 0, 1]


def test_backend_error_never_replays(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call()
    _C.fault_inject("submit_after", 1, 0, site.slot.plan)
    with pytest.raises(FastLaunchError) as e:
        site.call()
    _C.fault_inject("none")
    assert e.value.backend_submitted is True and e.value.reason == "fault_injected:submit_after"
    assert site.at.stock_runs == 1
    assert site.executions() == [1, 1, 1]  # ran once, was not replayed


def test_wrong_argument_count_goes_back_to_the_bound_launch(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call(4)
    entry = site.slot
    # Too few arguments at the entry: the bound launch takes the call (stock raises TypeError).
    with pytest.raises(TypeError):
        site.at.run(site.counts.arg, 0, stream=stream.handle)
    assert entry.fallbacks == 1 and site.bound.counts()["fallbacks"]["args_count"] == 1


def test_stable_launch_refusal_negative_caches(kernels, buf, stream):
    """A refusal the entry reports as stable (before the boundary) runs the call through the stock
    path and negative-caches the launcher: later calls skip the plan."""
    site = Site(kernels, buf, stream)
    site.call()
    launcher = site.bound.planned_launcher
    site.bound.entry_fallback("args_size_mismatch:2:3", True, (site.counts.arg, 1, 100), {"stream": stream.handle})
    assert site.bound.counts()["negative"] == "args_size_mismatch:2:3" and "run" in vars(site.at)
    assert not isinstance(site.slot, FinalizedLaunch)
    site.next_id = 2
    site.call()
    assert site.adapter.direct_calls == 1 and site.bound.negative_launcher is launcher
    assert site.executions() == [1, 1, 1]


def test_kwargs_and_benchmark_run_take_stock(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call(benchmark_run=True)
    assert site.at.stock_runs == 2 and site.bound.counts()["fallbacks"]["runtime_kwargs"] == 1


def test_uninstall_leaves_no_trace(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    assert "run" in vars(site.at)
    site.bound.uninstall()
    assert "run" not in vars(site.at)
    site.call()
    assert site.at.stock_runs == 2 and site.executions() == [1, 1]


def test_report_counts_reasons(kernels, buf, stream, capsys):
    site = Site(kernels, buf, stream)
    for _ in range(3):
        site.call()
    site.call(benchmark_run=True)
    rows = fastlaunch.report()
    out = capsys.readouterr().out
    row = [r for r in rows if r["site"] == site.bound.site][-1]
    assert (row["fast"], row["stock"]) == (2, 2)
    assert "stock-reasons[runtime_kwargs=1, warmup=1]" in out


def test_fastlaunch_log_reports_promotion_and_refusal(kernel_dir):
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    code = f"""
import sys; sys.path.insert(0, {tools!r})
import fastlaunch.host as host
from fldev import standins
from fastlaunch.bind import bind
import ctypes
k = host.compile(open({os.path.join(os.path.dirname(__file__), 'conftest.py')!r}).read().split('KERNELS = r\"\"\"')[1].split('\"\"\"')[0], 'count_launch', directory={kernel_dir!r})
good = standins.make_launcher(k, {SIG!r}, def_args=['c', 'i', 'xnumel'], grid={GRID!r}, constants={{'XBLOCK': 8}}, name='good')
bad = standins.make_launcher(k, {SIG!r}, def_args=['c', 'i', 'xnumel'], grid={GRID!r}, constants={{'XBLOCK': 8}}, name='bad', workspace_size=1)
s = host.Stream(); buf = (ctypes.c_int32 * 4)()
for name, l in (('good', good), ('bad', bad)):
    at = standins.Autotuner([l], name=name); bind(at, standins.HostAdapter())
    at.run(ctypes.addressof(buf), 0, 10, stream=s.handle); at.run(ctypes.addressof(buf), 0, 10, stream=s.handle)
s.synchronize()
"""
    env = dict(os.environ, FASTLAUNCH_LOG="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "fastlaunch: good: promoted (host, 3 runtime args, grid program)" in proc.stderr
    assert "fastlaunch: bad: refused: launcher_workspace_required" in proc.stderr
    quiet = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in os.environ.items() if k != "FASTLAUNCH_LOG"},
                           capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and "promoted" not in quiet.stderr


def test_promotion_errors_never_reach_a_call_that_ran(kernels, buf, stream):
    class Broken(CountingAdapter):
        def build_plan(self, autotuner, launcher, args):
            raise RuntimeError("adapter bug")

    site = Site(kernels, buf, stream, adapter=Broken())
    site.call()  # ran through the stock path; the failed promotion after it is not the call's failure
    site.call()
    assert site.bound.counts()["negative"] == "promotion_error:RuntimeError"
    assert site.executions() == [1, 1]


def test_hooks_after_a_launcher_change_use_the_new_launcher(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    site.call()
    old_entry = site.slot
    new = launcher_for(kernels, 16)
    site.at.launchers = [new]
    seen = []
    standins.hooks.launch_enter_hook.add(seen.append)
    try:
        site.call()
    finally:
        standins.hooks.launch_enter_hook.remove(seen.append)
    assert seen, "the hook did not see the call"
    assert site.bound.planned_launcher is not old_entry.launcher
    assert site.executions() == [1, 1, 1]


def test_uninstalled_bound_never_refills_the_slot(kernels, buf, stream):
    site = Site(kernels, buf, stream)
    site.call()
    bound = site.bound
    bound.uninstall()
    assert bound.promote((site.counts.arg, 0, 10), site.at.launchers[0]) is False  # nothing promoted
    assert "run" not in vars(site.at) and bound.entry is None and bound.plan is None


def test_category_check_skips_ignored_positions():
    from fastlaunch.bind import _category_mismatch

    assert _category_mismatch(["ptr", "fp32", "ptr"], (0x1000, 1, 0.5, 0x2000), (1,)) is None
    assert _category_mismatch(["ptr", "i32"], (0x1000, 1.5)) == "runtime_arg_category_mismatch:1:i32"


GATE = r"""
/* Waits until gate[0] is set (by a Python thread), then counts. */
typedef struct { volatile int32_t *gate; int32_t *count; } gate_args;
void gated(const void *a, const fl_host_program *p) {
  const gate_args *g = a; (void)p;
  while (!__atomic_load_n(g->gate, __ATOMIC_ACQUIRE)) { }
  __atomic_fetch_add(g->count, 1, __ATOMIC_RELAXED);
}
"""


def test_a_launch_waiting_on_a_full_queue_releases_the_gil(kernel_dir):
    """The first launch blocks the worker until another Python thread opens the gate; 300 launches
    fill the 256-entry queue, so the launching thread waits. Holding the GIL there would deadlock
    (the opener could never run); the wait releases it, as Triton's launcher does around its
    driver call."""
    import threading
    import time

    kernel = host.compile(GATE, "gated", directory=kernel_dir)
    plan = fastlaunch.Plan(kernel, ["ptr", "ptr"], grid=(1,))
    mem = (ctypes.c_int32 * 2)()
    gate, count = ctypes.addressof(mem), ctypes.addressof(mem) + 4
    s = host.Stream()
    done = threading.Event()

    def launcher():
        for _ in range(300):
            plan(gate, count, stream=s.handle)
        done.set()

    t = threading.Thread(target=launcher, daemon=True)
    t.start()
    time.sleep(0.2)  # the launcher is now blocked on the full queue
    assert not done.is_set()
    mem[0] = 1  # runs only because the blocked launcher released the GIL
    assert done.wait(30), "the launching thread kept the GIL while it waited"
    s.synchronize()
    assert mem[1] == 300
    s.close()
