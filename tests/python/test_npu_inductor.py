"""torch_npu's Inductor with fastlaunch.inductor.enable(): torch_npu 2.14.0's own NPUCachingAutotuner
(run from the wheel's file by fldev.tn_reference) is bound, autotunes through its own run(), and
is promoted to the npu backend with its best runtime blocks and its GridNpu grid; every launch's
bytes equal what Triton-Ascend 3.2.0's own generated launcher packs for the same call.

Stand-ins (fldev.npu_inductor_scene): the compile step and the CompiledKernel it returns (Triton-
Ascend's shape), the NPU benchmark (each scene names the winner), CANN's runtime and torch_npu's
task queue (fldev.ascend_standin). Not shown here: a real Ascend device, CANN, torch_npu's C++
extension and its generated wrapper code (the calls below are what that code does:
kernel.run(*args, stream=stream0))."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import reference_unavailable

pytest.importorskip("torch")
pytest.importorskip("triton")

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")

PRELUDE = """
import random, sys
import torch
from fldev import ascend_standin, tn_reference
try:
    tn_reference.load()
except tn_reference.Incompatible as e:
    print("INCOMPATIBLE", str(e).splitlines()[0]); sys.exit(0)
except tn_reference.Unavailable as e:
    print("UNAVAILABLE", str(e).splitlines()[0]); sys.exit(0)
rt = ascend_standin.load(queue=True)
from fldev import npu_inductor_scene as S
import fastlaunch
from fastlaunch import inductor
from fastlaunch.bind import BoundLaunch
if __import__("os").environ.get("FASTLAUNCH_INDUCTOR") != "1":
    inductor.enable()
assert inductor.enabled()
CONFIGS = [{"X0BLOCK": 64, "X0BLOCK_SUB": 16}, {"X0BLOCK": 128, "X0BLOCK_SUB": 16},
           {"X0BLOCK": 256, "X0BLOCK_SUB": 32}]

def ffts_addr():
    import ctypes
    a, n = ctypes.c_uint64(), ctypes.c_uint32()
    assert rt.rtGetC2cCtrlAddr(ctypes.byref(a), ctypes.byref(n)) == 0
    return a.value

