"""The JIT dispatcher against callbacks that call back in (issue 38's twelve defects, one check
each), on the stand-in driver in a process of its own. Each check prints one JSON line {"check",
"ok", "detail"}; a use-after-free shows as an ASan report when the process runs under the ASan
build (make reentry-sanitize), a wrong launch or exception as ok false anywhere.

    PYTHONPATH=tools python -m fldev.reentry_checks [NAME ...]
"""

from __future__ import annotations

import gc
import json
import sys

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

from fldev.jit_checks import registry  # noqa: E402

CHECKS, check = registry()


class Once:
    """A callback's action, run at its first call only (the harness's one-shot injection)."""

    def __init__(self, action=None):
        self.action, self.calls = action, 0

    def __call__(self, *a, **k):
        self.calls += 1
        if self.calls == 1 and self.action is not None:
            self.action()


class Env:
    def __init__(self):
        from fldev import cuda_stub

        self.stub = cuda_stub.load()
        import torch
        import triton
        import triton.language as tl

        import fastlaunch.triton as flt
        from fastlaunch import triton_jit

        flt.enable()
        self.torch, self.triton, self.tl, self.flt, self.tj = torch, triton, tl, flt, triton_jit
        self.x, self.y, self.spare = torch.zeros(4096), torch.zeros(4096), torch.zeros(4096)

    def kernel(self):
        """A fresh kernel (its own dispatcher and tables)."""
        tl = self.tl

        def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        return self.triton.jit(add)

    def log(self):
        self.stub.log(3)

    def launches(self):
        """(grid, x pointer, y pointer, n) of each launch since log(), read as the driver got them."""
        import fastlaunch

        lay = fastlaunch.layout("cuda", ["*fp32", "*fp32", "i32"])["args"]
        out = []
        for _, grid, used_params, b in self.stub.take_log():
            if used_params:
                vals = (b[0:8], b[8:16], b[16:20])
            else:
                vals = (b[lay[0]:lay[0] + 8], b[lay[1]:lay[1] + 8], b[lay[2]:lay[2] + 4])
            out.append((grid,) + tuple(int.from_bytes(v, "little", signed=len(v) == 4) for v in vals))
        self.stub.state.log_on = 0
        return out

    def warm(self, k, grid=(4,), n=1000):
        for _ in range(3):  # a miss (Triton compiles), a full call (the memo is set), a memo call
            k[grid](self.x, self.y, n, BLOCK=64)


def expect(env, got, x=None, y=None, n=1000, grid=(4, 1, 1)):
    x = env.x.data_ptr() if x is None else x
    want = [(grid, x, y if y is not None else env.y.data_ptr(), n)]
    return got == want, {"got": got, "want": want}


@check
def d01_disable_in_attach(env):
    """disable() while kernel[grid] is in its slow path (from what _attach runs): the JitSubscript in
    use is not freed under it, and the call launches once."""
    k = env.kernel()
    policy_init = env.tj._Policy.__init__
    fired = Once(env.flt.disable)

    def init(self, *a, **kw):
        fired()
        policy_init(self, *a, **kw)
    env.tj._Policy.__init__ = init
    try:
        env.log()
        k[(4,)](env.x, env.y, 1000, BLOCK=64)
        got = env.launches()
    finally:
        env.tj._Policy.__init__ = policy_init
        env.flt.enable()
    return expect(env, got) if fired.calls else (False, "the attach was not reached")


def _python_stream(env, action):
    """The driver's stream function replaced by a Python one running `action` once."""
    drv = env.triton.runtime.driver.active
    stock = drv.get_current_stream
    fired = Once(action)

    def stream(device):
        fired()
        return stock(device)
    drv.get_current_stream = stream
    return drv, stock, fired


@check
def d02_stream_function_clears_the_table(env):
    """A stream function that clears the kernel's table, on the memo path and on the full path: the
    entry the call holds stays readable and the call launches once, with its own grid."""
    out = []
    for path in ("memo", "full"):
        k = env.kernel()
        grid = lambda META: (env.triton.cdiv(META["n"], META["BLOCK"]),)  # noqa: E731 (read inline: grid_shaped)
        env.warm(k, grid)
        if path == "full":
            k.run.clear()
            env.warm(k, grid)
            k[grid](env.x, env.y, 1001, BLOCK=64)  # another key: the memo misses, the table has it
        drv, stock, fired = _python_stream(env, lambda: k.run.clear())
        try:
            env.log()
            k[grid](env.x, env.y, 1000, BLOCK=64)
            got = env.launches()
        finally:
            drv.get_current_stream = stock
        ok, detail = expect(env, got, grid=(16, 1, 1))
        out.append((path, ok, fired.calls, detail))
    return all(o[1] and o[2] for o in out), out


