"""Conformance without a GPU: real Triton kernels compiled here for sm_90; the plan's layout must
equal the parameter offsets and sizes the compiled kernel declares in its PTX."""

import importlib.util
import os
import random
import re
import sys

import pytest

triton = pytest.importorskip("triton") if os.environ.get("FASTLAUNCH_ALLOW_NO_TRITON") else __import__("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import fastlaunch  # noqa: E402
from fastlaunch import FastLaunchPlanUnavailable  # noqa: E402
from fastlaunch.triton import abi_of, plan_from_compiled  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import triton_kernels as K  # noqa: E402

pytestmark = pytest.mark.triton_abi
TARGET = GPUTarget("cuda", 90, 32)
PARAM = re.compile(r"^\s*\.param\s+(?P<body>.*?)\s+(?P<name>[\w$]+)(\[(?P<count>\d+)\])?\s*,?\s*$")
SIZES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
         "u64": 8, "s64": 8, "b64": 8, "f64": 8}


def compile_sm90(fn, signature, constexprs=None, num_warps=4):
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}), target=TARGET,
                          options={"num_warps": num_warps})


def ptx_params(ptx):
    """(offset, size) of each kernel parameter, as the PTX declares them: each at the next multiple
    of its alignment (an explicit .align, else its type's size), in order."""
    lines = ptx.splitlines()
    start = next(i for i, line in enumerate(lines) if ".entry" in line)
    params, offset = [], 0
    for line in lines[start + 1:]:
        if line.strip().startswith(")"):
            break
        m = PARAM.match(line)
        assert m, line
        body = m.group("body").split()
        ty = next(t[1:] for t in body if t[1:] in SIZES)
        elem = SIZES[ty]
        size = elem * int(m.group("count") or 1)
        align = elem
        if ".ptr" not in body and ".align" in body:  # .ptr .align N is the pointee's alignment
            align = int(body[body.index(".align") + 1])
        offset = (offset + align - 1) // align * align
        params.append((offset, size))
        offset += size
    return params, offset


def check_layout(ck, kinds_expected=None):
    abi = abi_of(ck)
    if kinds_expected is not None:
        assert abi.kinds == kinds_expected
    plan = plan_from_compiled(ck, backend="null", grid=(1,))
    layout = plan.layout
    params, end = ptx_params(ck.asm["ptx"])
    ours = list(zip(layout["args"], [SLOT[k] for k in abi.kinds])) + [(o, 8) for o in layout["hidden"]]
    assert ours == params, (ours, params)
    assert layout["size"] == (end + layout["align"] - 1) // layout["align"] * layout["align"]
    return abi, plan


SLOT = {"ptr": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8, "fp16": 2,
        "bf16": 2, "fp32": 4, "fp64": 8}


def test_vadd_layout_and_metadata():
    ck = compile_sm90(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                      {"BLOCK": 1024}, num_warps=8)
    abi, plan = check_layout(ck, ["ptr", "ptr", "ptr", "i32"])
    assert abi.names == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert (abi.num_warps, abi.num_ctas, abi.hidden_ptrs) == (8, 1, 2)
    assert plan.owner is ck and plan.layout["hidden"] == [32, 40]


def test_every_kind():
    kinds = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
    names = ["b", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "h", "bh", "f", "d"]
    sig = {"out_ptr": "*fp32", **dict(zip(names, kinds))}
    check_layout(compile_sm90(K.every_kind, sig), ["ptr"] + kinds)
    # Triton spells booleans u1 too.
    sig_u1 = dict(sig, b="u1")
    check_layout(compile_sm90(K.every_kind, sig_u1), ["ptr"] + kinds)


@pytest.mark.parametrize("seed", range(6))
def test_every_kind_in_random_orders(tmp_path, seed):
    """The same kinds shuffled, in a kernel generated for each order (alignment gaps differ)."""
    rng = random.Random(seed)
    kinds = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"] * 2
    rng.shuffle(kinds)
    names = [f"a{i}" for i in range(len(kinds))]
    body = "\n".join(f"    tl.store(out_ptr + {i}, {n}.to(tl.float32))" for i, n in enumerate(names))
    src = (f"import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(out_ptr, {', '.join(names)}):\n{body}\n")
    path = tmp_path / f"k{seed}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"fl_gen_k{seed}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    check_layout(compile_sm90(mod.k, {"out_ptr": "*fp32", **dict(zip(names, kinds))}), ["ptr"] + kinds)


def test_constexprs_are_dropped():
    ck = compile_sm90(K.constexpr_between, {"a_ptr": "*fp16", "B": "constexpr", "n": "i32", "C": "constexpr",
                                            "m": "i64", "s": "fp32"}, {"B": 64, "C": 3})
    abi, _ = check_layout(ck, ["ptr", "i32", "i64", "fp32"])
    assert abi.names == ["a_ptr", "n", "m", "s"]


