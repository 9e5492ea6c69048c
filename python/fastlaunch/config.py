"""fastlaunch.config: every FASTLAUNCH_* environment variable, in one table, read in one place.

`read()` returns a Config from the environment (the process's, or a mapping given); bad values and
unknown FASTLAUNCH_* names are warned about by name and ignored. The C library reads none of them:
`import fastlaunch` gives the backends their settings from here (`_C.backend_configure`, before any
backend loads). Two are read outside this module, with the same meaning: the tensor door's switch
(by the extension, at the first tensor) and torch_npu's library path (by fastlaunch._npu_queue).
"""

from __future__ import annotations

import difflib
import os
import warnings
from dataclasses import dataclass
from typing import Mapping, Optional

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str  # "switch" (1/true/yes/on or 0/false/no/off), "path", or "choice:a|b"
    default: str
    read_by: str
    meaning: str


VARIABLES = (
    Variable("FASTLAUNCH_INDUCTOR", "switch", "off", "import fastlaunch",
             "Calls `fastlaunch.inductor.enable()` at import: torch.compile's Triton kernels launch through fastlaunch."),
    Variable("FASTLAUNCH_TRITON", "switch", "off", "import fastlaunch",
             "Calls `fastlaunch.triton.enable()` at import: every `@triton.jit` kernel's `kernel[grid](...)` goes "
             "through fastlaunch's C dispatcher."),
    Variable("FASTLAUNCH_VERIFY", "switch", "off", "fastlaunch.triton.enable()",
             "1 checks every Triton JIT call against Triton's own choice of compiled kernel (its binder, key and "
             "cache; nothing compiled or launched) on any Triton, not only on one whose key-deciding code is not in "
             "the proven set (where calls are always checked); a disagreement hands that kernel to Triton."),
    Variable("FASTLAUNCH_VERIFY_LOG", "path", "none", "fastlaunch.triton_check",
             "A file each disagreement is appended to as one JSON line (the Triton's fingerprint, the kernel, what "
             "differs): how `tools/test-versions` sees that a run with the check on had none."),
    Variable("FASTLAUNCH_LOG", "switch", "off", "import fastlaunch",
             "Logs promotions, refusals and the tensor door's build to stderr (the `fastlaunch` logger)."),
    Variable("FASTLAUNCH_CACHE_DIR", "path", "~/.cache/fastlaunch", "fastlaunch.host, the tensor door",
             "Where compiled host kernels and the tensor door (per torch build) are cached; a door already built "
             "in ~/.cache/fastlaunch is found from here too."),
    Variable("FASTLAUNCH_TENSOR_DOOR", "switch", "on", "the C extension, at the first tensor",
             "0 reads every tensor through `data_ptr()` instead of torch's C++ tensor (no C++ compiler is run)."),
    Variable("FASTLAUNCH_TENSOR_DOOR_WAIT", "switch", "off", "the C extension, at the first tensor",
             "1 builds the tensor door at the first tensor, before that launch, instead of in the background "
             "(launches read `data_ptr()` until it is ready; `python -m fastlaunch tensor-reader --build` builds "
             "it ahead of time)."),
    Variable("FASTLAUNCH_CUDA_PARAMS", "choice:array|packed", "packed", "import fastlaunch (the cuda backend's setting)",
             "`array` passes kernel arguments to cuLaunchKernel as an array of pointers instead of one packed buffer."),
    Variable("FASTLAUNCH_LIBCUDA", "path", "libcuda.so.1 (the loader's)", "import fastlaunch (the cuda backend's setting)",
             "The CUDA driver the cuda backend opens instead of the loader's libcuda.so.1; it must be the driver "
             "torch and Triton use in the process."),
    Variable("FASTLAUNCH_LIBASCENDCL", "path", "libascendcl.so", "import fastlaunch (the npu backend's setting)",
             "The Ascend ACL library to open instead of the system's."),
    Variable("FASTLAUNCH_LIBRUNTIME", "path", "libruntime.so", "import fastlaunch (the npu backend's setting)",
             "The Ascend runtime library (rtKernelLaunch) to open instead of the system's."),
    Variable("FASTLAUNCH_HIP_PARAMS", "choice:array|packed", "packed", "import fastlaunch (the hip backend's setting)",
             "How hip launches pass arguments: the packed kernarg segment, or a parameter array as Triton does."),
    Variable("FASTLAUNCH_LIBHIP", "path", "TRITON_LIBHIP_PATH, else torch's ROCm libamdhip64, else the system's",
             "import fastlaunch (the hip backend's setting)",
             "The HIP runtime (libamdhip64.so) the hip backend opens; TRITON_LIBHIP_PATH is honoured after it."),
    Variable("FASTLAUNCH_LIBTORCH_NPU", "path", "libtorch_npu.so (loaded by torch_npu)", "fastlaunch._npu_queue",
             "torch_npu's library, for its task queue, when it is not the one torch_npu loaded."),
)
_BY_NAME = {v.name: v for v in VARIABLES}
# Read by the repository's tools and tests, never by the package: known, so never warned about.
TOOL_VARIABLES = ("FASTLAUNCH_REQUIRE_REFERENCES", "FASTLAUNCH_ALLOW_NO_TRITON", "FASTLAUNCH_VERSIONS_DIR",
                  "FASTLAUNCH_INSTALL_CHECK_DIR", "FASTLAUNCH_EXPECT_NO_GIL", "FASTLAUNCH_FREETHREADED_CACHE")


