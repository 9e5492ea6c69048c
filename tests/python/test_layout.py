"""fastlaunch.layout() against independent references.

* host and cuda: a ctypes.Structure with the natural C type of every kind (plus the trailing hidden
  pointers of cuda) must have the same field offsets, sizeof and alignment.
* npu: the worked examples of torch_npu's BuildPackedLayout, and a Python re-implementation of
  Triton-Ascend's packed argument struct (written from the driver's template, not from layout.c)
  over random signatures for every option combination; where a C compiler is present, GNU C's
  own layout of that packed struct is checked too.
* refusals, and the `python -m fastlaunch layout` command line.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

import fastlaunch

# ---- kinds ---------------------------------------------------------------------------------------

# Every spelling fastlaunch accepts, mapped to the canonical kind: kind names, Triton pointer
# entries (a pointer whatever it points to) and Triton's scalar aliases.
SPELLINGS = {
    "ptr": "ptr", "*fp32": "ptr", "*fp16": "ptr", "*bf16": "ptr", "*i8": "ptr", "*i64": "ptr",
    "*u1": "ptr", "*k*fp16": "ptr",
    "i1": "i1", "u1": "i1", "bool": "i1",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
    "fp16": "fp16", "f16": "fp16", "bf16": "bf16",
    "fp32": "fp32", "f32": "fp32", "fp64": "fp64", "f64": "fp64",
}
KINDS = ["ptr", "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]

# The natural C type of each kind for the host and cuda ABIs (Triton's CUDA launcher passes i1
# as int8 and fp16/bf16 as their 16 bits).
CTYPE = {
    "ptr": ctypes.c_void_p, "i1": ctypes.c_int8,
    "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
    "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
    "fp16": ctypes.c_uint16, "bf16": ctypes.c_int16, "fp32": ctypes.c_float, "fp64": ctypes.c_double,
}

N_SIGNATURES = 1000


def random_signature(rng: random.Random, max_len: int = 24):
    """A list of spellings; about one in twenty is empty."""
    n = 0 if rng.random() < 0.05 else rng.randint(1, max_len)
    spellings = list(SPELLINGS)
    return [rng.choice(spellings) for _ in range(n)]


def canonical(signature):
    return [SPELLINGS[s] for s in signature]


# ---- host and cuda against ctypes ---------------------------------------------------------------


def ctypes_struct(kinds, hidden_ptrs: int):
    fields = [(f"a{i}", CTYPE[k]) for i, k in enumerate(kinds)]
    fields += [(f"h{i}", ctypes.c_void_p) for i in range(hidden_ptrs)]
    return type("Args", (ctypes.Structure,), {"_fields_": fields})


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the ABIs assume 64-bit pointers")
@pytest.mark.parametrize("abi,hidden_ptrs", [("host", 0), ("cuda", 0), ("cuda", 1), ("cuda", 2)])
def test_natural_layout_matches_ctypes(abi, hidden_ptrs):
    rng = random.Random(f"natural-{abi}-{hidden_ptrs}")
    for _ in range(N_SIGNATURES):
        signature = random_signature(rng)
        kinds = canonical(signature)
        S = ctypes_struct(kinds, hidden_ptrs)
        opts = {"hidden_ptrs": hidden_ptrs} if hidden_ptrs else {}
        got = fastlaunch.layout(abi, signature, **opts)
        want_args = [getattr(S, f"a{i}").offset for i in range(len(kinds))]
        want_hidden = [getattr(S, f"h{i}").offset for i in range(hidden_ptrs)]
        where = f"{abi} hidden={hidden_ptrs} {signature}"
        assert got["args"] == want_args, where
        assert got["hidden"] == want_hidden, where
        assert got["size"] == ctypes.sizeof(S), where
        assert got["align"] == ctypes.alignment(S), where
        assert got["grid"] is None and got["ffts"] is None, where


def test_natural_layout_spellings_agree():
    """A Triton entry lays out exactly like its canonical kind name."""
    for abi in ("host", "cuda", "npu"):
        for spelling, kind in SPELLINGS.items():
            assert fastlaunch.layout(abi, ["i8", spelling, "i8"]) == fastlaunch.layout(abi, ["i8", kind, "i8"])


# ---- npu ----------------------------------------------------------------------------------------

# Triton-Ascend's ty_to_cpp, written from the driver (research doc §3.2): pointers -> void*,
# i1 -> int32_t, u1 -> uint32_t, fp16/bf16/fp32 -> float, fp64 -> double, the rest their C ints.
NPU_CPP_SIZE = {
    "ptr": 8, "i1": 4, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
    "fp16": 4, "bf16": 4, "fp32": 4, "fp64": 8,
}


def npu_ty(spelling: str) -> str:
    """The Triton type string the driver's template inspects (ptr written as a Triton pointer)."""
    return "*i8" if spelling == "ptr" else spelling


