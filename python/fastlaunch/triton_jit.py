"""Triton's JIT served by fastlaunch: `kernel[grid](*args, **kwargs)` through a C dispatcher.

`enable()` puts fastlaunch's JitSubscript in `JITFunction.__getitem__` and, at a kernel's first
subscript, a JitDispatcher in its call slot (the instance attribute `run`). The dispatcher (C,
src/python/triton/jit.c) keys each call on what Triton specializes on and launches the plan bound under
that key; this module is its policy:
  - `bind`: after Triton's own run served a call whose key had no plan (Triton compiled the variant
    if needed and launched it), a plan is built from the CompiledKernel that run returned, with the
    grid callable compiled into a grid program when its body allows;
  - `revalidate`: whenever something the dispatcher watches changed (Triton's knobs, the
    environment, the active driver, the globals the kernel or its grid read), what holds now: the
    device and stream sources, the launch hook lists, a reason to send every call to Triton (a
    changed global the kernel uses: Triton raises its RuntimeError), and whether bound variants
    still stand (a knob or environment change that enters Triton's key forgets them).
Triton stays the compiler and the authority on variants: a call fastlaunch cannot key, or whose
key has no plan yet, goes to Triton's run before anything was submitted.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import os
import types
import weakref

from fastlaunch import _C, triton_check, triton_compiled
from fastlaunch._C import FastLaunchPlanUnavailable
from fastlaunch.grid_trace import ABSENT as _ABSENT, NotTraceable as _NotTraceable, trace_grid
from fastlaunch.grid_trace import answered_grid, bind_arguments as _bind_arguments
from fastlaunch.triton_tuners import AutotunePolicy as _AutotunePolicy
from fastlaunch.triton_tuners import HeuristicsPolicy as _HeuristicsPolicy
from fastlaunch.triton_tuners import autotune_key  # noqa: F401  (its public home)
from fastlaunch.triton_tuners import subclass_refusal as _subclass_refusal
from fastlaunch.triton_tuners import watchable_dict as _watchable_dict

log = logging.getLogger("fastlaunch")

_state = {"enabled": False, "getitems": [], "backend": None, "tuner_run": None, "runs": [], "off": None}
# enable(), disable(), exclude(), attaching a kernel: one at a time (triton_compiled's lock); calls never take it.
_locked, members = triton_compiled.locked, triton_compiled.members  # one lock; WeakSet copies (bind.members)
_dispatchers: "weakref.WeakSet" = weakref.WeakSet()
_not_bound: dict = {}


def _launch_knobs():
    """Where a call with launch hooks set reads them: triton.knobs.runtime, given again whenever it is
    another object than the one given last (a replaced `triton.knobs.runtime`)."""
    runtime = getattr(getattr(sys.modules.get("triton"), "knobs", None), "runtime", None)
    if _state.get("launch_knobs") is not runtime or runtime is None:
        _C.launch_knobs(runtime)
        _state["launch_knobs"] = runtime


def _kernel_classes():
    """The classes whose `kernel[grid]` fastlaunch serves: Triton's JITFunction, Autotuner, Heuristics."""
    from triton.runtime.jit import JITFunction

    classes = [JITFunction]
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics

        classes += [Autotuner, Heuristics]
    except ImportError:  # a Triton without them: the JIT alone
        pass
    return classes


