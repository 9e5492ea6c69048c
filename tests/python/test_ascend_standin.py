"""The Ascend stand-ins alone (tools/fldev/ascend_standin.*): the recording runtime, the torch_npu
task queue, and the loader. fastlaunch is not involved: these are the ground the Ascend launch
tests stand on, so each property they rely on is checked here.

RunAclCall is a C++ function (std::string, std::function): it is driven through a small C++ helper
library compiled here (HELPER below), loaded after the stand-ins so that its RunAclCall and
rtKernelLaunch resolve to them, as a launcher's would. A missing compiler fails the tests with a
message; nothing is skipped."""

import ctypes
import os
import random
import shutil
import struct
import subprocess
import sys
import textwrap
import threading

import pytest

from fldev import ascend_standin

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
RUN_ACL = "_Z10RunAclCallRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKSt8functionIFivEE"
GET_TQE = "_Z23OpApiGetTaskQueueEnablev"
FFTS_BASE = 0xFF750000000

# A launcher's use of the queue, reduced: a kernel launch wrapped in RunAclCall, its arguments
# copied into the task. Returns 0, or -1 when RunAclCall threw.
HELPER = r"""
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <atomic>
#include <unistd.h>

void RunAclCall(const std::string &, const std::function<int()> &);
extern "C" int rtKernelLaunch(const void *, uint32_t, void *, uint32_t, void *, void *);

static std::atomic<uint64_t> off_thread{0};

extern "C" int helper_acl_launch(uint64_t stream, uint64_t tag, int ret) {
  unsigned char args[16];
  std::memcpy(args, &tag, 8);
  std::memcpy(args + 8, &stream, 8);
  std::thread::id caller = std::this_thread::get_id();
  try {
    RunAclCall("helper_launch", [=]() mutable {
      if (std::this_thread::get_id() != caller) off_thread++;
      int r = rtKernelLaunch((const void *)(uintptr_t)tag, 1, args, sizeof args, nullptr, (void *)(uintptr_t)stream);
      return ret ? ret : r;
    });
  } catch (const std::runtime_error &) {
    return -1;
  }
  return 0;
}

extern "C" uint64_t helper_off_thread(void) { return off_thread.load(); }

// A task whose effect outlives the process: one byte written to fd, after a pause of us microseconds.
extern "C" void helper_acl_write(int fd, int us) {
  RunAclCall("helper_write", [fd, us] {
    if (us) usleep(us);
    return write(fd, "x", 1) == 1 ? 0 : 1;
  });
}
"""


def _require(tool):
    if shutil.which(tool) is None:
        pytest.fail(f"{tool!r} not found: the Ascend stand-in tests need a C/C++ toolchain (cc, c++, nm)")


@pytest.fixture(scope="module")
def rt():
    _require(os.environ.get("CC", "cc"))
    _require(os.environ.get("CXX", "c++"))
    s = ascend_standin.load(queue=True)
    s.set_mode(1)
    s.reset()
    yield s
    s.drain()
    s.set_mode(1)
    s.reset()


@pytest.fixture(scope="module")
def helper(rt, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("helper") / "libhelper.so")
    src = path[:-3] + ".cpp"
    with open(src, "w") as f:
        f.write(HELPER)
    subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread",
                    "-Wall", "-Wextra", "-Werror", "-o", path, src], check=True)
    lib = ctypes.CDLL(path)  # RunAclCall and rtKernelLaunch resolve to the RTLD_GLOBAL stand-ins
    lib.helper_acl_launch.restype, lib.helper_acl_launch.argtypes = ctypes.c_int, [ctypes.c_uint64] * 2 + [ctypes.c_int]
    lib.helper_off_thread.restype = ctypes.c_uint64
    return lib


@pytest.fixture
def clean(rt):
    rt.drain()
    rt.set_mode(1)
    rt.count_only(False)
    rt.reset()
    yield rt
    rt.drain()
    rt.count_only(False)
    rt.reset()


def _launch_rt(rt, stub, blocks, data, stream):
    buf = ctypes.create_string_buffer(data, len(data))
    return rt.rtKernelLaunch(stub, blocks, buf, len(data), None, stream)


# ---- building and loading ----

