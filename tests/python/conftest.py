"""Shared fixtures: real host kernels compiled once per session, streams, buffers as torch tensors
(when torch is installed) or as plain integer addresses (always)."""

import ctypes
import os
import sys

import pytest

# The stand-ins (Inductor-shaped launchers over host kernels) live outside the runtime package.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

# The tensor door is built at the first tensor, before that launch, in every process the suite starts
# (as the tests were written); its background build is tested on its own (test_tensor_door.py).
os.environ.setdefault("FASTLAUNCH_TENSOR_DOOR_WAIT", "1")

import fastlaunch.host as host  # noqa: E402
from fastlaunch import _C  # noqa: E402
from fldev import standins  # noqa: E402

if not hasattr(_C, "fault_inject"):
    pytest.exit(f"the Python suite needs fastlaunch's testing build (fault injection, bench loops, grid_eval), and "
                f"{_C.__file__} is a release build: pip install --no-build-isolation -Csetup-args=-Dtesting=true . "
                "(make test does)", returncode=2)

# Every plan the suite creates can be armed with fault_inject: each backend is wrapped for fault
# injection (the wrapper forwards each launch to the backend unless a fault is armed on its plan).
for _backend in ("host", "null", "cuda", "npu"):
    _C.fault_wrap(_backend)

try:
    import torch
except ImportError:  # torch is optional at run time
    torch = None

KERNELS = r"""
#include <math.h>
/* counts[id] += 1 once per launch (program 0 only), whatever the grid */
typedef struct { int32_t *counts; int64_t id; int32_t n; int32_t B; } count_args;
void count_launch(const void *a, const fl_host_program *p) {
  const count_args *x = a;
  if (p->pid[0] == 0 && p->pid[1] == 0 && p->pid[2] == 0) __atomic_fetch_add(&x->counts[x->id], 1, __ATOMIC_RELAXED);
}

/* out = x + y, one block of B elements per program */
typedef struct { const float *x; const float *y; float *out; int32_t n; int32_t B; } vadd_args;
void vadd(const void *a, const fl_host_program *p) {
  const vadd_args *v = a;
  int32_t start = (int32_t)p->pid[0] * v->B;
  for (int32_t i = start; i < start + v->B && i < v->n; i++) v->out[i] = v->x[i] + v->y[i];
}

/* log[k] = (value, grid x, grid y, grid z, B) for each launch, in order */
typedef struct { int64_t *log; int64_t *pos; int64_t value; int32_t n; int32_t B; } record_args;
void record(const void *a, const fl_host_program *p) {
  const record_args *r = a;
  if (p->pid[0] || p->pid[1] || p->pid[2]) return;
  int64_t k = (*r->pos)++;
  r->log[5 * k + 0] = r->value;
  r->log[5 * k + 1] = p->grid[0];
  r->log[5 * k + 2] = p->grid[1];
  r->log[5 * k + 3] = p->grid[2];
  r->log[5 * k + 4] = r->B;
}

/* every kind: writes each scalar into out as a double (pointer written as its address) */
typedef struct {
  double *out; int8_t b; int8_t i8; int16_t i16; int32_t i32; int64_t i64;
  uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; uint16_t h; uint16_t bh; float f; double d;
} kinds_args;
static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}
static double bf16_to_double(uint16_t b) { union { uint32_t u; float f; } c; c.u = (uint32_t)b << 16; return c.f; }
void kinds(const void *a, const fl_host_program *p) {
  const kinds_args *k = a; (void)p;
  k->out[0] = k->b; k->out[1] = k->i8; k->out[2] = k->i16; k->out[3] = k->i32; k->out[4] = (double)k->i64;
  k->out[5] = k->u8; k->out[6] = k->u16; k->out[7] = k->u32; k->out[8] = (double)k->u64;
  k->out[9] = half_to_double(k->h); k->out[10] = bf16_to_double(k->bh); k->out[11] = k->f; k->out[12] = k->d;
}
"""


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="session")
def kernels(kernel_dir):
    return {name: host.compile(KERNELS, name, directory=kernel_dir) for name in ("count_launch", "vadd", "record", "kinds")}


@pytest.fixture
def _keep():
    """Buffers outlive the stream: it is drained (at its teardown) before they are freed, so a
    queued launch never writes freed memory."""
    kept = []
    yield kept
    kept.clear()


