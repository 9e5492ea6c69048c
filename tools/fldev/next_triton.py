"""A simulated next Triton: the installed Triton patched, in this process, to specialize on something
fastlaunch's key does not hold, each change the way a release could make it; then the same calls
through Triton alone and through fastlaunch, on the stand-in driver (cuda_stub.c), and each launch's
compiled kernel compared.

Per change, two JITFunctions over one kernel's code: the reference (excluded: Triton's own run) and
the served one. Calls come in an order whose far side of the new rule first appears late (after
fastlaunch has bound and launched the near side many times), then alternates. For each call the
compiled kernel each launched is found back in its JITFunction's kernel cache (by the function
handle the driver got) and the two keys compared: a differing key is a wrong launch (fastlaunch ran a
compiled kernel Triton would not have).

    PYTHONPATH=tools python -m fldev.next_triton checked|unchecked [CHANGE ...]   (one JSON line per change)

`unchecked` puts the patched Triton's fingerprint in the proven set for the run (fastlaunch then
trusts its own key, as it would for a Triton it had proven): the check disabled, so each change can
be seen to cause wrong launches. `checked` leaves the proven set as it is: the patched Triton is not
in it, so every call is checked.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

CHANGES = {}
NEAR_FIRST = 40  # calls of the near side before the far side first appears
MIXED = 24       # then alternating


def change(kernel, what):
    """Registers a change: patch(jit, torch) -> undo, calls(torch, side) -> (grid, args, kwargs, before)."""
    def deco(fn):
        CHANGES[fn.__name__] = (fn, kernel, what)
        return fn
    return deco


def _wrap_specialize(jit, rule):
    """Triton's specialization of one argument wrapped by rule(orig, backend, arg, is_const, specialize,
    align): libtriton's native_specialize_impl (3.6 on), or the Python one create_specialize_impl
    makes per binder (3.4, 3.5)."""
    if hasattr(jit, "native_specialize_impl"):
        orig = jit.native_specialize_impl

        def specialize_impl(backend, arg, is_const, specialize, align):
            return rule(orig, backend, arg, is_const, specialize, align)

        jit.native_specialize_impl = specialize_impl
        return lambda: setattr(jit, "native_specialize_impl", orig)
    make = jit.create_specialize_impl

    def create_specialize_impl(*extra):
        inner = make(*extra)

        def specialize_impl(arg, is_const=False, specialize_value=True, align=True):
            return rule(lambda _b, a, c, s, al: inner(a, c, s, al), None, arg, is_const, specialize_value, align)
        return specialize_impl

    jit.create_specialize_impl = create_specialize_impl
    return lambda: setattr(jit, "create_specialize_impl", make)


def _tensors_call(n, x=None, grid=None):
    def call(torch, K):
        xs = x(torch) if x else torch.zeros(8192)
        return grid or (lambda META: (-(-n // META["BLOCK"]),)), (xs, torch.zeros(8192), n), {"BLOCK": 128}, None
    return call


@change("tensors", "argument n")
def int_divisible_by_32(jit, torch):
    """A new integer attribute: divisibility by 32 besides 16 (near n=1008, far n=1024)."""
    def rule(orig, backend, arg, is_const, specialize, align):
        r = orig(backend, arg, is_const, specialize, align)
        if type(arg) is int and specialize and r[1] == "D" and arg % 32 == 0:
            return (r[0], "DD")
        return r
    return _wrap_specialize(jit, rule), {"near": _tensors_call(1008), "far": _tensors_call(1024)}


@change("tensors", "argument x_ptr")
def tensor_contiguity(jit, torch):
    """A new tensor property: whether it is contiguous (near: a tensor; far: every other element)."""
    def rule(orig, backend, arg, is_const, specialize, align):
        r = orig(backend, arg, is_const, specialize, align)
        if hasattr(arg, "data_ptr") and hasattr(arg, "is_contiguous") and not arg.is_contiguous():
            return (r[0], (r[1] or "") + "N")
        return r
    return _wrap_specialize(jit, rule), {"near": _tensors_call(1000),
                                         "far": _tensors_call(1000, lambda torch: torch.zeros(16384)[::2])}


@change("scalars", "argument f")
def float_sign(jit, torch):
    """A kind not specialized before: a float argument's sign (near f=1.5, far f=-1.5)."""
    def rule(orig, backend, arg, is_const, specialize, align):
        r = orig(backend, arg, is_const, specialize, align)
        if type(arg) is float and not is_const and specialize and arg < 0:
            return (r[0], "NEG")
        return r

    def call(f):
        return lambda torch, K: ((1,), (torch.zeros(64), 3, 4, f, True), {"BLOCK": 16}, None)
    return _wrap_specialize(jit, rule), {"near": call(1.5), "far": call(-1.5)}


@change("tensors", "option num_warps")
def option_from_value(jit, torch):
    """An option derived from an argument's value: num_warps 8 from n >= 4096 (near n=1000, far n=5000)."""
    orig = jit.create_function_from_signature

    def create_function_from_signature(sig, kparams, backend):
        binder = orig(sig, kparams, backend)

        def bind(*args, **kwargs):
            bound, specialization, options = binder(*args, **kwargs)
            if any(type(v) is int and v >= 4096 for v in bound.values()):
                options = dict(options, num_warps=8)
            return bound, specialization, options
        return bind

    jit.create_function_from_signature = create_function_from_signature
    return (lambda: setattr(jit, "create_function_from_signature", orig)), {"near": _tensors_call(1000),
                                                                             "far": _tensors_call(5000)}


