"""The seed's layering, rebuilt in Python for the benchmarks' comparison (its behaviour, not its code):
a Python finalized call-slot object making the seed's per-call checks, then a Python planned-launch
object calling the C plan. Shared by bench, stub_bench and npu_bench (which import it; it imports
none of them)."""

from __future__ import annotations

from fastlaunch._C import FastLaunchError

try:
    import torch
except ImportError:
    torch = None


class SeedPlannedLaunch:
    """The seed's planned-launch object: Python checks, then the C entry with the packed plan."""

    def __init__(self, plan, launcher, nargs):
        self.plan = plan
        self.launcher = launcher
        self.nargs = nargs

    def __call__(self, args, stream=None):
        if len(args) != self.nargs:
            raise FastLaunchError(f"args_size_mismatch:{len(args)}:{self.nargs}", backend_submitted=False, stable=True)
        if stream is None:
            raise FastLaunchError("stream_is_none", backend_submitted=False)
        try:
            self.plan(*args, stream=stream)
        except FastLaunchError as exc:
            # The seed treats anything raised inside its C++ entry as submitted.
            raise FastLaunchError(f"backend_error:{exc.reason}", backend_submitted=True) from exc


class SeedFinalized:
    """The seed's finalized call-slot object: its per-call checks in Python, then the direct call."""

    def __init__(self, autotuner, direct, hook_lists, profiler):
        self.autotuner = autotuner
        self.direct = direct
        self.hook_lists = hook_lists
        self.profiler = profiler

    def __call__(self, *args, stream=None, benchmark_run=False, **kwargs):
        if benchmark_run or kwargs or (self.profiler is not None and getattr(*self.profiler)):
            return self.autotuner.run(*args, stream=stream, benchmark_run=benchmark_run, **kwargs)
        launchers = self.autotuner.launchers
        if len(launchers) != 1 or launchers[0] is not self.direct.launcher:
            return self.autotuner.run(*args, stream=stream)
        if any(self.hook_lists):
            return self.direct.launcher(*args, stream=stream)
        return self.direct(args, stream=stream)



def profiler_flag():
    """The profiler flag the seed reads per call (torch's), or None without torch."""
    if torch is None:
        return None
    import torch.autograd.profiler as prof

    return (prof, "_is_profiler_enabled")
