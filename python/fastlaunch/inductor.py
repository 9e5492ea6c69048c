"""PyTorch Inductor: one call makes torch.compile launch every Triton kernel through fastlaunch.

``enable()`` wraps ``CachingAutotuner.__init__`` and ``__setstate__`` so that each kernel autotuner
Inductor creates from then on gets a bound launch as its call slot: the instance attribute ``run``,
which the generated ``kernel.run(*args, stream=stream0)`` finds before the class method. Autotuners
reach the generated code two ways: built in this process (``__init__``), or built in a compile
worker and unpickled here (``__setstate__``: parallel compile, the default on any machine with more
than one core, and the statically launchable autotuners of the FX graph cache). ``disable()`` removes the
wrapper and every slot it filled. ``FASTLAUNCH_INDUCTOR=1`` calls ``enable()`` when fastlaunch is
imported.

What each torch version has is detected by feature: the launcher list, grids computed inside the
launcher (GridExpr), static and non-static launchers (their scope), the cached fast launcher.
torch_npu's autotuners (NPUCachingAutotuner and kin) run CachingAutotuner's __init__ too; they are
told apart by their device type and served by NpuInductorAdapter (runtime blocks, GridNpu, the npu
backend), unless torch_npu's own fast launch owns their call slots.
"""

from __future__ import annotations

import ast
import contextlib
import os
import functools
import logging
import threading
import weakref

from fastlaunch._C import FastLaunchPlanUnavailable, FinalizedLaunch, Plan
from fastlaunch import inductor_facts
from fastlaunch.bind import Adapter, BoundLaunch, bind, members
from fastlaunch.inductor_abi import abi_of_launcher, device_type as _device_type, launch_target, scope_of as _scope
from fastlaunch.inductor_abi import static_kernel as _static_kernel

log = logging.getLogger("fastlaunch")

_lock = threading.Lock()
_state: dict = {}


# ---- grids ----
def grid_exprs_of(inductor_meta, config) -> list:
    """The launcher's three grid expressions (as Inductor writes them in the launcher), with the
    prefix assignments (the y/z overflow split) inlined, ready for the grid program compiler."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    return _exprs_of_grid(GridExpr.from_meta(inductor_meta, config))


def _exprs_of_grid(grid) -> list:
    """A GridExpr's three expressions with its prefix assignments inlined."""
    env = {}
    for line in grid.prefix:
        try:
            tree = ast.parse(line.strip(), mode="exec")
        except SyntaxError:
            tree = None
        if (tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign)
                or len(tree.body[0].targets) != 1 or not isinstance(tree.body[0].targets[0], ast.Name)):
            raise FastLaunchPlanUnavailable(f"grid_prefix_unsupported:{line.strip()[:60]}")
        env[tree.body[0].targets[0].id] = _Inline(env).visit(tree.body[0].value)
    return [_inline(str(e), env) for e in (grid.x_grid, grid.y_grid, grid.z_grid)]


class _Inline(ast.NodeTransformer):
    """Replaces each name bound by an earlier prefix assignment with its (already inlined) value."""

    def __init__(self, env):
        self.env = env

    def visit_Name(self, node):
        return self.env.get(node.id, node)


def _inline(expr: str, env) -> str:
    """`expr` with the names in env (name -> an AST node, or an int) replaced; exact, by the AST."""
    nodes = {k: (v if isinstance(v, ast.AST) else ast.Constant(int(v))) for k, v in env.items()}
    tree = _Inline(nodes).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(tree)


# ---- launchers ----
def _def_args(launcher):
    code = getattr(launcher, "__code__", None)
    if code is None:
        raise FastLaunchPlanUnavailable("launcher_not_generated")
    names = list(code.co_varnames[:code.co_argcount])
    if names and names[-1] == "stream":
        names = names[:-1]
    return names


def _ignored_positions(call_names, abi_names, folded, grid_names=()):
    """Positions of the call's arguments the plan skips: those not in the binary's ABI, allowed when
    Triton folded their value in or they hold the grid (grid_names), refused otherwise; the rest must
    be the ABI's, in its order."""
    ignore = [i for i, n in enumerate(call_names) if n not in abi_names]
    for i in ignore:
        if call_names[i] not in folded and call_names[i] not in grid_names:
            raise FastLaunchPlanUnavailable(f"runtime_arg_not_in_abi:{call_names[i]}")
    if [n for n in call_names if n in abi_names] != list(abi_names):
        raise FastLaunchPlanUnavailable(f"launcher_abi_mismatch:{len(call_names)}:{len(abi_names)}")
    return ignore


