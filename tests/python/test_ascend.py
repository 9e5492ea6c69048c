"""The npu backend as Triton-Ascend kernels use it, without Ascend hardware: launches through
rtKernelLaunch on a recording stand-in of CANN's runtime, ordered with torch_npu's task queue (a
stand-in libtorch_npu.so exporting RunAclCall and OpApiGetTaskQueueEnable over a real queue
thread, found by fastlaunch._npu_queue exactly as the real one would be), exactly once under
faults on both sides of the enqueue, and the refusals of plans from Triton-Ascend kernels.

Each scenario runs in a child process: the npu backend opens its runtime once per process, and the
stand-ins are named by environment variables read then. What is not shown here: a real Ascend
device, CANN's real runtime and torch_npu's real queue."""

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from fastlaunch import FastLaunchPlanUnavailable
from fastlaunch import ascend

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")


def run_child(body: str, env=None, timeout=240):
    """Runs `body` in a fresh interpreter with the stand-ins loaded (`rt`), fastlaunch imported."""
    code = textwrap.dedent("""
        import random, sys
        from fldev import ascend_standin
        rt = ascend_standin.load(queue=QUEUE)
        from fastlaunch import FastLaunchError, FastLaunchPlanUnavailable, Plan, _C
        def plan(grid=(2, 1, 1), grid_exprs=None, **opts):
            options = {"ffts": True, "rt_stub": True}
            options.update(opts)
            return Plan(0x5100, ["ptr", "i32"], backend="npu", abi="npu", options=options,
                        grid=None if grid_exprs else grid, grid_exprs=grid_exprs, name="kern")
        def order_tags():
            out = []
            for e in rt.entries():
                out.append(("aten", e.tag) if e.kind == 3 else ("launch", int.from_bytes(e.data[32:36], "little")))
            return out
    """).replace("QUEUE", str((env or {}).pop("_queue", True))) + textwrap.dedent(body)
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(TOOLS)] + sys.path), **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_launches_keep_their_place_among_queued_aten_ops():
    """Thousands of stand-in aten ops and fastlaunch launches interleaved at random on one stream,
    the queue's mode switched at run time among 0, 1 and 2: the runtime sees them in call order."""
    out = run_child("""
        rng = random.Random(1234)
        p = plan()
        assert _C.npu_queue()[0] == "queue", _C.npu_queue()
        expected, switches = [], 0
        for i in range(6000):
            if rng.random() < 0.01:
                rt.set_mode(rng.choice([0, 1, 2]))  # drains first, as torch_npu does
                switches += 1
            if rng.random() < 0.5:
                rt.aten_op(0x77, i)
                expected.append(("aten", i))
            else:
                p(0x1000, i, stream=0x77)
                expected.append(("launch", i))
        rt.drain()
        got = order_tags()
        assert got == expected, next((k, a, b) for k, (a, b) in enumerate(zip(got, expected)) if a != b)
        assert rt.task_errors() == 0
        print("ok", len(expected), switches, rt.enqueued())
    """)
    ok, n, switches, enqueued = out.split()[-4:]
    assert ok == "ok" and int(n) == 6000 and int(switches) > 10 and int(enqueued) > 1000


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_packed_bytes_blocks_stream_and_ffts(mode):
    """The launch Triton-Ascend 3.2.0 makes: the registered stub through rtKernelLaunch, the block
    count x*y*z, the stream, the struct (FFTS address of the device, lock and workspace NULL, the
    arguments, the grid); the FFTS address is fetched once, not per launch."""
    run_child(f"""
        rt.set_mode({mode})
        p = plan(grid=(3, 2, 2))
        for i in range(5):
            p(0xdead0000, -i, stream=0x99)
        rt.drain()
        es = [e for e in rt.entries() if e.kind == 1]
        assert len(es) == 5 and rt.ffts_calls() == 1
        for i, e in enumerate(es):
            assert (e.stub, e.blocks, e.stream, e.size) == (0x5100, 12, 0x99, 48)
            want = (0xFF750000000).to_bytes(8, "little") + bytes(16) + (0xdead0000).to_bytes(8, "little")
            want += (-i).to_bytes(4, "little", signed=True) + b"".join(d.to_bytes(4, "little") for d in (3, 2, 2))
            assert e.data == want, (e.data.hex(), want.hex())
    """)


