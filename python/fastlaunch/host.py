"""The host backend from Python: streams, and kernels from shared objects or C source. (Launchers
shaped like Inductor's, backed by host kernels, are stand-ins for tests and benchmarks: they live
in tools/fldev/standins.py, outside the runtime package.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading

from fastlaunch import _C
from fastlaunch._C import HostKernel

__all__ = ["Stream", "load", "compile"]


class Stream:
    """A host (or null) stream: a worker thread that runs launches in submission order."""

    def __init__(self, backend: str = "host"):
        self.backend = backend
        self.handle = _C.stream_create(backend)

    def __int__(self):
        return self.handle

    def synchronize(self) -> None:
        _C.stream_synchronize(self.handle, self.backend)

    @property
    def count(self) -> int:
        """Launches completed (host) or accepted (null) so far."""
        return _C.stream_count(self.handle, self.backend)

    def close(self) -> None:
        """Drains the stream, then destroys it."""
        if self.handle:
            handle, self.handle = self.handle, 0
            _C.stream_destroy(handle, self.backend)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def load(path: str, symbol: str) -> HostKernel:
    """A kernel `void symbol(const void *args, const fl_host_program *p)` from a shared object."""
    return HostKernel(path, symbol)


_HEADER = """#include <stdint.h>
typedef struct { uint32_t pid[3]; uint32_t grid[3]; } fl_host_program;
"""
_compile_lock = threading.Lock()


def cache_dir() -> str:
    from fastlaunch import config

    d = config.read().cache_dir
    os.makedirs(d, exist_ok=True)
    return d


def compile(source: str, symbol: str, *, cflags: tuple = ("-O2",), directory: str | None = None) -> HostKernel:
    """Compiles C source with the system compiler into the cache directory (once per source) and
    loads `symbol` from it. The source gets a `fl_host_program` typedef prepended."""
    cc = os.environ.get("CC", "cc")
    text = _HEADER + source
    key = hashlib.sha256("\0".join([cc, *cflags, text]).encode()).hexdigest()[:24]
    d = directory or cache_dir()
    so = os.path.join(d, f"k_{key}.so")
    with _compile_lock:
        if not os.path.exists(so):
            fd, src = tempfile.mkstemp(suffix=".c", dir=d)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            tmp = so + f".{os.getpid()}.tmp"
            try:
                proc = subprocess.run([cc, "-shared", "-fPIC", *cflags, "-o", tmp, src],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"compiling host kernel {symbol!r} failed:\n{proc.stderr}")
                os.replace(tmp, so)
            finally:
                os.unlink(src)
                if os.path.exists(tmp):
                    os.unlink(tmp)
    return HostKernel(so, symbol)