@dataclass(frozen=True)
class Config:
    inductor: bool = False
    triton: bool = False
    verify: bool = False
    verify_log: Optional[str] = None
    log: bool = False
    cache_dir: str = ""
    tensor_door: bool = True
    tensor_door_wait: bool = False
    cuda_params: str = "packed"
    hip_params: str = "packed"
    libascendcl: Optional[str] = None
    libruntime: Optional[str] = None
    libtorch_npu: Optional[str] = None
    libcuda: Optional[str] = None
    libhip: Optional[str] = None


def _switch(name: str, raw: Optional[str], default: bool) -> bool:
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    warnings.warn(f"{name}={raw!r} is not a switch: use 1, true, yes or on (or 0, false, no, off); "
                  f"ignored, {'on' if default else 'off'} as by default", stacklevel=3)
    return default


def _default_cache_dir() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                        "fastlaunch")


def read(environ: Optional[Mapping[str, str]] = None) -> Config:
    """The configuration the environment gives (os.environ unless a mapping is passed)."""
    env = os.environ if environ is None else environ
    for name in sorted(k for k in env if k.startswith("FASTLAUNCH_") and k not in _BY_NAME
                       and k not in TOOL_VARIABLES):
        near = difflib.get_close_matches(name, list(_BY_NAME), n=1)
        warnings.warn(f"{name} is not a fastlaunch variable" + (f"; did you mean {near[0]}?" if near else "")
                      + " (fastlaunch.config.VARIABLES lists them)", stacklevel=2)
    params, hip_params = (_params(name, env) for name in ("FASTLAUNCH_CUDA_PARAMS", "FASTLAUNCH_HIP_PARAMS"))
    return Config(
        inductor=_switch("FASTLAUNCH_INDUCTOR", env.get("FASTLAUNCH_INDUCTOR"), False),
        triton=_switch("FASTLAUNCH_TRITON", env.get("FASTLAUNCH_TRITON"), False),
        verify=_switch("FASTLAUNCH_VERIFY", env.get("FASTLAUNCH_VERIFY"), False),
        verify_log=env.get("FASTLAUNCH_VERIFY_LOG") or None,
        log=_switch("FASTLAUNCH_LOG", env.get("FASTLAUNCH_LOG"), False),
        cache_dir=env.get("FASTLAUNCH_CACHE_DIR") or _default_cache_dir(),
        tensor_door=_switch("FASTLAUNCH_TENSOR_DOOR", env.get("FASTLAUNCH_TENSOR_DOOR"), True),
        tensor_door_wait=_switch("FASTLAUNCH_TENSOR_DOOR_WAIT", env.get("FASTLAUNCH_TENSOR_DOOR_WAIT"), False),
        cuda_params=params,
        hip_params=hip_params,
        libascendcl=env.get("FASTLAUNCH_LIBASCENDCL") or None,
        libruntime=env.get("FASTLAUNCH_LIBRUNTIME") or None,
        libtorch_npu=env.get("FASTLAUNCH_LIBTORCH_NPU") or None,
        libcuda=env.get("FASTLAUNCH_LIBCUDA") or None,
        libhip=env.get("FASTLAUNCH_LIBHIP") or env.get("TRITON_LIBHIP_PATH") or _torch_libhip(),
    )


def _params(name: str, env) -> str:
    params = env.get(name, "packed").strip() or "packed"
    if params not in ("array", "packed"):
        warnings.warn(f"{name}={params!r}: use array or packed; ignored, packed as by default", stacklevel=3)
        params = "packed"
    return params


def _torch_libhip() -> Optional[str]:
    """The libamdhip64 of torch's ROCm build (torch/lib), found without importing torch: the process
    must use the HIP runtime torch loads, as Triton's AMD driver does."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for d in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(d, "lib", "libamdhip64.so")
        if os.path.isfile(path):
            return path
    return None


def backend_settings(cfg: Config):
    """(backend, setting, value) for each backend setting the configuration gives."""
    out = [("cuda", "params", cfg.cuda_params)] + ([("cuda", "library", cfg.libcuda)] if cfg.libcuda else [])
    out += [("npu", name, value) for name, value in (("libascendcl", cfg.libascendcl), ("libruntime", cfg.libruntime))
            if value]
    out += [("hip", "params", cfg.hip_params)] + ([("hip", "library", cfg.libhip)] if cfg.libhip else [])
    return out


def markdown_table() -> str:
    """The README's configuration table, from VARIABLES."""
    rows = ["| variable | values | default | read by | what it does |", "|---|---|---|---|---|"]
    for v in VARIABLES:
        values = {"switch": "1 / 0", "path": "a path"}.get(v.kind, v.kind.partition(":")[2].replace("|", " or "))
        rows.append(f"| `{v.name}` | {values} | {v.default} | {v.read_by} | {v.meaning} |")
    return "\n".join(rows)