@_locked
def enable(*, backend=None, verify=None) -> None:
    """Serves every `@triton.jit` kernel's `kernel[grid](...)` (and `kernel.run(...)`) through
    fastlaunch from now on, `@triton.autotune` and `@triton.heuristics` kernels included: kernels
    already defined and those defined later. Idempotent. backend None: each variant launches on the
    backend of the GPU Triton compiled it for (cuda, or hip for an hsaco); "null" for measuring.
    verify True: every call first asks Triton which compiled kernel it would run (triton_check), on
    any Triton; None: FASTLAUNCH_VERIFY's setting (on a Triton whose key-deciding code is not in the
    proven set, calls are checked whatever it says)."""
    if verify is None:
        import fastlaunch

        verify = fastlaunch._config.verify
    elif not isinstance(verify, bool):
        raise TypeError(f"enable(): verify must be True, False or None (FASTLAUNCH_VERIFY's), got {verify!r}")
    triton_check.set_verify(verify)
    if _state["enabled"]:
        for d in members(_dispatchers):
            d.invalidate()  # the check's setting read again at each kernel's next call
        return
    import triton

    if not hasattr(triton, "knobs"):  # before Triton 3.4: its settings are read otherwise
        _state["off"] = f"Triton {getattr(triton, '__version__', '?')} has no triton.knobs"
        log.warning("fastlaunch: Triton's JIT not served: %s", _state["off"])
        return
    detector, why = _C.watch_detector()
    if detector is None:  # no way to see a knob or a global change: Triton keeps every call
        _state["off"] = f"no dict change detector ({why})"
        log.warning("fastlaunch: Triton's JIT not served: %s", _state["off"])
        return
    _state["enabled"] = True  # first: code a replaced attribute's release runs may call enable() again
    _state["backend"] = backend
    _state["getitems"] = []
    for cls in _kernel_classes():
        had = "__getitem__" in cls.__dict__
        stock = cls.__getitem__
        _state["getitems"].append((cls, had, stock))
        cls.__getitem__ = sub = _C.JitSubscript(stock, _attach)
        if triton_compiled.slot_writable():  # kernel[grid] then calls it from the class's slot (CPython
            sub.take_slot(cls)  # undoes this on reassignment); else through CPython's slot and __getitem__
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        Autotuner = None
    # `fn.run(...)` called directly (FlagGems' LibEntry, an Autotuner subclass calling self.fn.run)
    # attaches the kernel at its first call, as kernel[grid] does: JITFunction.run and Heuristics.run
    # become RunSlots, Autotuner.run a TunerSlot (subclasses' super().run reaches an admitted
    # instance's dispatcher through it).
    for cls in _kernel_classes():
        stock = cls.__dict__.get("run")
        if not isinstance(stock, types.FunctionType):
            continue  # a Triton whose run this does not recognise: its own
        if cls is Autotuner:
            cls.run = _C.TunerSlot(stock, _attach_from_slot)
            _state["tuner_run"] = (Autotuner, stock)
        else:
            cls.run = _C.RunSlot(stock, _attach_from_slot)
            _state["runs"].append((cls, stock))
    _launch_knobs()  # the hooks' home
    triton_compiled.enable(_attach, backend=backend)  # compiled[grid](...) on a kept CompiledKernel
    log.debug("fastlaunch: Triton's JIT served (backend %s)", backend)


@_locked
def disable() -> None:
    """Gives every call slot back to Triton."""
    if not _state["enabled"]:
        return
    _state["enabled"] = False  # first: a __del__ this runs may call disable() or enable() again
    triton_compiled.disable()
    getitems, _state["getitems"] = _state["getitems"], []
    for cls, had, stock in getitems:
        if had:
            cls.__getitem__ = stock
        elif "__getitem__" in cls.__dict__:
            del cls.__getitem__
    if _state["tuner_run"] is not None:
        cls, stock = _state["tuner_run"]
        cls.run = stock
        _state["tuner_run"] = None
    runs, _state["runs"] = _state["runs"], []
    for cls, stock in runs:
        cls.run = stock
    for d in members(_dispatchers):
        owner = _owner(d)
        if vars(owner).get("run") is d:
            del owner.__dict__["run"]
        if vars(owner).get("_fastlaunch_run") is d:
            del owner.__dict__["_fastlaunch_run"]
        if hasattr(d, "clear"):
            d.clear()
    for fn in members(_refused):
        fn.__dict__.pop("run", None)
    _refused.clear()