def _fixed_grid_names(meta):
    """The launcher's grid arguments (torch 2.15's FixedGrid: template kernels take their grid as
    their last three arguments), or () where the launcher computes its grid."""
    extra = list(meta.get("extra_launcher_args") or ())
    if not extra:
        return ()
    if meta.get("grid_type") != "FixedGrid" or len(extra) != 3 or list(meta.get("fixed_grid") or ()) != extra:
        raise FastLaunchPlanUnavailable("extra_launcher_args_unsupported")
    return tuple(extra)


def _torch_npu_fast_launch_on() -> bool:
    """torch_npu's own Inductor fast launch (torch_npu 2.14: TORCHINDUCTOR_NPU_FAST_LAUNCH, read
    into torch_npu._inductor.config.enable_fast_launch), or its patch installed (the generated
    wrappers then call torch_npu's own call slots, whatever the flag says later)."""
    import sys

    for module, cls in (("torch_npu._inductor.runtime.triton_heuristics", "TritonCompileResultNpu"),
                        ("torch_npu._inductor.codegen.wrapper", "NPUPythonWrapperCodeGen")):
        if getattr(getattr(sys.modules.get(module), cls, None), "_npu_fast_launch_patched", False):
            return True
    config = sys.modules.get("torch_npu._inductor.config")
    if config is not None and hasattr(config, "enable_fast_launch"):
        return bool(config.enable_fast_launch)
    return os.environ.get("TORCHINDUCTOR_NPU_FAST_LAUNCH", "").strip().lower() in ("1", "true")


def _debug_mode_module():
    """The module holding DebugMode's active count: a package from torch 2.13 on, a single module
    before (torch 2.11, 2.12); absent before that."""
    import importlib

    for name in ("torch.utils._debug_mode._mode", "torch.utils._debug_mode"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "_ACTIVE_DEBUG_MODE_COUNT"):
            return mod
    return None


