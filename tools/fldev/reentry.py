"""The reentrancy harness: callbacks injected at every point where the JIT dispatcher calls into
Python, each running one action that calls back in, through fastlaunch and through Triton alone.

    PYTHONPATH=tools python -m fldev.reentry RUNS SEED       # prints one JSON summary
    PYTHONPATH=tools python -m fldev.reentry --threads SECONDS

Points Triton also calls (the driver's stream function, the grid callable, a pre-run hook, a
tensor-like's data_ptr() and dtype, Triton's binder: its run calls it, and so does fastlaunch's check
of every call, which the point turns on for the call: fastlaunch.triton_check): the same action at the same point on both sides; the launches
(grid and arguments as the stand-in driver got them, nested ones included), the outcome and the
launch hook's calls must be the same. Points only fastlaunch has (a released grid's __del__, a GC
pass at any allocation, the policy's revalidate() and bind()): the action runs on fastlaunch's side
only; the outer call's launches and outcome must be Triton's, and every nested call that returned
launched exactly once. Actions: disable(), disable() then enable(), clearing the kernel's tables,
launching the same kernel and another one, mutating the arguments (the grid's mapping at the grid
point, a tensor's storage elsewhere), setting the launch hook. The injection is one-shot: the action
runs at the point's first call in the run. Run under the ASan build by `make reentry-sanitize`.
"""

from __future__ import annotations

import collections
import gc
import json
import random
import sys
import threading
import time

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()

BOTH = ["stream", "grid", "pre_run_hook", "data_ptr", "dtype", "binder"]
FL_ONLY = ["grid_del", "gc", "revalidate", "bind"]
ACTIONS = ["disable", "disable_enable", "clear", "nested_same", "nested_other", "mutate", "set_hook"]
OUTER_N, SAME_N, OTHER_N = 1000, 500, 300  # the launches' n tells the outer call's from nested ones


class Side:
    """One side's kernels and tensors: fastlaunch (kernel[grid]) or Triton alone (its own run)."""

    def __init__(self, env, fl):
        import torch

        self.env, self.fl = env, fl
        self.kernels = env.make_kernels()
        if not fl:  # Triton alone: an Autotuner's `self.fn.run` would otherwise attach its kernel
            for k in self.kernels.values():
                env.flt.exclude(k)
        self.torch = torch
        self.hook_calls = 0
        self.nested = []  # outcomes of nested calls

    def fresh(self):
        t = self.torch
        self.x, self.y, self.s = t.zeros(2048), t.zeros(2048), t.zeros(2048)
        self.names = {self.x.data_ptr(): "x", self.y.data_ptr(): "y", self.s.data_ptr(): "s"}
        self.nested = []
        self.hook_calls = 0

    def launch(self, name, grid, *args, **kw):
        k = self.kernels[name]
        if self.fl:
            return k[grid](*args, **kw)
        return type(k).run(k, *args, grid=grid, warmup=False, **kw)


class Env:
    def __init__(self):
        from fldev import cuda_stub

        self.stub = cuda_stub.load()
        import triton
        import triton.language as tl

        import fastlaunch
        import fastlaunch.triton as flt
        from fastlaunch import triton_jit

        self.triton, self.tl, self.flt, self.tj = triton, tl, flt, triton_jit
        self.layout = fastlaunch.layout("cuda", ["*fp32", "*fp32", "i32"])["args"]
        flt.enable()
        self.sides = {True: Side(self, True), False: Side(self, False)}

    def make_kernels(self):
        triton, tl = self.triton, self.tl

        def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        def mul(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)

        def tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        configs = [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]
        return {"A": triton.jit(add), "B": triton.jit(mul),
                "T": triton.autotune(configs=configs, key=["n"])(triton.jit(tuned))}

    def launches(self, side):
        out = []
        lay = self.layout
        for _, grid, used_params, b in self.stub.take_log():
            vals = (b[0:8], b[8:16], b[16:20]) if used_params else tuple(
                b[o:o + w] for o, w in zip(lay, (8, 8, 4)))
            x, y, n = (int.from_bytes(v, "little", signed=len(v) == 4) for v in vals)
            out.append((grid, side.names.get(x, "?"), side.names.get(y, "?"), n))
        return out