def test_ffts_address_is_per_device_and_plans_stay_on_theirs():
    run_child("""
        import ctypes
        lib = ctypes.CDLL(None)
        p0 = plan()
        lib.rtSetDevice(1)
        p1 = plan()
        p1(0x1000, 1, stream=0x77)
        try:
            p0(0x1000, 2, stream=0x77)
            raise SystemExit("a plan launched on another device")
        except FastLaunchError as e:
            assert e.reason == "npu_device_changed:0:1" and not e.backend_submitted, e.reason
        rt.drain()
        (e,) = [e for e in rt.entries() if e.kind == 1]
        assert e.data[:8] == (0xFF750000000 + 0x100000).to_bytes(8, "little")
        assert rt.ffts_calls() == 2
    """)


def test_faults_on_both_sides_of_the_enqueue():
    """Before the boundary nothing reaches the queue and the call may go stock; from the enqueue on,
    the error says it may have been submitted and nothing is launched twice."""
    run_child("""
        p = plan()
        rt.set_mode(1)
        rt.fail(1)  # RunAclCall throws before taking the task
        try:
            p(0x1000, 1, stream=0x77); raise SystemExit("no error")
        except FastLaunchError as e:
            assert e.backend_submitted and e.reason.startswith("npu_enqueue_failed:"), e.reason
        rt.fail(2)  # RunAclCall takes the task, then throws
        try:
            p(0x1000, 2, stream=0x77); raise SystemExit("no error")
        except FastLaunchError as e:
            assert e.backend_submitted and e.reason.startswith("npu_enqueue_failed:"), e.reason
        rt.drain()
        rt.fail_next(507899)  # the queued launch itself fails on the queue's thread: reported there
        p(0x1000, 3, stream=0x77)
        p(0x1000, 4, stream=0x77)
        rt.drain()
        assert [t for k, t in order_tags()] == [2, 4], order_tags()  # 1 never queued, 3 failed, none twice
        assert rt.task_errors() == 1
        rt.set_mode(0)
        rt.fail_next(507899)  # queue off: the launch's own error, submitted
        try:
            p(0x1000, 5, stream=0x77); raise SystemExit("no error")
        except FastLaunchError as e:
            assert e.backend_submitted and e.reason.startswith("backend_error:npu:507899"), e.reason
        try:  # refused before the boundary: nothing anywhere
            p(0x1000, 6, stream=0)
        except FastLaunchError as e:
            assert not e.backend_submitted and e.reason == "stream_is_none"
        try:  # past 65,535 blocks, as Triton-Ascend's JIT refuses it
            plan(grid_exprs=["$1", "2", "1"])(0x1000, 40000, stream=0x77)
        except FastLaunchError as e:
            assert not e.backend_submitted and e.reason.startswith("grid_product_exceeds"), e.reason
        assert [t for k, t in order_tags()] == [2, 4]
    """)


def test_without_torch_npu_launches_go_to_the_stream():
    run_child("""
        assert _C.npu_queue()[0] == "stream"
        p = plan()
        p(0x1000, 1, stream=0x77)
        assert _C.npu_queue()[0] == "stream" and len(rt.entries()) == 1
    """, env={"_queue": False})


def test_unreachable_queue_refuses_every_npu_launch(tmp_path):
    """torch_npu loaded without the exports the shim needs: never an unordered launch."""
    src = tmp_path / "broken.cpp"
    src.write_text("#include <cstdint>\nuint32_t OpApiGetTaskQueueEnable() { return 1; }\n")
    lib = tmp_path / "libtorch_npu.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-Wl,-soname,libtorch_npu.so", "-o", str(lib), str(src)], check=True)
    run_child(f"""
        import ctypes
        ctypes.CDLL({str(lib)!r}, mode=ctypes.RTLD_GLOBAL)
        p = plan()
        assert _C.npu_queue()[0] == "unusable", _C.npu_queue()
        try:
            p(0x1000, 1, stream=0x77); raise SystemExit("launched")
        except FastLaunchError as e:
            assert e.reason.startswith("npu_queue_unavailable:") and e.stable and not e.backend_submitted, e.reason
        assert rt.entries() == []
    """, env={"_queue": False})