def test_many_arguments(tmp_path):
    nptr, nint = 40, 24
    names = [f"p{i}" for i in range(nptr)] + [f"s{i}" for i in range(nint)]
    body = "\n".join(f"    tl.store(p{i} + s{i % nint}, {i}.0)" for i in range(nptr))
    src = f"import triton\nimport triton.language as tl\n\n@triton.jit\ndef many({', '.join(names)}):\n{body}\n"
    path = tmp_path / "many.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("fl_gen_many", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {**{f"p{i}": "*fp32" for i in range(nptr)}, **{f"s{i}": ("i64" if i % 3 == 0 else "i32") for i in range(nint)}}
    abi, plan = check_layout(compile_sm90(mod.many, sig))
    assert len(abi.kinds) == 64 and abi.kinds[:40] == ["ptr"] * 40


def test_fixed_args_and_grid_program():
    ck = compile_sm90(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                      {"BLOCK": 256})
    plan = plan_from_compiled(ck, backend="null", grid_exprs=["-((n) // -(256))", "1", "1"])
    assert plan.grid_mode == "program" and plan.resolve_grid(0, 0, 0, 1000) == (4, 1, 1)
    fixed = plan_from_compiled(ck, backend="null", fixed_args=[4096], grid_exprs=["-((n) // -(256))", "1", "1"])
    assert fixed.grid_mode == "static" and fixed.runtime_arg_count == 3


def test_refusals_and_unavailable_backend():
    ck = compile_sm90(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                      {"BLOCK": 128})

    class WithScratch:
        src = ck.src
        metadata = ck.metadata._replace(global_scratch_size=256)

    with pytest.raises(FastLaunchPlanUnavailable) as e:
        plan_from_compiled(WithScratch(), backend="null", grid=(1,))
    assert (e.value.reason, e.value.stable) == ("global_scratch_required:256", True)
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        plan_from_compiled(ck, backend="cuda", function=0x1234, grid=(1,))
    assert e.value.reason.startswith("backend_unavailable:cuda:")
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        plan_from_compiled(ck, backend="null", runtime_arg_count=2, fixed_args=[1], grid=(1,))
    assert e.value.reason == "canonical_args_size_mismatch:3:4"


def test_older_signature_formats():
    """Triton before 3.3 keyed signatures by position and left constexprs out of them; the kinds
    must come out the same."""
    ck = compile_sm90(K.constexpr_between, {"a_ptr": "*fp16", "B": "constexpr", "n": "i32", "C": "constexpr",
                                            "m": "i64", "s": "fp32"}, {"B": 64, "C": 3})

    class Src:
        fn = ck.src.fn
        signature = {0: "*fp16", 2: "i32", 4: "i64", 5: "fp32"}
        constants = {1: 64, 3: 3}

    class Old:
        src = Src()
        metadata = {"num_warps": 4, "num_ctas": 1, "shared": 0}

    abi = abi_of(Old())
    assert abi.kinds == ["ptr", "i32", "i64", "fp32"] and abi.names == ["a_ptr", "n", "m", "s"]
    assert abi.hidden_ptrs == 0
    assert fastlaunch.layout("cuda", abi.kinds)["size"] == 32  # i64 at 16, fp32 at 24, tail to 8


def test_tuple_arguments_are_flattened():
    """Triton 3.3+ signatures may hold tuples; their members are ABI arguments in order, and a
    constexpr member (by type or by its (i, j) path in constants) is dropped."""

    class Src:
        class fn:
            arg_names = ["t", "n", "u"]

        signature = {"t": ("*fp32", "i32", "constexpr"), "n": "i64", "u": ("fp16", "*i8")}
        constants = {(2, 1): None}

    class Kernel:
        src = Src()
        metadata = {"num_warps": 2, "global_scratch_size": 0, "profile_scratch_size": 0}

    abi = abi_of(Kernel())
    assert abi.kinds == ["ptr", "i32", "i64", "fp16"]
    assert abi.names == ["t_0", "t_1", "n", "u_0"]
    assert abi.positions == [(0, 0), (0, 1), (1, None), (2, 0)]
    assert abi.hidden_ptrs == 2
    # The names are plan names: a plan takes them (they once failed its identifier check).
    plan = fastlaunch.Plan(None, abi.kinds, backend="null", abi="cuda", arg_names=abi.names, grid=(1,))
    assert len(plan.layout["args"]) == 4


def test_nested_tuples_are_flattened_as_tritons_launcher_expands_them():
    """('*fp32', ('i32', 'fp32')): depth first, each leaf an ABI argument at the offset the PTX
    declares, a leaf's position its index among the tuple's leaves; a constexpr leaf (by type or by
    its path in constants) dropped."""
    ck = compile_sm90(K.nested, {"x_ptr": "*fp32", "t": ("*fp32", ("i32", "fp32")), "n": "i32"})
    abi, plan = check_layout(ck, ["ptr", "ptr", "i32", "fp32", "i32"])
    assert abi.names == ["x_ptr", "t_0", "t_1_0", "t_1_1", "n"]
    assert abi.positions == [(0, None), (1, 0), (1, 1), (1, 2), (2, None)]
    from fastlaunch.triton import abi_from_signature

    names, kinds, positions, _ = abi_from_signature({"t": ("*fp32", ("i32", "constexpr", "i64")), "u": ("fp16", ("i8",))},
                                                    {(1, 1, 0): None}, ["t", "u"])
    assert kinds == ["ptr", "i32", "i64", "fp16"] and names == ["t_0", "t_1_0", "t_1_2", "u_0"]
    assert positions == [(0, 0), (0, 1), (0, 3), (1, 0)]


