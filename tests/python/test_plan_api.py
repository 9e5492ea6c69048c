"""Plans from Python: launching real host kernels, every kind, every refusal with its reason."""

import ctypes
import math
import struct

import pytest

import fastlaunch
from fastlaunch import FastLaunchError, FastLaunchPlanUnavailable, Plan
from fastlaunch import _C


def vadd_plan(kernels, **kw):
    kw.setdefault("grid_exprs", ["-((n) // -(B))", "1", "1"])
    return Plan(kernels["vadd"], ["ptr", "ptr", "ptr", "i32", "i32"], fixed_args=[16],
                arg_names=["x", "y", "out", "n", "B"], name="vadd", **kw)


@pytest.mark.parametrize("grid", ["program", "static", "caller"])
def test_vadd_end_to_end(kernels, stream, buf, grid):
    n = 1000
    x, y, out = buf(n, ctypes.c_float), buf(n, ctypes.c_float), buf(n, ctypes.c_float)
    for i in range(n):
        x[i] = i
        y[i] = 2 * i + 0.5
    if grid == "program":
        plan = vadd_plan(kernels)
        plan(x.arg, y.arg, out.arg, n, stream=stream.handle)
    elif grid == "static":
        plan = vadd_plan(kernels, grid_exprs=None, grid=(63,))
        assert plan.grid_mode == "static"
        plan(x.arg, y.arg, out.arg, n, stream=stream.handle)
    else:
        plan = vadd_plan(kernels, grid_exprs=None)
        assert plan.grid_mode == "caller"
        plan(x.arg, y.arg, out.arg, n, stream=stream.handle, grid=(63, 1, 1))
    stream.synchronize()
    assert out.tolist() == [3 * i + 0.5 for i in range(n)]
    assert stream.count == 1


class _Name(str):
    pass


@pytest.mark.parametrize("make", [lambda s: "".join(list(s)), _Name], ids=["built", "subclass"])
def test_keywords_not_interned_are_read_by_value(kernels, stream, buf, make):
    """stream= and grid= given by names that are not interned strs (built at run time, a str
    subclass): read by value, as an interned name is by identity."""
    import sys
    n = 100
    x, y, out = buf(n, ctypes.c_float), buf(n, ctypes.c_float), buf(n, ctypes.c_float)
    for i in range(n):
        x[i], y[i] = i, 1.0
    st, gr = make("stream"), make("grid")
    assert st is not sys.intern("stream") and st == "stream"
    plan = vadd_plan(kernels, grid_exprs=None)
    plan(x.arg, y.arg, out.arg, n, **{st: stream.handle, gr: (7, 1, 1)})
    stream.synchronize()
    assert out.tolist() == [i + 1.0 for i in range(n)]
    assert stream.count == 1
    with pytest.raises(TypeError, match="unexpected keyword argument 'streams'"):
        plan(x.arg, y.arg, out.arg, n, **{make("streams"): stream.handle})
    assert stream.count == 1


def test_grid_program_constant_folds_to_static(kernels):
    plan = vadd_plan(kernels, grid_exprs=["-((4096) // -(B))", "1", "1"])
    assert plan.grid_mode == "static"
    assert plan.resolve_grid(0, 0, 0, 5) == (256, 1, 1)