def test_sources_compile_warning_free(tmp_path):
    cc, cxx = ascend_standin.compilers()
    for comp, std, src in ((cc, "-std=c11", ascend_standin.RT_SRC), (cxx, "-std=c++17", ascend_standin.NPU_SRC)):
        r = subprocess.run([comp, std, "-O2", "-fPIC", "-pthread", "-Wall", "-Wextra", "-Werror", "-Wpedantic",
                            "-c", "-o", str(tmp_path / "x.o"), src], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_build_is_cached_and_exports_exact_names(rt):
    assert ascend_standin.build() == ascend_standin.build() == (rt.rt_path, rt.npu_path)
    _require("nm")
    out = subprocess.run(["nm", "-D", "--defined-only", rt.npu_path], capture_output=True, text=True, check=True).stdout
    syms = {line.split()[-1] for line in out.splitlines() if " T " in line}
    assert {RUN_ACL, GET_TQE} <= syms
    assert {s for s in syms if "RunAclCall" in s or "TaskQueue" in s} == {RUN_ACL, GET_TQE}
    out = subprocess.run(["nm", "-D", "--defined-only", rt.rt_path], capture_output=True, text=True, check=True).stdout
    syms = {line.split()[-1] for line in out.splitlines() if " T " in line}
    assert {"rtKernelLaunch", "aclrtLaunchKernelWithHostArgs", "rtGetC2cCtrlAddr", "aclrtGetHardwareSyncAddr",
            "rtGetDevice", "rtSetDevice", "aclrtGetDevice", "aclrtSetDevice", "aclGetRecentErrMsg"} <= syms


def test_build_in_parallel_processes(tmp_path):
    """Four processes building into one empty cache: all succeed and agree on the paths."""
    env = dict(os.environ, FLDEV_STANDIN_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join([TOOLS, os.environ.get("PYTHONPATH", "")]))
    code = "from fldev import ascend_standin as a; print(*a.build())"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(o == outs[0] for o in outs) and all(os.path.exists(x) for x in outs[0])
    assert [d for d in os.listdir(tmp_path) if d.startswith(".build-")] == []


def test_load_is_idempotent_and_sets_env(rt):
    assert ascend_standin.load() is rt and ascend_standin.load(queue=False) is rt
    assert os.environ["FASTLAUNCH_LIBRUNTIME"] == os.environ["FASTLAUNCH_LIBASCENDCL"] == rt.rt_path
    # found by its soname, as a launcher looks for torch_npu without loading it
    ctypes.CDLL("libtorch_npu.so", mode=os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_GLOBAL)


# ---- the runtime ----

def test_rt_kernel_launch_recorded(clean):
    rt = clean
    data = bytes(range(200)) + b"\xff" * 56
    assert _launch_rt(rt, 0x1234, 48, data, 0xabc) == 0
    assert _launch_rt(rt, 0x5678, 1, b"", 0) == 0
    (e, f) = rt.entries()
    assert (e.kind, e.stub, e.blocks, e.stream, e.size, e.cfg_null, e.data) == (1, 0x1234, 48, 0xabc, 256, True, data)
    assert (f.kind, f.stub, f.blocks, f.stream, f.size, f.data) == (1, 0x5678, 1, 0, 0, b"")
    assert rt.launches() == 2


def test_acl_launch_recorded_with_cfg(clean):
    rt = clean

    class Attr(ctypes.Structure):
        _fields_ = [("id", ctypes.c_int), ("value", ctypes.c_uint32 * 4)]

    class Cfg(ctypes.Structure):
        _fields_ = [("attrs", ctypes.POINTER(Attr)), ("numAttrs", ctypes.c_size_t)]

    attrs = (Attr * 2)(Attr(7, (ctypes.c_uint32 * 4)(65536, 1, 2, 3)), Attr(9))
    data = struct.pack("<QQi", 0xdead, 0xbeef, -5)
    buf = ctypes.create_string_buffer(data, len(data))
    for cfg in (None, Cfg(attrs, 2), Cfg(attrs, 0)):
        ptr = ctypes.byref(cfg) if cfg is not None else None
        assert rt.aclrtLaunchKernelWithHostArgs(0x77, 20, 0x99, ptr, buf, len(data), None, 0) == 0
    a, b, c = rt.entries()
    assert (a.kind, a.stub, a.blocks, a.stream, a.size, a.data, a.cfg_null) == (2, 0x77, 20, 0x99, 20, data, True)
    assert (b.cfg_null, b.attr_id, b.attr_value, b.data) == (False, 7, 65536, data)
    assert (c.cfg_null, c.attr_id, c.attr_value) == (False, 0, 0)


def test_fail_next(clean):
    rt = clean
    rt.fail_next(507011)
    assert _launch_rt(rt, 1, 1, b"abcd", 0) == 507011
    assert rt.aclGetRecentErrMsg() == b"standin: injected failure 507011"
    assert _launch_rt(rt, 2, 1, b"abcd", 0) == 0  # one launch only
    rt.fail_next(42)
    assert rt.aclrtLaunchKernelWithHostArgs(3, 1, 0, None, None, 0, None, 0) == 42
    assert rt.aclrtLaunchKernelWithHostArgs(4, 1, 0, None, None, 0, None, 0) == 0
    assert [e.stub for e in rt.entries()] == [2, 4] and rt.launches() == 2
    rt.fail_next(9)
    rt.count_only(True)
    assert _launch_rt(rt, 5, 1, b"", 0) == 9  # also in count-only mode
    rt.reset()
    assert rt.aclGetRecentErrMsg() == b""


def test_count_only(clean):
    rt = clean
    rt.count_only(True)
    for i in range(100):
        assert _launch_rt(rt, i, 1, b"xy", 0) == 0
    assert rt.launches() == 100 and rt.count() == 0
    rt.count_only(False)
    assert _launch_rt(rt, 1, 1, b"xy", 0) == 0
    assert rt.launches() == 101 and rt.count() == 1


def test_ffts_per_device_per_thread(clean):
    rt = clean
    addr, n, p, d = ctypes.c_uint64(), ctypes.c_uint32(), ctypes.c_void_p(), ctypes.c_int32()

    def ffts():
        assert rt.rtGetC2cCtrlAddr(ctypes.byref(addr), ctypes.byref(n)) == 0
        assert rt.aclrtGetHardwareSyncAddr(ctypes.byref(p)) == 0
        assert addr.value == p.value and n.value == 4096
        return addr.value

    try:
        assert ffts() == FFTS_BASE
        for dev, setter in ((3, rt.rtSetDevice), (1, rt.aclrtSetDevice), (7, rt.rtSetDevice)):
            assert setter(dev) == 0
            assert rt.rtGetDevice(ctypes.byref(d)) == 0 and d.value == dev
            assert rt.aclrtGetDevice(ctypes.byref(d)) == 0 and d.value == dev
            assert ffts() == FFTS_BASE + dev * 0x100000
        assert rt.rtSetDevice(-1) != 0
        seen = []
        t = threading.Thread(target=lambda: seen.append(ffts()))  # another thread: still device 0
        t.start()
        t.join()
        assert seen == [FFTS_BASE]
        assert rt.ffts_calls() == 10
    finally:
        rt.rtSetDevice(0)


def test_concurrent_launches_all_recorded(clean):
    """8 threads launching at once (ctypes drops the GIL): every launch recorded, bytes intact."""
    rt = clean
    per = 2000

    def worker(t):
        for i in range(per):
            data = struct.pack("<QQ", t, i) * (1 + i % 5)
            assert _launch_rt(rt, t, i, data, t) == 0

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    es = rt.entries()
    assert len(es) == rt.launches() == 8 * per
    last = {}
    for e in es:
        assert e.data == struct.pack("<QQ", e.stub, e.blocks) * (1 + e.blocks % 5)
        assert last.get(e.stub, -1) == e.blocks - 1  # each thread's launches in its own order
        last[e.stub] = e.blocks


# ---- the torch_npu queue ----

def test_queue_fifo_across_mode_switches(clean, helper):
    """Thousands of aten ops and RunAclCall launches interleaved, the mode switched at random
    points: whatever went through the queue is recorded in exactly the order it was submitted; in
    mode 0 (reached through a draining switch) every call, direct launches too, is the last entry
    as soon as it returns."""
    rt = clean
    rng = random.Random(1234)
    expect = []     # (kind, tag) of everything routed through RunAclCall or aten ops, in call order
    direct = set()  # direct launches made while the queue was on: they may overtake queued work
    enq = queued_launches = switches = 0
    off0 = helper.helper_off_thread()

    def log():
        return [(e.kind, e.tag if e.kind == 3 else e.stub) for e in rt.entries()]

    for tag in range(1, 6001):
        mode = rt.mode()
        r = rng.random()
        if r < 0.004:
            rt.set_mode(rng.choice([0, 1, 2]))
            switches += 1
            if rt.mode() == 0:  # drained: the log is complete up to here
                assert [x for x in log() if x not in direct] == expect
            continue
        if r < 0.45:
            rt.aten_op(5, tag)
            op = (3, tag)
        elif r < 0.9:
            assert helper.helper_acl_launch(5, tag, 0) == 0
            op = (1, tag)
            queued_launches += mode > 0
        else:
            assert _launch_rt(rt, tag, 1, struct.pack("<QQ", tag, 5), 5) == 0
            op = (1, tag)
            if mode > 0:
                direct.add(op)
        if op not in direct:
            expect.append(op)
            enq += mode > 0
        if mode == 0:  # nothing pending: this call's entry is the last one
            last = rt.entry(rt.count() - 1)
            assert rt.count() == len(expect) + len(direct)
            assert (last.kind, last.tag if last.kind == 3 else last.stub) == op
    rt.drain()
    got = log()
    assert [x for x in got if x not in direct] == expect
    assert sorted(got) == sorted(expect + list(direct))
    assert switches > 10 and rt.enqueued() == enq > 1000
    assert helper.helper_off_thread() - off0 == queued_launches  # queued tasks ran on the worker
    for e in rt.entries():
        if e.kind == 1:  # every launch's bytes, whichever thread made it
            assert e.data == struct.pack("<QQ", e.stub, 5)
    assert rt.task_errors() == 0


def test_queue_runs_on_worker_only_when_on(clean, helper):
    rt = clean
    off, enq = helper.helper_off_thread(), rt.enqueued()  # the queue's counters are never reset
    rt.set_mode(0)
    assert rt.OpApiGetTaskQueueEnable() == 0
    for i in range(50):
        helper.helper_acl_launch(0, i + 1, 0)
    assert helper.helper_off_thread() == off and rt.count() == 50 and rt.enqueued() == enq
    for m in (1, 2):
        rt.set_mode(m)
        assert rt.OpApiGetTaskQueueEnable() == m
        before = rt.enqueued()
        for i in range(50):
            helper.helper_acl_launch(0, i + 1, 0)
        rt.drain()
        assert rt.enqueued() - before == 50
    assert helper.helper_off_thread() - off == 100 and rt.count() == 150


def test_drain_waits_for_everything(clean):
    rt = clean
    rt.set_mode(1)
    for i in range(20000):
        rt.aten_op(1, i)
    rt.drain()
    assert rt.count() == 20000  # nothing ran after drain returned
    assert [e.tag for e in rt.entries()] == list(range(20000))


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_run_acl_call_failures(clean, helper, mode):
    """fail(1): throws, nothing enqueued or run; fail(2): the task is enqueued (run at once in mode 0)
    and the call throws; a task returning nonzero counts as a task error; none of it crashes."""
    rt = clean
    rt.set_mode(mode)
    e0 = rt.enqueued()
    rt.fail(1)
    assert helper.helper_acl_launch(0, 11, 0) == -1
    rt.drain()
    assert rt.count() == 0 and rt.enqueued() == e0
    rt.fail(2)
    assert helper.helper_acl_launch(0, 12, 0) == -1
    rt.drain()
    assert [e.stub for e in rt.entries()] == [12] and rt.enqueued() == e0 + (mode > 0)
    assert helper.helper_acl_launch(0, 13, 0) == 0  # one call only
    errs = rt.task_errors()
    assert helper.helper_acl_launch(0, 14, 3) == 0  # launched, then the task reports failure
    rt.drain()  # 13 and 14 have run: the failure below is 15's, not a queued task's
    rt.fail_next(507015)                             # the launch itself fails inside the task
    assert helper.helper_acl_launch(0, 15, 0) == 0
    rt.drain()
    assert rt.task_errors() - errs == 2
    assert [e.stub for e in rt.entries()] == [12, 13, 14]


# ---- the process around it ----

def _run_py(code, **env):
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([TOOLS, os.environ.get("PYTHONPATH", "")]))
    for k in ("TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING"):
        e.pop(k, None)
    e.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("env,mode", [({}, 1), ({"TASK_QUEUE_ENABLE": "2"}, 2), ({"TASK_QUEUE_ENABLE": "0"}, 0),
                                      ({"TASK_QUEUE_ENABLE": "2", "ASCEND_LAUNCH_BLOCKING": "1"}, 0)])
