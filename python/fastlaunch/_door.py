"""fastlaunch._door: builds fastlaunch._tensor, the C++ module that reads a torch tensor's data pointer
through torch's own C++ object, at first use against the torch this process imported, and caches it
per torch build, as Triton compiles its launcher. pip's isolated build has no torch, so the wheel
cannot carry it; without a C++ compiler, or when it cannot load, tensors are read through
data_ptr() (about ten times slower per tensor) and report() says why and what to do.

The C extension calls load() once, at the first tensor-like argument after `import torch`. A door not
built yet is built in a background thread: launches read data_ptr() meanwhile and the door once it
is there. `python -m fastlaunch tensor-reader --build` builds it ahead of time (a container's build
step); FASTLAUNCH_TENSOR_DOOR_WAIT=1 builds it at first use, before that launch.
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


def _command(torch, cxx: list, target: str, tmp: str) -> list:
    facts = _torch_facts(torch)
    inc = os.path.join(facts["dir"], "include")
    lib = os.path.join(facts["dir"], "lib")
    return [*cxx, *_FLAGS,
            f"-DFL_TORCH_VERSION=\"{facts['version']}\"", f"-D_GLIBCXX_USE_CXX11_ABI={facts['cxx11_abi']}",
            "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
            "-I", sysconfig.get_paths()["include"], "-I", source_dir(),
            os.path.join(source_dir(), "tensor_door.cpp"), "-o", tmp,
            "-L", lib, "-ltorch_python", "-ltorch", "-lc10", f"-Wl,-rpath,{lib}"]


def _failed(cxx, target, code, output) -> str:
    last = (output.strip().splitlines() or ["no output"])[-1][:160]
    return f"compiling it with {cxx[0]} failed (exit {code}: {last}); full log: {target}.log"


def _prepare(torch, cxx: list, target: str):
    """(tmp, command): the compiler's command, writing to a file of this process and thread."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"
    return tmp, _command(torch, cxx, target, tmp)


def _build(torch, cxx: list, target: str) -> str | None:
    """Compiles the door into `target`; None on success, else why (the log's path included)."""
    tmp, cmd = _prepare(torch, cxx, target)
    _log.warning("fastlaunch: compiling its tensor reader for torch %s (once per torch build) into %s",
                 torch.__version__, os.path.dirname(target))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        with open(target + ".log", "w") as f:
            f.write(shlex.join(cmd) + "\n" + proc.stdout + proc.stderr)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return _failed(cxx, target, proc.returncode, proc.stderr)
    os.replace(tmp, target)
    return None


# The background build: the compiler in a session of its own, which moves its output into place
# itself, so a process that exits before it ends (a short script) still leaves the door built for
# the next one.
_DETACHED = ('if "$0" "$@" >"$FL_LOG" 2>&1; then mv -f "$FL_TMP" "$FL_TARGET"; '
             'else rc=$?; rm -f "$FL_TMP"; exit $rc; fi')


def _build_detached(torch, cxx: list, target: str) -> str | None:
    tmp, cmd = _prepare(torch, cxx, target)
    _log.info("fastlaunch: compiling its tensor reader for torch %s in the background into %s",
              torch.__version__, os.path.dirname(target))
    env = dict(os.environ, FL_LOG=target + ".log", FL_TMP=tmp, FL_TARGET=target)
    nice = ["nice", "-n", "19"] if shutil.which("nice") else []  # the launches come first
    code = subprocess.Popen([*nice, "/bin/sh", "-c", _DETACHED, *cmd], env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
    if code == 0 and os.path.exists(target):
        return None
    try:
        with open(target + ".log") as f:
            output = f.read()
    except OSError:
        output = ""
    return _failed(cxx, target, code, output)


BUILDING = "being built in the background (launches read data_ptr() until it is ready)"
_background = {"thread": None, "why": None}


def cached(torch):
    """(path or None, cxx, first): a door built for this torch in a cache dir, the compiler, and
    where a build goes."""
    cxx = compiler()
    if cxx is None:
        return None, None, None
    first = path_for(torch, cxx)
    for d in cache_dirs():
        p = os.path.join(d, *first.split(os.sep)[-2:])
        if os.path.exists(p):
            return p, cxx, first
    return None, cxx, first


def find(torch, wait=True):
    """(path or None, why): a built door for this torch, building it when none is cached: now, or
    (wait False) in a background thread, whose end tells the C extension to look again."""
    path, cxx, first = cached(torch)
    if path is not None:
        return path, None
    if cxx is None:
        which = f"CXX={os.environ['CXX']} was not found" if os.environ.get("CXX") else "no C++ compiler on PATH"
        return None, f"not built: {which}; install one (g++ or clang++) or set CXX"
    if not wait:
        with _lock:
            if _background["thread"] is None:
                t = threading.Thread(target=_build_in_background, args=(torch, cxx, first),
                                     name="fastlaunch-tensor-reader", daemon=True)
                _background["thread"] = t
                t.start()
        return None, BUILDING
    wait_for_background()
    with _lock:
        if os.path.exists(first):
            return first, None
        why = _build(torch, cxx, first)
    return (None, "not built: " + why) if why else (first, None)


def _build_in_background(torch, cxx, first):
    try:
        with _lock:
            why = None if os.path.exists(first) else _build_detached(torch, cxx, first)
    except Exception as exc:  # noqa: BLE001 - reported, never raised into a launch
        why = f"{type(exc).__name__}: {exc}"
    _background["why"] = why
    from fastlaunch import _C

    _C._door_retry(why)  # the next tensor argument loads it (or keeps data_ptr(), saying why)


def wait_for_background():
    """Waits for a background build in flight, if any."""
    t = _background["thread"]
    if t is not None and t is not threading.current_thread():
        t.join()


def load(wait=None):
    """(module or None, why): fastlaunch._tensor for the imported torch. Never raises. A door not
    built yet is built in the background (why: BUILDING) unless `wait` (None: FASTLAUNCH_TENSOR_DOOR_WAIT)
    asks for it now."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch not imported yet"
    if wait is None:
        from fastlaunch import config

        wait = config.read().tensor_door_wait
    if _background["why"] is not None:
        return None, "not built: " + _background["why"]
    try:
        path, why = find(torch, wait=wait)
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
