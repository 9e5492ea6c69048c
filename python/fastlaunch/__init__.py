"""fastlaunch: kernel launches from compiler-generated Python wrappers at almost no cost."""

from fastlaunch._C import (  # noqa: F401
    FastLaunchError,
    FastLaunchPlanUnavailable,
    FinalizedLaunch,
    HostKernel,
    Plan,
    layout,
)