@check
def d03_global_eq_clears_the_table(env):
    """A key in the grid's globals whose hash collides with the global the grid reads, its __eq__
    clearing the table: the lookup's entry stays readable, the call launches once."""
    k = env.kernel()
    state = {"armed": False}

    class Collide:
        def __hash__(self):
            return hash("N_REENTRY")

        def __eq__(self, other):
            if state["armed"]:
                state["armed"] = False
                state["fired"] = True
                k.run.clear()
            return False
    g = {"triton": env.triton, Collide(): 0}
    g["N_REENTRY"] = 1000
    exec("grid = lambda META: (triton.cdiv(N_REENTRY, META['BLOCK']),)", g)
    grid = g["grid"]
    env.warm(k, grid)
    state["armed"] = True
    env.log()
    k[grid](env.x, env.y, 1000, BLOCK=64)
    got = env.launches()
    ok, detail = expect(env, got, grid=(16, 1, 1))
    return ok and state.get("fired", False), (detail, state)


@check
def d04_tuner_warmup_bool_renames(env):
    """An Autotuner subclass calling super().run(**kwargs) with a warmup whose __bool__ makes a
    nested call with other keyword names: the outer call's names are not freed under it."""
    triton, tl = env.triton, env.tl
    from triton.runtime.autotuner import Autotuner

    class Tuner(Autotuner):
        def run(self, *args, **kwargs):
            return super().run(*args, **kwargs)

    def tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]
    fn = triton.jit(tuned)
    k = Tuner(fn, fn.arg_names, configs, ["n"], None, None, None, None, None)

    class Warm:
        def __init__(self):
            self.fired = 0

        def __bool__(self):
            self.fired += 1
            if self.fired == 1:
                # Nested calls with other keyword names: the first replaces the dict form's names
                # and the entry's, the second the key's (another key: Triton's, then bound).
                k.run(env.x, env.y, 1000, grid=(2,), warmup=False)
                k.run(env.x, y_ptr=env.y, n=1000, grid=(2,), warmup=False)
                # A 1-tuple made now takes a freed one's place (CPython's free list, which ASan does
                # not see): the outer call would read these names if it still borrowed the old ones.
                self.taken = [tuple(["BLOCK"]) for _ in range(256)]
            return False
    for _ in range(3):
        k[(2,)](env.x, env.y, n=1000)
    for _ in range(3):
        k.run(env.x, env.y, n=1000, grid=(2,), warmup=False)  # the dict form's names: ("n",)
    w = Warm()
    env.log()
    k.run(env.x, env.y, n=1000, grid=(3,), warmup=w)
    got = env.launches()
    slot = type(k.__dict__.get("_fastlaunch_run")).__name__
    if slot != "AutotuneDispatcher":
        return False, f"not served: {slot}"
    xp, yp = env.x.data_ptr(), env.y.data_ptr()
    want = [((2, 1, 1), xp, yp, 1000)] * 2 + [((3, 1, 1), xp, yp, 1000)]
    return got[-1:] == want[-1:] and got.count(want[0]) >= 2 and w.fired >= 1, {"got": got, "want": want, "bool_calls": w.fired}


@check
def d05_spare_grid_del_launches(env):
    """The spare JitCall's old grid, released when kernel[(5,)] reuses it, runs kernel[(7,)] in its
    __del__: the outer call still launches (5,)."""
    k = env.kernel()
    env.warm(k)
    fired = []

    class Grid:
        def __call__(self, meta):
            return (3,)

        def __del__(self):
            fired.append(1)
            k[(7,)](env.x, env.y, 1000, BLOCK=64)
    k[Grid()](env.x, env.y, 1000, BLOCK=64)  # the spare now holds the Grid (this call dropped its own)
    gc.collect()
    env.log()
    k[(5,)](env.x, env.y, 1000, BLOCK=64)
    got = env.launches()
    xp, yp = env.x.data_ptr(), env.y.data_ptr()
    want = [((7, 1, 1), xp, yp, 1000), ((5, 1, 1), xp, yp, 1000)]
    return got == want and fired, {"got": got, "want": want}