class InductorAdapter(Adapter):
    """Promotion policy for Inductor's CachingAutotuner.

    backend: "cuda" launches the Triton binary through the driver. For tests without a GPU,
    backend="host" with a ``kernel_resolver(autotuner, launcher) -> HostKernel`` stands a host
    kernel in for the binary; everything else (launchers, grids, checks) is Inductor's own.
    """

    def __init__(self, backend: str = "cuda", kernel_resolver=None):
        self.backend = backend
        self.kernel_resolver = kernel_resolver

    # -- when not to bind or not to promote --
    def bind_refusal(self, autotuner):
        if type(autotuner).__name__ == "DebugAutotuner" or (getattr(autotuner, "inductor_meta", None) or {}).get(
                "profile_bandwidth"):
            return "debug_autotuner"  # it benchmarks on every call by design
        if _device_type(autotuner) == "npu" and not isinstance(self, NpuInductorAdapter):
            return "npu:needs_npu_adapter"  # enable() hands torch_npu's autotuners to NpuInductorAdapter
        return super().bind_refusal(autotuner)

    def static_stock_reason(self, autotuner):
        if getattr(autotuner, "triton_interpret", False):
            return "triton_interpret"
        if getattr(autotuner, "dump_launch_params", False):
            return "dump_launch_params"
        if getattr(autotuner, "dump_launch_tensors", False):
            return "dump_launch_tensors"
        if getattr(autotuner, "_plugins", None):
            return "autotuner_plugins"
        return None

    def flags(self):
        out = []
        try:
            import torch.autograd.profiler as prof

            if hasattr(prof, "_is_profiler_enabled"):
                out.append((prof, "_is_profiler_enabled", "profiler"))
        except ImportError:
            pass
        dm = _debug_mode_module()
        if dm is not None:
            out.append((dm, "_ACTIVE_DEBUG_MODE_COUNT", "debug_mode"))
        return out

    def ready(self, autotuner, launcher):
        meta = getattr(autotuner, "inductor_meta", None) or {}
        config = getattr(launcher, "config", None)
        if getattr(launcher, "store_cubin", False) and not getattr(autotuner, "cuda_kernel_saved", False):
            return False
        if meta.get("coordinate_descent_tuning") and not getattr(config, "found_by_coordesc", False):
            return False
        if meta.get("combo_tuning_groups") and not getattr(config, "found_by_combo_autotune", False):
            return False
        return True

    def _hooks(self, launcher):
        scope = _scope(launcher)
        if _static_kernel(launcher) is not None:
            return ()  # static launchers call no hooks, the stock path neither
        return tuple(scope.get(n) for n in ("launch_enter_hook", "launch_exit_hook") if scope.get(n) is not None)

    def hook_lists(self, launcher):
        return tuple(h.calls for h in self._hooks(launcher) if isinstance(getattr(h, "calls", None), list))

    def hook_flags(self, launcher):
        # Each hook name of the launcher's scope that holds no list-based hook: active while set
        # (the C entry reads the scope dict, watched). Static launchers call no hooks.
        scope = _scope(launcher)
        if _static_kernel(launcher) is not None or not isinstance(scope, dict):
            return []
        return [(scope, n, "launch_hooks") for n in ("launch_enter_hook", "launch_exit_hook")
                if not isinstance(getattr(scope.get(n), "calls", None), list)]

    def legacy_hooks_active(self, launcher):
        return any(not isinstance(getattr(h, "calls", None), list) for h in self._hooks(launcher))

    # -- the plan --
    def build_plan(self, autotuner, launcher, args):
        inductor_facts.check_autotuner(autotuner)  # what is read below: each fact checked (inductor_facts)
        meta = getattr(autotuner, "inductor_meta", None) or {}
        if "grid_type" not in meta:
            raise FastLaunchPlanUnavailable("grid_outside_launcher")  # older Inductor passes grid=
        grid_names = _fixed_grid_names(meta)
        def_args = _def_args(launcher)
        if len(args) != len(def_args):
            raise FastLaunchPlanUnavailable(f"args_size_mismatch:{len(args)}:{len(def_args)}")
        abi = abi_of_launcher(autotuner, launcher, args, def_args)
        ignore = _ignored_positions(def_args, abi.call_names, abi.folded, grid_names)
        from torch._inductor.runtime.triton_heuristics import GridExpr

        exprs = _exprs_of_grid(GridExpr.from_meta(meta, launcher.config))
        if grid_names and exprs != list(grid_names):
            raise FastLaunchPlanUnavailable("fixed_grid_unrecognised")
        grid = None if grid_names else [_inline(e, {n: v for n, v in abi.folded.items() if n in def_args}) for e in exprs]
        options, abi_name, backend, trailing, _ = launch_target(self.backend, autotuner, launcher)
        names = abi.names + ["global_scratch", "profile_scratch"][:len(trailing)]
        kernel = self._kernel(autotuner, launcher)
        try:
            # The binary's ABI whenever its own options apply (a cuda or hip plan, or the null
            # backend measuring one); host kernels standing in for the GPU take the host ABI.
            plan = Plan(kernel, abi.kinds + trailing, backend=backend, abi=abi_name, options=options or None,
                        owner=launcher, grid_exprs=grid, arg_names=names, name=meta.get("kernel_name"),
                        ignore=ignore or None, tensor_maps=abi.maps or None,
                        tensor_map_geometry=abi.geometry or None)
        except (ValueError, TypeError, OverflowError) as exc:
            raise FastLaunchPlanUnavailable(f"plan_creation_error:{type(exc).__name__}") from exc
        # The launcher torch generated, run once with a recording runner: what it passes and the grid
        # it computes are what the plan packs and computes (inductor_facts), else refused by name.
        static = _static_kernel(launcher) if self.kernel_resolver is None else None
        grid_now = tuple(args[def_args.index(n)] for n in grid_names) if grid_names else plan.resolve_grid(*args)
        inductor_facts.check_launcher(autotuner, launcher, args, static=static, ignore=ignore, plan_grid=grid_now,
                                      signature=autotuner.triton_meta["signature"],
                                      host_tma=bool(meta.get("host_tma_descriptor_args")))
        if grid_names:
            return plan  # the call's own values are the grid
        # One-time check that the grid program computes what the launcher's Python computes.
        expected = GridExpr.from_meta(meta, launcher.config).eval_slow(dict(zip(def_args, args)))
        if tuple(expected) != tuple(grid_now):
            raise FastLaunchPlanUnavailable(f"grid_program_mismatch:{tuple(expected)}:{grid_now}")
        return plan

    def entry_options(self, autotuner, launcher, plan):
        """The entry's grid positions (FixedGrid) and global scratch, as build_plan found them."""
        out = {}
        grid_names = _fixed_grid_names(getattr(autotuner, "inductor_meta", None) or {})
        if grid_names:
            def_args = _def_args(launcher)
            out["grid_args"] = tuple(def_args.index(n) for n in grid_names)
        scratch = launch_target(self.backend, autotuner, launcher)[4]
        if scratch is not None:
            out["scratch"] = scratch
        return out

    def _kernel(self, autotuner, launcher):
        if self.kernel_resolver is not None:
            return self.kernel_resolver(autotuner, launcher)
        static = _static_kernel(launcher)
        if static is not None:
            return int(static.function)
        function = _scope(launcher).get("function")
        if not function:
            binary = _scope(launcher).get("bin")
            function = getattr(binary, "function", None)
        if not function:
            raise FastLaunchPlanUnavailable("kernel_function_missing")
        return int(function)


