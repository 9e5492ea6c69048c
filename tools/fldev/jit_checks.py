"""What the JIT dispatcher does besides launching, checked on the stand-in driver in a process of
its own (the stub becomes its libcuda): each check prints one JSON line {"check", "ok", "detail"}.

    PYTHONPATH=tools python -m fldev.jit_checks [NAME ...]
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from fastlaunch import _C  # noqa: E402

_C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door)

CHECKS = {}
triton = None


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def counts(fn):
    return dict(fn.run.counts)


class Env:
    def __init__(self):
        global triton
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
        from fldev import cuda_stub

        self.stub = cuda_stub.load()
        import torch
        import triton as _triton

        triton = _triton
        import fastlaunch.triton as flt
        import jit_kernels as K

        flt.enable()
        self.torch, self.flt, self.K = torch, flt, K
        from fastlaunch import triton_jit

        self.flt_not_bound = triton_jit.not_bound
        self.x = torch.zeros(4096)
        self.y = torch.zeros(4096)

    def launches(self):
        return self.stub.state.calls

    def add(self, n=1000, **kw):
        return self.K.tensors[lambda META: (triton.cdiv(n, META["BLOCK"]),)](self.x, self.y, n, BLOCK=128, **kw)


@check
def steady_state_is_fast_and_grid_programs_run_in_c(env):
    for i in range(20):
        env.add(1001 + 2 * i)  # odd sizes: one variant (a multiple of 16 is another)
    c = counts(env.K.tensors)
    env.stub.record(0)
    env.add(4097)
    grid = tuple(env.stub.state.grid)
    env.stub.count_only()
    return c["fast"] == 19 and c["stock"] == 1 and c["grid_calls"] == 0 and grid == (33, 1, 1), (c, grid)


@check
def registered_c_sources_read_the_stream(env):
    """The stub registers C equivalents of its driver's device and stream: the dispatcher reads the
    stream through C (a different handle in the stub's C source shows up in the launch), and a
    registration that is not a capsule is refused by name."""
    from fldev import cuda_stub

    env.add()
    env.stub.record(0)
    env.stub.state.stream_handle = 0x7F00_0000_BEEF
    env.add()
    seen_c = env.stub.state.stream
    env.stub.state.stream_handle = cuda_stub.STREAM
    env.add()
    seen_back = env.stub.state.stream
    env.stub.count_only()
    try:
        env.flt.register_c_sources(len, object(), len, object())
        refused = None
    except TypeError as exc:
        refused = str(exc)
    return (seen_c == 0x7F00_0000_BEEF and seen_back == cuda_stub.STREAM and refused is not None
            and "fastlaunch.current_device" in refused), (hex(seen_c), hex(seen_back), refused)


@check
def autotuned_keys_launch_the_tuned_config_and_the_rest_goes_to_triton(env):
    """After the Autotuner tuned a key, calls with that key launch its config from C; a keyword a
    config also sets raises Triton's TypeError and launches nothing; a cleared cache is seen (the
    key is tuned again by Triton, then served again); a config's pre_hook, set on a config already
    bound, makes the key Triton's once, then it is called in C as Triton calls it."""
    K = env.K
    grid = lambda META: (triton.cdiv(1000, META["BLOCK"]),)  # noqa: E731
    for _ in range(5):
        K.tuned[grid](env.x, env.y, 1000)
    c0 = dict(K.tuned.run.counts)
    env.stub.record(0)
    K.tuned[grid](env.x, env.y, 1000)
    block = tuple(env.stub.state.block)
    env.stub.count_only()
    before = env.launches()
    try:
        K.tuned[grid](env.x, env.y, 1000, BLOCK=64)
        clash = None
    except TypeError as exc:
        clash = str(exc)
    clash_launched = env.launches() - before
    K.tuned.cache.clear()
    K.tuned[grid](env.x, env.y, 1000)
    K.tuned[grid](env.x, env.y, 1000)
    c1 = dict(K.tuned.run.counts)
    hooked, seen = K.tuned.configs[1], []

    def pre_hook(nargs):  # what Triton's run shows a config's pre_hook: the mapping, nargs, best_config
        seen.append((tuple(sorted(nargs)), nargs["n"], K.tuned.nargs is not None, K.tuned.best_config is hooked))

    hooked.pre_hook = pre_hook  # on a config already bound: seen (its dict is watched), the key forgotten
    try:
        before = env.launches()
        K.tuned[grid](env.x, env.y, 1000)  # Triton's run: it calls the pre_hook; then bound with it
        K.tuned[grid](env.x, env.y, 1000)  # served: the pre_hook called in C
        c2, hook_launches = dict(K.tuned.run.counts), env.launches() - before
    finally:
        hooked.pre_hook = None
    K.tuned[grid](env.x, env.y, 1000)  # the pre_hook gone: forgotten again, Triton's once
    K.tuned[grid](env.x, env.y, 1000)
    c3 = dict(K.tuned.run.counts)
    K.tuned.cache.clear()
    mapping = tuple(sorted(("x_ptr", "y_ptr", "n", "grid", "warmup", *hooked.all_kwargs())))  # Triton's, by name
    ok = (c0["fast"] >= 4 and block == (128, 1, 1) and K.tuned.best_config is K.tuned.configs[1]
          and K.tuned.nargs is None and clash is not None and "multiple values" in clash and clash_launched == 0
          and c1["stock_reasons"].get("first_call_of_key", 0) == c0["stock_reasons"].get("first_call_of_key", 0) + 1
          and c1["fast"] == c0["fast"] + 2 and c2["fast"] == c1["fast"] + 1 and hook_launches == 2
          and seen == [(mapping, 1000, True, True)] * 2 and c3["fast"] == c2["fast"] + 1
          and "config_pre_hook" not in c3["stock_reasons"])
    return ok, (c0, block, clash, clash_launched, c1, c2, seen, c3)


