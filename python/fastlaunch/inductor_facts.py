"""Every fact the Inductor adapter (inductor.py, inductor_abi.py) reads from the launcher torch
generates and from its autotuner, listed here and checked when a call site is bound: a torch whose
launcher or autotuner does not match one of them has that call site refused with the fact's name
(`torch_launcher_unrecognised:<fact>`; the stock launcher runs), never guessed.

The launcher is checked by running it once, at bind, with the bound call's arguments and a runner
that records what it is given instead of launching (its other globals as they are; the binary seen
only through its launch_metadata): the arguments the launcher passes, their order and the grid it
computes are then compared with what the plan packs and computes. A torch whose launcher gains an
argument, drops one, reorders them, passes them otherwise than as given, or computes its grid
otherwise is refused here.
"""

from __future__ import annotations

import dis
import types

from fastlaunch._C import FastLaunchPlanUnavailable

FACTS = {
    "autotuner.inductor_meta": "a dict; its grid_type names the launcher's grid (GridExpr), computed inside the launcher",
    "autotuner.triton_meta": "a dict whose signature is a dict of the kernel's parameters to Triton types, in order",
    "autotuner.fn.arg_names": "the kernel's parameter names, a list of str",
    "launcher.parameters": "a Python function `launcher(<the call's arguments>, stream)`, config at launcher.config",
    "launcher.runner": "it calls `runner` from its globals once, with positional arguments only, and calls no "
                       "other global that launches (the binary is read only for its launch_metadata)",
    "launcher.runner_prefix": "runner's arguments begin grid_0, grid_1, grid_2, stream (torch's static launcher), or "
                              "those, then the scope's function, metadata, a launch metadata, launch_enter_hook and "
                              "launch_exit_hook (Triton's launcher)",
    "launcher.runner_args": "then the launcher's own arguments, each as given, in its own order, every one the plan "
                            "packs among them (constants Triton's launcher drops as literals; a host-side TMA "
                            "argument as the descriptor the launcher builds)",
    "launcher.grid": "the grid the launcher passes is the plan's for the same arguments",
}


def refuse(fact, detail=""):
    assert fact in FACTS, fact
    return FastLaunchPlanUnavailable(f"torch_launcher_unrecognised:{fact}" + (f":{detail}" if detail else ""))


def check_autotuner(autotuner):
    """The autotuner's facts: raises FastLaunchPlanUnavailable naming the first that does not hold."""
    meta = getattr(autotuner, "inductor_meta", None)
    if not isinstance(meta, dict):
        raise refuse("autotuner.inductor_meta")
    triton_meta = getattr(autotuner, "triton_meta", None)
    if not isinstance(triton_meta, dict) or not isinstance(triton_meta.get("signature"), dict):
        raise refuse("autotuner.triton_meta")
    names = getattr(getattr(autotuner, "fn", None), "arg_names", None)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise refuse("autotuner.fn.arg_names")


class _Int(int):
    """An int argument as the probe passes it: the same value, its own identity."""


class _Float(float):
    pass


class _Binary:
    """The binary as the probed launcher sees it: its launch_metadata only."""

    def __init__(self, binary):
        self._launch_metadata = getattr(binary, "launch_metadata", None)

    def launch_metadata(self, *args, **kwargs):
        if self._launch_metadata is None:
            raise AttributeError("launch_metadata")
        return self._launch_metadata(*args, **kwargs)


def _globals_loaded(code):
    names = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(ins.argval if isinstance(ins.argval, str) else str(ins.argval))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_loaded(const)
    return names


def _mark(v):
    if type(v) is int:
        return _Int(v)
    if type(v) is float:
        return _Float(v)
    return v