# ---- torch_npu's Inductor ----
def _torch_npu_debug_mode():
    """torch_npu's accuracy-check and FX-dump modes (INDUCTOR_ASCEND_CHECK_ACCURACY,
    INDUCTOR_ASCEND_DUMP_FX_GRAPH): its run() then dumps or compares around every launch."""
    import sys

    config = sys.modules.get("torch_npu._inductor.config")
    for name in ("dump_fx_graph", "check_accuracy"):
        if config is not None and getattr(config, name, False):
            return name
    return None


def _npu_grid_of(autotuner, launcher, numels, block_names):
    """The GridExpr torch_npu's make_launcher wrote into this launcher, rebuilt by its own code
    (found by feature in the module of the autotuner's class or a base class)."""
    import sys

    meta = autotuner.inductor_meta
    for klass in type(autotuner).__mro__:
        mod = sys.modules.get(klass.__module__)
        create = getattr(mod, "_create_launcher_grid", None)
        if create is not None:
            return create(meta, launcher.config, numels, block_names)
        grid_expr = getattr(mod, "GridExprNpu", None)
        if grid_expr is not None and hasattr(grid_expr, "from_meta_and_set_numel"):
            return grid_expr.from_meta_and_set_numel(meta, launcher.config, numels)
    raise FastLaunchPlanUnavailable("npu:grid_builder_missing")