@check
def d06_insert_bad_grid_spec(env):
    """_insert with a grid spec whose later items are wrong: a TypeError each time, and the code
    object's references as they were (no release of one never taken)."""
    k = env.kernel()
    env.warm(k)
    code = (lambda META: (1,)).__code__
    before = sys.getrefcount(code)
    errors = []
    for i in range(5):
        try:
            k.run._insert(b"\x0d" * 8 + bytes([i]) * 8, None, None, (), (code, "not a dict", (), ()), (), None)
        except TypeError as exc:
            errors.append(str(exc)[:60])
    gc.collect()
    after = sys.getrefcount(code)
    return len(errors) == 5 and before == after, {"refs": (before, after), "errors": errors[:1]}


@check
def d07_grid_moves_storage(env):
    """A grid callable that moves a tensor's storage (set_()): the launch gets the new storage's
    pointer, as Triton's launcher reads data_ptr() after the grid."""
    k = env.kernel()
    x = env.torch.zeros(4096)
    moved = []

    def grid(meta):
        if not moved:
            moved.append(x.data_ptr())
            x.set_(env.spare)
        return (4,)
    for _ in range(3):
        k[(4,)](x, env.y, 1000, BLOCK=64)
    env.log()
    k[grid](x, env.y, 1000, BLOCK=64)
    got = env.launches()
    ok, detail = expect(env, got, x=env.spare.data_ptr())
    return ok and moved and moved[0] != env.spare.data_ptr(), detail


@check
def d08_param_const_bool_raises(env):
    """A param_const entry whose __bool__ raises: that exception, not a SystemError."""
    class Bad:
        def __bool__(self):
            raise ValueError("no truth")
    try:
        _C.JitDispatcher(None, None, None, param_names=("a",), param_const=(Bad(),), defaults=((),), option_names=(),
                         pre_run_hooks=[])
    except ValueError as exc:
        return "no truth" in str(exc), repr(exc)
    except BaseException as exc:  # noqa: BLE001 (what the defect gave: SystemError)
        return False, repr(exc)
    return False, "no exception"


@check
def d09_grid_sets_launch_hook(env):
    """A grid callable that sets launch_enter_hook: the hook is called for that launch (Triton reads
    it after the grid), and the launch happens once."""
    k = env.kernel()
    env.warm(k)
    calls = []
    knobs = env.triton.knobs.runtime

    def grid(meta):
        knobs.launch_enter_hook = calls.append
        return (4,)
    try:
        env.log()
        k[grid](env.x, env.y, 1000, BLOCK=64)
        got = env.launches()
    finally:
        knobs.launch_enter_hook = None
    ok, detail = expect(env, got)
    return ok and len(calls) == 1, (detail, len(calls))


@check
def d10_grid_writes_mapping(env):
    """A grid callable that writes its mapping (meta["n"] = 7): Triton launches 7; so does this."""
    k = env.kernel()
    env.warm(k)

    def grid(meta):
        meta["n"] = 7
        return (4,)
    env.log()
    k[grid](env.x, env.y, 1000, BLOCK=64)
    got = env.launches()
    return expect(env, got, n=7)


@check
def d11_data_ptr_then_raises(env):
    """A tensor-like whose data_ptr() answers once and then raises: Triton's TypeError (its
    launcher reads data_ptr() again after the binder did), on a miss and on a bound variant alike,
    and nothing launched."""
    torch = env.torch
    k = env.kernel()

    class Like:
        dtype = torch.float32

        def __init__(self, t, answers):
            self.t, self.answers = t, answers

        def data_ptr(self):
            self.answers -= 1
            if self.answers < 0:
                raise RuntimeError("storage gone")
            return self.t.data_ptr()
    out = []
    for state in ("miss", "bound"):
        if state == "bound":
            for _ in range(3):
                k[(4,)](Like(env.x, 99), env.y, 1000, BLOCK=64)
        env.log()
        try:
            k[(4,)](Like(env.x, 1), env.y, 1000, BLOCK=64)
            out.append((state, "returned", env.launches()))
        except TypeError as exc:
            out.append((state, "TypeError", env.launches(), str(exc)[:70]))
        except Exception as exc:  # noqa: BLE001
            out.append((state, type(exc).__name__, env.launches()))
    return all(o[1] == "TypeError" and o[2] == [] for o in out), out