@check
def subclass_super_run_reads_the_keywords_dict(env):
    """An Autotuner subclass whose run calls super().run(*args, **kwargs) (fla's CachedAutotuner):
    `super().run` is the slot bound to the instance, which reads the keyword dict CPython built in
    place. Keywords in another order, a super().run without warmup=, and plain attribute access
    each launch once, the tuned config; an instance fastlaunch did not admit runs Triton's own run."""
    from triton.runtime.autotuner import Autotuner

    class Sub(Autotuner):
        calls = 0

        def run(self, *args, **kwargs):
            Sub.calls += 1
            if kwargs.pop("drop_warmup", False):
                kwargs.pop("warmup")
            return super().run(*args, **kwargs)

    fn = env.K.tuned.fn
    tuner = Sub(fn, fn.arg_names, env.K.tuned.configs, ["n"], None, None)
    grid = lambda META: (triton.cdiv(1000, META["BLOCK"]),)  # noqa: E731
    for _ in range(3):
        tuner[grid](env.x, env.y, 1000)
    bound = super(Sub, tuner).run
    c0 = dict(vars(tuner)["_fastlaunch_run"].counts)
    launched, blocks = [], []
    for call in 2 * (lambda: tuner[grid](env.x, env.y, n=1000), lambda: tuner[grid](env.x, n=1000, y_ptr=env.y),
                 lambda: tuner[grid](y_ptr=env.y, x_ptr=env.x, n=1000),
                 lambda: bound(env.x, env.y, 1000, grid=grid, warmup=False),
                 lambda: Sub.run(tuner, env.x, env.y, 1000, grid=grid, warmup=False, drop_warmup=True)):
        if len(launched) == 5:  # the second round: every key form tuned (a keyword n= is a key of its own)
            c0 = dict(vars(tuner)["_fastlaunch_run"].counts)
        before = env.launches()
        env.stub.record(0)
        call()
        blocks.append(env.stub.state.block[0])
        env.stub.count_only()
        launched.append(env.launches() - before)
    c1 = dict(vars(tuner)["_fastlaunch_run"].counts)
    other = Sub(fn, fn.arg_names, env.K.tuned.configs, ["n"], None, None)  # never called through kernel[grid]
    before = env.launches()
    other.run(env.x, env.y, 1000, grid=grid, warmup=False)
    other_launched = env.launches() - before
    ok = (launched == [1] * 10 and blocks == [128] * 10 and c1["fast"] == c0["fast"] + 5 and bound.__self__ is tuner
          and "TunerSlot" in repr(type(bound)) and other_launched == 1 + len(other.configs)
          and other.best_config is other.configs[1] and Sub.calls == 3 + 2 * 4 + 1)
    return ok, (launched, blocks, c0, c1, type(bound), other_launched)