_refused: "weakref.WeakSet" = weakref.WeakSet()
_excluded: "weakref.WeakSet" = weakref.WeakSet()


def _stock_run(fn):
    """Triton's own run of fn's class, bound to fn (under fastlaunch's slot when one is there; a
    subclass's own run otherwise). Through a RunSlot it is the slot called through the class, which
    marks the call as Triton's own (what it launches through a kept kernel's `run` is Triton's)."""
    run = type(fn).run
    if isinstance(run, _C.RunSlot):
        return types.MethodType(run, fn)
    return run.stock.__get__(fn) if isinstance(run, _C.TunerSlot) else run.__get__(fn)


@_locked
def exclude(kernel) -> None:
    """Leaves `kernel` (a JITFunction, Autotuner or Heuristics, and the kernels it wraps) to Triton:
    its calls never reach fastlaunch, now and after enable() again, as long as it lives."""
    from triton.runtime.jit import JITFunction

    fn = kernel
    while fn is not None:
        _excluded.add(fn)
        for name in ("_fastlaunch_run", "run"):
            d = vars(fn).get(name)
            if d is not None and d in _dispatchers:  # served until now
                del fn.__dict__[name]
                d.clear()
        if _state["enabled"] and "run" not in vars(fn):
            _refuse(fn, "excluded")
        fn = None if isinstance(fn, JITFunction) else getattr(fn, "fn", None)


def _refuse(fn, reason):
    _not_bound[reason] = _not_bound.get(reason, 0) + 1
    fn.__dict__["run"] = _stock_run(fn)  # the subscript sees Triton's own run: stock
    _refused.add(fn)
    log.debug("fastlaunch: %s not served: %s", getattr(fn, "__name__", fn), reason)


def _attach_from_slot(fn) -> None:
    """A kernel's `run` read before any kernel[grid] (the class's RunSlot or TunerSlot): attached as
    its first subscript would."""
    if _state["enabled"] and isinstance(fn, tuple(_kernel_classes())):
        _attach(fn)


@_locked
def _attach(fn) -> None:
    """Installs a dispatcher in `fn`'s call slot at its first subscript (or marks it stock)."""
    from triton.runtime.jit import JITFunction

    if "run" in vars(fn) or not _state["enabled"]:  # disable() ran in another thread since its subscript
        return
    if fn in _excluded:
        return _refuse(fn, "excluded")
    if not isinstance(fn, JITFunction):
        return _attach_wrapper(fn)
    if type(fn).run is not JITFunction.run or getattr(fn, "is_gluon", lambda: False)():
        return _refuse(fn, "jit_subclass")
    if triton_check.checking() and triton_check.prelude()[0] is None:  # Triton's choice cannot be asked
        return _refuse(fn, f"triton_run_unrecognised:{triton_check.prelude()[1]}")
    try:
        policy = _Policy(fn, _state["backend"])
        params = list(fn.params)
        names = tuple(sys.intern(p.name) for p in params)
        consts = tuple(bool(p.is_constexpr) for p in params)
        defaults = tuple((p.default,) if p.has_default else () for p in params)
        d = _C.JitDispatcher(fn, _stock_run(fn), policy, param_names=names, param_const=consts,
                             defaults=defaults, option_names=policy.option_names(),
                             pre_run_hooks=fn.pre_run_hooks)
    except Exception as exc:  # a Triton this does not recognise: Triton keeps the kernel
        return _refuse(fn, f"unrecognised:{type(exc).__name__}")
    policy.dispatcher = weakref.ref(d)
    fn.__dict__["run"] = d
    _dispatchers.add(d)


def _inner_run(fn):
    """What an Autotuner's or a Heuristics' `self.fn.run` is once served: the inner JITFunction's
    dispatcher (attached now), or the inner wrapper's run."""
    from triton.runtime.jit import JITFunction

    if isinstance(fn, JITFunction):
        _attach(fn)
    elif "run" not in vars(fn):
        _attach_wrapper(fn)
    return fn.run


