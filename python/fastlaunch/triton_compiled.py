"""`compiled[grid](*args, stream=None)` on a Triton CompiledKernel, served (fastlaunch._C's
CompiledSubscript, compiled.c): what `kernel[grid](...)` or `kernel.warmup(...)` returned, kept and
called again, as FlagGems' LibEntry and other caches of compiled kernels launch: Triton's launcher
with no JIT in between.

At a kernel's first subscript `_attach` makes its CompiledLaunch: a plan taking every parameter
(constexprs passed and skipped, as Triton's launcher skips them) and the JitDispatcher of the
kernel's JITFunction, whose gates and device and stream sources the call uses. A kernel with no
plan keeps Triton's runner, with the reason: its source is not a JITFunction's, the JITFunction is
not served, a tuple parameter, or what plan_from_compiled refuses.
"""

from __future__ import annotations

import logging
import weakref

from fastlaunch import _C
from fastlaunch._C import FastLaunchPlanUnavailable

log = logging.getLogger("fastlaunch")
_state = {"getitem": None, "backend": None, "attach_jit": None}
_attached: "weakref.WeakSet" = weakref.WeakSet()  # the kernels holding a CompiledLaunch


def enable(attach_jit, *, backend=None) -> None:
    """CompiledKernel.__getitem__ is fastlaunch's from now on (idempotent); attach_jit(fn) installs
    a JITFunction's dispatcher (fastlaunch.triton_jit's, which calls this)."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return
    if _state["getitem"] is not None:
        return
    had = "__getitem__" in CompiledKernel.__dict__
    stock = CompiledKernel.__getitem__
    _state.update(getitem=(CompiledKernel, had, stock), backend=backend, attach_jit=attach_jit)
    CompiledKernel.__getitem__ = _C.CompiledSubscript(stock, _attach)


def disable() -> None:
    """Triton's own CompiledKernel.__getitem__ back; every kernel's CompiledLaunch dropped."""
    if _state["getitem"] is None:
        return
    (cls, had, stock), _state["getitem"] = _state["getitem"], None
    if had:
        cls.__getitem__ = stock
    elif "__getitem__" in cls.__dict__:
        del cls.__getitem__
    for kernel in list(_attached):
        kernel.__dict__.pop("_fastlaunch_launch", None)  # its dispatcher was the old JIT's
    _attached.clear()


def launch_of(kernel):
    """The kernel's CompiledLaunch (None before its first subscript while served)."""
    return getattr(kernel, "__dict__", {}).get("_fastlaunch_launch")


def _attach(kernel):
    """The kernel's CompiledLaunch, made at its first subscript and kept in its __dict__."""
    if _state["getitem"] is None:
        return None
    kernel._init_handles()  # first, as Triton's __getitem__ does: its errors are Triton's
    dispatcher, plan, reason = None, None, None
    try:
        dispatcher, plan = _plan(kernel)
    except FastLaunchPlanUnavailable as exc:
        reason = exc.reason
    except Exception as exc:  # a kernel this does not recognise: Triton's runner keeps it
        reason = f"unrecognised:{type(exc).__name__}"
    if reason:
        log.debug("fastlaunch: compiled %s not served: %s", getattr(kernel, "name", kernel), reason)
    launch = _C.CompiledLaunch(kernel, dispatcher, plan, reason, _state["getitem"][2])
    try:
        kernel.__dict__["_fastlaunch_launch"] = launch
        _attached.add(kernel)
    except (AttributeError, TypeError):
        pass  # made again at the next subscript
    return launch


def _plan(kernel):
    from triton.runtime.jit import JITFunction

    from fastlaunch.triton_plan import abi_of, is_hip, plan_from_compiled

    fn = getattr(getattr(kernel, "src", None), "fn", None)
    if not isinstance(fn, JITFunction):
        raise FastLaunchPlanUnavailable("compiled_without_jit_function")
    _state["attach_jit"](fn)
    dispatcher = vars(fn).get("run")
    if not isinstance(dispatcher, _C.JitDispatcher):
        raise FastLaunchPlanUnavailable("jit_function_not_served")
    abi = abi_of(kernel)
    nparams = len(kernel.src.signature)
    used = [p for p, _ in abi.positions]
    if any(m is not None for _, m in abi.positions) or used != sorted(set(used)) or \
            not all(isinstance(p, int) and 0 <= p < nparams for p in used):
        raise FastLaunchPlanUnavailable("compiled_tuple_parameters")
    backend = _state["backend"] or ("hip" if is_hip(kernel.metadata) else "cuda")
    ignore = [i for i in range(nparams) if i not in set(used)]
    return dispatcher, plan_from_compiled(kernel, backend=backend, name=fn.__name__, ignore=ignore)