@change("scalars", "argument flag")
def bool_by_value(jit, torch):
    """A bool argument specialized on its value, as constexprs are (near flag=True, far flag=False)."""
    def rule(orig, backend, arg, is_const, specialize, align):
        r = orig(backend, arg, is_const, specialize, align)
        if type(arg) is bool and not is_const and specialize:
            return (r[0], "T" if arg else "F")
        return r

    def call(flag):
        return lambda torch, K: ((1,), (torch.zeros(64), 3, 4, 1.5, flag), {"BLOCK": 16}, None)
    return _wrap_specialize(jit, rule), {"near": call(True), "far": call(False)}


@change("tensors", "argument n")
def zero_becomes_constexpr(jit, torch):
    """A new constexpr rule: an int equal to 0 specialized away as a constexpr, as 1 is (near n=1024, far
    n=0: both multiples of 16, one key word for fastlaunch)."""
    def rule(orig, backend, arg, is_const, specialize, align):
        if type(arg) is int and arg == 0 and specialize and not is_const:
            return ("constexpr", 0)
        return orig(backend, arg, is_const, specialize, align)
    return _wrap_specialize(jit, rule), {"near": _tensors_call(1024, grid=(8,)), "far": _tensors_call(0, grid=(8,))}


@change("tensors", "key computation")
def key_reads_new_state(jit, torch):
    """The key's computation reads state fastlaunch does not watch: torch's deterministic-algorithms
    flag (near: off; far: on)."""
    orig = jit.compute_cache_key

    def compute_cache_key(kernel_key_cache, specialization, options):
        return orig(kernel_key_cache, specialization, options) + f"|det={torch.are_deterministic_algorithms_enabled()}"

    jit.compute_cache_key = compute_cache_key

    def before(on):
        return lambda: torch.use_deterministic_algorithms(on)

    def call(on):
        base = _tensors_call(1000)

        def c(torch_, K):
            grid, args, kwargs, _ = base(torch_, K)
            return grid, args, kwargs, before(on)
        return c
    return (lambda: (setattr(jit, "compute_cache_key", orig), torch.use_deterministic_algorithms(False))), \
        {"near": call(False), "far": call(True)}


def order():
    """near x NEAR_FIRST, then far, near alternating: the far side first seen late."""
    return ["near"] * NEAR_FIRST + ["far", "near"] * (MIXED // 2)


def key_of(jitfn, handle):
    for key, kernel in list(jitfn.device_caches[0][0].items()):
        if getattr(kernel, "function", None) == handle:
            return key
    return None


def run_change(name, checked, stub):
    import torch
    import triton
    from triton.runtime import jit

    import fastlaunch.triton as flt
    import jit_kernels as K
    from fastlaunch import triton_check

    patch, kernel_name, what = CHANGES[name]
    try:
        undo, calls = patch(jit, torch)
    except AttributeError as exc:  # what the change patches is not in this Triton (3.4's key is inline)
        return {"change": name, "unavailable": f"{type(exc).__name__}: {exc}"}
    try:
        fp = triton_check.fingerprint()[0]
        if not checked:  # the check disabled: this patched Triton taken as proven
            triton_check.proven_set()[fp] = "simulated (the check disabled)"
        base = getattr(K, kernel_name).fn
        ref, ours = triton.jit(base), triton.jit(base)
        flt.exclude(ref)
        wrong, launches, raised, first_wrong = 0, 0, [], None
        for i, side in enumerate(order()):
            grid, args, kwargs, before = calls[side](torch, K)
            keys = []
            for fn in (ref, ours):
                if before:
                    before()
                stub.take_log()
                try:
                    fn[grid](*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - counted: both sides must raise alike
                    raised.append((i, fn is ours, f"{type(exc).__name__}: {exc}"[:200]))
                log = stub.take_log()
                keys.append(key_of(fn, log[-1][0]) if log else "(no launch)")
            launches += 1
            if keys[0] != keys[1]:
                wrong += 1
                first_wrong = first_wrong if first_wrong is not None else i
        counts = dict(ours.run.counts) if hasattr(ours.run, "counts") else {}
        found = triton_check.disagreements().get(f"jit:{base.__name__}")
        return {"change": name, "checked": checked, "calls": launches, "wrong": wrong, "first_wrong": first_wrong,
                "first_far": order().index("far"), "raised": raised[:5], "disagreement": found,
                "expected": what, "named": bool(found and what in found), "fingerprint": fp,
                "fast": counts.get("fast", 0), "checked_calls": counts.get("checked", 0),
                "handed_back": counts.get("stock_reasons", {}).get(triton_check.VERIFY_DISAGREED, 0),
                "stock_reasons": counts.get("stock_reasons", {})}
    finally:
        undo()
        triton_check._state["disagreements"].pop(f"jit:{getattr(K, kernel_name).fn.__name__}", None)


def main(argv):
    mode = argv[0] if argv else "checked"
    if mode not in ("checked", "unchecked"):
        raise SystemExit("usage: python -m fldev.next_triton checked|unchecked [CHANGE ...]")
    names = argv[1:] or list(CHANGES)
    from fastlaunch import _C

    _C.accept_host_memory()  # host tensors stand in for device memory (a testing build's door); not at
    # import: the suite imports CHANGES from here, and its own process must keep the door's checks
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
    from fldev import cuda_stub

    stub = cuda_stub.load()
    import fastlaunch.triton as flt

    flt.enable()
    stub.log()
    rc = 0
    for name in names:
        try:
            out = run_change(name, mode == "checked", stub)
        except Exception:  # noqa: BLE001 - one change's failure is its line, the others still run
            out = {"change": name, "checked": mode == "checked", "error": traceback.format_exc()[-2000:]}
            rc = 1
        print(json.dumps(out, default=str), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