def probe(launcher, args, static):
    """(runner's positional arguments, the probe's arguments, the stream passed): the launcher run
    with a recording runner. Raises FastLaunchPlanUnavailable naming the fact that fails."""
    code = getattr(launcher, "__code__", None)
    scope = getattr(launcher, "__globals__", None)
    if code is None or not isinstance(scope, dict) or not isinstance(launcher, types.FunctionType):
        raise refuse("launcher.parameters")
    names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    varargs = code.co_flags & (0x04 | 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    if not names or names[-1] != "stream" or len(names) != len(args) + 1 or varargs:
        raise refuse("launcher.parameters", f"{len(names)}:{len(args)}")
    loaded = _globals_loaded(code)
    binary = scope.get("bin")
    launching = {id(scope.get("runner")), id(static), id(getattr(static, "run", None)), id(getattr(binary, "run", None))}
    if "runner" not in loaded or any(id(scope.get(n)) in launching - {id(None)} for n in loaded - {"runner", "bin"}):
        raise refuse("launcher.runner", "globals")
    calls = []

    def runner(*a, **kw):
        calls.append((a, kw))

    probe_scope = dict(scope, runner=runner)
    if "bin" in scope:
        probe_scope["bin"] = _Binary(binary)
    # torch 2.15's static launcher builds host-side TMA descriptors before its runner: not built for the
    # probe (they would be encoded, an unaligned tensor copied); each stands as no value where it goes.
    if "expand_host_tma_descriptor" in scope:
        probe_scope["expand_host_tma_descriptor"] = lambda *a, **k: ()
    if "_host_tma_aligned" in scope:
        probe_scope["_host_tma_aligned"] = lambda tensor, name: tensor
    fn = types.FunctionType(code, probe_scope, code.co_name, launcher.__defaults__, launcher.__closure__)
    given = [_mark(a) for a in args]
    stream = _Int(0x7F00DEAD0000)
    try:
        fn(*given, stream)
    except Exception as exc:  # noqa: BLE001 - whatever it is, not the launcher modelled here
        raise refuse("launcher.runner", type(exc).__name__) from exc
    if len(calls) != 1 or calls[0][1]:
        raise refuse("launcher.runner", f"{len(calls)} calls")
    return calls[0][0], given, stream


def check_launcher(autotuner, launcher, args, *, static, ignore, plan_grid, signature, host_tma):
    """The launcher's facts against the plan: runner's prefix, the arguments it passes, the grid.
    plan_grid: the grid the plan computes for args (or None where the call's own values are the
    grid: then the launcher's must be those). Raises FastLaunchPlanUnavailable naming the fact."""
    passed, given, stream = probe(launcher, args, static)
    if len(passed) < 4 or passed[3] is not stream:
        raise refuse("launcher.runner_prefix", "stream")
    scope = launcher.__globals__
    if static is not None:
        rest = passed[4:]
    else:
        head = passed[4:9]
        want = (scope.get("function"), scope.get("metadata"), None, scope.get("launch_enter_hook"),
                scope.get("launch_exit_hook"))
        if len(head) != 5 or any(head[i] is not want[i] for i in (0, 1, 3, 4)):
            raise refuse("launcher.runner_prefix", "triton")
        rest = passed[9:]
    positions, literals = [], []
    for j, v in enumerate(rest):
        at = next((i for i, g in enumerate(given) if g is v and (type(g) in (_Int, _Float) or not isinstance(
            g, (bool, int, float, str, type(None))))), None)
        if at is not None:
            positions.append(at)
        elif isinstance(v, (bool, int, float, str, type(None))) and type(v) not in (_Int, _Float):
            literals.append(j)  # a constant Inductor writes as a literal (Triton's launcher drops constexprs)
        elif not host_tma:
            raise refuse("launcher.runner_args", f"foreign:{type(v).__name__}")
    if positions != sorted(positions) or len(set(positions)) != len(positions):
        raise refuse("launcher.runner_args", "order")
    packed = [i for i in range(len(args)) if i not in set(ignore or ())]
    if host_tma:
        packed = [i for i in packed if i in positions]  # a descriptor argument: passed as the launcher builds it
    if [i for i in positions if i in packed] != packed or any(i not in positions for i in packed):
        raise refuse("launcher.runner_args", f"passed {positions}, packed {packed}")
    if host_tma:
        pass  # a descriptor's expansion (its map, shape and strides) stands where its tensor was
    elif static is not None and literals:
        raise refuse("launcher.runner_args", f"{len(literals)} literals")  # the static binary takes every value
    elif literals:  # one value per kernel parameter, each literal a constant's (Triton's launcher drops them)
        names = list(autotuner.fn.arg_names)
        consts = set(getattr(getattr(launcher, "config", None), "kwargs", None) or ())
        consts |= set((autotuner.triton_meta.get("constants") or {}).keys()) | {"num_warps", "num_stages"}
        consts |= {n for n, t in signature.items() if t == "constexpr"}
        if len(rest) != len(names):
            raise refuse("launcher.runner_args", f"{len(rest)} values for {len(names)} parameters")
        odd = [names[j] for j in literals if names[j] not in consts]
        if odd:
            raise refuse("launcher.runner_args", f"a literal for {odd[0]}")
    grid = tuple(int(g) for g in passed[:3])
    if plan_grid is not None and grid != tuple(plan_grid):
        raise refuse("launcher.grid", f"{grid}:{tuple(plan_grid)}")