def test_tuple_member_names_never_collide_with_parameters():
    from fastlaunch.triton import abi_from_signature

    names, kinds, positions, _ = abi_from_signature({"t": ("*fp32", "i32"), "t_0": "i32"}, {}, ["t", "t_0"])
    assert names == ["t_0", "t_1", "_t_0"] and kinds == ["ptr", "i32", "i32"]
    assert len(set(names)) == 3 and all(n.isidentifier() for n in names)


def test_clusters_as_each_triton_launches_them():
    """Triton <= 3.5 multiplies the grid by metadata.cluster_dims when num_ctas != 1; later
    versions multiply x by num_ctas. The plan's CTAs per program follow whichever the binary has."""
    from fastlaunch.triton import launch_options_of

    assert launch_options_of({"num_warps": 4, "num_ctas": 1, "shared": 0, "cluster_dims": (4, 1, 1)})["num_ctas"] == 1
    assert launch_options_of({"num_warps": 4, "num_ctas": 2, "shared": 0, "cluster_dims": (4, 1, 1)})["num_ctas"] == 4
    assert launch_options_of({"num_warps": 4, "num_ctas": 2, "shared": 0, "cluster_dims": [2]})["num_ctas"] == 2
    assert launch_options_of({"num_warps": 4, "num_ctas": 4, "shared": 0})["num_ctas"] == 4
    for dims in ((2, 2, 1), (1, 1, 2)):
        with pytest.raises(FastLaunchPlanUnavailable) as e:
            launch_options_of({"num_warps": 4, "num_ctas": 4, "shared": 0, "cluster_dims": dims})
        assert e.value.stable and e.value.reason == "cluster_dims_unsupported:%dx%dx%d" % dims

    class Src:
        class fn:
            arg_names = ["p", "n"]

        signature = {"p": "*fp32", "n": "i32"}
        constants = {}

    class Old:
        src = Src()
        metadata = {"num_warps": 4, "num_ctas": 2, "shared": 0, "cluster_dims": (2, 1, 1)}

    assert abi_of(Old()).num_ctas == 2
    Old.metadata = dict(Old.metadata, cluster_dims=(1, 2, 1))
    with pytest.raises(FastLaunchPlanUnavailable, match="cluster_dims_unsupported:1x2x1"):
        abi_of(Old())


def test_instrumented_kernels_are_refused():
    """Triton 3.9's instrumentation modes (gsan adds three hidden arguments its launcher fills per
    call) cannot go through a plan."""
    from fastlaunch.triton import launch_options_of

    for md in ({"instrumentation_mode": "gsan", "num_warps": 4},
               {"instrumentation_mode": " gsan,other ", "num_warps": 4}):
        with pytest.raises(FastLaunchPlanUnavailable) as e:
            launch_options_of(md)
        assert e.value.stable and e.value.reason.startswith("instrumentation_unsupported:gsan")
    assert launch_options_of({"instrumentation_mode": "", "num_warps": 4})["num_warps"] == 4
    ck = compile_sm90(K.vadd, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                      {"BLOCK": 128})

    class Instrumented:
        src = ck.src
        metadata = dict(ck.metadata._asdict(), instrumentation_mode="gsan")

    with pytest.raises(FastLaunchPlanUnavailable, match="instrumentation_unsupported:gsan"):
        plan_from_compiled(Instrumented(), backend="null", grid=(1,))


def test_one_signature_mapping_and_kinds_parsed_in_c():
    """abi_from_signature is the one mapping (compiled kernels and Inductor's triton_meta use it);
    C parses the kinds, Triton's spellings included, and names an argument it cannot take."""
    from fastlaunch import _C
    from fastlaunch.triton import abi_from_signature

    assert _C.kinds(["*fp32", "u1", "f16", "bool", "fp64", "i64"]) == ["ptr", "i1", "fp16", "i1", "fp64", "i64"]
    names, kinds, positions, folded = abi_from_signature(
        {"x": "*fp32", "ks0": "i32", "n": "i32", "B": "constexpr"}, {"ks0": 1}, ["x", "ks0", "n", "B"])
    assert (names, kinds, folded) == (["x", "n"], ["ptr", "i32"], {"ks0": 1})
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        abi_from_signature({"x": "*fp32", "y": "q8"}, {}, ["x", "y"])
    assert e.value.stable and e.value.reason == "arg_kind_unsupported:y:q8"
    with pytest.raises(FastLaunchPlanUnavailable, match="signature_unrecognised"):
        abi_from_signature(None, {}, [])