@check
def d13_launch_hook_clears_and_relaunches(env):
    """An enter hook that clears the dispatcher's table and launches the kernel again (a profiler
    that warms something up): the inner launch, then the outer one with the entry it had (cleared,
    still readable), each once, and the hooks called for both, nested as Triton nests them."""
    k = env.kernel()
    env.warm(k)
    knobs, seen = env.triton.knobs.runtime, []

    def enter(meta):
        seen.append(("enter", meta.get()["name"]))
        if len(seen) == 1:
            k.run.clear()
            k[(2,)](env.x, env.y, 500, BLOCK=64)

    try:
        knobs.launch_enter_hook, knobs.launch_exit_hook = enter, lambda meta: seen.append(("exit", meta.get()["name"]))
        env.log()
        k[(4,)](env.x, env.y, 1000, BLOCK=64)
        got = env.launches()
    finally:
        knobs.launch_enter_hook = knobs.launch_exit_hook = None
    c = dict(k.run.counts)
    x, y = env.x.data_ptr(), env.y.data_ptr()
    want = [((2, 1, 1), x, y, 500), ((4, 1, 1), x, y, 1000)]
    return (got == want and seen == [("enter", "add"), ("enter", "add"), ("exit", "add"), ("exit", "add")]
            and c["hooked"] >= 1), (got, seen, c)


@check
def d14_pre_run_hook_clears_and_relaunches(env):
    """A pre-run hook (called in C) that clears the dispatcher's table and launches the kernel again,
    then one that disables fastlaunch: each outer call launches once, after the inner one, and each
    hook is called once per call (the nested call's included)."""
    k = env.kernel()
    env.warm(k)
    seen = []

    def hook(*a, **kw):
        seen.append(a[2])
        if len(seen) == 1:
            k.run.clear()
            k[(2,)](env.x, env.y, 500, BLOCK=64)

    k.add_pre_run_hook(hook)
    try:
        env.log()
        k[(4,)](env.x, env.y, 1000, BLOCK=64)
        got = env.launches()
        seen2 = []
        k.pre_run_hooks[:] = [lambda *a, **kw: (seen2.append(a[2]), env.flt.disable())]
        env.log()
        k[(4,)](env.x, env.y, 1000, BLOCK=64)
        got2 = env.launches()
    finally:
        k.pre_run_hooks.clear()
        env.flt.enable()
    x, y = env.x.data_ptr(), env.y.data_ptr()
    want = [((2, 1, 1), x, y, 500), ((4, 1, 1), x, y, 1000)]
    return (got == want and seen == [1000, 500] and got2 == [((4, 1, 1), x, y, 1000)] and seen2 == [1000]), \
        (got, seen, got2, seen2)


@check
def d15_config_pre_hook_clears_and_relaunches(env):
    """A Config's pre_hook (called in C on a tuned key) that clears the AutotuneDispatcher's table and
    launches the kernel again: the nested launch, then the outer one with the config it had, once
    each; then the kernel's run read for the first time through its class slot while a RunSlot attach
    disables fastlaunch: the call is Triton's, launched once."""
    triton, tl = env.triton, env.tl
    seen = []

    def pre_hook(nargs):
        seen.append(nargs["n"])
        if len(seen) == 2:  # the first served call (Triton's own run called it once before)
            tuned.run.clear()
            tuned[(2,)](env.x, env.y, 500)

    def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64}, pre_hook=pre_hook)], key=[])(triton.jit(add))
    tuned[(4,)](env.x, env.y, 1000)  # Triton's run: tunes nothing (one config), calls the pre_hook, binds
    env.log()
    tuned[(4,)](env.x, env.y, 1000)
    got = env.launches()
    x, y = env.x.data_ptr(), env.y.data_ptr()
    plain = env.kernel()
    policy_init = env.tj._Policy.__init__
    fired = Once(env.flt.disable)

    def init(self, *a, **kw):
        fired()
        policy_init(self, *a, **kw)
    env.tj._Policy.__init__ = init
    try:
        env.log()
        plain.run(env.x, env.y, 1000, grid=(4,), warmup=False, BLOCK=64)
        got2 = env.launches()
    finally:
        env.tj._Policy.__init__ = policy_init
        env.flt.enable()
    want = [((2, 1, 1), x, y, 500), ((4, 1, 1), x, y, 1000)]
    return (got == want and seen[:3] == [1000, 1000, 500] and tuned.nargs is None and fired.calls == 1
            and got2 == [((4, 1, 1), x, y, 1000)]), (got, seen, got2, fired.calls)


@check
def d12_watch_detector(env):
    """The dict-change detector in use is named (the import never fails for want of one; the pyenv
    check exhausts the watcher ids before import, tools/fldev/watch_exhaust.py)."""
    detector, why = _C.watch_detector()
    want = "watcher" if sys.version_info >= (3, 12) else "version_tags"
    return detector == want and why is None, (detector, why)


def main(names):
    from fldev.jit_checks import run_checks

    return run_checks(CHECKS, Env(), names, mark_start=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