@check
def warmup_goes_to_triton_and_launches_nothing(env):
    env.add()
    before, c0 = env.launches(), counts(env.K.tensors)
    k = env.K.tensors.run(env.x, env.y, 1000, grid=(1,), warmup=True, BLOCK=128)
    c1 = counts(env.K.tensors)
    return (env.launches() == before and c1["stock_reasons"].get("warmup") == 1 and c1["fast"] == c0["fast"]
            and type(k).__name__ == "CompiledKernel"), c1


@check
def pre_run_hooks_and_launch_hooks_are_called_in_c(env):
    """A pre-run hook is called as Triton's run calls it (the positional arguments as passed, the
    keywords plus what Triton adds: debug and the compilation knobs), once a call, and the launch is
    still served; on a miss (Triton compiles), once too: Triton's run is given the kernel with its
    hook list emptied for that call. A hook that raises: its exception, nothing launched. A hook added
    by a hook is called in the same call, as Triton's loop reaches it."""
    env.add()
    seen = []
    pre = lambda *a, **k: seen.append(("pre", len(a), tuple(sorted(k))))  # noqa: E731
    env.K.tensors.add_pre_run_hook(pre)
    f0, l0 = counts(env.K.tensors), env.launches()
    env.add()
    env.add(n=1)  # int == 1: a variant of its own, first met here (Triton's run, the hook not called twice)
    env.add(n=1)
    f1 = counts(env.K.tensors)
    hook = lambda meta: seen.append(("enter", meta.get()["name"]))  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    env.add()
    triton.knobs.runtime.launch_enter_hook.remove(hook)
    f2 = counts(env.K.tensors)

    def boom(*a, **k):
        raise ValueError("a pre-run hook that raises")

    env.K.tensors.add_pre_run_hook(boom)
    l1, raised = env.launches(), None
    try:
        env.add()
    except ValueError as exc:
        raised = str(exc)
    l2 = env.launches()
    env.K.tensors.pre_run_hooks.clear()
    added = lambda *a, **k: seen.append("added")  # noqa: E731
    env.K.tensors.add_pre_run_hook(lambda *a, **k: env.K.tensors.pre_run_hooks.append(added) if len(
        env.K.tensors.pre_run_hooks) == 1 else None)
    env.add()
    env.K.tensors.pre_run_hooks.clear()
    f3 = counts(env.K.tensors)
    env.add()
    c = counts(env.K.tensors)
    keys = ("BLOCK", "debug", *(n for n in ("fpsan_homomorphic_casts", "instrumentation_mode")
                                  if hasattr(triton.knobs.compilation, n)))
    want = [("pre", 3, tuple(sorted(keys)))] * 4 + [("enter", "tensors")] + ["added"]
    ok = (seen == want[:5] + [want[0], "added"] and f1["fast"] == f0["fast"] + 2
          and f1["stock_reasons"].get("first_call_of_variant", 0) == f0["stock_reasons"].get("first_call_of_variant", 0) + 1
          and f2["fast"] == f1["fast"] + 1 and f2["hooked"] == f1["hooked"] + 1 and f2["pre_run"] == f0["pre_run"] + 4
          and raised == "a pre-run hook that raises" and l2 == l1 and f3["fast"] == f2["fast"] + 1
          and c["fast"] == f3["fast"] + 1 and c["pre_run"] == f3["pre_run"] and "pre_run_hooks" not in c["stock_reasons"]
          and l1 == l0 + 4)
    return ok, (seen, f0, f1, f2, f3, c, l0, l1, l2)