def _tuner_run():
    """Triton's own Autotuner.run (the slot keeps it while fastlaunch serves the JIT)."""
    from triton.runtime.autotuner import Autotuner

    return _state["tuner_run"][1] if _state["tuner_run"] is not None else Autotuner.run


@_locked
def _attach_wrapper(fn) -> None:
    """An Autotuner gets a dispatcher of its own (autotune.c), and so does a Heuristics
    (heuristics.c). An Autotuner subclass whose own run calls super().run keeps its run; the super()
    call reaches the dispatcher through the TunerSlot."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    if not _state["enabled"]:
        return  # disable() ran in another thread since the call that attaches it began
    if not triton_check.tuners_recognised():  # their own key is not checked: Triton's run, its JIT calls checked
        return _refuse(fn, "triton_unproven:" + ("heuristics" if isinstance(fn, Heuristics) else "autotuner"))
    if isinstance(fn, Heuristics):
        if type(fn).run is not Heuristics.run:
            return _refuse(fn, "kernel_wrapper_subclass")
        return _attach_heuristics(fn)
    if not isinstance(fn, Autotuner):
        return _refuse(fn, "kernel_wrapper_subclass")
    stock = _tuner_run()
    subclass = type(fn).run is not stock and type(fn).run is not Autotuner.run
    why = subclass and _subclass_refusal(fn, _state["tuner_run"] is not None)
    if why:
        return _refuse(fn, why)
    try:
        _inner_run(fn.fn)
        policy = _AutotunePolicy(fn, _inner_run, _watchable_dict)
        names = tuple(sys.intern(n) for n in fn.arg_names)
        keys = tuple(names.index(k) for k in fn.keys if k in names)
        d = _C.AutotuneDispatcher(fn, stock.__get__(fn), policy, arg_names=names, key_params=keys,
                                  configs=fn.configs)
    except Exception as exc:  # noqa: BLE001 - an Autotuner this does not recognise stays Triton's
        return _refuse(fn, f"unrecognised_autotuner:{type(exc).__name__}")
    policy.dispatcher = weakref.ref(d)
    _dispatchers.add(d)
    if subclass:
        fn.__dict__["_fastlaunch_run"] = d  # its own run stays: the subscript hands calls to it
        fn.__dict__["run"] = _stock_run(fn)
        _refused.add(fn)
    else:
        fn.__dict__["run"] = d


def _attach_heuristics(fn) -> None:
    try:
        policy = _HeuristicsPolicy(fn, _inner_run)
        names = tuple(sys.intern(n) for n in fn.arg_names)
        d = _C.HeuristicsDispatcher(fn, _stock_run(fn), policy, arg_names=names)
    except Exception as exc:  # noqa: BLE001 - a Heuristics this does not recognise stays Triton's
        return _refuse(fn, f"unrecognised_heuristics:{type(exc).__name__}")
    policy.dispatcher = weakref.ref(d)
    _inner_run(fn.fn)
    fn.__dict__["run"] = d
    _dispatchers.add(d)


def _owner(d):
    return d.fn if hasattr(d, "fn") else d.heuristics if hasattr(d, "heuristics") else d.autotuner


def _base_name(fn):
    while not hasattr(fn, "__name__") and hasattr(fn, "fn"):
        fn = fn.fn
    return getattr(fn, "__name__", "?")


def sites():
    """(name, counts) of every kernel with a dispatcher, for report()."""
    out = []
    for d in members(_dispatchers):
        if hasattr(d, "fn"):
            out.append((f"jit:{getattr(d.fn, '__name__', '?')}", d.counts))
        elif hasattr(d, "heuristics"):
            out.append((f"heuristics:{_base_name(d.heuristics.fn)}", d.counts))
        else:
            kind = "autotune" if type(d.autotuner).__name__ == "Autotuner" else f"autotune[{type(d.autotuner).__name__}]"
            out.append((f"{kind}:{_base_name(d.autotuner.fn)}", d.counts))
    return sorted(out, key=lambda x: x[0])


def not_bound():
    return dict(_not_bound)


# ---- the policy of one kernel ----

def _knob(obj, name, default=None):
    try:
        return getattr(obj, name)
    except Exception:
        return default


def _are_torchs(device_fn, stream_fn):
    """Whether the driver's device and stream sources are torch's current device and raw stream."""
    try:
        import torch

        return device_fn is torch.cuda.current_device and stream_fn is getattr(torch._C, "_cuda_getCurrentRawStream", None)
    except Exception:
        return False


# Triton's knob groups whose values enter its key (options and their defaults) or the dispatch.
_C_SOURCES = []  # (device callable, capsule, stream callable, capsule), newest first


def register_c_sources(get_current_device, device_capsule, get_current_stream, stream_capsule) -> None:
    """A driver's current device and stream readable from C: when Triton's active driver has these
    two callables, the dispatcher calls the capsules' C functions instead (capsule names
    `fastlaunch.current_device` and `fastlaunch.current_stream`; signatures of torch's C shim,
    `int32_t (int32_t *device)` and `int32_t (int32_t device, void **stream)`, 0 on success). They
    must return what the callables return. torch's own functions need no registration."""
    for cap, name in ((device_capsule, "fastlaunch.current_device"), (stream_capsule, "fastlaunch.current_stream")):
        if type(cap).__name__ != "PyCapsule":
            raise TypeError(f"register_c_sources(): expected a capsule named {name}, got {type(cap).__name__}")
    _C_SOURCES.insert(0, (get_current_device, device_capsule, get_current_stream, stream_capsule))
    for d in members(_dispatchers):
        d.invalidate()