def npu_reference(signature, *, ffts=False, simt_only=False, dtdata=False, scratch=0):
    """The Triton-Ascend `struct __attribute__((packed))` of the research doc §3.2/§3.5: fields
    carry explicit aligned() attributes (8 for pointers and types whose name ends in "64", 4 for
    everything else, 4 for the int32 grid), and the struct still gets tail padding up to its
    largest field alignment."""
    fields = []  # (name, size, align)
    if ffts:
        fields.append(("ffts", 8, 8))
    if not simt_only:
        fields += [("syncBlockLock", 8, 8), ("workspace_addr", 8, 8)]
    for i, spelling in enumerate(signature):
        ty = npu_ty(spelling)
        align = 4 if ty[0] != "*" and ty[-2:] != "64" else 8
        fields.append((f"arg{i}", NPU_CPP_SIZE[SPELLINGS[spelling]], align))
    fields += [("gridX", 4, 4), ("gridY", 4, 4), ("gridZ", 4, 4)]
    if simt_only:  # global_scratch, profile_scratch: pure SIMT only
        fields += [(f"scratch{i}", 8, 8) for i in range(scratch)]
    if dtdata:
        fields.append(("DTData", 8, 8))
    offsets, offset, max_align = {}, 0, 1
    for name, size, align in fields:
        offset = -(-offset // align) * align
        offsets[name] = offset
        offset += size
        max_align = max(max_align, align)
    size = -(-offset // max_align) * max_align
    return {
        "size": size,
        "align": max_align,
        "args": [offsets[f"arg{i}"] for i in range(len(signature))],
        "grid": [offsets["gridX"], offsets["gridY"], offsets["gridZ"]],
        "ffts": offsets.get("ffts"),
        "hidden": [offsets[n] for n, _, _ in fields if n.startswith(("scratch", "DTData"))],
    }


# Valid option combinations: scratch slots exist only for pure-SIMT kernels.
NPU_OPTIONS = [
    dict(ffts=f, simt_only=s, dtdata=d, scratch=n)
    for f, s, d, n in itertools.product((False, True), (False, True), (False, True), (0, 1, 2))
    if s or n == 0
]


def test_npu_worked_examples():
    """torch_npu's BuildPackedLayout worked examples (research doc §2.3)."""
    # FFTS on, non-pure-SIMT, (tensor, tensor, i32): ffts 0, lock 8, ws 16, ptr 24, ptr 32, i32 40,
    # grid 44/48/52, size 56.
    got = fastlaunch.layout("npu", ["ptr", "ptr", "i32"], ffts=True)
    assert got == {"size": 56, "align": 8, "args": [24, 32, 40], "grid": [44, 48, 52], "ffts": 0, "hidden": []}
    # FFTS on, (tensor, i32, i32): ptr 24, i32 32, i32 36, grid 40/44/48, end 52 -> size 56 (tail pad).
    got = fastlaunch.layout("npu", ["ptr", "i32", "i32"], ffts=True)
    assert got == {"size": 56, "align": 8, "args": [24, 32, 36], "grid": [40, 44, 48], "ffts": 0, "hidden": []}
    # FFTS off, pure SIMT, (tensor, i32): ptr 0, i32 8, grid 12/16/20, size 24.
    got = fastlaunch.layout("npu", ["ptr", "i32"], simt_only=True)
    assert got == {"size": 24, "align": 8, "args": [0, 8], "grid": [12, 16, 20], "ffts": None, "hidden": []}
    # The same through Triton signature entries.
    assert fastlaunch.layout("npu", ["*fp32", "*fp16", "i32"], ffts=True)["args"] == [24, 32, 40]


def test_npu_reference_reproduces_worked_examples():
    """The Python reference itself gives the worked examples, so it is a fair judge below."""
    assert npu_reference(["ptr", "ptr", "i32"], ffts=True)["size"] == 56
    assert npu_reference(["ptr", "i32", "i32"], ffts=True)["grid"] == [40, 44, 48]
    assert npu_reference(["ptr", "i32"], simt_only=True) == {
        "size": 24, "align": 8, "args": [0, 8], "grid": [12, 16, 20], "ffts": None, "hidden": []}


def test_npu_small_cases():
    # i8 takes one byte at a 4-aligned offset; fp16 and i1 take four bytes.
    got = fastlaunch.layout("npu", ["i8", "i8", "fp16", "i1", "i16"], simt_only=True)
    assert got["args"] == [0, 4, 8, 12, 16]
    assert got["grid"] == [20, 24, 28] and got["size"] == 32 and got["align"] == 4
    # No 8-aligned field at all: the buffer aligns to 4.
    got = fastlaunch.layout("npu", [], simt_only=True)
    assert got == {"size": 12, "align": 4, "args": [], "grid": [0, 4, 8], "ffts": None, "hidden": []}
    # Pure SIMT with both scratch slots and DTData: after the grid, pointer-aligned, back to back.
    got = fastlaunch.layout("npu", ["ptr", "i32"], simt_only=True, scratch=2, dtdata=True)
    assert got["grid"] == [12, 16, 20] and got["hidden"] == [24, 32, 40] and got["size"] == 48
    # DTData alone on a mixed kernel.
    got = fastlaunch.layout("npu", ["ptr", "i32"], dtdata=True)
    assert got["args"] == [16, 24] and got["grid"] == [28, 32, 36] and got["hidden"] == [40] and got["size"] == 48


@pytest.mark.parametrize("opts", NPU_OPTIONS, ids=lambda o: ",".join(f"{k}={int(v)}" for k, v in o.items()))
def test_npu_layout_matches_reference(opts):
    rng = random.Random(f"npu-{sorted(opts.items())}")
    for _ in range(N_SIGNATURES):
        signature = random_signature(rng)
        got = fastlaunch.layout("npu", signature, **opts)
        assert got == npu_reference(signature, **opts), f"{opts} {signature}"


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler")
def test_npu_reference_matches_gnu_c(tmp_path):
    """The reference's reading of the packed struct (aligned fields inside a packed struct, tail
    padding to the largest alignment) is what GNU C does with Triton-Ascend's template."""
    cpp = {"ptr": "void*", "i1": "int32_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "fp16": "float",
           "bf16": "float", "fp32": "float", "fp64": "double"}
    rng = random.Random("gnu-c")
    cases = []
    for i in range(120):
        opts = NPU_OPTIONS[i % len(NPU_OPTIONS)]
        cases.append((random_signature(rng, 12), opts))
    src = ["#include <stddef.h>", "#include <stdint.h>", "#include <stdio.h>", "int main(void) {"]
    for c, (signature, o) in enumerate(cases):
        body = []
        if o["ffts"]:
            body.append("void* ffts __attribute__((aligned(8)));")
        if not o["simt_only"]:
            body.append("void* syncBlockLock __attribute__((aligned(8)));")
            body.append("void* workspace_addr __attribute__((aligned(8)));")
        for i, s in enumerate(signature):
            ty = npu_ty(s)
            align = 4 if ty[0] != "*" and ty[-2:] != "64" else 8
            body.append(f"{cpp[SPELLINGS[s]]} arg{i} __attribute__((aligned({align})));")
        body += [f"int32_t grid{m} __attribute__((aligned(4)));" for m in "XYZ"]
        body += [f"void* scratch{i} __attribute__((aligned(8)));" for i in range(o["scratch"])]
        if o["dtdata"]:
            body.append("void* DTData __attribute__((aligned(8)));")
        src.append(f"  {{ struct __attribute__((packed)) S {{ {' '.join(body)} }};")
        fields = ([f"arg{i}" for i in range(len(signature))] + ["gridX", "gridY", "gridZ"]
                  + [f"scratch{i}" for i in range(o["scratch"])] + (["DTData"] if o["dtdata"] else []))
        fmt = " ".join(["%zu"] * (len(fields) + 2))
        args = ", ".join([f"offsetof(struct S, {f})" for f in fields] + ["sizeof(struct S)", "_Alignof(struct S)"])
        src.append(f'    printf("{fmt}\\n", {args}); }}')
    src += ["  return 0;", "}"]
    (tmp_path / "npu_layout.c").write_text("\n".join(src))
    exe = tmp_path / "npu_layout"
    cc = shutil.which(os.environ.get("CC", "cc"))
    subprocess.run([cc, "-std=gnu11", "-o", str(exe), str(tmp_path / "npu_layout.c")], check=True,
                   capture_output=True, timeout=60)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert len(lines) == len(cases)
    for (signature, o), line in zip(cases, lines):
        nums = [int(x) for x in line.split()]
        ref = npu_reference(signature, **o)
        n = len(signature)
        assert nums[:n] == ref["args"], (signature, o)
        assert nums[n:n + 3] == ref["grid"], (signature, o)
        assert nums[n + 3:-2] == ref["hidden"], (signature, o)
        assert nums[-2:] == [ref["size"], ref["align"]], (signature, o)
        assert fastlaunch.layout("npu", signature, **o) == ref


# ---- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("abi", ["gpu", "", "NPU", "cuda "])
def test_refuses_unknown_abi(abi):
    with pytest.raises(ValueError) as info:
        fastlaunch.layout(abi, ["ptr"])
    assert "abi" in str(info.value) and repr(abi) in str(info.value)


@pytest.mark.parametrize("bad,index", [(["ptr", "i33"], 1), (["fp8", "i32"], 0), (["ptr", "i32", "constexpr"], 2),
                                       (["ptr", "*"], 1), (["ptr", ""], 1)])
def test_refuses_unknown_kind_with_index(bad, index):
    for abi in ("host", "cuda", "npu"):
        with pytest.raises(ValueError) as info:
            fastlaunch.layout(abi, bad)
        assert f"kinds[{index}]" in str(info.value)


def test_refuses_non_str_kind():
    with pytest.raises(TypeError, match=r"kinds\[1\]"):
        fastlaunch.layout("host", ["ptr", 3])


def test_refuses_scratch_without_simt_only():
    with pytest.raises(ValueError, match="npu_scratch_requires_simt_only"):
        fastlaunch.layout("npu", ["ptr"], scratch=1)
    with pytest.raises(ValueError, match="npu_scratch_requires_simt_only"):
        fastlaunch.layout("npu", ["ptr"], scratch=2, ffts=True, dtdata=True)


@pytest.mark.parametrize("abi,opts,reason", [
    ("npu", {"simt_only": True, "scratch": 3}, "option_out_of_range:scratch:3"),
    ("cuda", {"hidden_ptrs": 3}, "option_out_of_range:hidden_ptrs:3"),
    ("cuda", {"hidden_ptrs": -1}, "option_out_of_range:hidden_ptrs:-1"),
    ("host", {"hidden_ptrs": 1}, "'hidden_ptrs' is not an option of the host ABI \\(its options: none\\)"),
    ("npu", {"hidden_ptrs": 1}, "'hidden_ptrs' is not an option of the npu ABI \\(its options: ffts, simt_only"),
    ("host", {"ffts": True}, "'ffts' is not an option of the host ABI"),
    ("cuda", {"simt_only": True}, "'simt_only' is not an option of the cuda ABI \\(its options: hidden_ptrs, "),
    ("cuda", {"dtdata": True}, "'dtdata' is not an option of the cuda ABI"),
    ("host", {"scratch": 1}, "'scratch' is not an option of the host ABI"),
])
def test_refuses_options_outside_the_abi(abi, opts, reason):
    with pytest.raises(ValueError, match=reason):
        fastlaunch.layout(abi, ["ptr"], **opts)


# ---- the command line ---------------------------------------------------------------------------


def run_cli(*argv):
    return subprocess.run([sys.executable, "-m", "fastlaunch", *argv], capture_output=True, text=True, timeout=60)


def test_cli_layout_prints_the_layout_as_json():
    r = run_cli("layout", "--abi", "npu", "--ffts", "ptr", "ptr", "i32")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == fastlaunch.layout("npu", ["ptr", "ptr", "i32"], ffts=True)
    assert json.loads(r.stdout)["size"] == 56


def test_cli_bad_kind_exits_2_naming_it():
    r = run_cli("layout", "--abi", "cuda", "*fp32", "i33")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "i33" in lines[0] and "KIND" in lines[0]


def test_cli_in_process_options_and_errors(capsys):
    from fastlaunch.__main__ import SUBCOMMANDS, main

    assert "layout" in SUBCOMMANDS
    assert main(["layout", "--abi", "npu", "--simt-only", "--scratch", "2", "--dtdata", "*fp32", "i64"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == fastlaunch.layout("npu", ["*fp32", "i64"], simt_only=True, scratch=2, dtdata=True)
    assert main(["layout", "--abi", "cuda", "--hidden-ptrs", "2", "--indent", "2", "*i8", "i1"]) == 0
    out = capsys.readouterr().out
    assert "\n  " in out and json.loads(out) == fastlaunch.layout("cuda", ["*i8", "i1"], hidden_ptrs=2)
    # Library refusals name the command-line argument; exit status 2.
    for argv, flag in [(["--abi", "npu", "--scratch", "1"], "--scratch"),
                       (["--abi", "host", "--ffts"], "--ffts"),
                       (["--abi", "cuda", "--hidden-ptrs", "3"], "--hidden-ptrs"),
                       (["--abi", "npu", "--simt-only", "--scratch", "3"], "--scratch")]:
        assert main(["layout", *argv, "ptr"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0], (argv, err)
    # argparse refusals (bad abi, negative count, no kinds) are one line too.
    for argv, name in [(["--abi", "gpu", "ptr"], "--abi"), (["--abi", "cuda", "--hidden-ptrs", "-1", "ptr"],
                                                              "--hidden-ptrs"), (["--abi", "cuda"], "KIND")]:
        with pytest.raises(SystemExit) as info:
            main(["layout", *argv])
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and name in err[0], (argv, err)