def test_initial_mode_from_env(rt, env, mode):
    r = _run_py("from fldev import ascend_standin as a; s = a.load(); print(s.mode(), s.OpApiGetTaskQueueEnable())",
                **env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(mode)] * 2


def test_process_exits_cleanly_with_pending_tasks(rt, helper):
    """A process that leaves thousands of tasks queued exits with 0, promptly, having run them all
    (each writes one byte to stdout); and one that drained exits with nothing on stderr."""
    r = _run_py(f"""
        import ctypes
        from fldev import ascend_standin as a
        s = a.load()
        s.set_mode(1)
        h = ctypes.CDLL({helper._name!r})
        h.helper_acl_write(1, 300000)  # the worker is still busy when the interpreter exits
        for i in range(19999):
            h.helper_acl_write(1, 0)
            s.aten_op(0, i)
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "x" * 20000 and r.stderr == ""
    r = _run_py("""
        import sys
        from fldev import ascend_standin as a
        s = a.load()
        s.aten_op(0, 1)
        s.drain()
        sys.exit(0)
        """)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_process_exits_despite_a_stuck_task(rt, helper):
    """A task that would run for a minute holds exit back a few seconds at most (then is left)."""
    r = _run_py(f"""
        import ctypes
        from fldev import ascend_standin as a
        a.load().set_mode(1)
        ctypes.CDLL({helper._name!r}).helper_acl_write(1, 60000000)
        """)
    assert r.returncode == 0 and r.stdout == "", r.stderr