@check
def run_called_directly_is_served_from_its_first_call(env):
    """`fn.run(...)` on a JITFunction, an Autotuner and a Heuristics never subscripted (FlagGems'
    LibEntry on a miss), and an Autotuner subclass whose run calls `self.fn.run` itself (FlagGems'
    LibTuner): each attached at its first call, every later call served. Through the class
    (`JITFunction.run(fn, ...)`) it is Triton's own run; an excluded kernel stays Triton's."""
    import triton.language as tl
    from triton.runtime.autotuner import Autotuner

    def body(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)

    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]
    plain = triton.jit(body)
    tuned = triton.autotune(configs=configs, key=["n"])(triton.jit(body))
    heur = triton.heuristics({"BLOCK": lambda a: 64})(triton.jit(body))

    class OwnRun(Autotuner):  # LibTuner's shape: picks its config, then self.fn.run
        def run(self, *args, **kwargs):
            return self.fn.run(*args, **kwargs, **self.configs[0].all_kwargs())

    own = OwnRun(triton.jit(body), ["x_ptr", "y_ptr", "n", "BLOCK"], configs, ["n"], None, None)
    excluded = triton.jit(body)
    env.flt.exclude(excluded)
    out = {}
    for name, k, kw, inner in (("plain", plain, {"BLOCK": 128}, plain), ("tuned", tuned, {}, tuned.fn),
                               ("heuristics", heur, {}, heur.fn), ("own run", own, {}, own.fn),
                               ("excluded", excluded, {"BLOCK": 128}, excluded)):
        before = env.launches()
        for _ in range(4):
            k.run(env.x, env.y, 1000, grid=(4,), warmup=False, **kw)
        launched = env.launches() - before
        fast = dict(vars(inner)["run"].counts)["fast"] if hasattr(vars(inner)["run"], "counts") else 0
        out[name] = (launched, fast)
    before = env.launches()
    type(plain).run(plain, env.x, env.y, 1000, grid=(4,), warmup=False, BLOCK=128)  # Triton's own
    through_class = (env.launches() - before, dict(vars(plain)["run"].counts)["fast"])
    tuned_extra = len(configs)  # the first call of the key benchmarks each config (Triton's run)
    ok = (out["plain"] == (4, 3) and out["tuned"][0] == 4 + tuned_extra * 1 and out["tuned"][1] >= 3
          and out["heuristics"] == (4, 3) and out["own run"] == (4, 3) and out["excluded"] == (4, 0)
          and through_class == (1, 3) and "excluded" in env.flt_not_bound())
    return ok, (out, through_class)


@check
def a_changed_global_raises_tritons_error(env):
    K = env.K
    grid = (2,)
    K.activation[grid](env.x, 100, ACT="relu", BLOCK=64)
    K.activation[grid](env.x, 100, ACT="relu", BLOCK=64)
    saved = K.SCALE
    K.SCALE = triton.language.constexpr(5)
    before = env.launches()
    msgs = []
    for call in (lambda: K.activation[grid](env.x, 100, ACT="relu", BLOCK=64),
                 lambda: type(K.activation).run(K.activation, env.x, 100, grid=grid, warmup=False, ACT="relu",
                                                BLOCK=64)):
        try:
            call()
            msgs.append(None)
        except RuntimeError as exc:
            msgs.append(str(exc))
    K.SCALE = saved
    launched = env.launches() - before
    f0 = counts(K.activation)["fast"]
    K.activation[grid](env.x, 100, ACT="relu", BLOCK=64)
    fast_again = counts(K.activation)["fast"] == f0 + 1
    return (msgs[0] is not None and msgs[0] == msgs[1] and "has changed since we compiled" in msgs[0] and launched == 0
            and fast_again), (msgs, launched, fast_again)


@check
def values_triton_refuses_raise_the_same_and_launch_nothing(env):
    out = []
    for n in (2**64, -(2**63) - 1, "12", 3.5j):
        errs = []
        for call in (lambda: env.K.tensors[(1,)](env.x, env.y, n, BLOCK=128),
                     lambda: type(env.K.tensors).run(env.K.tensors, env.x, env.y, n, grid=(1,), warmup=False,
                                                     BLOCK=128)):
            before = env.launches()
            try:
                call()
                errs.append(("no error", env.launches() - before))
            except Exception as exc:
                errs.append((type(exc).__name__, env.launches() - before))
        out.append(errs)
    return all(a == b and a[0] != "no error" and a[1] == 0 for a, b in out), out


@check
def declined_tensors_are_checked_where_they_live(env):
    """Tensors the door declines, through the JIT's full path: a meta tensor goes to Triton's path
    (no pointer of fastlaunch's is handed on: whatever Triton does, it does), a subclass with
    __torch_function__ launches its own data_ptr() with the same bytes Triton passes."""
    torch, K = env.torch, env.K

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    out = {}
    for kind, t in (("meta", torch.empty(4096, device="meta")), ("subclass", torch.zeros(4096).as_subclass(Sub))):
        rows = []
        for _ in range(3):
            c0, before = counts(K.tensors), env.launches()
            try:
                K.tensors[(2,)](t, env.y, 1000, BLOCK=128)
                got = "launched"
            except Exception as exc:  # noqa: BLE001 - the same as Triton's, below
                got = type(exc).__name__
            c1 = counts(K.tensors)
            try:
                type(K.tensors).run(K.tensors, t, env.y, 1000, grid=(2,), warmup=False, BLOCK=128)
                ref = "launched"
            except Exception as exc:  # noqa: BLE001
                ref = type(exc).__name__
            rows.append((got, ref, c1["fast"] - c0["fast"], env.launches() - before))
        out[kind] = rows
    meta_ok = all(r[0] == r[1] and r[2] == 0 for r in out["meta"])  # never fastlaunch's launch
    sub_ok = all(r[0] == r[1] == "launched" for r in out["subclass"]) and out["subclass"][-1][2] == 1
    return meta_ok and sub_ok, out