class Like:
    """A tensor-like (the door declines it): data_ptr() and dtype as Triton reads them, each able
    to run the injected callback."""

    def __init__(self, side, t, on_ptr=None, on_dtype=None):
        self.side, self.t, self.on_ptr, self.on_dtype = side, t, on_ptr, on_dtype

    @property
    def dtype(self):
        if self.on_dtype:
            self.on_dtype()
        return self.side.torch.float32

    def data_ptr(self):
        if self.on_ptr:
            self.on_ptr()
        return self.t.data_ptr()


def action_fn(env, side, action, kname, meta_box):
    """The injected action, for one side (fastlaunch-only actions do nothing on Triton's)."""
    def run(meta=None):
        if action in ("disable", "disable_enable", "clear"):
            if not side.fl:
                return
            if action == "clear":
                run_slot = side.kernels[kname].__dict__.get("run")
                if hasattr(run_slot, "clear"):
                    run_slot.clear()
                return
            env.flt.disable()
            if action == "disable_enable":
                env.flt.enable()
        elif action in ("nested_same", "nested_other"):
            name, n = ("A", SAME_N) if action == "nested_same" else ("B", OTHER_N)
            try:
                side.launch(name, (2,), side.x, side.y, n, BLOCK=64)
                side.nested.append("returned")
            except Exception as exc:  # noqa: BLE001 (compared, not required to succeed)
                side.nested.append(type(exc).__name__)
        elif action == "mutate":
            if meta is not None:
                meta["n"] = 7
            else:
                side.x.set_(side.s)
        elif action == "set_hook":
            def hook(*a, **k):
                side.hook_calls += 1
            env.triton.knobs.runtime.launch_enter_hook = hook
    return run


class Injector:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, meta=None):
        self.calls += 1
        if self.calls == 1:
            self.fn(meta)


def set_point(env, side, point, inj, kname, args, kw, restore):
    """The point set up to call inj (restore gets what undoes it; args may be changed in place): the
    grid to call with when the point is the grid, else None. The GC point is armed apart (arm_gc),
    once the launch log runs."""
    k = side.kernels[kname]
    drv = env.triton.runtime.driver.active
    if point == "stream":
        stock = drv.get_current_stream

        def stream(device):
            inj()
            return stock(device)
        drv.get_current_stream = stream
        restore.append(lambda: setattr(drv, "get_current_stream", stock))
    elif point == "grid":
        return lambda meta: (inj(meta), (4,))[1]
    elif point == "pre_run_hook":
        jit = k
        while not hasattr(jit, "add_pre_run_hook"):  # an Autotuner's or Heuristics' JITFunction
            jit = jit.fn

        def hook(*a, **kk):
            inj()
        jit.add_pre_run_hook(hook)
        restore.append(lambda: jit.pre_run_hooks.remove(hook))
    elif point == "binder":
        jit = k
        while not hasattr(jit, "add_pre_run_hook"):  # an Autotuner's or Heuristics' JITFunction
            jit = jit.fn
        device = drv.get_current_device()
        caches = jit.device_caches[device]  # the binder is its last member (3.3 to 3.9)
        stock_binder = caches[-1]

        def binder(*a, **kk):
            inj()
            return stock_binder(*a, **kk)
        jit.device_caches[device] = (*caches[:-1], binder)
        restore.append(lambda: jit.device_caches.__setitem__(device, (*jit.device_caches[device][:-1], stock_binder)))
        if side.fl:  # every call checked against Triton's own choice for the call: the binder called
            from fastlaunch import triton_check

            was = triton_check.verify_all()
            env.tj.enable(verify=True)
            restore.append(lambda: env.tj.enable(verify=was))
    elif point in ("data_ptr", "dtype"):
        args[0] = Like(side, side.x, on_ptr=inj if point == "data_ptr" else None,
                       on_dtype=inj if point == "dtype" else None)
    elif point == "grid_del" and side.fl:
        class Grid:
            def __call__(self, meta):
                return (4,)

            def __del__(self):
                inj()
        k[Grid()](side.x, side.y, OUTER_N, **kw)  # the spare JitCall holds it; released by the next subscript
    elif point in ("revalidate", "bind") and side.fl:
        # The kernel's own dispatcher and policy where they have the point, else its JITFunction's.
        inner = k
        while not hasattr(inner, "add_pre_run_hook"):
            inner = inner.fn
        own = {"T": env.tj._AutotunePolicy, "H": env.tj._HeuristicsPolicy}.get(kname)
        slot = k.__dict__.get("run")
        trigger = "invalidate" if point == "revalidate" else "clear"
        if own is not None and point in own.__dict__ and hasattr(slot, trigger):
            cls, target = own, slot
        else:
            cls, target = env.tj._Policy, vars(inner).get("run")
        stock_m = cls.__dict__[point]

        def wrapped(self, *a, **kk):
            inj()
            return stock_m(self, *a, **kk)
        setattr(cls, point, wrapped)
        restore.append(lambda: setattr(cls, point, stock_m))
        if hasattr(target, trigger):
            getattr(target, trigger)()  # revalidated at the next call; a miss (Triton runs, the policy binds)
    return None


