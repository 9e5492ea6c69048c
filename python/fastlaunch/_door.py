"""fastlaunch._door: builds fastlaunch._tensor, the C++ module that reads a torch tensor's data pointer
through torch's own C++ object, at first use against the torch this process imported, and caches it
per torch build, as Triton compiles its launcher. pip's isolated build has no torch, so the wheel
cannot carry it; without a C++ compiler, or when it cannot load, tensors are read through
data_ptr() (about ten times slower per tensor) and report() says why and what to do.

The C extension calls load() once, at the first tensor-like argument after `import torch`.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading

_log = logging.getLogger("fastlaunch")
_lock = threading.Lock()
_SOURCES = ("tensor_door.cpp", "tensor_door.h")
# As meson's release build compiles C++: optimized, torch's debug-only checks off. Part of the key.
_FLAGS = ("-O3", "-DNDEBUG", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden")


def source_dir() -> str:
    """Where the C++ source is: installed next to this file, or src/tensor in a checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "_tensor_src")
    here = os.path.dirname(os.path.realpath(__file__))
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(here)), "src", "tensor")


def cache_dirs() -> list:
    """FASTLAUNCH_CACHE_DIR first when set, then the user's cache: a door built once for a torch is
    found from either."""
    from fastlaunch import config

    dirs = [config.read().cache_dir, config._default_cache_dir()]
    return [os.path.join(d, "tensor") for d in dict.fromkeys(dirs)]


def compiler() -> list | None:
    """The C++ compiler: $CXX when set (None when it is not there), else c++, g++ or clang++."""
    cxx = os.environ.get("CXX")
    if cxx:
        words = shlex.split(cxx)
        return words if words and shutil.which(words[0]) else None
    for name in ("c++", "g++", "clang++"):
        if shutil.which(name):
            return [name]
    return None


def _torch_facts(torch) -> dict:
    base = os.path.dirname(os.path.abspath(torch.__file__))
    return {
        "version": str(torch.__version__),
        "git": str(getattr(getattr(torch, "version", None), "git_version", "")),
        "dir": base,
        "cxx11_abi": int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))),
    }


def path_for(torch, cxx=None) -> str:
    """Where the door for this torch, this Python and this compiler lives in the first cache dir."""
    facts = _torch_facts(torch)
    h = hashlib.sha256()
    for name in _SOURCES:
        with open(os.path.join(source_dir(), name), "rb") as f:
            h.update(f.read())
    h.update(repr((sorted(facts.items()), sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX"),
                   cxx or compiler(), _FLAGS)).encode())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return os.path.join(cache_dirs()[0], f"torch-{facts['version']}-{h.hexdigest()[:16]}", "_tensor" + suffix)


def _build(torch, cxx: list, target: str) -> str | None:
    """Compiles the door into `target`; None on success, else why (the log's path included)."""
    facts = _torch_facts(torch)
    inc = os.path.join(facts["dir"], "include")
    lib = os.path.join(facts["dir"], "lib")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"
    cmd = [*cxx, *_FLAGS,
           f"-DFL_TORCH_VERSION=\"{facts['version']}\"", f"-D_GLIBCXX_USE_CXX11_ABI={facts['cxx11_abi']}",
           "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
           "-I", sysconfig.get_paths()["include"], "-I", source_dir(),
           os.path.join(source_dir(), "tensor_door.cpp"), "-o", tmp,
           "-L", lib, "-ltorch_python", "-ltorch", "-lc10", f"-Wl,-rpath,{lib}"]
    _log.warning("fastlaunch: compiling its tensor reader for torch %s (once per torch build) into %s",
                 facts["version"], os.path.dirname(target))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = target + ".log"
        with open(log, "w") as f:
            f.write(shlex.join(cmd) + "\n" + proc.stdout + proc.stderr)
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"compiling it with {cxx[0]} failed (exit {proc.returncode}: {last}); full log: {log}"
    os.replace(tmp, target)
    return None


def find(torch):
    """(path or None, why): a built door for this torch, building it when none is cached."""
    cxx = compiler()
    if cxx is None:
        which = f"CXX={os.environ['CXX']} was not found" if os.environ.get("CXX") else "no C++ compiler on PATH"
        return None, f"not built: {which}; install one (g++ or clang++) or set CXX"
    first = path_for(torch, cxx)
    for d in cache_dirs():
        p = os.path.join(d, *first.split(os.sep)[-2:])
        if os.path.exists(p):
            return p, None
    with _lock:
        if os.path.exists(first):
            return first, None
        why = _build(torch, cxx, first)
    return (None, "not built: " + why) if why else (first, None)


def load():
    """(module or None, why): fastlaunch._tensor for the imported torch. Never raises."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch not imported yet"
    try:
        path, why = find(torch)
        if path is None:
            return None, why
    except Exception as exc:  # an unreadable cache dir, a missing source: data_ptr() then
        return None, f"not built: {type(exc).__name__}: {exc}"
    try:
        spec = importlib.util.spec_from_file_location("fastlaunch._tensor", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as exc:
        return None, (f"failed to load {path}: {exc}; delete that file to build it again"
                      if os.path.exists(path) else f"failed to load {path}: {exc}")
    sys.modules["fastlaunch._tensor"] = mod
    return mod, f"torch {mod.torch_version}, built at first use, cached in {os.path.dirname(path)}"