@check
def unknown_keywords_and_missing_arguments_as_triton_says(env):
    res = []
    for kwargs in ({"BLOCK": 128, "bogus": 1}, {}):
        errs = []
        for fl in (True, False):
            try:
                if fl:
                    env.K.tensors[(1,)](env.x, env.y, 10, **kwargs)
                else:
                    type(env.K.tensors).run(env.K.tensors, env.x, env.y, 10, grid=(1,), warmup=False, **kwargs)
                errs.append("no error")
            except Exception as exc:
                errs.append(type(exc).__name__)
        res.append(errs)
    return all(a == b for a, b in res), res


@check
def knob_change_forgets_bound_variants(env):
    env.add()
    env.add()
    v0 = counts(env.K.tensors)["variants"]
    triton.knobs.runtime.debug = True
    try:
        env.add()
        v1 = counts(env.K.tensors)["variants"]
    finally:
        triton.knobs.runtime.debug = False
    env.add()
    return v0 >= 1 and v1 == 1, (v0, v1)


@check
def opaque_grid_called_once_per_launch_with_tritons_mapping(env):
    seen = []

    def grid(meta):
        seen.append(sorted(meta))
        return (len(seen) % 3 + 1,)

    env.add()  # the dispatcher is in the slot from here on
    before = counts(env.K.tensors)
    for _ in range(4):
        env.K.tensors[grid](env.x, env.y, 77, BLOCK=64)
    c = counts(env.K.tensors)
    fast, stock, calls = (c[k] - before[k] for k in ("fast", "stock", "grid_calls"))
    # Once per launch, fast or Triton's, with Triton's mapping; every fast launch called it from C. The
    # first call of the BLOCK=64 variant is Triton's (and, with Triton 3.7 after a knob was toggled and
    # restored, its compile changes what the policy watches: one more call is Triton's).
    ok = len(seen) == 4 and seen[0] == ["BLOCK", "n", "x_ptr", "y_ptr"] and fast + stock == 4 and calls == fast >= 2
    return ok, (seen, fast, stock, calls)


@check
def memo_takes_repeats_of_a_form_and_only_its_variant(env):
    """The memo (the last fast call's form and variant) serves repeated calls of one form; a call of
    another variant from the same form (n a multiple of 16), or with the keywords in another order,
    goes the full way and launches its own variant; a table cleared by a grid callable while the
    memo holds a variant sends that call to Triton, launched once."""
    K = env.K

    def launch(n, **kw):  # one call site, its keyword names tuple the same object each time
        env.stub.record(0)
        K.tensors[(4,)](env.x, env.y, n, BLOCK=128, **kw)
        f = env.stub.state.function
        env.stub.count_only()
        return f

    def memo():
        return counts(K.tensors)["memo"]

    launch(1001), launch(1024), launch(1001)  # both variants bound (each one's first call is Triton's)
    m0 = memo()
    f_odd = [launch(1003), launch(1005)]  # the memo holds the odd variant (the last call found it)
    m1 = memo()
    f_16 = launch(1024)  # a multiple of 16: another variant, the full way
    m2 = memo()
    f_back = launch(1007)  # odd again: the memo now holds the other variant, the full way
    m3 = memo()
    ordered = K.tensors[(4,)](env.x, env.y, BLOCK=128, n=1009)  # other keyword names: the full way
    m4 = memo()
    from fastlaunch import triton_check

    if triton_check.checking():  # every call asks Triton first: the memo is never taken, each call checked
        ok = f_odd[0] == f_odd[1] == f_back != f_16 and m0 == m4 == 0 and ordered is not None \
            and counts(K.tensors)["checked"] >= 6
    else:
        ok = (f_odd[0] == f_odd[1] == f_back != f_16 and m1 - m0 == 2 and m2 == m1 and m3 == m2 and m4 == m3
              and ordered is not None)

    def clearing_grid(meta):
        K.tensors.run.clear()
        return (2,)

    launch(1011)
    launch(1013)  # the memo holds the odd variant
    before, c0 = env.launches(), counts(K.tensors)
    K.tensors[clearing_grid](env.x, env.y, 1015, BLOCK=128)
    c1 = counts(K.tensors)
    once = env.launches() - before == 1 and c1["stock_reasons"].get("table_changed", 0) == \
        c0["stock_reasons"].get("table_changed", 0) + 1
    return ok and once, (f_odd, f_16, f_back, m0, m1, m2, m3, m4, c1["stock_reasons"])