def arm_gc(env, side, point, inj, restore):
    """The GC point (fastlaunch's side): a collection inside the call runs inj at its start."""
    if point != "gc" or not side.fl:
        return

    def cb(phase, info):
        if phase == "start":
            inj()
    gc.callbacks.append(cb)
    old = gc.get_threshold()
    # A free-threaded 3.13 scales the threshold by the live objects unless the second one is 0
    # (gc_should_collect): 0 there, so a collection runs inside the call on both builds.
    ft = hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled()
    gc.set_threshold(1, 0 if ft else 1, 1)
    restore.append(lambda: (gc.callbacks.remove(cb), gc.set_threshold(*old)))


def one_call(env, side, point, action, kname, armed):
    """The outer call on one side with the point set up; (outcome, launches, hook calls, nested, fired)."""
    side.fresh()
    inj = Injector(action_fn(env, side, action, kname, None) if armed else (lambda meta=None: None))
    args = [side.x, side.y, OUTER_N]
    kw = {} if kname == "T" else {"BLOCK": 64}
    restore = []
    grid = set_point(env, side, point, inj, kname, args, kw, restore) or (4,)
    return run_outer(env, side, point, inj, restore, lambda: side.launch(kname, grid, *args, **kw))


def run_outer(env, side, point, inj, restore, call):
    """The outer call (call()) with the launches logged and the GC point armed, everything set up put
    back after it: (outcome, launches, hook calls, nested outcomes, whether the point fired)."""
    env.stub.log(3)
    arm_gc(env, side, point, inj, restore)
    try:
        out = ("returned", type(call()).__name__)
    except Exception as exc:  # noqa: BLE001 (the exception's type is what must agree)
        out = ("raised", type(exc).__name__)
    finally:
        env.stub.state.log_on = 0
        for r in reversed(restore):
            r()
        env.triton.knobs.runtime.launch_enter_hook = None
        env.triton.knobs.runtime.launch_exit_hook = None
        if side.fl and not env.tj._state["enabled"]:
            env.flt.enable()
    fired = inj.calls > 0
    inj.calls = max(inj.calls, 1)  # a grid left in a spare call, released later, does nothing then
    launches = env.launches(side)
    return out, launches, side.hook_calls, list(side.nested), fired