class NpuInductorAdapter(InductorAdapter):
    """Promotion policy for torch_npu's Inductor autotuners (NPUCachingAutotuner and the cost-model
    and FastA variants that share its run()), launching Triton-Ascend kernels on the npu backend.

    Their run() differs from torch's: the autotuner picks `best_launcher` and `best_runtime_blocks`
    (block sizes chosen at run time, not compiled in), then calls
    `launcher(*args, *runtime_blocks, stream=stream)` through `_build_runtime_launch_args`. The plan
    keeps those block sizes as fixed trailing arguments of the packed struct and inlines them into
    torch_npu's grid (GridNpu / GridExprNpu); the call's own arguments are the runtime ones.

    run() sets best_launcher and best_runtime_blocks together, once (it never tunes again after),
    and narrows `launchers` to that launcher: the entry follows the launcher list as it does for
    torch's autotuners, and the blocks fixed in the plan are the ones run() would append.

    One owner per call slot: with torch_npu's own fast launch on (TORCHINDUCTOR_NPU_FAST_LAUNCH),
    its generated code calls its own slot, and these autotuners are left to it (not bound).
    Grouped autotuners (runtime blocks chosen per call by group) are not bound either.
    """

    def __init__(self, backend: str = "npu"):
        super().__init__(backend=backend)

    def bind_refusal(self, autotuner):
        meta = getattr(autotuner, "inductor_meta", None) or {}
        if type(autotuner).__name__ in ("DebugAutotuner", "NPUDebugAutotuner") or meta.get("profile_bandwidth"):
            return "debug_autotuner"
        if _torch_npu_fast_launch_on():
            return "npu:torch_npu_fast_launch_owns"
        if meta.get("group_enabled") or hasattr(autotuner, "best_launcher_map"):
            return "npu:grouped_autotuner"
        if not callable(getattr(type(autotuner), "_build_runtime_launch_args", None)):
            return "npu:autotuner_unrecognised"  # not torch_npu's run() as fastlaunch knows it
        return None

    def static_stock_reason(self, autotuner):
        debug = _torch_npu_debug_mode()
        if debug is not None:
            return f"npu:{debug}"
        return super().static_stock_reason(autotuner)

    def ready(self, autotuner, launcher):
        # run() has autotuned once best_launcher is set (it never tunes again after that).
        return getattr(autotuner, "best_launcher", None) is launcher

    def _runtime_blocks(self, autotuner):
        names = tuple(getattr(autotuner, "runtime_block_arg_names", None) or ())
        values = tuple(getattr(autotuner, "best_runtime_blocks", None) or ())
        if len(names) != len(values) or not all(isinstance(v, int) for v in values):
            raise FastLaunchPlanUnavailable(f"npu:runtime_blocks_unrecognised:{len(names)}:{len(values)}")
        return names, values

    def call_launcher(self, autotuner, launcher, args, stream):
        _, values = self._runtime_blocks(autotuner)
        return launcher(*autotuner._build_runtime_launch_args(args, values), stream=stream)

    def build_plan(self, autotuner, launcher, args):
        from fastlaunch import ascend

        meta = getattr(autotuner, "inductor_meta", None) or {}
        if meta.get("extra_launcher_args"):
            raise FastLaunchPlanUnavailable("extra_launcher_args_unsupported")
        if getattr(launcher, "store_cubin", False):
            raise FastLaunchPlanUnavailable("npu:store_cubin")  # torch_npu's run saves it on every call
        binary = _scope(launcher).get("bin")
        src = getattr(binary, "src", None)
        if src is None or getattr(binary, "metadata", None) is None:
            raise FastLaunchPlanUnavailable("compiled_kernel_unrecognised")
        block_names, block_values = self._runtime_blocks(autotuner)
        launch_args = tuple(autotuner._build_runtime_launch_args(tuple(args), block_values))
        if (len(launch_args) != len(args) + len(block_values)
                or any(a is not b for a, b in zip(launch_args, args)) or launch_args[len(args):] != block_values):
            raise FastLaunchPlanUnavailable("npu:runtime_launch_args_unrecognised")
        fn = getattr(src, "fn", None) or getattr(autotuner, "fn", None)
        arg_names = list(getattr(fn, "arg_names", None) or [])
        names, kinds, folded = ascend.abi_and_folded(getattr(src, "signature", None), getattr(src, "constants", None),
                                                     arg_names)
        def_args = _def_args(launcher)
        nb = len(block_names)
        if len(def_args) != len(launch_args):
            raise FastLaunchPlanUnavailable(f"args_size_mismatch:{len(launch_args)}:{len(def_args)}")
        if tuple(def_args[len(def_args) - nb:]) != block_names:
            raise FastLaunchPlanUnavailable("npu:runtime_blocks_not_last_in_launcher")
        call_names = def_args[:len(def_args) - nb]
        # The struct: the call's arguments in ABI order, then the runtime blocks it holds (fixed).
        fixed_names = [n for n in block_names if n in names]
        if names[len(names) - len(fixed_names):] != fixed_names or any(n in block_names for n in
                                                                         names[:len(names) - len(fixed_names)]):
            raise FastLaunchPlanUnavailable("npu:runtime_blocks_not_last_in_abi")
        runtime_names = names[:len(names) - len(fixed_names)]
        ignore = _ignored_positions(call_names, runtime_names, folded)
        values = dict(zip(block_names, block_values))
        fixed = [values[n] for n in fixed_names]
        numels = [a for a in (getattr(autotuner.fn, "arg_names", None) or arg_names) if "_numel" in a]
        grid_expr = _npu_grid_of(autotuner, launcher, numels, block_names)
        env = {n: v for n, v in folded.items() if n in call_names}
        env.update(values)
        grid = [_inline(e, env) for e in _exprs_of_grid(grid_expr)]
        options = ascend.options_of(binary.metadata)
        if self.backend == "npu":
            kernel = int(_scope(launcher).get("function") or ascend.stub_of(binary))
        else:
            kernel, _ = 0, options.pop("rt_stub", None)
        try:
            plan = Plan(kernel, kinds, backend=self.backend, abi="npu", options=options, owner=launcher,
                        grid_exprs=grid, arg_names=names, name=meta.get("kernel_name"),
                        fixed_args=fixed or None, ignore=ignore or None)
        except (ValueError, TypeError, OverflowError) as exc:
            raise FastLaunchPlanUnavailable(f"plan_creation_error:{type(exc).__name__}") from exc
        # One-time check against what the launcher's own Python computes for this call.
        expected = grid_expr.eval_slow(dict(zip(def_args, launch_args)))
        got = plan.resolve_grid(*args)
        if tuple(expected) != tuple(got):
            raise FastLaunchPlanUnavailable(f"grid_program_mismatch:{tuple(expected)}:{got}")
        return plan


