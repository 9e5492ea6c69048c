"""Binding and promotion: the bound launch that sits in a generated call slot.

A call slot is the callable a generated wrapper calls for one kernel (with Inductor, the kernel
autotuner's instance attribute ``run``). ``bind`` installs a :class:`BoundLaunch` there. It runs the
stock ``run`` while the autotuner warms up, promotes once exactly one final launcher exists (builds
a plan through the adapter and installs the C :class:`FinalizedLaunch` into the slot), keeps stable
refusals in a negative cache, and takes the call back whenever the entry cannot launch.

Every call ends in exactly one of: the plan launched it once; the stock path ran it and nothing was
submitted by fastlaunch; a FastLaunchError with backend_submitted=True was raised (never replayed).
"""

from __future__ import annotations

import collections
import logging
import sysconfig
import threading
import weakref

from fastlaunch._C import FastLaunchError, FastLaunchPlanUnavailable, FinalizedLaunch

log = logging.getLogger("fastlaunch")

_sites: "weakref.WeakSet[BoundLaunch]" = weakref.WeakSet()
_sites_lock = threading.Lock()
# A free-threaded build runs two threads' `counter += 1` side by side and may lose one: there the
# counters of a site are added under a lock; with the GIL they are plain adds.
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class Adapter:
    """What the bound launch needs to know about one kind of autotuner and launcher.

    Subclasses answer for Inductor's CachingAutotuner (fastlaunch.inductor) or for the host-backed
    launchers of fastlaunch.host. Every method may be overridden; the defaults fit an autotuner
    with a ``launchers`` list whose launchers are called ``launcher(*args, stream=stream)``.
    """

    #: autotuner attribute holding its launchers
    launchers_attr = "launchers"

    def bind_refusal(self, autotuner) -> str | None:
        """A reason not to bind at all (a grouped autotuner that picks launchers per call)."""
        if hasattr(autotuner, "best_launcher_map"):
            return "grouped_autotuner"
        return None

    def static_stock_reason(self, autotuner) -> str | None:
        """A reason, fixed for this autotuner's lifetime, to always take the stock path."""
        return None

    def profiler_flag(self):
        """(object, attribute) whose truth means a profiler is recording; None when there is none."""
        return None

    def flags(self) -> list:
        """(object, attribute, reason) triples: while any attribute is true, calls take the stock
        path (profilers, debug modes). The C entry reads them on every call."""
        flag = self.profiler_flag()
        return [(flag[0], flag[1], "profiler")] if flag is not None else []

    def ready(self, autotuner, launcher) -> bool:
        """True once nothing is left for the stock run to do before launches (saving binaries...)."""
        return True

    def hook_flags(self, launcher) -> list:
        """(object or dict, name, "launch_hooks") for each launch hook that is active while set (one
        without a calls list): the C entry sends a call back while any is set."""
        return []

    def hook_lists(self, launcher) -> tuple:
        """Lists whose non-emptiness means launch hooks are active."""
        return ()

    def legacy_hooks_active(self, launcher) -> bool:
        """Hooks that are not lists (a single callable): always active while set."""
        return False

    def build_plan(self, autotuner, launcher, args):
        """A Plan whose runtime arguments are the call's positional args; raise
        FastLaunchPlanUnavailable (stable) when none can be built."""
        raise FastLaunchPlanUnavailable("adapter_cannot_plan")

    def entry_options(self, autotuner, launcher, plan) -> dict:
        """FinalizedLaunch's keywords beyond the plan: grid_args (the call positions holding the grid,
        for a plan whose grid comes from the caller) and scratch (global scratch allocated per call)."""
        return {}

    def call_launcher(self, autotuner, launcher, args, stream):
        """Runs one call through the launcher itself (negative cache, active hooks)."""
        return launcher(*args, stream=stream)


# Reasons the C entry gives for calls it hands back without having tried to launch (a reason's
# code is what precedes its first colon).
_CHECK_REASONS = frozenset({"runtime_kwargs", "stream_invalid_type", "stream_out_of_range", "args_count"})


