"""The launch sequence against Triton alone (issue 55's defects, one check each), on the stand-in
driver in a process of its own. Each check runs the same scenario twice, with fastlaunch.triton
disabled (Triton's own run, runner and launcher) and enabled, and compares what the driver got
(function, grid, the first arguments' bytes), the hook calls and the exceptions. Each prints one
JSON line {"check", "ok", "detail"}; run under the ASan build by `make reentry-sanitize`.

    PYTHONPATH=tools python -m fldev.sequence_checks [NAME ...]
"""

from __future__ import annotations

import sys

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

from fldev import reentry_checks  # noqa: E402
from fldev.jit_checks import registry  # noqa: E402

CHECKS, check = registry()


class Env(reentry_checks.Env):
    """reentry_checks' (the stand-in driver, fastlaunch.triton enabled, fresh kernels), and each
    scenario run on both sides."""

    @property
    def cuda_stub(self):
        from fldev import cuda_stub

        return cuda_stub

    def tensors(self):
        t = self.torch
        return t.zeros(4096), t.zeros(4096), t.zeros(4096)

    def warm(self, k, names, grid=(4,)):
        """Fresh tensors x, y, other (named on the side's launches), and k bound: a miss (Triton
        compiles), a full call (the memo is set), a memo call."""
        x, y, other = self.tensors()
        named(names, x=x, y=y, other=other)
        for _ in range(3):
            k[grid](x, y, 1000, BLOCK=64)
        return x, y, other

    def logged(self, fn):
        """(grid, first word, second word, 32-bit third) of each launch fn() makes, and its exception."""
        self.stub.log(3)
        exc = None
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (compared by type and text)
            exc = f"{type(e).__name__}: {e}"[:200]
        out = []
        for _, grid, used_params, b in self.stub.take_log():
            if used_params:
                vals = (b[0:8], b[8:16], b[16:20])
            else:
                vals = (b[0:8], b[8:16], b[16:20])
            out.append((grid,) + tuple(int.from_bytes(v, "little", signed=len(v) == 4) for v in vals))
        self.stub.state.log_on = 0
        return out, exc

    def both(self, scenario):
        """scenario(fl) run with Triton alone (fl False) and with fastlaunch (fl True): each side's
        (launches, exception, what the scenario returned), with pointers named by the tensor they
        belong to (each side has tensors of its own)."""
        sides = []
        for fl in (False, True):
            if fl:
                self.flt.enable()
            else:
                self.flt.disable()
            names = {}
            ret = {}

            def body():
                ret["v"] = scenario(fl, names)
            got, exc = self.logged(body)
            named = [tuple(names.get(v, v) for v in launch) for launch in got]
            sides.append((named, exc, ret.get("v")))
        self.flt.enable()
        return sides[0] == sides[1], {"triton": sides[0], "fastlaunch": sides[1]}


class enter_hook:
    """triton.knobs.runtime.launch_enter_hook set to `hook` in the block, None after it."""

    def __init__(self, env, hook):
        self.knobs, self.hook = env.triton.knobs.runtime, hook

    def __enter__(self):
        self.knobs.launch_enter_hook = self.hook

    def __exit__(self, *exc):
        self.knobs.launch_enter_hook = None


def named(names, **tensors):
    for k, t in tensors.items():
        names[t.data_ptr()] = k
    return tensors


@check
def s01_run_enter_hook_moves_storage(env):
    """compiled.run(gx, gy, gz, stream, function, packed, md, enter, exit, *args) called directly,
    with an enter hook (a plain function) that moves x's storage (x.set_(other)): Triton 3.7 on read
    the arguments after the enter hook and launch the new address; Triton 3.5 and 3.6 parse the
    scalars first and read the pointers after it too."""
    k = env.kernel()

    def scenario(fl, names):
        x, y, other = env.tensors()
        named(names, x=x, y=y, other=other)
        ck = k[(4,)](x, y, 1000, BLOCK=64)
        ck[(4, 1, 1)](x, y, 1000, 64)  # met as compiled[grid]: its launcher slot served
        calls = []

        def enter(md):
            calls.append(md)
            x.set_(other)

        ck.run(2, 1, 1, env.cuda_stub.STREAM, ck.function, ck.packed_metadata, "md", enter, None, x, y, 500, 64)
        return calls
    return env.both(scenario)


@check
def s02_compiled_enter_hook_moves_storage(env):
    """compiled[grid](*args) with triton.knobs.runtime.launch_enter_hook set to a plain function that
    moves x's storage: the address launched is the one Triton's launcher reads, after the hook."""
    k = env.kernel()

    def scenario(fl, names):
        x, y, other = env.tensors()
        named(names, x=x, y=y, other=other)
        ck = k[(4,)](x, y, 1000, BLOCK=64)
        ck[(4, 1, 1)](x, y, 1000, 64)
        calls = []

        def enter(md):
            calls.append(1)
            x.set_(other)
        with enter_hook(env, enter):
            ck[(3, 1, 1)](x, y, 500, 64)
        return calls
    return env.both(scenario)