_KEY_KNOBS = ("runtime", "compilation", "language", "nvidia", "amd")


class _Empty:
    pass


class _Policy:
    def __init__(self, fn, backend):
        self.fn = fn
        self.backend = backend
        self.dispatcher = None
        self.snapshot = None
        self.guards = []  # (dict, name, object or _ABSENT): what traced grids read from modules
        self.handed = None  # why the kernel is Triton's for good (Triton chose another compiled kernel)

    answered_grid = staticmethod(answered_grid)  # the grid Triton gets once fastlaunch called the callable

    def option_names(self):
        import triton
        from triton.compiler import make_backend

        target = triton.runtime.driver.active.get_current_target()
        opts = make_backend(target).parse_options({})
        return tuple(sys.intern(f.name) for f in dataclasses.fields(opts))  # matched by identity first

    # What enters Triton's key besides the arguments: a change forgets every bound variant.
    def _key_snapshot(self):
        import triton

        knobs = triton.knobs
        env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(("TRITON_", "MLIR_", "LLVM_"))))
        # Knobs set in code (options take defaults from some), less the launch hooks (read per launch).
        knob_values = tuple(sorted((name, k, repr(v)) for name in _KEY_KNOBS
                                   for k, v in vars(getattr(knobs, name, None) or _Empty).items()
                                   if k not in ("launch_enter_hook", "launch_exit_hook")))
        return (bool(getattr(self.fn, "debug", False)), _knob(knobs.runtime, "debug"),
                _knob(knobs.compilation, "instrumentation_mode"),
                _knob(knobs.compilation, "fpsan_homomorphic_casts"), env, knob_values, id(triton.runtime.driver.active))

    def _watched(self):
        import triton

        knobs = triton.knobs
        dicts = [os.environ._data, _watchable_dict(self.fn), _watchable_dict(triton.runtime.driver),
                 _watchable_dict(triton.runtime.driver.active), vars(knobs),  # knobs' own: runtime replaced
                 vars(sys.modules["triton.runtime.jit"])]  # a piece replaced there: recognised again
        for name in _KEY_KNOBS:
            obj = getattr(knobs, name, None)
            if obj is not None and hasattr(obj, "__dict__"):
                dicts.append(_watchable_dict(obj))
        # A module's globals the kernel or its traced grids read: watched for those names only (a
        # loop variable written at module level is no change).
        keyed = {}
        for (name, _), (_, g) in getattr(self.fn, "used_global_vals", {}).items():
            keyed.setdefault(id(g), (g, set()))[1].add(name)
        for g, name, _ in self.guards:
            keyed.setdefault(id(g), (g, set()))[1].add(name)
        whole = {id(d): d for d in dicts if isinstance(d, dict) and id(d) not in keyed}
        return tuple(whole.values()), tuple((g, tuple(sorted(n))) for g, n in keyed.values() if isinstance(g, dict))

    def _stock_reason(self, driver):
        import triton

        if self.handed is not None:
            return self.handed
        knobs = triton.knobs
        if _knob(knobs.compilation, "instrumentation_mode", "") not in ("", None):
            return "instrumentation"
        if _knob(knobs.runtime, "add_stages_inspection_hook") is not None:
            return "stages_inspection_hook"
        if not hasattr(driver, "get_current_stream") or not hasattr(driver, "get_current_device"):
            return "driver_unrecognised"
        not_present = object()
        for (name, _), (val, g) in getattr(self.fn, "used_global_vals", {}).items():
            if g.get(name, not_present) != val:
                return "global_changed"  # Triton's run raises its RuntimeError
        return None

    def _hook_lists(self):
        import triton

        lists = []
        for name in ("launch_enter_hook", "launch_exit_hook"):
            hook = _knob(triton.knobs.runtime, name)
            if hook is None:
                continue
            calls = getattr(hook, "calls", None)
            if not isinstance(calls, list):
                return None  # a plain callable: active while set
            lists.append(calls)
        return tuple(lists)

    def revalidate(self):
        """(stock reason or None, device_fn, stream_fn, hook lists or None, watched dicts, keyed dicts,
        check or None): called by the dispatcher when a watched dict changed (and at its first call).
        A Triton where any of it cannot be read has the kernel's calls go to Triton, never raising
        where Triton alone would not."""
        try:
            return self._revalidate()
        except Exception as exc:  # noqa: BLE001 - not a Triton this knows: its run serves every call
            log.debug("fastlaunch: %s: every call Triton's: %s: %s", getattr(self.fn, "__name__", "?"),
                      type(exc).__name__, exc)
            return (f"unrecognised:{type(exc).__name__}", None, None, (), (), (), None)

    def _revalidate(self):
        import triton

        _launch_knobs()  # triton.knobs.runtime replaced (its module's dict is watched): hooks read there

        driver = triton.runtime.driver.active
        d = self.dispatcher() if self.dispatcher else None
        snap = self._key_snapshot()
        guards_hold = all((g.get(name, _ABSENT) is obj) for g, name, obj in self.guards)
        if d is not None and (snap != self.snapshot or not guards_hold):
            d.clear()
            self.guards = []
        self.snapshot = snap
        reason = self._stock_reason(driver)
        hooks = self._hook_lists()  # None: a hook is a plain callable (the dispatcher calls it while set)
        dev = getattr(driver, "get_current_device", None)
        stream = getattr(driver, "get_current_stream", None)
        if _are_torchs(dev, stream) and _C.jit_torch_shim():
            dev = stream = None  # torch's C shim: no Python call per launch
        else:
            for d_fn, d_cap, s_fn, s_cap in _C_SOURCES:
                if d_fn == dev and s_fn == stream:
                    dev, stream = d_cap, s_cap  # the driver's registered C functions
                    break
        check = self.check if triton_check.checking() and triton_check.prelude()[0] is not None else None
        if check is None and triton_check.checking():
            reason = reason or "triton_run_unrecognised"  # never launched unchecked
        return (reason, dev, stream, hooks, *self._watched(), check)

    def check(self, device, args, kwargs, kernels, unread=False):
        """Triton's own choice for the call among `kernels` (triton_check.ask says what it returns)."""
        return triton_check.ask(self, device, args, kwargs, kernels, unread)

    def bind(self, key, kernel, args, kwargs, grid):
        """Binds the variant Triton's run used for a call whose key had no plan."""
        d = self.dispatcher() if self.dispatcher else None
        if d is None:
            return
        bound = _bind_arguments(self.fn, args, kwargs)
        # What the key holds by address: constexpr and option values, tensors' dtypes (never a
        # tensor: the plan must not keep the first call's memory alive).
        consts = {p.name for p in self.fn.params if p.is_constexpr}
        keep = tuple(v for k, v in bound.items() if k in consts)
        keep += tuple(v for k, v in kwargs.items() if k not in bound)
        keep += tuple(getattr(v, "dtype", None) for v in bound.values() if hasattr(v, "data_ptr"))
        try:
            plan, positions, scratch = self._plan(kernel)
        except FastLaunchPlanUnavailable as exc:
            d._insert(key, kernel, None, (), None, keep, exc.reason)
            log.debug("fastlaunch: %s variant refused: %s", self.fn.__name__, exc.reason)
            d.invalidate()
            return
        spec = None
        if callable(grid) and not isinstance(grid, (tuple, list)):
            spec = self._grid_spec(grid, bound)
        try:
            d._insert(key, kernel, plan, positions, spec, keep, None, scratch)
        except FastLaunchPlanUnavailable:
            d._insert(key, kernel, plan, positions, None, keep, None, scratch)  # the grid is called instead
        d.invalidate()  # used_global_vals and the grid's guards enter the watched set
        triton_compiled.serve_run(kernel)  # kernel.run(...) called directly on what kernel[grid] returned

    def _plan(self, kernel):
        from fastlaunch.triton_plan import abi_of, is_hip, jit_positions, plan_from_compiled

        abi, nparams = abi_of(kernel), len(self.fn.params)
        if not all(isinstance(p, int) and 0 <= p < nparams for p, _ in abi.positions):
            raise FastLaunchPlanUnavailable("signature_positions_unrecognised")
        backend = self.backend or ("hip" if is_hip(kernel.metadata) else "cuda")
        scratch = triton_compiled.scratch_of(kernel, abi) if backend == "cuda" else None
        plan = plan_from_compiled(kernel, backend=backend, name=self.fn.__name__, descriptors=True,
                                  scratch_args=scratch is not None)
        return plan, jit_positions(abi.positions) + ((-1, -1),) * (scratch[4] if scratch else 0), scratch

    def pre_run_kwargs(self, kwargs):
        """Adds to a call's keywords what Triton's run adds before its pre-run hooks see them
        (`debug`, and the compilation knobs this Triton passes); False when this Triton's run is not
        one whose additions are known (the call is then Triton's)."""
        names = triton_check.pre_run_names()
        if names is None:
            return False
        import triton

        knobs = triton.knobs
        kwargs["debug"] = kwargs.get("debug", self.fn.debug) or knobs.runtime.debug
        for name in names:
            kwargs[name] = getattr(knobs.compilation, name)
        return True

    def learn_grid(self, grid, meta):
        """The grid program of a callable met after its variant was bound (None: called per launch)."""
        spec = self._grid_spec(grid, dict(meta))
        d = self.dispatcher() if self.dispatcher else None
        if spec is not None and d is not None:
            d.invalidate()  # the grid's guards enter the watched set
        return spec

    def _grid_spec(self, grid, bound):
        try:
            exprs, sources, guards = trace_grid(grid, self.fn, bound)
        except _NotTraceable as exc:
            log.debug("fastlaunch: %s grid called per launch: %s", self.fn.__name__, exc)
            return None
        self.guards.extend(guards)
        return (grid.__code__, grid.__globals__, exprs, sources)
