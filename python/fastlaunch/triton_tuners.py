"""The policies of Triton's kernel wrappers served by fastlaunch.triton_jit: what the C dispatcher of
one Autotuner (src/python/triton/autotune.c) or one Heuristics (src/python/triton/heuristics.c) cannot decide in
C. Each is given the JIT's `inner_run(fn)`, which hands out the inner kernel's run (attaching it when
first needed).
"""

from __future__ import annotations

import sys
import threading

from fastlaunch.heuristic_trace import guards_hold, read_heuristic

_DETACHED = {}  # id -> each object whose __dict__ watchable_dict made a plain dict (kept alive)
_DETACHING = threading.Lock()  # two kernels' first calls in two threads: one replacement per object


def watchable_dict(obj):
    """vars(obj), as a dict whose changes reach a dict watcher. From Python 3.13 an instance's
    attributes may live in inline values behind the dict vars() materializes, and setting one
    (`triton.knobs.runtime.debug = True`) does not notify the dict's watchers: the object gets a
    plain dict of the same contents, once (under a lock: two threads replacing it would each watch
    their own dict, and one of them not the object's)."""
    if sys.version_info >= (3, 13) and id(obj) not in _DETACHED:
        with _DETACHING:
            if id(obj) not in _DETACHED:
                try:
                    obj.__dict__ = dict(vars(obj))
                except (AttributeError, TypeError):
                    return vars(obj)
                _DETACHED[id(obj)] = obj
    return vars(obj)


class HeuristicsPolicy:
    """What the HeuristicsDispatcher of one Heuristics cannot decide in C: each value's form, read
    from its function's code (heuristic_trace), and the inner kernel's run."""

    def __init__(self, heuristics, inner_run):
        self.heuristics = heuristics
        self.inner_run = inner_run
        self.arg_names = tuple(heuristics.arg_names)
        self.dispatcher = None
        self.read = None  # (the values' items, their guards, the specs) as last read

    def revalidate(self):
        """(stock reason or None, watched dicts, inner run, value specs, or None when the specs
        the dispatcher holds still stand: a watched dict changed, not what the forms read)."""
        h = self.heuristics
        values = getattr(h, "values", None)
        if not isinstance(values, dict) or tuple(h.arg_names) != self.arg_names:
            return ("heuristics_unrecognised", (vars(h),), None, ())
        items = tuple(values.items())
        if self.read is not None and len(items) == len(self.read[0]) and all(
                a is c and b is d for (a, b), (c, d) in zip(items, self.read[0])) and guards_hold(self.read[1]):
            return (None, self.read[3], self.inner_run(h.fn), None)
        watched = {id(vars(h)): vars(h), id(values): values}
        specs, guards = [], []
        for name, fn in items:
            if type(name) is not str:  # noqa: E721 - Triton passes it as a keyword: its error
                return ("heuristics_name", tuple(watched.values()), None, ())
            form, read = read_heuristic(fn)
            specs.append((sys.intern(name), fn, form))
            guards += read
            watched.update((id(d), d) for d, _, _ in read)
        self.read = (items, tuple(guards), tuple(specs), tuple(watched.values()))
        return (None, self.read[3], self.inner_run(h.fn), self.read[2])


def autotune_key(autotuner, args, kwargs):
    """The cache key Triton's Autotuner.run computes for a call (its code, read, not called)."""
    nargs = dict(zip(autotuner.arg_names, args))
    all_args = {**nargs, **kwargs}
    named = {k: v for (k, v) in all_args.items() if k in autotuner.arg_names}
    key = [named[k] for k in autotuner.keys if k in named]
    for _, arg in named.items():
        if hasattr(arg, "dtype"):
            key.append(str(arg.dtype))
    return tuple(key)


class AutotunePolicy:
    """What the AutotuneDispatcher of one Autotuner cannot decide in C."""

    def __init__(self, autotuner, inner_run, watchable=vars):
        self.autotuner = autotuner
        self.inner_run = inner_run
        self.watchable = watchable  # vars(obj) as a dict whose changes reach a dict watcher
        self.dispatcher = None
        self.bound = {}  # key bytes -> (Triton's key, config, its pre_hook when bound)

    def revalidate(self):
        """(stock reason or None, watched dicts, inner run): after the tuner's cache changed (a
        key tuned), every bound key whose config is no longer the cache's, or whose config's
        pre_hook is no longer the one bound (the configs' dicts are watched), is forgotten."""
        at = self.autotuner
        d = self.dispatcher() if self.dispatcher else None
        cache = getattr(at, "cache", None)
        if not isinstance(cache, dict) or not isinstance(at.configs, list):
            return ("autotuner_unrecognised", (), None)
        if any((len(at.configs) > 1 and cache.get(k) is not c) or (len(at.configs) <= 1 and at.configs[0] is not c)
               or getattr(c, "pre_hook", None) is not h for k, c, h in self.bound.values()):
            if d is not None:
                d.clear()
            self.bound = {}
        configs = {id(c): c for _, c, _ in self.bound.values()}
        watched = (cache,) + tuple(self.watchable(c) for c in configs.values() if hasattr(c, "__dict__"))
        return (None, watched, self.inner_run(at.fn))

    def bind(self, key_bytes, args, kwargs):
        """Binds the config Triton's run used for a call whose key had none (its pre_hook, if any,
        called by the dispatcher as Triton's run calls it)."""
        at = self.autotuner
        d = self.dispatcher() if self.dispatcher else None
        if d is None:
            return
        if len(at.configs) > 1:
            key = autotune_key(at, args, kwargs)
            config = at.cache.get(key)
        else:
            key, config = (), at.configs[0]
        # What the key holds by address: str key values, and the arguments' dtype objects (the
        # key's way without the tensor door).
        keep = tuple(v for v in key if isinstance(v, str))
        keep += tuple(getattr(v, "dtype", None) for v in list(args) + list(kwargs.values()) if hasattr(v, "dtype"))
        if config is None:
            d._insert(key_bytes, None, (), (), keep, "key_not_cached")
        else:
            kw = config.all_kwargs()
            d._insert(key_bytes, config, tuple(sys.intern(k) for k in kw), tuple(kw.values()), keep, None)
            self.bound[key_bytes] = (key, config, getattr(config, "pre_hook", None))
        d.invalidate()  # the cache (just written by a tune) and the config enter the watched set as they are now


# What Autotuner.run reads on a tuned key; a subclass that defines any of these (a property, a
# method) may decide otherwise than the dispatcher computes, and stays Triton's.
_TUNER_READS = {"cache", "keys", "arg_names", "configs", "fn", "nargs", "best_config", "__getattribute__",
                "__getattr__", "__setattr__", "__getitem__"}


def subclass_refusal(fn, slot_kept):
    """Why an Autotuner subclass is not served (None: its own run runs, its super().run is served);
    slot_kept: fastlaunch's TunerSlot holds Triton's own Autotuner.run."""
    from triton.runtime.autotuner import Autotuner

    if not slot_kept:
        return "kernel_wrapper_subclass"
    for cls in type(fn).__mro__:
        if cls is Autotuner:
            return None
        clash = _TUNER_READS & set(vars(cls))
        if clash:
            return f"autotuner_subclass_defines:{sorted(clash)[0]}"
    return "kernel_wrapper_subclass"