@check
def s03_jit_enter_hook_moves_storage(env):
    """kernel[grid](...) with an enter hook (a plain function) that moves x's storage: Triton's
    launcher reads the pointers after it."""
    k = env.kernel()

    def scenario(fl, names):
        x, y, other = env.warm(k, names)
        calls = []

        def enter(md):
            calls.append(1)
            x.set_(other)
        with enter_hook(env, enter):
            k[(3,)](x, y, 500, BLOCK=64)
        return calls
    return env.both(scenario)


@check
def s05_grid_sets_plain_hook(env):
    """A grid callable that sets launch_enter_hook to a plain Python function, on a kernel already
    bound: Triton calls it for that launch (it reads the hooks after the grid) and for every later
    launch while it is set."""
    k = env.kernel()
    knobs = env.triton.knobs.runtime

    def scenario(fl, names):
        x, y, _ = env.warm(k, names)
        calls = []

        def hook(md):
            calls.append("hook")

        def grid(meta):
            knobs.launch_enter_hook = hook
            return (2,)
        try:
            for _ in range(3):
                k[grid](x, y, 600, BLOCK=64)
                k[(5,)](x, y, 700, BLOCK=64)
        finally:
            knobs.launch_enter_hook = None
        return calls
    return env.both(scenario)


@check
def s06_knobs_runtime_replaced(env):
    """triton.knobs.runtime replaced by a new object whose launch_enter_hook is a plain function:
    Triton reads the hooks from the new object."""
    k = env.kernel()
    knobs = env.triton.knobs

    def scenario(fl, names):
        x, y, _ = env.warm(k, names)
        calls = []
        old = knobs.runtime
        new = type(old)()

        def hook(md):
            calls.append("hook")
        knobs.runtime = new
        try:
            new.launch_enter_hook = hook
            for _ in range(2):
                k[(3,)](x, y, 500, BLOCK=64)
            new.launch_enter_hook = None
            k[(3,)](x, y, 400, BLOCK=64)
        finally:
            knobs.runtime = old
        return calls
    return env.both(scenario)


SCALE = None  # a tl.constexpr global the kernel of s07 reads


@check
def s07_grid_changes_a_global(env):
    """A global the kernel reads, changed inside the grid callable: Triton checked the globals before
    calling the grid, so the call launches; the next call raises Triton's RuntimeError on both."""
    tl = env.tl

    def scaled(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)
    k = env.triton.jit(scaled)

    def scenario(fl, names):
        global SCALE
        x, y, _ = env.tensors()
        named(names, x=x, y=y)
        SCALE = tl.constexpr(4)
        for _ in range(3):
            k[(4,)](x, y, 1000, BLOCK=64)

        def grid(meta):
            global SCALE
            SCALE = tl.constexpr(5)
            return (2,)
        out = []
        try:
            k[grid](x, y, 600, BLOCK=64)
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        try:
            k[(3,)](x, y, 500, BLOCK=64)
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        SCALE = tl.constexpr(4)
        return out
    return env.both(scenario)


@check
def s08_memo_scratch_allocator_toggles_and_moves(env):
    """kernel[grid] of a kernel with global scratch (a device-side tensor descriptor), on the memo
    path, with an allocator (Python code from triton.set_allocator) that both drops fastlaunch's tables
    (disable() then enable()) and moves x's storage: Triton's launcher reads the arguments after
    allocating, so the new address is launched, the allocator called once."""
    import torch
    from triton.runtime import _allocation

    triton, tl = env.triton, env.tl

    from fldev.scratch_fidelity import _kernels

    copy1, _ = _kernels(triton, tl)
    pool = torch.empty(1 << 16, dtype=torch.int8)

    def scenario(fl, names):
        x, y, other = (torch.zeros(4096) for _ in range(3))
        named(names, x=x, y=y, other=other, pool=pool)
        calls = []
        act = {"on": False}

        def allocator(size, align, stream):
            calls.append((size, align))
            if act["on"]:
                act["on"] = False
                if fl:
                    env.flt.disable()
                    env.flt.enable()
                x.set_(other)
            return pool
        token = _allocation._allocator.set(allocator)
        try:
            for _ in range(3):  # a miss, a full call, a memo call
                copy1[(2,)](x, y, 1024, BLOCK=64)
            act["on"] = True
            copy1[(3,)](x, y, 1024, BLOCK=64)
            copy1[(4,)](x, y, 1024, BLOCK=64)
        finally:
            _allocation._allocator.reset(token)
        return calls
    return env.both(scenario)