def judge(both, a, b, mutated):
    """Whether fastlaunch's side (b) did as Triton alone (a): at a point both call, the same outcome,
    launches, hook calls and nested outcomes; at one only fastlaunch has (Triton's side unarmed), the
    outer call's outcome and launches Triton's (a storage moved there counted as not moved: before or
    after the launch read it) and every nested call that returned launched once."""
    if both:
        return a[:4] == b[:4]
    outer = [x for x in b[1] if x[3] not in (SAME_N, OTHER_N)]
    nested = [x for x in b[1] if x[3] in (SAME_N, OTHER_N)]
    if mutated:
        outer = [(g, "x" if xp == "s" else xp, yp, n) for g, xp, yp, n in outer]
    return a[0] == b[0] and a[1] == outer and len(nested) == b[3].count("returned")


def compare(env, point, action, kname):
    both = point in BOTH
    a = one_call(env, env.sides[False], point, action, kname, armed=both)
    b = one_call(env, env.sides[True], point, action, kname, armed=True)
    return judge(both, a, b, action == "mutate"), a, b


def main(runs=2000, seed=38):
    env = Env()
    for side in env.sides.values():  # compiled and bound before the runs
        side.fresh()
        for _ in range(3):
            for name in ("A", "B"):
                for n in (OUTER_N, SAME_N, OTHER_N):
                    side.launch(name, (2,), side.x, side.y, n, BLOCK=64)
            side.launch("T", (4,), side.x, side.y, OUTER_N)
    env.stub.take_log()
    rng = random.Random(seed)
    cells = [(p, a) for p in BOTH + FL_ONLY for a in ACTIONS]
    stats, fired, mismatches = collections.Counter(), collections.Counter(), []
    for i in range(runs):
        point, action = cells[i % len(cells)] if i < len(cells) * 2 else rng.choice(cells)
        kname = rng.choice(["A", "A", "B", "T"])
        ok, a, b = compare(env, point, action, kname)
        stats["same" if ok else "different"] += 1
        fired[f"{point}/{action}"] += b[4]
        if not ok and len(mismatches) < 8:
            mismatches.append((i, point, action, kname, a[:4], b[:4]))
    never = sorted(c for c in (f"{p}/{a}" for p, a in cells) if not fired[c])
    result = {"runs": runs, "seed": seed, "cells": len(cells), "same": stats["same"],
              "different": stats["different"], "never_fired": never, "first_differences": repr(mismatches)}
    print(json.dumps(result))
    return 0 if not stats["different"] and not never else 1


def threads(seconds=10.0):
    """4 launcher threads and one toggling enable()/disable(): every call returns, and the driver
    saw exactly as many launches as calls returned."""
    env = Env()
    import torch

    kernels = [env.make_kernels()["A"] for _ in range(4)]
    x, y = torch.zeros(2048), torch.zeros(2048)
    for k in kernels:
        k[(2,)](x, y, OUTER_N, BLOCK=64)
    env.stub.count_only()
    before = env.stub.state.calls
    done, counts, errors = threading.Event(), [0] * 4, []

    def launcher(i):
        k = kernels[i]
        while not done.is_set():
            try:
                k[(2,)](x, y, OUTER_N, BLOCK=64)
                counts[i] += 1
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))
                return

    def toggler():
        while not done.is_set():
            env.flt.disable()
            time.sleep(0.0002)
            env.flt.enable()
            time.sleep(0.0002)
    sys.setswitchinterval(1e-5)  # threads switch inside _attach, the slow path and Triton's run
    ts = [threading.Thread(target=launcher, args=(i,)) for i in range(4)] + [threading.Thread(target=toggler)]
    for t in ts:
        t.start()
    time.sleep(seconds)
    done.set()
    for t in ts:
        t.join()
    launched = env.stub.state.calls - before
    result = {"seconds": seconds, "calls": sum(counts), "launches": launched, "errors": errors[:3]}
    print(json.dumps(result))
    return 0 if not errors and launched == sum(counts) and sum(counts) > 0 else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--threads"]:
        sys.exit(threads(float(sys.argv[2]) if len(sys.argv) > 2 else 10.0))
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
