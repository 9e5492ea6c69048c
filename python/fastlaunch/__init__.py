"""fastlaunch: kernel launches from compiler-generated Python wrappers at almost no cost.

The C extension (fastlaunch._C) holds plans, the finalized call-slot entry and the error types;
this package is the thin policy around it: binding and promotion (fastlaunch.bind), the host
backend's streams and kernels (fastlaunch.host), adapters for Triton and Inductor.
"""

from __future__ import annotations

import logging
import sys
import warnings

from fastlaunch._C import (  # noqa: F401
    FastLaunchError,
    FastLaunchPlanUnavailable,
    FinalizedLaunch,
    HostKernel,
    Plan,
)

__all__ = ["FastLaunchError", "FastLaunchPlanUnavailable", "FinalizedLaunch", "HostKernel", "Plan", "config",
           "layout", "report", "tensor_reader"]
__version__ = "0.1.0"

from fastlaunch import _C, config  # noqa: E402  (every FASTLAUNCH_* variable, read in one place)

_config = config.read()
# The backends' settings, before any of them loads: the C library reads no environment variable.
for _backend, _name, _value in config.backend_settings(_config):
    try:
        _C.backend_configure(_backend, _name, _value)
    except (FastLaunchError, ValueError) as _e:
        warnings.warn(f"fastlaunch: the {_backend} backend's setting {_name}={_value!r} was not applied: {_e}",
                      stacklevel=2)
_log = logging.getLogger("fastlaunch")
if _config.log:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(message)s"))
    _log.addHandler(_handler)
    _log.setLevel(logging.DEBUG)


if _config.triton:
    try:
        from fastlaunch import triton_jit as _triton_jit

        _triton_jit.enable()
    except ImportError as _exc:  # triton is optional
        _log.warning("fastlaunch: FASTLAUNCH_TRITON is set but Triton is unavailable: %s", _exc)


if _config.inductor:
    try:
        from fastlaunch import inductor as _inductor

        _inductor.enable()
    except ImportError as _exc:  # torch is optional
        _log.warning("fastlaunch: FASTLAUNCH_INDUCTOR is set but Inductor is unavailable: %s", _exc)


def report(file=None, *, as_dict: bool = False):
    """Counters and reasons per call site: launches that took the fast path, stock calls and why,
    promotions, refusals. Prints a table (to stdout or `file`) and returns the rows."""
    from fastlaunch.bind import sites

    rows = sorted((s.counts() for s in sites()), key=lambda r: r["site"])
    # Sites never called (an autotuner Inductor copied for its cache, a kernel not reached yet)
    # are counted, not listed.
    called = [bool(r["fast"] or r["stock"] or r["promotions"] or r["refusals"]) for r in rows]
    idle = called.count(False)
    rows = [r for r, c in zip(rows, called) if c]
    if as_dict:
        return rows
    out = file or sys.stdout
    total_fast = sum(r["fast"] for r in rows)
    total = total_fast + sum(r["stock"] for r in rows)
    print(f"fastlaunch: {len(rows)} call sites (fastlaunch owns their call slots), {total_fast} of {total} "
          "launches on the fast path"
          + (f" ({100.0 * total_fast / total:.1f}%)" if total else "")
          + (f"; {idle} bound call sites not called" if idle else ""), file=out)
    if not rows and not idle:
        print("  (none: call sites are the Triton kernels torch.compile generates for a GPU or an NPU once "
              "fastlaunch.inductor.enable() is on; on a CPU, Inductor generates C++, with nothing to bind)", file=out)
    in_use, why = tensor_reader(wait=False)
    how = "read from torch's C++ tensor (fastlaunch._tensor)" if in_use else "read through data_ptr()"
    print(f"  tensor arguments: {how}: {why}", file=out)
    from fastlaunch.bind import not_bound

    unbound = not_bound()
    if unbound:
        owners: dict = {}
        for k, v in sorted(unbound.items()):
            # One owner per call slot: torch_npu's own fast launch when it is on, else the stock launcher.
            owner = "torch_npu's own fast launch" if k == "npu:torch_npu_fast_launch_owns" else "the stock launcher"
            owners.setdefault(owner, []).append(f"{k}={v}")
        for owner, items in owners.items():
            print(f"  not bound ({owner} keeps these call slots): " + ", ".join(items), file=out)
    _report_jit(out)
    for r in rows:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(r["fallbacks"].items()))
        refusals = ", ".join(f"{k}={v}" for k, v in sorted(r["refusals"].items()))
        line = f"  {r['site']}: fast={r['fast']} stock={r['stock']} promotions={r['promotions']}"
        if reasons:
            line += f" stock-reasons[{reasons}]"
        if refusals:
            line += f" refusals[{refusals}]"
        if r["negative"]:
            line += f" negative-cached[{r['negative']}]"
        print(line, file=out)
    return rows


def layout(abi: str, kinds, **options) -> dict:
    """Where each argument of a signature sits in the packed buffer of an ABI (host, cuda, npu or
    hip, whose buffer is the kernarg segment) with those options: {size, align, args, grid, ffts,
    hidden}."""
    return _C.layout(abi, kinds, options)


def tensor_reader(wait=True):
    """(in_use, why): whether tensor arguments are read from torch's C++ tensor (fastlaunch._tensor,
    compiled for the installed torch at first use, in the background, or ahead of time by `python -m
    fastlaunch tensor-reader --build`) or through data_ptr(), and why. Imports torch when it is
    installed and not imported yet; waits for a build in flight unless `wait` is False, so the
    answer is the one launches will get."""
    from fastlaunch import _C, _door

    if "torch" not in sys.modules:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return False, "torch is not installed"
        import torch  # noqa: F401
    in_use, why = _C.tensor_door()
    if wait and not in_use and why == _door.BUILDING:
        _door.wait_for_background()
        in_use, why = _C.tensor_door()
    return in_use, why


def _report_jit(out):
    """Triton JIT kernels served by fastlaunch.triton.enable(): fast and Triton-served calls, with
    why each call went to Triton ("first_call_of_variant": Triton compiled or looked up the variant,
    then fastlaunch bound it)."""
    mod = sys.modules.get("fastlaunch.triton_jit")
    if mod is None:
        return
    detector, why = _C.watch_detector()
    if mod._state["off"]:
        print(f"  Triton JIT kernels: not served: {mod._state['off']}", file=out)
    elif why:
        print(f"  Triton JIT kernels: changes seen through {detector} ({why})", file=out)
    from fastlaunch import triton_check

    for line in triton_check.report_lines():
        print(line, file=out)
    sites = mod.sites()
    fast = sum(c["fast"] for _, c in sites)
    total = fast + sum(c["stock"] for _, c in sites)
    print(f"  Triton JIT kernels (kernel[grid](...)): {len(sites)}, {fast} of {total} calls on the fast path",
          file=out)
    for reason, n in sorted(mod.not_bound().items()):
        print(f"  not served (Triton's own dispatch keeps them): {reason}={n}", file=out)
    for name, c in sites:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(c["stock_reasons"].items()))
        line = f"  {name}: fast={c['fast']} triton={c['stock']}"
        if "variants" in c:  # a heuristics site binds none of its own: its kernel's site does
            line += f" variants={c['variants']}"
        if c.get("pre_run"):
            line += f" pre-run-hooks-called={c['pre_run']}"
        if c.get("grid_calls"):
            line += f" grid-called={c['grid_calls']}"
        if c.get("checked"):
            line += f" checked-with-triton={c['checked']}"
        print(line + (f" triton-reasons[{reasons}]" if reasons else ""), file=out)