@pytest.fixture
def stream(_keep):
    s = host.Stream()
    yield s
    s.close()


class Buffer:
    """A zeroed buffer: `arg` is what a launch receives (a torch tensor or an int address)."""

    def __init__(self, n, ctype, mode):
        self.n = n
        self.mode = mode
        if mode == "torch":
            dtype = {ctypes.c_int32: torch.int32, ctypes.c_int64: torch.int64, ctypes.c_float: torch.float32,
                     ctypes.c_double: torch.float64}[ctype]
            self.tensor = torch.zeros(n, dtype=dtype)
            self.arg = self.tensor
        else:
            self.array = (ctype * n)()
            self.arg = ctypes.addressof(self.array)

    def tolist(self):
        return self.tensor.tolist() if self.mode == "torch" else list(self.array)

    def __setitem__(self, i, v):
        if self.mode == "torch":
            self.tensor[i] = v
        else:
            self.array[i] = v


ARG_MODES = ["int"] + (["torch"] if torch is not None else [])


@pytest.fixture(params=ARG_MODES)
def arg_mode(request):
    return request.param


@pytest.fixture
def buf(arg_mode, _keep):
    def make(n, ctype=ctypes.c_int32):
        b = Buffer(n, ctype, arg_mode)
        _keep.append(b)
        return b

    return make


@pytest.fixture(autouse=True)
def _no_faults():
    from fastlaunch import _C

    yield
    _C.fault_inject("none")
    standins.hooks.launch_enter_hook.calls.clear()
    standins.hooks.launch_exit_hook.calls.clear()


def pytest_report_header(config):
    gil = getattr(sys, "_is_gil_enabled", None)
    return [f"fastlaunch tests: torch {'%s' % torch.__version__ if torch else 'absent (plain integer addresses only)'}",
            f"FASTLAUNCH_CACHE_DIR={os.environ.get('FASTLAUNCH_CACHE_DIR', '(default)')}",
            f"GIL: {'on' if gil is None or gil() else 'off (free-threaded)'}"]


# make test-freethreaded (FASTLAUNCH_EXPECT_NO_GIL=1): the GIL must stay off from the first test to
# the last, fastlaunch's modules, torch and Triton imported (Triton's with PYTHON_GIL=0).
def _gil_must_be_off(when):
    if os.environ.get("FASTLAUNCH_EXPECT_NO_GIL") == "1" and (not hasattr(sys, "_is_gil_enabled") or sys._is_gil_enabled()):
        pytest.exit(f"the GIL is on {when} (a free-threaded interpreter and PYTHON_GIL=0 are expected)", returncode=3)


def pytest_sessionstart(session):
    if os.environ.get("FASTLAUNCH_EXPECT_NO_GIL") == "1":
        import triton  # noqa: F401  (declares nothing: PYTHON_GIL=0 keeps the GIL off)

        import fastlaunch.inductor  # noqa: F401
        import fastlaunch.triton  # noqa: F401
    _gil_must_be_off("before the first test")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("FASTLAUNCH_EXPECT_NO_GIL") == "1" and sys._is_gil_enabled():
        print("\nthe GIL was turned on during the run (FASTLAUNCH_EXPECT_NO_GIL=1)", file=sys.stderr)
        session.exitstatus = 3


def memo_or_checked(result: dict) -> int:
    """The JIT calls a fidelity run served through the memo (the last fast call's form), or, when
    every call is checked against Triton's own choice (FASTLAUNCH_VERIFY=1, fastlaunch.triton_check),
    the calls checked: the memo is not taken then, each call asking Triton first."""
    from fastlaunch import config

    return result.get("checked", 0) if config.read().verify else result["memo"]


def reference_unavailable(message: str):
    """A reference fetched from PyPI at test set-up (Triton-Ascend's, torch_npu's wheel) could not be
    had: skipped, unless FASTLAUNCH_REQUIRE_REFERENCES=1 (make test sets it: a machine that installs
    the test dependencies from PyPI can fetch the wheels too), where the test fails."""
    if os.environ.get("FASTLAUNCH_REQUIRE_REFERENCES") == "1":
        pytest.fail(f"{message} (FASTLAUNCH_REQUIRE_REFERENCES=1)", pytrace=False)
    pytest.skip(message)
