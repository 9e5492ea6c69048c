"""`compiled[grid](*args, stream=None)` on a Triton CompiledKernel, served (fastlaunch._C's
CompiledSubscript, compiled.c): what `kernel[grid](...)` or `kernel.warmup(...)` returned, kept and
called again, as FlagGems' LibEntry and other caches of compiled kernels launch: Triton's launcher
with no JIT in between.

At a kernel's first subscript `_attach` makes its CompiledLaunch: a plan taking every parameter
(constexprs passed and skipped, as Triton's launcher skips them) and the JitDispatcher of the
kernel's JITFunction, whose gates and device and stream sources the call uses. A kernel with no
plan keeps Triton's runner, with the reason: its source is not a JITFunction's, the JITFunction is
not served, a tuple parameter, or what plan_from_compiled refuses. A kernel with a plan gets a
CompiledRun in its launcher's slot too, and so does each variant the JIT dispatcher binds (lazily:
attached at its first direct call): `kernel.run(gx, gy, gz, stream, function, ...)` called directly
is served (compiled_run.c); Triton's own run and runner keep Triton's launcher; disable() puts it
back everywhere.

Triton 3.5 and 3.6 launchers parse their arguments by a format string before the enter hook
(`_parses_first`): there a call takes exactly one argument per parameter, and with hooks set the
scalars are checked before enter is called (compiled.c's parse_first).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import weakref

from fastlaunch import _C
from fastlaunch.bind import members
from fastlaunch._C import FastLaunchPlanUnavailable

log = logging.getLogger("fastlaunch")
_state = {"getitem": None, "backend": None, "attach_jit": None}
# One lock for what changes slots and tables here and in triton_jit (which takes this one: one lock,
# so no order between two): enable(), disable(), attaching a kernel. Re-entrant. Calls never take it.
lock = threading.RLock()


def slot_writable() -> bool:
    """Whether a class's mapping slot may be written now: with the GIL, always; on a free-threaded
    build only while no other thread runs (the write races with every other thread's subscript, as
    CPython's own slot update does)."""
    return getattr(sys, "_is_gil_enabled", lambda: True)() or threading.active_count() == 1


def locked(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)
    return wrapper
_attached: "weakref.WeakSet" = weakref.WeakSet()  # the kernels holding a CompiledLaunch
_runs: "weakref.WeakSet" = weakref.WeakSet()  # the kernels holding a CompiledRun


@locked
def enable(attach_jit, *, backend=None) -> None:
    """CompiledKernel.__getitem__ is fastlaunch's from now on (idempotent); attach_jit(fn) installs
    a JITFunction's dispatcher (fastlaunch.triton_jit's, which calls this)."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return
    if _state["getitem"] is not None:
        return
    try:  # kernel[grid] with host-side tensor descriptors: the JIT's key pass reads them
        from triton.tools.tensor_descriptor import TensorDescriptor

        _C.tensor_descriptor_type(TensorDescriptor)
    except ImportError:
        pass
    had = "__getitem__" in CompiledKernel.__dict__
    stock = CompiledKernel.__getitem__
    _state.update(getitem=(CompiledKernel, had, stock), backend=backend, attach_jit=attach_jit)
    CompiledKernel.__getitem__ = _C.CompiledSubscript(stock, _attach)
    prop = CompiledKernel.__dict__.get("run")
    if isinstance(prop, property):  # Triton 3.7 on: `run` read in C (the launcher in _run), no Python frame
        CompiledKernel.run = _C.RunProperty(prop, "_run")
        _state["run_property"] = prop


@locked
def disable() -> None:
    """Triton's own CompiledKernel.__getitem__ back; every kernel's CompiledLaunch dropped."""
    if _state["getitem"] is None:
        return
    (cls, had, stock), _state["getitem"] = _state["getitem"], None
    if had:
        cls.__getitem__ = stock
    elif "__getitem__" in cls.__dict__:
        del cls.__getitem__
    prop = _state.pop("run_property", None)
    if prop is not None:
        cls.run = prop
    for kernel in members(_attached):
        kernel.__dict__.pop("_fastlaunch_launch", None)  # its dispatcher was the old JIT's
    for kernel in members(_runs):
        _unserve_run(kernel)
    _attached.clear()
    _runs.clear()


def launch_of(kernel):
    """The kernel's CompiledLaunch (None before its first subscript while served)."""
    return getattr(kernel, "__dict__", {}).get("_fastlaunch_launch")


@locked
def _attach(kernel):
    """The kernel's CompiledLaunch, made at its first subscript and kept in its __dict__."""
    if _state["getitem"] is None:
        return None
    kernel._init_handles()  # first, as Triton's __getitem__ does: its errors are Triton's
    dispatcher, plan, reason, scratch = None, None, None, None
    parse_first = _parses_first(kernel)
    try:
        dispatcher, plan, scratch = _plan(kernel, parse_first)
    except FastLaunchPlanUnavailable as exc:
        reason = exc.reason
    except Exception as exc:  # a kernel this does not recognise: Triton's runner keeps it
        reason = f"unrecognised:{type(exc).__name__}"
    if reason:
        log.debug("fastlaunch: compiled %s not served: %s", getattr(kernel, "name", kernel), reason)
    launch = _C.CompiledLaunch(kernel, dispatcher, plan, reason, _state["getitem"][2], parse_first=parse_first,
                               scratch=scratch)
    try:
        kernel.__dict__["_fastlaunch_launch"] = launch
        _attached.add(kernel)
    except (AttributeError, TypeError):
        return launch  # made again at the next subscript
    if plan is not None:
        _serve_run(kernel, launch)
    return launch


def _launcher_slot(kernel):
    """Where the kernel keeps Triton's launcher: `_run` behind the `run` property (Triton 3.7 on),
    else the instance's own `run` (3.5, 3.6)."""
    d = kernel.__dict__
    return "_run" if "_run" in d else "run" if "run" in d else None


def _serve_run(kernel, launch=None):
    """`kernel.run(...)` called directly served too: a CompiledRun in the launcher's slot, with the
    kernel's CompiledLaunch, or (launch None) one that attaches the kernel at its first call made
    outside Triton's own run (a variant fastlaunch's JIT bound: what kernel[grid] returned)."""
    if _state["getitem"] is None:
        return
    slot = _launcher_slot(kernel)
    stock = kernel.__dict__.get(slot) if slot else None
    if stock is None or isinstance(stock, _C.CompiledRun) or not callable(stock):
        return
    try:
        if launch is not None:
            kernel.__dict__[slot] = _C.CompiledRun(kernel, stock, launch=launch)
        else:
            kernel.__dict__[slot] = _C.CompiledRun(kernel, stock, attach=_launch_for_run)
    except (TypeError, AttributeError) as exc:  # no function handle yet, or not a kernel this knows
        log.debug("fastlaunch: compiled %s run not served: %s", getattr(kernel, "name", kernel), exc)
        return
    _runs.add(kernel)


@locked
def serve_run(kernel):
    """Called by the JIT policy for each variant it binds (fastlaunch.triton_jit), in the calling
    thread: under the lock, so a disable() in another thread finds it in _runs or finds it not served."""
    _serve_run(kernel)


def _launch_for_run(kernel):
    return launch_of(kernel) or _attach(kernel)


def _unserve_run(kernel):
    slot = _launcher_slot(kernel)
    run = kernel.__dict__.get(slot) if slot else None
    if isinstance(run, _C.CompiledRun):
        run.detach()  # a caller holding it gets Triton's launcher from now on
        kernel.__dict__[slot] = run.stock


def _parses_first(kernel) -> bool:
    """Whether the kernel's launcher parses its arguments by a format string before the enter hook
    (Triton 3.5 and 3.6, whose driver modules define _BASE_ARGS_FORMAT): one argument per parameter,
    trailing constexprs included, and a scalar out of its C type's range raised before any hook."""
    import sys

    module = sys.modules.get(type(getattr(kernel, "run", None)).__module__)
    return hasattr(module, "_BASE_ARGS_FORMAT")


def _plan(kernel, parse_first=False):
    from triton.runtime.jit import JITFunction

    from fastlaunch.triton_plan import abi_of, is_descriptor_member, is_hip, plan_from_compiled

    fn = getattr(getattr(kernel, "src", None), "fn", None)
    if not isinstance(fn, JITFunction):
        raise FastLaunchPlanUnavailable("compiled_without_jit_function")
    _state["attach_jit"](fn)
    dispatcher = vars(fn).get("run")
    if not isinstance(dispatcher, _C.JitDispatcher):
        raise FastLaunchPlanUnavailable("jit_function_not_served")
    if parse_first and "i8" in kernel.src.signature.values():
        # Triton 3.5 and 3.6 parse an i8 as an unsigned char ("b"): a negative value raises there.
        raise FastLaunchPlanUnavailable("launcher_parses_i8_unsigned")
    abi = abi_of(kernel)
    if abi.decomposed:  # its values passed one by one (below sm_90, AMD): served through kernel[grid]
        raise FastLaunchPlanUnavailable("tensor_descriptor_decomposed")
    nparams = len(kernel.src.signature)
    used = [p for p, m in abi.positions if not is_descriptor_member(m)]  # a descriptor's shape and strides are its own
    if any(m is not None for _, m in abi.positions if not is_descriptor_member(m)) or used != sorted(set(used)) or \
            not all(isinstance(p, int) and 0 <= p < nparams for p in used):
        raise FastLaunchPlanUnavailable("compiled_tuple_parameters")
    backend = _state["backend"] or ("hip" if is_hip(kernel.metadata) else "cuda")
    ignore = [i for i in range(nparams) if i not in set(used)]
    scratch = scratch_of(kernel, abi)
    plan = plan_from_compiled(kernel, backend=backend, name=fn.__name__, ignore=ignore, scratch_args=scratch is not None,
                              descriptors=True)
    return dispatcher, plan, scratch


def scratch_of(kernel, abi):
    """(allocator ContextVar, bytes per CTA, alignment, num_ctas, trailing pointers) for a kernel whose
    metadata asks for global scratch, as Triton's launcher allocates it; None for one that does not."""
    if abi.global_scratch_size <= 0:
        return None
    from triton.runtime import _allocation

    if abi.profile_scratch_size > 0 or not hasattr(_allocation, "_allocator"):
        raise FastLaunchPlanUnavailable(f"global_scratch_required:{abi.global_scratch_size}")
    align = int(getattr(kernel.metadata, "global_scratch_align", 1) or 1)
    ctas = int(getattr(kernel.metadata, "num_ctas", 1) or 1)
    return (_allocation._allocator, abi.global_scratch_size, align, ctas, abi.hidden_ptrs)