def expected(sc, ptrs, numel):
    # What Triton-Ascend 3.2.0's generated launcher packs for this call with the autotuner's choice.
    block = sc.autotuner.best_runtime_blocks[0]
    runner = sc.autotuner.best_launcher.__globals__["bin"].run
    blocks = -(-numel // block)
    return runner.ref.launch(list(ptrs) + [numel, block], (blocks, 1, 1), ffts_addr()), blocks

def check_launches(sc, calls, entries):
    stub = sc.autotuner.best_launcher.__globals__["bin"].function
    for (ptrs, numel), e in zip(calls, entries):
        ref, blocks = expected(sc, ptrs, numel)
        assert (e.kind, e.stub, e.blocks, e.stream) == (1, stub, blocks, S.STREAM), (e, blocks)
        assert e.size == ref.size and e.data[:e.size] == ref.data, (e.data.hex(), ref.data.hex())

def site(sc):
    rt.drain()  # the queue's thread runs queued launches: counts are read once it has run them all
    rows = [r for r in fastlaunch.report(open(__import__("os").devnull, "w"), as_dict=True)
            if r["site"] == sc.name]
    return rows[0] if rows else None
"""


def run_child(body: str, env=None, timeout=300):
    code = PRELUDE + textwrap.dedent(body)
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(TOOLS)] + sys.path))
    for k in ("FASTLAUNCH_INDUCTOR", "TORCHINDUCTOR_NPU_FAST_LAUNCH", "INDUCTOR_ASCEND_DUMP_FX_GRAPH", "INDUCTOR_ASCEND_CHECK_ACCURACY",
              "TRITON_DEVICE_PRINT", "TRITON_ASCEND_ARCH", "TRITON_DISABLE_FFTS", "TRITON_ALL_BLOCKS_PARALLEL"):
        child_env.pop(k, None)
    child_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    if proc.stdout.startswith("INCOMPATIBLE"):  # torch_npu 2.14.0's runtime needs a newer Inductor
        pytest.skip(proc.stdout.strip()[len("INCOMPATIBLE "):])
    if proc.stdout.startswith("UNAVAILABLE"):
        reference_unavailable(f"torch-npu wheel: {proc.stdout.strip()[len('UNAVAILABLE '):]} "
                              "(fetched from PyPI at test set-up)")
    return proc.stdout


@pytest.mark.parametrize("how", ["enable", "FASTLAUNCH_INDUCTOR=1"])
def test_bound_autotuned_promoted_and_launched_as_triton_ascend_packs(how):
    """The real NPUCachingAutotuner: bound at creation, its first call autotunes (stock run, three
    candidates over two compiled variants; the stand-in benchmark picks X0BLOCK=128), later calls
    take the npu plan with that runtime block as a fixed argument and torch_npu's GridNpu grid
    (ceil(numel / 128)) computed per call. Thousands of calls with random pointers and sizes,
    interleaved with queued stand-in aten ops while torch_npu's queue mode switches at random among
    0, 1 and 2: every call launched once, in call order, with Triton-Ascend's bytes."""
    out = run_child("""
        rng = random.Random(11)
        sc = S.Scene(rt, configs=CONFIGS, winner="c1")
        at = sc.autotuner
        assert type(at).__name__ == "NPUCachingAutotuner" and isinstance(vars(at)["run"], BoundLaunch)
        calls, order, switches = [], [], 0
        for i in range(3000):
            if rng.random() < 0.01:
                rt.set_mode(rng.choice([0, 1, 2]))
                switches += 1
            if rng.random() < 0.4:
                rt.aten_op(S.STREAM, i)
                order.append(("aten", i))
                continue
            ptrs = [rng.randrange(1, 2**40) * 16 for _ in range(3)]
            numel = rng.randrange(1, 65535 * 128)
            sc.call(*ptrs, numel)
            calls.append((ptrs, numel))
            order.append(("launch", numel))
        rt.drain()
        entries = rt.entries()
        got = [("aten", e.tag) if e.kind == 3 else ("launch", int.from_bytes(e.data[48:52], "little"))
               for e in entries]
        assert got == order, next(k for k, (a, b) in enumerate(zip(got, order)) if a != b)
        launches = [e for e in entries if e.kind != 3]
        assert len(launches) == len(calls) == rt.launches()
        assert at.best_runtime_blocks == (128,) and len(sc.compiled) == 2
        check_launches(sc, calls, launches)
        r = site(sc)
        assert r["stock"] == 1 and r["fast"] == len(calls) - 1 and r["promotions"] == 1, r
        assert sc.stock_launches == 1 and rt.task_errors() == 0
        print("ok", len(calls), switches, rt.enqueued())
    """, env={"FASTLAUNCH_INDUCTOR": "1"} if how != "enable" else None)
    ok, n, switches, enqueued = out.split()[-4:]
    assert ok == "ok" and int(n) > 1500 and int(switches) > 10 and int(enqueued) > 500


@pytest.mark.parametrize("how", ["TORCHINDUCTOR_NPU_FAST_LAUNCH=1", "patched"])
def test_torch_npu_fast_launch_owns_the_slot_when_on(how):
    """TORCHINDUCTOR_NPU_FAST_LAUNCH=1 (read by torch_npu's own config module), or torch_npu's fast
    launch patch installed (its marker on TritonCompileResultNpu, set here as the patch sets it):
    torch_npu's fast launch owns these call slots, fastlaunch binds none of them and report() says
    so; the calls run torch_npu's run() (stock here), each launched once."""
    out = run_child("""
        import io
        from torch_npu._inductor import config as npu_config
        if HOW == "patched":
            assert npu_config.enable_fast_launch is False
            S.tn_reference.load().TritonCompileResultNpu._npu_fast_launch_patched = True
        else:
            assert npu_config.enable_fast_launch is True
        sc = S.Scene(rt, configs=CONFIGS, winner="c2")
        assert "run" not in vars(sc.autotuner)
        for i in range(20):
            sc.call(0x1000, 0x2000, 0x3000, 1000 + i)
        rt.drain()
        assert rt.launches() == 20 and sc.stock_launches == 20
        buf = io.StringIO()
        fastlaunch.report(buf)
        print(buf.getvalue())
    """.replace("HOW", repr(how)), env={"TORCHINDUCTOR_NPU_FAST_LAUNCH": "1"} if how != "patched" else None)
    assert "not bound (torch_npu's own fast launch keeps these call slots): npu:torch_npu_fast_launch_owns=1" in out


def test_grouped_autotuners_stay_with_their_launcher_and_cost_model_ones_are_bound():
    """torch_npu's grouped autotuner (NPUSymbolicGroupedAutotuner: runtime blocks picked per call by
    group) is not bound; its cost-model autotuner (INDUCTOR_ASCEND_ENABLE_COSTMODEL, the same run())
    is, and is promoted after its first call."""
    run_child("""
        import fastlaunch.bind as fb
        g = S.Scene(rt, configs=CONFIGS,
                    meta={"group_enabled": True, "grouped_candidate_plan": {"group_id_count": 1}})
        assert type(g.autotuner).__name__ == "NPUSymbolicGroupedAutotuner", type(g.autotuner)
        assert "run" not in vars(g.autotuner) and fb.not_bound() == {"npu:grouped_autotuner": 1}
    """)
    run_child("""
        sc = S.Scene(rt, configs=CONFIGS, winner="c2")
        assert type(sc.autotuner).__name__ == "NPUCostModelAutotuner", type(sc.autotuner)
        calls = [([0x1000, 0x2000, 0x3000], 3000 + i) for i in range(12)]
        for ptrs, n in calls:
            sc.call(*ptrs, n)
        r = site(sc)
        assert r["fast"] == 11 and r["stock"] == 1 and sc.autotuner.best_runtime_blocks == (256,), r
        check_launches(sc, calls, rt.entries())
    """, env={"INDUCTOR_ASCEND_ENABLE_COSTMODEL": "1"})


def test_debug_modes_and_profiler_take_torch_npus_run():
    """Calls go through torch_npu's own run() while it does more than launch: its FX-graph dump mode
    (INDUCTOR_ASCEND_DUMP_FX_GRAPH) for the autotuner's lifetime, the autograd profiler while it
    records; back on the plan once the profiler stops. Each call launched once."""
    run_child("""
        sc = S.Scene(rt, configs=CONFIGS, winner="c0")
        for i in range(30):
            sc.call(0x1000, 0x2000, 0x3000, 4096 + i)
        r = site(sc)
        assert r["fast"] == 0 and r["stock"] == 30 and r["fallbacks"] == {"npu:dump_fx_graph": 30}, r
        assert rt.launches() == 30 == sc.stock_launches
    """, env={"INDUCTOR_ASCEND_DUMP_FX_GRAPH": "1"})
    run_child("""
        import torch.autograd.profiler as prof
        sc = S.Scene(rt, configs=CONFIGS, winner="c0")
        calls = []
        for i in range(60):
            prof._is_profiler_enabled = 20 <= i < 40
            ptrs = [0x1000 * (i + 1), 0x2000, 0x3000]
            sc.call(*ptrs, 4096 + i)
            calls.append((ptrs, 4096 + i))
        prof._is_profiler_enabled = False
        r = site(sc)
        assert r["fallbacks"].get("profiler") == 20 and r["stock"] == 21 and r["fast"] == 39, r
        assert rt.launches() == 60 and sc.stock_launches == 21
        check_launches(sc, calls, rt.entries())
    """)


@pytest.mark.parametrize("case,reason", [
    ({"metadata": {"workspace_size": 64}}, "npu_workspace_unsupported:64"),
    ({"metadata": {"lock_num": 2}}, "npu_sync_lock_unsupported:2"),
    ({"env": {"TRITON_DEVICE_PRINT": "1"}}, "npu_device_print_unsupported"),
])
def test_refused_kernels_keep_torch_npus_launcher(case, reason):
    """A kernel the npu plan does not take (workspace, sync lock, device print) is refused once,
    with its reason, and every call goes to torch_npu's launcher with its runtime blocks (the bytes
    Triton-Ascend packs), launched once."""
    run_child(f"""
        sc = S.Scene(rt, configs=CONFIGS, winner="c1", metadata={case.get("metadata", {})!r})
        calls = []
        for i in range(25):
            ptrs = [0x1000, 0x2000 * (i + 1), 0x3000]
            sc.call(*ptrs, 5000 + i)
            calls.append((ptrs, 5000 + i))
        r = site(sc)
        assert r["negative"] == {reason!r} and r["fast"] == 0 and r["stock"] == 25, r
        assert rt.launches() == 25 == sc.stock_launches
        check_launches(sc, calls, rt.entries())
    """, env=case.get("env"))


def test_grid_past_the_block_limit_takes_the_stock_launcher_for_that_call():
    """A call whose GridNpu grid exceeds 65,535 blocks is refused per launch before anything is
    submitted and runs through torch_npu's launcher; the calls around it stay on the plan."""
    run_child("""
        sc = S.Scene(rt, configs=CONFIGS, winner="c1")
        sizes = [1000, 1000, 128 * 65535, 128 * 65535 + 1, 1000, 128 * 70000, 1000]
        for n in sizes:
            sc.call(0x1000, 0x2000, 0x3000, n)
        r = site(sc)
        assert r["stock"] == 3 and r["fast"] == 4, r  # warm-up, then the two past the limit
        assert rt.launches() == len(sizes) and sc.stock_launches == 3
        assert [e.blocks for e in rt.entries()] == [-(-n // 128) for n in sizes]
    """)