def test_acl_handles_still_launch_through_acl():
    run_child("""
        p = plan(rt_stub=False, simt=True, dyn_ubuf=4096)
        rt.set_mode(0)
        p(0x1000, 1, stream=0x77)
        (e,) = rt.entries()
        assert (e.kind, e.stub, e.blocks, e.cfg_null, e.attr_id, e.attr_value) == (2, 0x5100, 2, 0, 2, 4096)
        try:
            plan(simt=True)
        except FastLaunchPlanUnavailable as exc:
            assert exc.reason == "npu_option_conflict:rt_stub:simt"
    """)


# ---- plans from Triton-Ascend kernels: what the launcher of 3.2.0 takes and what it refuses ----

def fake_kernel(signature, constants=None, arg_names=None, **metadata):
    md = {"kernel_name": "triton_fake", "mix_mode": "aiv", "parallel_mode": "simd", "force_simt_only": False}
    md.update(metadata)
    fn = SimpleNamespace(arg_names=arg_names or list(signature))
    return SimpleNamespace(src=SimpleNamespace(signature=signature, constants=constants or {}, fn=fn),
                           metadata=SimpleNamespace(**md), function=0x5100,
                           packed_metadata={"kernel_name": md["kernel_name"][-49:]})


SIG = {"x": "*fp32", "n": "i32", "one": "i32", "none_ptr": "*i8", "alpha": "fp16", "BLOCK": "constexpr"}


def test_plan_drops_constexprs_and_specialised_constants():
    plan = ascend.plan_from_ascend(fake_kernel(SIG, {"one": 1, "none_ptr": None, "BLOCK": 64}), backend="null")
    assert list(plan.kinds) == ["ptr", "i32", "fp16"]
    lay = plan.layout  # ffts, lock, workspace, x@24, n@32, alpha@36 (passed as a float), the grid at 40
    assert (lay["size"], lay["ffts"], lay["args"], lay["grid"]) == (56, 0, [24, 32, 36], [40, 44, 48])


@pytest.mark.parametrize("metadata,env,reason", [
    ({"workspace_size": 256}, {}, "npu_workspace_unsupported:256"),
    ({"lock_num": 2}, {}, "npu_sync_lock_unsupported:2"),
    ({"sync_block_lock_layout": 5}, {}, "npu_sync_lock_unsupported:layout:5"),  # Triton-Ascend 3.6's field
    ({}, {"TRITON_DEVICE_PRINT": "1"}, "npu_device_print_unsupported"),
    ({"compile_on_910_95": True, "force_simt_only": True}, {}, "npu_launch_unsupported:910_95_simt"),
    ({}, {"TRITON_REGISTER_TENSOR_MSPROF": "1"}, "npu_msprof_registration"),
    ({}, {"TRITON_ALL_BLOCKS_PARALLEL": "1"}, "npu_core_count_unknown"),
])
def test_refusals_are_stable_and_named(monkeypatch, metadata, env, reason):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        ascend.plan_from_ascend(fake_kernel({"x": "*fp32"}, **metadata), backend="null")
    assert e.value.reason == reason


@pytest.mark.parametrize("ty", ["i8", "i16", "u8", "u16", "u1"])
def test_kinds_the_launcher_cannot_take_are_refused(ty):
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        ascend.plan_from_ascend(fake_kernel({"x": "*fp32", "v": ty}), backend="null")
    assert e.value.reason == f"arg_kind_unsupported_by_launcher:v:{ty}"


@pytest.mark.parametrize("env,ffts", [({}, True), ({"TRITON_DISABLE_FFTS": "true"}, False),
                                      ({"TRITON_ASCEND_ARCH": "Ascend310B4"}, False),
                                      ({"TRITON_ASCEND_ARCH": "Ascend910B3"}, True)])
def test_ffts_decided_as_the_launcher_decides(monkeypatch, env, ffts):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    plan = ascend.plan_from_ascend(fake_kernel({"x": "*fp32"}), backend="null")
    assert (plan.layout["ffts"] is not None) == ffts


def test_simt_only_kernels_have_no_lock_or_workspace_slots():
    plan = ascend.plan_from_ascend(fake_kernel({"x": "*fp32"}, force_simt_only=True), backend="null")
    assert plan.layout["size"] == 32 and plan.layout["args"] == [8]  # ffts, x, the grid (12 bytes), padded to 8