class SiteStats:
    """Counters of one call site. Fast launches are counted by the C entry as well."""

    __slots__ = ("fast", "stock", "promotions", "refusals", "fallbacks", "errors", "_lock")

    def __init__(self):
        self.fast = 0
        self.stock = 0
        self.promotions = 0
        self.refusals = collections.Counter()
        self.fallbacks = collections.Counter()
        self.errors = 0
        self._lock = threading.Lock() if _FREE_THREADED else None

    def add(self, *, stock=0, fallback=None, refusal=None, promotions=0):
        """Counts one event: a stock call (and its reason), a refusal, a promotion."""
        if self._lock is not None:
            with self._lock:
                return self._add(stock, fallback, refusal, promotions)
        self._add(stock, fallback, refusal, promotions)

    def _add(self, stock, fallback, refusal, promotions):
        self.stock += stock
        self.promotions += promotions
        if fallback is not None:
            self.fallbacks[fallback] += 1
        if refusal is not None:
            self.refusals[refusal] += 1


class BoundLaunch:
    """The Python half of a call slot. See the module docstring."""

    def __init__(self, autotuner, adapter: Adapter, *, site: str | None = None, call_slot=None,
                 stock_run=None, slot_attr: str | None = "run"):
        self.autotuner = autotuner
        self.adapter = adapter
        self.site = site or getattr(autotuner, "fastlaunch_site", None) or _default_site(autotuner)
        # The slot: an instance attribute of the autotuner (Inductor's kernel.run), or a one-element
        # list (a generated call site's own slot).
        self._call_slot = call_slot
        self._slot_attr = slot_attr if call_slot is None else None
        self._stock_run = stock_run if stock_run is not None else type(autotuner).run.__get__(autotuner)
        self._static_stock_reason = adapter.static_stock_reason(autotuner)
        self._flags = tuple(adapter.flags())
        self._entry: FinalizedLaunch | None = None
        # (plan, the launcher it was built from) or None: one attribute, read once per call, so a
        # thread dropping the plan while others launch never leaves them half of a pair.
        self._planned = None
        self._negative_launcher = None
        self._negative_reason = None
        self._repromoted_for = None  # the launcher a hook change re-promoted once (entry_fallback)
        self.stats = SiteStats()
        self._retired_fast = 0  # fast launches of entries since replaced
        self._warm = False  # True once a stock run has completed
        self._uninstalled = False
        # Threads (a free-threaded build, or a thread switch with the GIL): one promotion at a time,
        # and a call that finds one under way takes the stock path rather than wait for it; the
        # slot's state (the entry, the plan, the negative cache, uninstalled) changes under _slot_lock,
        # which is held for no call and no adapter code, so disable() never waits for a plan to build.
        self._promoting = threading.Lock()
        self._slot_lock = threading.RLock()
        with _sites_lock:
            _sites.add(self)

    # ---- the slot ----
    def install(self, obj) -> None:
        with self._slot_lock:
            if self._uninstalled:
                return  # disabled: whatever still holds this bound launch must not refill the slot
            if self._call_slot is not None:
                self._call_slot[0] = obj
            elif self._slot_attr is not None:
                setattr(self.autotuner, self._slot_attr, obj)

    def uninstall(self) -> None:
        """Removes whatever fastlaunch put into the slot (disable())."""
        with self._slot_lock:
            if self._call_slot is not None:
                self._call_slot[0] = self._stock_run
            elif self._slot_attr is not None and self._slot_attr in vars(self.autotuner):
                delattr(self.autotuner, self._slot_attr)
            self._entry = None
            self._planned = None
            self._uninstalled = True
        with _sites_lock:
            _sites.discard(self)

    # ---- the call ----
    def __call__(self, *args, stream=None, benchmark_run=False, **kwargs):
        reason = self._stock_reason(benchmark_run, kwargs)
        if reason is not None:
            return self._stock(reason, args, stream, benchmark_run, kwargs)
        # Promoted: the C entry decides this call (profiler and debug flags, hooks, the launcher it
        # was built from) and hands it back to entry_fallback when it cannot launch it. Read once:
        # another thread may drop it meanwhile.
        entry = self._entry
        if entry is not None:
            return entry(*args, stream=stream)
        # The first call always goes through the stock run: whatever it does once (autotuning,
        # coordinate descent, saving binaries, registering the winner) completes before promotion.
        launcher = self._stable_launcher() if self._warm else None
        if launcher is not None:
            if self._negative_launcher is launcher:
                self.stats.add(stock=1, fallback="negative_cache")
                return self.adapter.call_launcher(self.autotuner, launcher, args, stream)
            if self._promote(launcher, args, before_launch=True):
                entry = self._entry
                if entry is not None:  # another thread may have dropped it already
                    return entry(*args, stream=stream)
                self.stats.add(stock=1)
                return self.adapter.call_launcher(self.autotuner, launcher, args, stream)
            if self._negative_launcher is launcher:
                self.stats.add(stock=1)
                return self.adapter.call_launcher(self.autotuner, launcher, args, stream)
        # Still warming up (or not promotable yet): the stock run does what it must (autotuning,
        # coordinate descent, saving binaries), then promotion is tried for the next call.
        result = self._stock("warmup", args, stream, benchmark_run, kwargs)
        self._warm = True
        launcher = self._stable_launcher()
        planned = self._planned
        if launcher is not None and self._negative_launcher is not launcher and (planned is None or planned[1] is not launcher):
            # The call has run: whatever promotion raises must not reach the caller, who would
            # take the call for failed and might run it again.
            self._promote(launcher, args)
        return result

    def entry_fallback(self, reason, stable, args, kwargs):
        """Called by the C entry (FinalizedLaunch) when it cannot launch this call; nothing was
        submitted. Each branch counts the reason once (_stock counts its own)."""
        stream = kwargs.pop("stream", None)
        if reason in ("launch_hooks", "launcher_changed"):
            self.stats.add(fallback=reason)
        if reason == "launch_hooks":
            # Hooks see this call through the stock launcher; the plan stays for the next one. The
            # entry checked the launcher and the keywords first; re-decide if that changed since.
            planned = self._planned
            if kwargs or planned is None or self._stable_launcher() is not planned[1]:
                return self(*args, stream=stream, **kwargs)
            launcher = planned[1]
            if (self._repromoted_for is not launcher and not self.adapter.legacy_hooks_active(launcher)
                    and not any(self.adapter.hook_lists(launcher))):
                # The hooks changed form since the entry was made (a list-based hook installed where
                # none was): a new entry for them as they are now, through the promotion path; once
                # per launcher, so an adapter whose flags and hooks disagree cannot loop.
                self._repromoted_for = launcher
                self._drop_plan()
                return self(*args, stream=stream)
            self.stats.add(stock=1)
            return self.adapter.call_launcher(self.autotuner, launcher, args, stream)
        if reason == "launcher_changed":
            self._drop_plan()
            return self(*args, stream=stream, **kwargs)
        if reason.split(":", 1)[0] in _CHECK_REASONS or any(reason == f[2] for f in self._flags):
            # A flag (profiler, debug mode) or a call the entry does not take: the stock run.
            return self._stock(reason, args, stream, kwargs.pop("benchmark_run", False), kwargs)
        # A launch refused before the submit boundary.
        planned = self._planned
        if stable and planned is not None:
            self._install_negative(planned[1], reason)
        return self._stock(reason, args, stream, False, kwargs)

    # ---- internals ----
    def _stock_reason(self, benchmark_run, kwargs):
        """Why this call takes the stock run whatever the promotion state (the autotuner's fixed
        reason, a benchmark run, keywords the entry does not take), or None."""
        if self._static_stock_reason is not None:
            return self._static_stock_reason
        if benchmark_run:
            return "benchmark_run"
        if kwargs:
            return "runtime_kwargs"
        return None

    def _stock(self, reason, args, stream, benchmark_run, kwargs):
        self.stats.add(stock=1, fallback=reason)
        if benchmark_run:
            kwargs = dict(kwargs, benchmark_run=True)
        return self._stock_run(*args, stream=stream, **kwargs)

    def _stable_launcher(self):
        launchers = getattr(self.autotuner, self.adapter.launchers_attr, None)
        if not launchers or len(launchers) != 1:
            return None
        launcher = launchers[0]
        if getattr(launcher, "fallback", None) is not None:
            return None
        try:
            ready = self.adapter.ready(self.autotuner, launcher)
        except Exception as exc:  # an adapter's surprise means "not ready": the stock path runs
            log.warning("fastlaunch: %s: readiness check failed: %s: %s", self.site, type(exc).__name__, exc)
            return None
        return launcher if ready else None

    def _promote(self, launcher, args, before_launch: bool = False, again: bool = False) -> bool:
        """Promotes for `launcher` once: False when another thread is promoting now (this call takes
        the stock path, never waits) or when the launcher was refused (`again`: try it anyway); True
        when it is (or already was, by another thread) the plan's launcher."""
        if not self._promoting.acquire(blocking=False):
            return False
        try:
            planned = self._planned
            if planned is not None and planned[1] is launcher:
                return True  # another thread promoted it while this call ran the stock path
            if (self._negative_launcher is launcher and not again) or self._uninstalled:
                return False
            return self._promote_unguarded(launcher, args)
        except Exception as exc:  # an adapter's surprise: never fatal to the call
            reason = f"promotion_error:{type(exc).__name__}"
            self.stats.add(refusal=reason)
            log.warning("fastlaunch: %s: promotion failed: %s: %s", self.site, type(exc).__name__, exc)
            self._drop_plan()
            if not before_launch:
                self._install_negative(launcher, reason)
            return False
        finally:
            self._promoting.release()

    def _promote_unguarded(self, launcher, args) -> bool:
        try:
            plan = self.adapter.build_plan(self.autotuner, launcher, args)
        except FastLaunchPlanUnavailable as exc:
            self.stats.add(refusal=exc.reason)
            if exc.stable:
                self._install_negative(launcher, exc.reason)
            else:
                log.debug("fastlaunch: %s: plan not built this time: %s", self.site, exc.reason)
            return False
        except FastLaunchError as exc:
            self.stats.add(refusal=exc.reason)
            if exc.stable:
                self._install_negative(launcher, exc.reason)
            return False
        reason = _category_mismatch(plan.kinds, args, getattr(plan, "ignored", ()))
        options = self.adapter.entry_options(self.autotuner, launcher, plan)
        if reason is None and plan.grid_mode == "caller" and "grid_args" not in options:
            reason = "grid_from_caller"  # the entry launches with the plan's own grid or the call's grid_args
        if reason is not None:
            self.stats.add(refusal=reason)
            self._install_negative(launcher, reason)
            return False
        entry = FinalizedLaunch(
            self, plan, autotuner=self.autotuner, launcher=launcher,
            launcher_attr=self.adapter.launchers_attr,
            hook_lists=tuple(self.adapter.hook_lists(launcher)),
            flags=self._flags + tuple(self.adapter.hook_flags(launcher)), **options)
        with self._slot_lock:
            if self._uninstalled:
                return False  # disable() ran while the plan was built: the slot stays the stock run's
            self._planned = (plan, launcher)
            self._negative_launcher = None
            self._negative_reason = None
            self._entry = entry
            self.install(entry)
        self.stats.add(promotions=1)
        log.info("fastlaunch: %s: promoted (%s, %d runtime args, grid %s)", self.site, plan.backend,
                 plan.runtime_arg_count, plan.grid_mode)
        return True

    def _install_negative(self, launcher, reason):
        with self._slot_lock:
            self._drop_plan()
            self._negative_launcher = launcher
            self._negative_reason = reason
        log.info("fastlaunch: %s: refused: %s", self.site, reason)

    def _drop_plan(self):
        with self._slot_lock:
            entry = self._entry
            if entry is not None or self._planned is not None:
                if entry is not None:
                    self._retired_fast += entry.calls
                self._entry = None
                self._planned = None
                self.install(self)

    # ---- public seams (tools, tests, the C entry) ----
    def promote(self, args, launcher=None) -> bool:
        """Tries a promotion now, for `launcher` (default: the autotuner's one final launcher) and a
        call's positional args, as the next call would after warm-up. True when a plan was built;
        a stable refusal negative-caches the launcher as usual."""
        launcher = launcher if launcher is not None else self._stable_launcher()
        if launcher is None:
            return False
        self._warm = True
        self._drop_plan()
        return self._promote(launcher, tuple(args), again=True)

    @property
    def entry(self):
        """The FinalizedLaunch in the slot while promoted, else None."""
        return self._entry

    @property
    def plan(self):
        """The plan of the current promotion, or None."""
        planned = self._planned
        return planned[0] if planned is not None else None

    @property
    def planned_launcher(self):
        """The launcher the current plan was built from, or None."""
        planned = self._planned
        return planned[1] if planned is not None else None

    @property
    def negative_launcher(self):
        """The launcher in the negative cache (its calls skip the fast path), or None."""
        return self._negative_launcher

    # ---- reporting ----

    def counts(self) -> dict:
        entry_fast = 0
        entry_fallbacks = 0
        if self._entry is not None:
            entry_fast = self._entry.calls
            entry_fallbacks = self._entry.fallbacks
        fast = self.stats.fast + entry_fast + self._retired_fast
        return {
            "site": self.site,
            "fast": fast,
            "stock": self.stats.stock,
            "promotions": self.stats.promotions,
            "entry_fallbacks": entry_fallbacks,
            "fallbacks": dict(self.stats.fallbacks),
            "refusals": dict(self.stats.refusals),
            "negative": self._negative_reason,
        }