# ---- enable / disable ----
def _bind_new(autotuner):
    """Binds an autotuner just made (its __init__ or __setstate__, in any compiling thread), under the
    lock disable() takes: a bound launch made beside a disable() would be left in its slot."""
    with _lock:
        state = _state
        if state and (state["everywhere"] or state["scopes"]):
            adapter = state["npu_adapter"] if _device_type(autotuner) == "npu" else state["adapter"]
            b = bind(autotuner, adapter)
            if b is not None:
                state["bound"].add(b)


def enable(adapter: InductorAdapter | None = None, npu_adapter: "NpuInductorAdapter | None" = None) -> None:
    """From now on, every CachingAutotuner Inductor creates or unpickles gets a bound launch in its
    call slot: torch's own, and torch_npu's (they subclass it and run its __init__; they are told
    apart by their device type and served by `npu_adapter`)."""
    with _lock:
        _install(adapter, npu_adapter)
        _state["everywhere"] = True
    log.info("fastlaunch: Inductor integration enabled")


@contextlib.contextmanager
def scope(adapter: InductorAdapter | None = None, npu_adapter: "NpuInductorAdapter | None" = None):
    """`with fastlaunch.inductor.scope(): ...`: binds the autotuners Inductor creates (or unpickles)
    while the block runs, in any thread, and only those: torch.compile compiles at a function's first
    call, so that call belongs inside the block. What was bound stays bound after it; `disable()`
    unbinds everything."""
    with _lock:
        _install(adapter, npu_adapter)
        _state["scopes"] += 1
    try:
        yield
    finally:
        with _lock:
            if _state:
                _state["scopes"] -= 1


def _install(adapter, npu_adapter) -> None:
    """Wraps CachingAutotuner's __init__ and pickling once (under _lock); they bind a new autotuner
    while enable() is on or a scope() is open."""
    from torch._inductor.runtime import triton_heuristics as th

    if _state:
        _state["adapter"] = adapter or _state["adapter"]
        _state["npu_adapter"] = npu_adapter or _state["npu_adapter"]
        return
    cls = th.CachingAutotuner
    original_init = cls.__dict__["__init__"]
    original_getstate = cls.__dict__.get("__getstate__")
    original_setstate = cls.__dict__.get("__setstate__")
    _state.update(cls=cls, init=original_init, getstate=original_getstate, setstate=original_setstate,
                  adapter=adapter or InductorAdapter(), npu_adapter=npu_adapter or NpuInductorAdapter(),
                  bound=weakref.WeakSet(), everywhere=False, scopes=0)

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _bind_new(self)

    def __getstate__(self):
        # The slot is runtime state: pickled autotuners leave it behind.
        slot = vars(self).get("run")
        saved = vars(self).pop("run") if isinstance(slot, (BoundLaunch, FinalizedLaunch)) else None
        try:
            if original_getstate is not None:
                return original_getstate(self)
            return dict(vars(self))
        finally:
            if saved is not None:
                vars(self)["run"] = saved

    def __setstate__(self, state):
        # An autotuner compiled in a worker process (or kept by the FX graph cache) arrives
        # here, never through __init__.
        if original_setstate is not None:
            original_setstate(self, state)
        else:
            vars(self).update(state)
        _bind_new(self)

    __init__._fastlaunch = True
    __setstate__._fastlaunch = True
    cls.__init__ = __init__
    cls.__getstate__ = __getstate__
    cls.__setstate__ = __setstate__


def disable() -> None:
    """Removes the wrappers and every call slot fastlaunch filled; leaves no trace."""
    with _lock:
        if not _state:
            return
        cls = _state["cls"]
        cls.__init__ = _state["init"]
        for name in ("getstate", "setstate"):
            if _state[name] is not None:
                setattr(cls, f"__{name}__", _state[name])
            else:
                delattr(cls, f"__{name}__")
        for b in members(_state["bound"]):
            b.uninstall()
        _state.clear()
    log.info("fastlaunch: Inductor integration disabled")


def enabled() -> bool:
    """Whether enable() is on (a scope() alone does not count)."""
    return bool(_state) and _state["everywhere"]