@check
def report_lists_jit_sites(env):
    import io

    import fastlaunch

    env.add()
    out = io.StringIO()
    fastlaunch.report(out)
    text = out.getvalue()
    return "jit:tensors" in text and "fast=" in text, text


@check
def disable_gives_the_kernels_back(env):
    from triton.runtime.jit import JITFunction

    env.add()
    env.flt.disable()
    restored = "run" not in vars(env.K.tensors) and type(JITFunction.__dict__.get("__getitem__")).__name__ != "JitSubscript"
    before = env.launches()
    env.add()
    launched = env.launches() - before
    env.flt.enable()
    env.add()
    return restored and launched == 1 and type(vars(env.K.tensors)["run"]).__name__ == "JitDispatcher", restored


@check
def namedtuple_and_tensor_extents_are_served(env):
    """A namedtuple grid and a 0-d torch tensor as an extent (Triton reads len, [i] and __index__;
    both are C code here): served, with the grid Triton computes."""
    import collections

    G = collections.namedtuple("G", "x y")
    got = []
    for grid in (G(3, 2), (env.torch.tensor(5),), (env.torch.tensor(2), 3)):
        env.K.tensors[grid](env.x, env.y, 1000, BLOCK=128)  # a variant bound before: the counts below are this form's
        before = counts(env.K.tensors)
        env.stub.record(0)
        env.K.tensors[grid](env.x, env.y, 1000, BLOCK=128)
        got.append((tuple(env.stub.state.grid), counts(env.K.tensors)["fast"] - before["fast"]))
    env.stub.count_only()
    return got == [((3, 2, 1), 1), ((5, 1, 1), 1), ((2, 3, 1), 1)], got


@check
def grid_lambdas_compiled_when_first_met(env):
    """A lambda grid on a variant whose first call had a tuple, then another lambda closing over an
    enclosing function's local: each traced when first met, later calls computed in C (no grid
    call), with the grid Triton computes."""
    k = env.K.no_spec  # its own variant, first met with a tuple grid
    for _ in range(3):
        k[(4,)](env.x, env.y, 777, BLOCK=128)

    def site(n):
        m = n * 2
        g1 = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731
        g2 = lambda META: (triton.cdiv(m, META["BLOCK"]), 2)  # noqa: E731
        out = []
        for g in (g1, g2):
            for _ in range(5):
                k[g](env.x, env.y, n, BLOCK=128)
            before = counts(k)["grid_calls"]
            env.stub.record(0)
            k[g](env.x, env.y, n, BLOCK=128)
            out.append((tuple(env.stub.state.grid), counts(k)["grid_calls"] - before))
        env.stub.count_only()
        return out
    got = site(777)
    return got == [((7, 1, 1), 0), ((13, 2, 1), 0)], got


def registry():
    """(CHECKS, check): a checks module's table and the decorator that files a check in it by name."""
    checks = {}

    def check(fn):
        checks[fn.__name__] = fn
        return fn
    return checks, check


def run_checks(checks, env, names, mark_start=False):
    """Runs the named checks (all when none), one JSON line each; with mark_start a line before each
    too, so a crash (an ASan report) names the check that ran. 1 when any failed."""
    failed = 0
    for name in names or list(checks):
        if mark_start:
            print(json.dumps({"check": name, "start": True}), flush=True)
        try:
            ok, detail = checks[name](env)
        except Exception:
            ok, detail = False, traceback.format_exc()[-1500:]
        failed += not ok
        print(json.dumps({"check": name, "ok": bool(ok), "detail": repr(detail)[:1500]}), flush=True)
    return 1 if failed else 0


def main(names):
    return run_checks(CHECKS, Env(), names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