def _category_mismatch(kinds, args, ignored=()):
    """Checks once, at promotion, that each runtime arg is of the kind's category (the C path checks
    values on every call; a category mismatch here means the launcher's signature is not this call
    site's, so the plan would refuse every call). Positions the plan skips are left out."""
    if "tmap" in kinds:
        return None  # one argument gives a map and its shape and strides: the C path checks each call
    kept = [a for i, a in enumerate(args) if i not in ignored]
    for i, (kind, arg) in enumerate(zip(kinds, kept)):
        if kind == "ptr":
            ok = arg is None or (isinstance(arg, int) and not isinstance(arg, bool)) or hasattr(arg, "data_ptr")
        elif kind.startswith(("fp", "bf")):
            ok = isinstance(arg, (int, float)) or hasattr(arg, "__float__")
        else:
            ok = isinstance(arg, int) or (hasattr(arg, "__index__") and not isinstance(arg, float))
        if not ok:
            return f"runtime_arg_category_mismatch:{i}:{kind}"
    return None


def _default_site(autotuner) -> str:
    meta = getattr(autotuner, "inductor_meta", None) or {}
    name = meta.get("kernel_name") if isinstance(meta, dict) else None
    return name or f"{type(autotuner).__name__}@{id(autotuner):#x}"


def bind(autotuner, adapter: Adapter, **kwargs):
    """Installs a bound launch into the autotuner's call slot and returns it; returns None and leaves
    the slot alone when the adapter refuses to bind (a grouped autotuner)."""
    reason = adapter.bind_refusal(autotuner)
    if reason is not None:
        log.info("fastlaunch: not binding %s: %s", _default_site(autotuner), reason)
        with _sites_lock:
            _not_bound[reason] = _not_bound.get(reason, 0) + 1
        return None
    bound = BoundLaunch(autotuner, adapter, **kwargs)
    bound.install(bound)
    return bound


# Autotuners left unbound, by reason (report() prints them: who owns those call slots).
_not_bound: dict = {}


def not_bound() -> dict:
    with _sites_lock:
        return dict(_not_bound)


def sites() -> list:
    with _sites_lock:
        return members(_sites)


def members(weak_set) -> list:
    """A WeakSet's members now. Its entries die in any thread (a free-threaded build runs their removal
    beside the copy, which then raises "changed size"): copied again until a copy holds."""
    while True:
        try:
            return list(weak_set)
        except RuntimeError:
            continue