def test_every_kind_reaches_the_kernel(kernels, stream, buf):
    out = buf(13, ctypes.c_double)
    kinds = ["ptr", "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
    plan = Plan(kernels["kinds"], kinds, grid=(1,), name="kinds")
    values = [True, -128, -32768, -2**31, -2**63, 255, 65535, 2**32 - 1, 2**64 - 1, 0.333251953125, -1.5, 0.1, math.pi]
    plan(out.arg, *values, stream=stream.handle)
    stream.synchronize()
    got = out.tolist()
    expected = [1.0, -128, -32768, -2**31, float(-2**63), 255, 65535, 2**32 - 1, float(2**64 - 1),
                struct.unpack("e", struct.pack("e", 0.333251953125))[0], -1.5, struct.unpack("f", struct.pack("f", 0.1))[0],
                math.pi]
    assert got == expected


def test_fp16_rounds_like_struct(kernels, stream, buf):
    out = buf(13, ctypes.c_double)
    kinds = ["ptr", "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
    plan = Plan(kernels["kinds"], kinds, grid=(1,))
    for v in [0.1, 1e-7, 65504.0, 65519.0, -3.14159, 6.1e-5, 2.0**-24, 2.0**-25 * 1.5]:
        plan(out.arg, False, 0, 0, 0, 0, 0, 0, 0, 0, v, 0.0, 0.0, 0.0, stream=stream.handle)
        stream.synchronize()
        assert out.tolist()[9] == struct.unpack("e", struct.pack("e", v))[0], v
    with pytest.raises(FastLaunchError) as e:
        plan(out.arg, False, 0, 0, 0, 0, 0, 0, 0, 0, 65520.0, 0.0, 0.0, 0.0, stream=stream.handle)
    assert e.value.reason == "float_out_of_range:10:fp16"


@pytest.mark.parametrize("kind,value,reason", [
    ("i8", 128, "int_out_of_range:1:i8"),
    ("i8", -129, "int_out_of_range:1:i8"),
    ("u8", -1, "uint_negative:1:u8"),
    ("u16", 65536, "int_out_of_range:1:u16"),
    ("i32", 2**31, "int_out_of_range:1:i32"),
    ("i64", 2**63, "int_out_of_range:1:i64"),
    ("u64", 2**64, "int_out_of_range:1:u64"),
    ("i64", -2**70, "int_out_of_range:1:i64"),
    ("i1", 2, "int_out_of_range:1:i1"),
    ("i32", 1.5, "int_expected:1:i32:float"),
    ("i32", "7", "int_expected:1:i32:str"),
    ("fp32", 1e39, "float_out_of_range:1:fp32"),
    ("fp32", "x", "float_expected:1:fp32:str"),
    ("fp64", None, "float_expected:1:fp64:NoneType"),
])
def test_bad_values_are_refused_before_submit(kind, value, reason):
    plan = Plan(None, ["ptr", kind], backend="null", grid=(1,))
    s = _C.stream_create("null")
    with pytest.raises(FastLaunchError) as e:
        plan(0, value, stream=s)
    assert e.value.reason == reason
    assert e.value.backend_submitted is False and e.value.stable is False
    assert _C.stream_count(s, "null") == 0
    plan(0, 0 if kind != "fp32" and kind != "fp64" else 0.0, stream=s)
    assert _C.stream_count(s, "null") == 1


def test_pointer_arguments():
    plan = Plan(None, ["ptr"], backend="null", grid=(1,))
    s = _C.stream_create("null")

    class Fake:
        def __init__(self, addr):
            self.addr = addr

        def data_ptr(self):
            if isinstance(self.addr, Exception):
                raise self.addr
            return self.addr

    plan(None, stream=s)
    plan(0x1000, stream=s)
    plan(Fake(0x2000), stream=s)
    for bad, reason in [(Fake(RuntimeError("no")), "ptr_extract_failed:0:Fake"), (Fake("str"), "ptr_extract_failed:0:Fake"),
                        (object(), "ptr_extract_failed:0:object"), (-5, "ptr_out_of_range:0"), (2**64, "ptr_out_of_range:0"), (1.5, "ptr_extract_failed:0:float")]:
        with pytest.raises(FastLaunchError) as e:
            plan(bad, stream=s)
        assert e.value.reason == reason and not e.value.backend_submitted
    assert _C.stream_count(s, "null") == 3


def test_launch_refusals(kernels, stream):
    plan = vadd_plan(kernels)
    with pytest.raises(FastLaunchError) as e:
        plan(0, 0, 0, stream=stream.handle)
    assert (e.value.reason, e.value.stable) == ("args_size_mismatch:3:4", True)
    with pytest.raises(FastLaunchError) as e:
        plan(0, 0, 0, 10, stream=0xdead0000)
    assert e.value.reason == "stream_invalid:0xdead0000"
    with pytest.raises(FastLaunchError) as e:
        plan(0, 0, 0, 10, stream="s")
    assert e.value.reason == "stream_invalid_type:str"
    with pytest.raises(FastLaunchError) as e:
        plan(0, 0, 0, -100, stream=stream.handle)
    assert (e.value.reason, e.value.stable) == ("grid_dim_negative:0", False)
    with pytest.raises(FastLaunchError) as e:
        plan(0, 0, 0, 10, stream=stream.handle, grid=(1, 1, 1))
    assert e.value.reason == "grid_unexpected"
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        plan(0, 0, 0, 10, stream=stream.handle, bogus=1)
    caller = vadd_plan(kernels, grid_exprs=None)
    for grid, reason in [(None, "grid_missing"), ((1, 2, 3, 4), "grid_rank_mismatch:4"), ((1, "x"), "invalid_grid:1"),
                         (7, "invalid_grid:int"), ((2**40,), "grid_dim_exceeds:0"), ((1, -1), "grid_dim_negative:1")]:
        with pytest.raises(FastLaunchError) as e:
            caller(0, 0, 0, 10, stream=stream.handle, grid=grid)
        assert e.value.reason == reason
    stream.synchronize()
    assert stream.count == 0


def test_plan_refusals(kernels):
    cases = [
        (dict(kinds=["ptr", "ptr"], fixed_args=[0]), "fixed_ptr_unsupported:1"),
        (dict(kinds=["ptr", "i8"], fixed_args=[300]), "int_out_of_range:1:i8"),
        (dict(kinds=["ptr", "i32"], grid=(2**40,)), "grid_dim_exceeds:0"),
        (dict(kinds=["ptr", "i32"], grid_exprs=["1 // 0", "1", "1"], arg_names=["p", "n"]), "grid_expr_const_div_by_zero:0"),
        (dict(kinds=["ptr", "i32"], grid_exprs=["p", "1", "1"], arg_names=["p", "n"]), "grid_var_not_int:0:ptr:0"),
        (dict(kinds=["ptr", "i32"], grid_exprs=["m", "1", "1"], arg_names=["p", "n"]), "grid_expr_unknown_name:m:0"),
        (dict(kinds=["i64"] * 600), "args_too_large:4800:4096"),
    ]
    for kw, reason in cases:
        with pytest.raises(FastLaunchPlanUnavailable) as e:
            Plan(kernels["vadd"], **kw)
        assert e.value.reason == reason and e.value.stable is True
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        Plan(0x1234, ["ptr"], backend="cuda")
    assert e.value.reason.startswith("backend_unavailable:cuda:")
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        Plan(None, ["ptr"], backend="host")
    assert e.value.reason == "kernel_null"
    # A kind no plan takes is a stable refusal naming the argument (C parses kinds, Triton's spellings too).
    for kinds, reason in ((["ptr", "q32"], "kinds[1]: kind_unknown:q32"), (["constexpr"], "kinds[0]: kind_constexpr_not_abi"),
                          (["*fp32", "u1", "i32\0x"], "kinds[2]: kind_unknown:embedded NUL")):
        with pytest.raises(FastLaunchPlanUnavailable) as e:
            Plan(None, kinds, backend="null")
        assert e.value.reason == reason and e.value.stable is True
    with pytest.raises(ValueError, match="backend: unknown backend .gpu. \\(expected one of host, null, cuda, npu, hip\\)"):
        Plan(None, ["ptr"], backend="gpu")
    with pytest.raises(TypeError, match="kernel: the host backend needs a HostKernel, got str"):
        Plan("k", ["ptr"])
    with pytest.raises(TypeError, match="kernel: the host backend needs a HostKernel, got int"):
        Plan(0x1234, ["ptr"])  # an arbitrary address is never called on a worker thread
    with pytest.raises(TypeError, match="kernel: expected a HostKernel or an int handle"):
        Plan("k", ["ptr"], backend="null")
    with pytest.raises(ValueError, match="grid and grid_exprs"):
        Plan(None, ["ptr"], backend="null", grid=(1,), grid_exprs=["1", "1", "1"])
    with pytest.raises(ValueError, match="arg_names: expected 2 entries, got 1"):
        Plan(None, ["ptr", "i32"], backend="null", arg_names=["a"])
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        fastlaunch.HostKernel("/nonexistent/lib.so", "k")
    assert e.value.reason.startswith("dlopen:")


def test_plan_introspection(kernels):
    plan = vadd_plan(kernels)
    assert plan.kinds == ["ptr", "ptr", "ptr", "i32", "i32"]
    assert plan.runtime_arg_count == 4
    assert plan.layout == {"size": 32, "align": 8, "args": [0, 8, 16, 24, 28], "grid": None, "ffts": None, "hidden": []}
    assert plan.template[28:32] == struct.pack("i", 16)
    assert plan.owner is None and plan.name == "vadd" and plan.backend == "host"
    npu = Plan(None, ["ptr", "ptr", "i32"], backend="null", abi="npu", options={"ffts": True, "ffts_addr": 0xabc},
               grid=(40, 2, 1))
    assert npu.layout == fastlaunch.layout("npu", ["ptr", "ptr", "i32"], ffts=True) and npu.abi == "npu"
    t = npu.template
    assert struct.unpack_from("<Q", t, 0)[0] == 0xabc
    assert struct.unpack_from("<iii", t, 44) == (40, 2, 1)


def test_host_kernel_keeps_library_alive(kernels, stream, buf):
    import gc

    k = fastlaunch.HostKernel(kernels["vadd"].path, "vadd")
    plan = Plan(k, ["ptr", "ptr", "ptr", "i32", "i32"], fixed_args=[8], grid=(4,))
    del k
    gc.collect()
    x, y, out = buf(32, ctypes.c_float), buf(32, ctypes.c_float), buf(32, ctypes.c_float)
    x[3] = 1.0
    y[3] = 2.0
    plan(x.arg, y.arg, out.arg, 32, stream=stream.handle)
    del plan
    gc.collect()
    stream.synchronize()
    assert out.tolist()[3] == 3.0


def test_ignored_positional_arguments(kernels, stream, buf):
    """A call may pass arguments the kernel does not take (values folded into the binary); the plan
    skips them, and the grid reads the ones it keeps."""
    x, y, out = buf(64, ctypes.c_float), buf(64, ctypes.c_float), buf(64, ctypes.c_float)
    x[5], y[5] = 1.0, 2.0
    plan = Plan(kernels["vadd"], ["ptr", "ptr", "ptr", "i32", "i32"], fixed_args=[16], arg_names=["x", "y", "out", "n", "B"],
                grid_exprs=["-((n) // -(B))", "1", "1"], ignore=[1, 4])
    assert (plan.call_arg_count, plan.runtime_arg_count) == (6, 4)
    plan(x.arg, "skipped", y.arg, out.arg, object(), 64, stream=stream.handle)
    assert plan.resolve_grid(x.arg, None, y.arg, out.arg, None, 64) == (4, 1, 1)
    stream.synchronize()
    assert out.tolist()[5] == 3.0
    with pytest.raises(FastLaunchError) as e:
        plan(x.arg, y.arg, out.arg, 64, stream=stream.handle)
    assert e.value.reason == "args_size_mismatch:4:6"
    for bad in ([6], [0, 0], [-1]):
        with pytest.raises(ValueError, match="ignore"):
            Plan(kernels["vadd"], ["ptr", "i32"], fixed_args=[16], grid=(1,), ignore=bad)


def test_keyboard_interrupt_in_data_ptr_propagates():
    plan = Plan(None, ["ptr"], backend="null", grid=(1,))
    s = _C.stream_create("null")

    class Interrupting:
        def data_ptr(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        plan(Interrupting(), stream=s)
    with pytest.raises(KeyboardInterrupt):
        _C.Floor(["ptr"])(Interrupting(), stream=s)
    assert _C.stream_count(s, "null") == 0


def test_strings_from_a_generator_outlive_parsing():
    exprs = (e.replace("Q", "") for e in ["-((nQ) // -(128))", "1Q", "Q1"])
    names = (n for n in ["p", "n"])
    plan = Plan(None, ["ptr", "i32"], backend="null", grid_exprs=exprs, arg_names=names)
    assert plan.resolve_grid(0, 1000) == (8, 1, 1)


def test_reasons_cut_inside_a_character_still_raise_fastlaunch_error():
    plan = Plan(None, ["ptr", "i32"], backend="null", grid=(1,))
    s = _C.stream_create("null")
    odd = type("a" * 39 + "é", (), {})()
    with pytest.raises(FastLaunchError) as e:
        plan(0, odd, stream=s)
    assert e.value.reason.startswith("int_expected:1:i32:" + "a" * 39)


def test_layout_with_keyword_arguments():
    assert fastlaunch.layout(abi="host", kinds=["ptr", "i8"])["size"] == 16
    with pytest.raises(ValueError, match="abi: unknown ABI 'gpu'"):
        fastlaunch.layout(abi="gpu", kinds=["ptr"])


def test_a_plan_takes_a_typed_spec():
    """The ABI is explicit (default: the backend's own, from its table) and the options are that
    ABI's, by name; the null backend stands in for any ABI."""
    host = Plan(None, ["ptr", "i32"], backend="null", grid=(1,))
    assert host.abi == "host" and host.layout["size"] == 16
    npu = Plan(None, ["ptr", "i32"], backend="null", abi="npu", grid=(1,))
    assert npu.abi == "npu" and npu.layout == fastlaunch.layout("npu", ["ptr", "i32"]) and npu.layout["size"] == 40
    cuda = Plan(None, ["*fp32", "i32"], backend="null", abi="cuda", options={"hidden_ptrs": 2, "num_warps": 8}, grid=(1,))
    assert cuda.layout["hidden"] == [16, 24]
    with pytest.raises(ValueError, match="'num_warps' is not an option of the npu ABI"):
        Plan(None, ["ptr"], backend="null", abi="npu", options={"num_warps": 4}, grid=(1,))
    with pytest.raises(ValueError, match="option_out_of_range:num_warps:64"):
        Plan(None, ["ptr"], backend="null", abi="cuda", options={"num_warps": 64}, grid=(1,))
    with pytest.raises(TypeError, match="options\\['num_warps'\\]: expected an int or a bool, got float"):
        Plan(None, ["ptr"], backend="null", abi="cuda", options={"num_warps": 4.0}, grid=(1,))
    with pytest.raises(FastLaunchPlanUnavailable, match="abi_not_for_backend:npu:host"):
        Plan(None, ["ptr"], backend="host", abi="npu", grid=(1,))
    with pytest.raises(ValueError, match="abi: unknown ABI 'gpu'"):
        Plan(None, ["ptr"], backend="null", abi="gpu")
    info = fastlaunch._C.backend_info("npu")
    assert info == {"name": "npu", "abi": "npu", "abis": ["npu"], "kernel": "handle", "own_streams": False}
    assert fastlaunch._C.backend_info("null")["abis"] == ["host", "cuda", "npu", "hip"]
    assert fastlaunch._C.backend_info("hip") == {"name": "hip", "abi": "hip", "abis": ["hip"], "kernel": "handle",
                                                 "own_streams": False}
    assert fastlaunch._C.backend_info("host")["kernel"] == "host_fn"


def test_more_than_256_runtime_args_take_every_path():
    """A foreach or combo kernel past 256 arguments: launching, resolving its grid and the finalized
    entry all take it (values past the stack array go on the heap)."""
    s = fastlaunch._C.stream_create("null")
    kinds = ["ptr"] * 150 + ["i32"] * 150
    names = [f"a{i}" for i in range(300)]
    plan = Plan(None, kinds, backend="null", grid_exprs=["-((a299) // -(64))", "a150", "1"], arg_names=names)
    args = [0x1000 + 8 * i for i in range(150)] + list(range(1, 151))
    assert plan.resolve_grid(*args) == ((150 + 63) // 64, 1, 1)
    plan(*args, stream=s)
    assert fastlaunch._C.stream_count(s, "null") == 1
    fastlaunch._C.stream_destroy(s, "null")


def test_the_c_launch_loop_launches_n_times_and_refuses_what_it_cannot_time():
    """_C.bench_c_launch_loop (the hip-stub bench's fastlaunch-c): fl_launch n times over values read
    once, each a launch; a bad value is refused before any, naming the argument, and a caller-grid plan
    is refused by name."""
    plan = Plan(None, ["ptr", "i32"], backend="null", grid=(1,))
    s = _C.stream_create("null")
    assert _C.bench_c_launch_loop(plan, (0x7F00_0000_1000, 7), s, 50) >= 0
    assert _C.stream_count(s, "null") == 50
    with pytest.raises(FastLaunchError) as e:
        _C.bench_c_launch_loop(plan, (0, 2**31), s, 50)
    assert e.value.reason == "int_out_of_range:1:i32"
    assert _C.stream_count(s, "null") == 50
    caller = Plan(None, ["ptr"], backend="null")
    with pytest.raises(ValueError, match="caller-grid"):
        _C.bench_c_launch_loop(caller, (0,), s, 5)
    assert _C.stream_count(s, "null") == 50