@check
def s09_entry_scratch_many_map_values(env):
    """FinalizedLaunch (the Inductor entry) with global scratch and 8 rank-5 host-side tensor maps (each
    made from the call's tensor with the compile-time geometry, as Inductor's TMA templates pass them)
    beside 200 i32 arguments: 290 values from 211 call positions, past the 256 a stack array holds.
    Launched once, the allocator called once (an overflowing stack write before: AddressSanitizer's
    stack-buffer-overflow in fl_ext_collect; a crash in a release build)."""
    import contextvars

    import torch

    from fastlaunch import FinalizedLaunch, Plan

    nm, ni, block = 8, 200, [8, 8, 8, 8, 8]
    kinds = (["nvTmaDesc"] + ["i32"] * 5 + ["i64"] * 5) * nm + ["i32"] * ni + ["ptr", "ptr"]
    grid_pos = (nm + ni, nm + ni + 1, nm + ni + 2)  # the template's grid: the launcher's last three
    # Inductor's host-side TMA: each map made from the call's tensor with the compile-time geometry.
    geometry = [((8, 8, 8, 8, 8), (4096, 512, 64, 8, 1))] * nm
    plan = Plan(1, kinds, backend="cuda", abi="cuda", options={"num_warps": 4},
                tensor_maps=[(3, 2, 6, block, False)] * nm, tensor_map_geometry=geometry, ignore=list(grid_pos))

    class Bound:
        def entry_fallback(self, reason, stable, args, kwargs):
            fallbacks.append(reason)
    fallbacks, allocs = [], []
    pool = torch.empty(1 << 20, dtype=torch.int8)
    var = contextvars.ContextVar("allocator")

    def allocator(size, align, stream):
        allocs.append((size, align))
        return pool
    var.set(allocator)
    entry = FinalizedLaunch(Bound(), plan, grid_args=grid_pos, scratch=(var, 256, 128, 1, 2))
    descs = [torch.zeros(8, 8, 8, 8, 8, dtype=torch.float16) for _ in range(nm)]
    got, exc = env.logged(lambda: entry(*descs, *range(7, 7 + ni), 2, 1, 1, stream=env.cuda_stub.STREAM))
    detail = {"plan_values": plan.runtime_arg_count, "launches": len(got), "grid": got[0][0] if got else None,
              "allocs": allocs, "fallbacks": fallbacks, "exc": exc}
    return (plan.runtime_arg_count > 256 and len(got) == 1 and got[0][0] == (2, 1, 1) and allocs == [(512, 128)]
            and not fallbacks and exc is None), detail


@check
def s10_grid_switches_device_then_refused(env):
    """Two devices on the stand-in driver, a context each: a grid callable that switches the current
    device, on a kernel already bound, then the launch refused (cuda_context_changed: the plan's
    context is device 0's). Triton read the device and the stream once, before the grid, and its
    launcher gets device 0's stream; handed back, the call's launcher gets the same (before: Triton's
    run read them again, the other device's stream and a variant compiled for it)."""
    env.cuda_stub.two_devices(True)
    drv = env.triton.runtime.driver.active
    k = env.kernel()
    try:
        def scenario(fl, names):
            x, y, _ = env.warm(k, names)

            def grid(meta):
                drv.set_current_device(1)
                return (2,)
            streams = []
            try:
                k[grid](x, y, 600, BLOCK=64)
                streams.append(env.stub.state.stream)
            finally:
                drv.set_current_device(0)
            k[(3,)](x, y, 500, BLOCK=64)
            streams.append(env.stub.state.stream)
            return [hex(s) for s in streams]
        return env.both(scenario)
    finally:
        env.cuda_stub.two_devices(False)


@check
def s11_run_detached_inside_attach(env):
    """compiled.run(...) called directly on a lazy CompiledRun whose attach (the first direct call's)
    meets a disable(): disable() detaches every served run (here from inside attach, as a __del__ in a
    GC pass during it could). The run stays detached: this call and the next are Triton's launcher's,
    launched once each (before: attach's launch was installed after the detach, served from then on)."""
    from fastlaunch import triton_compiled as tc

    k = env.kernel()
    x, y, _ = env.tensors()
    ck = k[(4,)](x, y, 1000, BLOCK=64)
    slot = vars(ck).get("_run", vars(ck).get("run"))
    stock = getattr(slot, "stock", slot)
    holder = {}

    def attach(kernel):
        holder["run"].detach()
        return tc._attach(kernel)
    run = _C.CompiledRun(ck, stock, attach=attach)
    holder["run"] = run

    def calls():
        for n in (500, 400):
            run(2, 1, 1, env.cuda_stub.STREAM, ck.function, ck.packed_metadata, None, None, None, x, y, n, 64)
    got, exc = env.logged(calls)
    launch = tc.launch_of(ck)
    fast = launch.counts()["fast"] if launch is not None else 0
    detail = {"launches": got, "exc": exc, "served_after": run.launch is not None, "fast": fast}
    return ([g[3] for g in got] == [500, 400] and exc is None and run.launch is None and fast == 0), detail


def main(names):
    from fldev.jit_checks import run_checks

    return run_checks(CHECKS, Env(), names, mark_start=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
