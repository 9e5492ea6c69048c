"""Stand-ins for tests and benchmarks, outside the runtime package: launchers generated the way
Inductor generates them (grid computed in Python, a runner that binds the args as Triton's launcher
does) backed by host kernels, launch hooks as Triton keeps them, a minimal autotuner, and the
adapter that binds them."""

from __future__ import annotations

from fastlaunch._C import FastLaunchPlanUnavailable, Plan
from fastlaunch.bind import Adapter

__all__ = ["HookChain", "hooks", "make_launcher", "Autotuner", "HostAdapter"]


class HookChain:
    """Launch hooks, as Triton keeps them: a list of callables; active while the list is non-empty."""

    def __init__(self):
        self.calls: list = []

    def add(self, fn):
        self.calls.append(fn)

    def remove(self, fn):
        self.calls.remove(fn)

    def __call__(self, *args, **kwargs):
        for fn in self.calls:
            fn(*args, **kwargs)


class _Hooks:
    def __init__(self):
        self.launch_enter_hook = HookChain()
        self.launch_exit_hook = HookChain()


#: the hooks host launchers call (Triton's knobs.runtime holds the equivalent for its kernels)
hooks = _Hooks()


def _runner(grid_0, grid_1, grid_2, stream, function, metadata, launch_metadata, launch_enter_hook,
            launch_exit_hook, *args):
    """Binds and submits like Triton's launcher: hooks around a call that extracts every argument
    (data_ptr() per tensor) and submits with the grid the Python launcher computed."""
    if launch_enter_hook is not None and launch_enter_hook.calls:
        launch_enter_hook(launch_metadata)
    function(*args, stream=stream, grid=(grid_0, grid_1, grid_2))
    if launch_exit_hook is not None and launch_exit_hook.calls:
        launch_exit_hook(launch_metadata)


def make_launcher(kernel, signature, *, def_args, grid, constants=None, backend: str = "host",
                  name: str = "kernel", metadata=None, **spec_extra):
    """A launcher generated the way Inductor generates them, backed by a host kernel.

    signature: kind names for every ABI argument, in order (runtime args first, then the
      ``constants``: values fixed for this launcher, such as a runtime block size).
    def_args: the names of the runtime args (the launcher's parameters).
    grid: three Python expressions over def_args and the constants' names, as Inductor writes them.
    constants: {name: value} for the fixed args (in signature order after the runtime args).
    """
    constants = dict(constants or {})
    names = list(def_args) + list(constants)
    if len(names) != len(signature):
        raise ValueError(f"signature: {len(signature)} kinds for {len(names)} arguments")
    # The binary's entry: a caller-grid plan, so each call extracts every argument and takes the
    # grid the Python launcher computed, as Triton's launcher does.
    function = Plan(kernel, list(signature), backend=backend, name=name, fixed_args=list(constants.values()))
    call_args = list(def_args)
    lines = [
        f"def launcher({', '.join([*def_args, 'stream'])}):",
        *[f"    {k} = {v!r}" for k, v in constants.items()],
        f"    grid_0 = {grid[0]}",
        f"    grid_1 = {grid[1]}",
        f"    grid_2 = {grid[2]}",
        "    runner(grid_0, grid_1, grid_2, stream, function, metadata, None, launch_enter_hook, "
        f"launch_exit_hook{''.join(', ' + a for a in call_args)})",
    ]
    scope = {
        "runner": _runner,
        "function": function,
        "metadata": metadata,
        "launch_enter_hook": hooks.launch_enter_hook,
        "launch_exit_hook": hooks.launch_exit_hook,
    }
    exec("\n".join(lines), scope)
    launcher = scope["launcher"]
    launcher.fastlaunch_spec = {
        "kernel": kernel,
        "kinds": list(signature),
        "arg_names": names,
        "fixed_args": list(constants.values()),
        "grid_exprs": tuple(grid),
        "backend": backend,
        "name": name,
        **spec_extra,
    }
    launcher.def_args = list(def_args)
    launcher.fn = kernel
    return launcher


class Autotuner:
    """The stock path in plain Python, shaped like Inductor's CachingAutotuner: a list of
    launchers, benchmarked down to one on the first call, then ``launcher(*args, stream=stream)``."""

    def __init__(self, launchers, *, name: str = "kernel", bench=None):
        self.launchers = list(launchers)
        self.inductor_meta = {"kernel_name": name}
        self.autotuned = 0
        self._bench = bench

    def autotune_to_one_config(self, *args, stream=None):
        timings = {}
        for i, launcher in enumerate(self.launchers):
            timings[launcher] = self._bench(launcher) if self._bench else float(i)
        self.launchers = [min(timings, key=timings.get)]
        self.autotuned += 1

    def run(self, *args, stream=None, benchmark_run=False, **kwargs):
        if len(self.launchers) > 1:
            self.autotune_to_one_config(*args, stream=stream)
        (launcher,) = self.launchers
        return launcher(*args, **kwargs, stream=stream)


class HostAdapter(Adapter):
    """Plans from launchers made by make_launcher: their spec names the kernel, kinds and grid."""

    def __init__(self, hook_source=None):
        self._hooks = hook_source or hooks

    def hook_lists(self, launcher):
        return (self._hooks.launch_enter_hook.calls, self._hooks.launch_exit_hook.calls)

    def build_plan(self, autotuner, launcher, args):
        spec = getattr(launcher, "fastlaunch_spec", None)
        if spec is None:
            raise FastLaunchPlanUnavailable("launcher_metadata_missing")
        # What the host backend cannot provide is refused before any plan is made (stable).
        if spec.get("workspace_size", 0) > 0:
            raise FastLaunchPlanUnavailable("launcher_workspace_required")
        if spec.get("lock_num", 0) > 0:
            raise FastLaunchPlanUnavailable("launcher_sync_block_lock_required")
        nfixed = len(spec["fixed_args"])
        nruntime = len(spec["kinds"]) - nfixed
        if len(args) != nruntime:
            raise FastLaunchPlanUnavailable(f"args_size_mismatch:{len(args)}:{nruntime}")
        try:
            return Plan(spec["kernel"], spec["kinds"], backend=spec["backend"], owner=launcher,
                        fixed_args=spec["fixed_args"], grid_exprs=list(spec["grid_exprs"]),
                        arg_names=spec["arg_names"], name=spec["name"])
        except (ValueError, TypeError, OverflowError) as exc:
            # A malformed spec will not get better on the next call: a stable refusal.
            raise FastLaunchPlanUnavailable(f"plan_creation_error:{type(exc).__name__}:{exc}") from exc

