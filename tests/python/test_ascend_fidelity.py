"""fastlaunch's npu packed buffer against Triton-Ascend 3.2.0's own launcher, byte for byte.

The reference (tools/fldev/ta_reference.py) is Triton-Ascend's generated launcher itself: the wheel
is fetched from PyPI, its generate_npu_wrapper_src writes the launcher C++ for each signature, and
that source is compiled, unchanged, as the `__triton_launcher` extension against a stand-in
precompiled header whose rtKernelLaunch records (args, sizeof(args)). Each random row is launched
through both: Triton-Ascend's `launch(gridX, gridY, gridZ, stream, function, ...)` with every
signature value (constants filled in as Triton's JIT passes them), and a fastlaunch npu plan with
the non-constant kinds on the recording stand-in runtime (tools/fldev/ascend_standin.*). Every byte
of every member must agree; Triton-Ascend's padding bytes are indeterminate (stack contents), so
fastlaunch's must be zero. The blocks, stream, kernel handle and size must agree too.

A row Triton-Ascend accepts and fastlaunch refuses before submitting is allowed, and reported (the
summary test prints them). A row fastlaunch launches and Triton-Ascend refuses fails.
"""

from __future__ import annotations

import collections
import math
import random
import struct

import pytest

from conftest import reference_unavailable
from fastlaunch import FastLaunchError, Plan
from fldev import ascend_standin, ta_reference

SEED = 0x5EED_A5CE
STREAM = ta_reference.Reference.STREAM
KERNEL = ta_reference.Reference.FUNC
FLAGS = [(ffts, simt) for ffts in (False, True) for simt in (False, True)]
SCALARS = ["i1", "i32", "i64", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]
PTRS = ["*fp32", "*fp16", "*bf16", "*i8", "*i32", "*i64", "*u8", "*fp64"]
# Triton-Ascend's PyArg_ParseTuple code for each scalar (its _format_of(_extracted_ty(ty))).
FORMAT = {"i1": "i", "i32": "i", "i64": "L", "u32": "I", "u64": "K", "fp16": "f", "bf16": "f", "fp32": "f",
          "fp64": "d"}


def _sig(types):
    return dict(enumerate(types))


def _random_signatures():
    rng = random.Random(SEED ^ 0x51)
    out = {}
    for n in range(3):
        types = [rng.choice(SCALARS + ["*fp32", "*i8"]) for _ in range(rng.randint(3, 14))]
        constants = {}
        for i, ty in enumerate(types):
            if ty == "i32" and rng.random() < 0.3:
                constants[i] = 1          # an int equal to 1, specialised away
            elif ty[0] == "*" and rng.random() < 0.25:
                types[i], constants[i] = "*i8", None   # a None argument: *i8 and a constant
        if len(constants) == len(types):  # Triton-Ascend cannot compile an all-constant launcher
            constants.pop(0)
        out[f"random{n}"] = (_sig(types), constants)
    return out


SIGNATURES = {
    # every scalar kind and pointers, with both kinds of constants in the middle
    "every_kind": (_sig(["*fp32", "i1", "i32", "i64", "u32", "*i8", "u64", "fp16", "bf16", "fp32", "fp64",
                         "*bf16"]), {2: 1, 5: None}),
    # 4-byte slots before and after 8-byte ones: padding inside and at the tail
    "mixed_align": (_sig(["i1", "i64", "fp32", "fp64", "u32", "*fp16", "fp16", "u64", "i32"]), {}),
    "scalars_tail": (_sig(["fp32", "i32", "bf16"]), {1: 1}),
    "one_ptr": (_sig(["*i8"]), {}),
    "empty": ({}, {}),
    **_random_signatures(),
}

COMBOS = [(name, ffts, simt) for name in SIGNATURES for ffts, simt in FLAGS]


def combo_id(c):
    return f"{c[0]}-ffts{int(c[1])}-simt{int(c[2])}"


# ---- values ------------------------------------------------------------------------------------------

class DataPtr:
    """A tensor-like object: both launchers call data_ptr()."""
    __slots__ = ("p",)

    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p

    def __repr__(self):
        return f"DataPtr({self.p!r})"


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


FLT_MAX = f32(0x7F7FFFFF)
FLT_TRUE_MIN = 2.0 ** -149
DOUBLE_NAN = float("nan")

F_EDGES = [
    0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 1 / 3, 2 / 3, math.pi, 1e-45, 1.4e-45,
    math.inf, -math.inf, DOUBLE_NAN, -DOUBLE_NAN,
    FLT_MAX, -FLT_MAX, math.nextafter(FLT_MAX, math.inf),
    FLT_MAX + 2.0 ** 103,                                # the tie above FLT_MAX: rounds to even, i.e. inf
    math.nextafter(FLT_MAX + 2.0 ** 103, 0.0),           # just under it: FLT_MAX
    -(FLT_MAX + 2.0 ** 103), 1e39, -1e39, 1e300, -1e300, 1.7976931348623157e308,
    2.0 ** -126, math.nextafter(2.0 ** -126, 0.0), FLT_TRUE_MIN, 3 * FLT_TRUE_MIN, -FLT_TRUE_MIN,
    FLT_TRUE_MIN / 2, 1.5 * FLT_TRUE_MIN, 2.5 * FLT_TRUE_MIN, 0.75 * FLT_TRUE_MIN,    # subnormal ties
    math.nextafter(FLT_TRUE_MIN / 2, 1.0), math.nextafter(FLT_TRUE_MIN / 2, 0.0),
    5e-324, -5e-324, 2.2250738585072014e-308,
    65504.0, 65519.99, 65520.0, -65520.0, 1e5, 6e-8, 5.96e-8, 3.3895313892515355e38,  # fp16/bf16 edges
    1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 16777217.0, 16777219.0, -16777217.0,          # ties at 1 and 2^24
]
D_EDGES = [0.0, -0.0, 1.0, -1.0, 0.1, math.pi, math.inf, -math.inf, DOUBLE_NAN, -DOUBLE_NAN, 5e-324, -5e-324,
           2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, 1e-300, FLT_MAX * 2,
           2.0 ** 53 + 2, float(2 ** 63)]
INT_RANGE = {"i1": (0, 1), "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1), "u32": (0, 2**32 - 1),
             "u64": (0, 2**64 - 1)}

# Values Triton-Ascend's launcher accepts that are not the kind's plain domain (PyArg "i" takes any
# int32 for i1, "I"/"K" mask any int, "f"/"d" take ints through __index__/__float__, getPointer
# takes any int including True): fastlaunch may refuse them (reported), never mis-pack them.
LENIENT = {
    "i1": [2, -1, 7, 2**31 - 1, -2**31],
    "i32": [True, False],
    "i64": [True],
    "u32": [-1, -2**31, 2**32, 2**33 + 7, 2**100, True],
    "u64": [-1, -2**63, 2**64, 2**64 + 5, 2**100, True],
    "f": [0, 3, -7, 2**24 + 1, 2**53 + 1, 2**60, 10**30, 10**40, -10**40, True],
    "d": [0, 3, -7, 2**53 + 1, 2**63, 10**308, True],
    "ptr": [True, False, DataPtr(0), DataPtr(2**64 - 1)],
}
# Values Triton-Ascend refuses (raises, sometimes after launching): fastlaunch must not launch them.
REFUSED = {
    "i": [2**31, -2**31 - 1, 1.5, None, "1"],
    "L": [2**63, -2**63 - 1, 1.0, None],
    "I": [1.5, None, "1"],
    "K": [1.5, None],
    "f": ["x", None, 10**400, b"1"],
    "d": ["x", None, 10**400],
    "ptr": [-1, 2**64, 1.5, object(), DataPtr(1.5), DataPtr(-1)],
}


def random_int(rng, kind):
    lo, hi = INT_RANGE[kind]
    if kind == "i1":
        return rng.choice([0, 1, True, False])
    r = rng.random()
    if r < 0.15:
        return rng.choice([lo, hi, 0, 1, lo + 1, hi - 1] + ([-1] if lo < 0 else []))
    bits = rng.randint(0, hi.bit_length())
    v = rng.getrandbits(bits) if bits else 0
    if lo < 0 and rng.random() < 0.5:
        v = -v - 1
    return max(lo, min(hi, v))


def random_double_bits(rng, exp_lo, exp_hi):
    sign = rng.getrandbits(1) << 63
    exp = rng.randint(exp_lo, exp_hi)
    v = struct.unpack("<d", struct.pack("<Q", sign | (exp << 52) | rng.getrandbits(52)))[0]
    return v


def random_f(rng):
    r = rng.random()
    if r < 0.2:
        return rng.choice(F_EDGES)
    if r < 0.4:  # a rounding tie between two adjacent finite floats, or just either side of it
        b = rng.randrange(0, 0x7F7FFFFF)
        x, y = f32(b), f32(b + 1)
        t = (x + y) / 2  # exact in double
        t = rng.choice([t, t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf)])
        return -t if rng.random() < 0.5 else t
    if r < 0.7:  # a double whose exponent is in (or near) float range, random low bits
        return random_double_bits(rng, 1023 - 152, 1023 + 129)
    if r < 0.8:  # an exact float
        b = rng.getrandbits(32)
        v = f32(b)
        return DOUBLE_NAN if v != v else v
    if r < 0.9:
        return rng.uniform(-1e6, 1e6)
    v = random_double_bits(rng, 0, 2046)  # any finite double
    return v


def random_d(rng):
    r = rng.random()
    if r < 0.2:
        return rng.choice(D_EDGES)
    if r < 0.9:
        return random_double_bits(rng, 0, 2046)
    return rng.uniform(-1e9, 1e9)


def random_ptr(rng):
    r = rng.random()
    if r < 0.5:
        return rng.getrandbits(64)
    if r < 0.6:
        return rng.choice([0, None, 2**64 - 1, 2**63, 1, 0x1000])
    if r < 0.8:
        return DataPtr(rng.getrandbits(64))
    return rng.getrandbits(48) & ~0xFF


def random_value(rng, ty):
    if ty[0] == "*":
        return random_ptr(rng)
    if ty in INT_RANGE:
        return random_int(rng, ty)
    return random_f(rng) if FORMAT[ty] == "f" else random_d(rng)


def special_value(rng, ty, which):
    """A LENIENT (which='lenient') or REFUSED value for a type."""
    if ty[0] == "*":
        key = "ptr"
    elif which == "lenient":
        key = ty if ty in LENIENT else FORMAT[ty]
    else:
        key = FORMAT[ty]
    return rng.choice((LENIENT if which == "lenient" else REFUSED)[key])


def random_grid(rng):
    gx = rng.choice([1, rng.randint(1, 65535), rng.randint(1, 64)])
    gy = rng.randint(1, max(1, min(65535 // gx, 64)))
    gz = rng.randint(1, max(1, min(65535 // (gx * gy), 8)))
    return (gx, gy, gz)


def make_rows(rng, signature, constants, n):
    runtime = [i for i in sorted(signature) if i not in constants]
    rows = []
    for _ in range(n):
        values = [random_value(rng, signature[i]) for i in runtime]
        if runtime and rng.random() < 0.08:
            k = rng.randrange(len(runtime))
            which = "lenient" if rng.random() < 0.7 else "refused"
            values[k] = special_value(rng, signature[runtime[k]], which)
            if which == "refused" and signature[runtime[k]][0] == "*":
                # Triton-Ascend's getPointer leaves the error set and goes on; a later pointer
                # argument with data_ptr() is then called with an exception pending, gets NULL back
                # and getPointer dereferences it (PyLong_Check(NULL)): the process crashes. Only
                # plain ints after a refused pointer, then.
                values[k + 1:] = [v.p if isinstance(v, DataPtr) else v for v in values[k + 1:]]
        rows.append((values, random_grid(rng)))
    return rows


def rows_for(signature, constants):
    n_runtime = len([i for i in signature if i not in constants])
    return min(1500, 250 + 120 * n_runtime)


# ---- the two launchers -------------------------------------------------------------------------------

def fl_kind(ty):
    return "ptr" if ty[0] == "*" else ty


def describe(v):
    if isinstance(v, float):
        return f"{v!r} ({v.hex()})"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v} ({v:#x})" if v >= 0 else f"{v}"
    return repr(v)


Stats = collections.namedtuple("Stats", "rows compared both_refused fl_refused fl_only mismatches per_kind")


def make_plan(signature, constants, ffts, simt, ffts_addr, kinds=None):
    runtime = [i for i in sorted(signature) if i not in constants]
    kinds = kinds or [fl_kind(signature[i]) for i in runtime]
    options = {"ffts": ffts, "simt_only": simt}
    if ffts:
        options["ffts_addr"] = ffts_addr
    return Plan(KERNEL, kinds, backend="npu", abi="npu", options=options, name="fidelity")


def compare(ref, ta, entry):
    """Problems (strings) between Triton-Ascend's launch and fastlaunch's recorded entry."""
    problems = []
    if entry.kind != ascend_standin.KIND_ACL:
        problems.append(f"launch call kind {entry.kind}, expected aclrtLaunchKernelWithHostArgs")
    if (entry.stub, entry.stream, entry.blocks) != (ta.func, ta.stream, ta.blocks):
        problems.append(f"launch (kernel, stream, blocks) = {(hex(entry.stub), hex(entry.stream), entry.blocks)}, "
                        f"Triton-Ascend {(hex(ta.func), hex(ta.stream), ta.blocks)}")
    if not entry.cfg_null:
        problems.append("a launch cfg was passed (Triton-Ascend's rtKernelLaunch has none)")
    if entry.size != ta.size or len(entry.data) != len(ta.data):
        problems.append(f"size {entry.size} (data {len(entry.data)}), Triton-Ascend sizeof(args) = {ta.size}")
        return problems
    if entry.data == ta.data:
        return problems
    for name, (off, size) in ref.members.items():
        exp, got = ta.data[off:off + size], entry.data[off:off + size]
        if exp != got:
            problems.append(f"member {name} @{off}: Triton-Ascend {exp.hex()} fastlaunch {got.hex()}")
    pad = [i for i in ref.layout()["padding"] if entry.data[i] != 0]
    if pad:
        problems.append(f"padding bytes {pad} not zero: {bytes(entry.data[i] for i in pad).hex()}")
    return problems


def plain_value(rng, ty):
    """An in-domain value both launchers should take (for retrying a row after a refusal)."""
    if ty[0] == "*":
        return rng.getrandbits(64)
    if ty in INT_RANGE:
        return rng.randint(*INT_RANGE[ty])
    if ty == "fp16":
        return rng.uniform(-65504.0, 65504.0)
    if FORMAT[ty] == "f":
        v = f32(rng.getrandbits(32) & 0xFF7FFFFF)  # exponent below 255: finite
        return v
    return random_double_bits(rng, 0, 2046)


def run_rows(rt, ref, plan, signature, constants, rows, ffts_addr, rng=None, retries=3):
    """Launches each row through both and compares. A row fastlaunch refuses (and Triton-Ascend
    accepts) is recorded, then retried with the refused argument replaced by a plain value, so that
    one argument's refusal does not keep the others from being compared."""
    rng = rng or random.Random(0)
    runtime = [i for i in sorted(signature) if i not in constants]
    compared = both_refused = 0
    fl_refused, fl_only, mismatches = [], [], []
    per_kind = collections.Counter()
    for values, grid in rows:
        values = list(values)
        for attempt in range(retries + 1):
            try:
                ta, ta_exc = ref.launch(values, grid, ffts_addr), None
            except Exception as e:  # Triton-Ascend's launch() raised: it refuses this call
                ta, ta_exc = None, e
            n0 = rt.count()
            try:
                plan(*values, stream=STREAM, grid=grid)
                fl_exc = None
            except FastLaunchError as e:
                fl_exc = e
            if rt.npu is not None:  # the torch_npu queue stand-in was loaded by another test: wait for it
                rt.drain()
            launched = rt.count() > n0
            if fl_exc is None or ta_exc is not None or fl_exc.backend_submitted or launched:
                break
            reason = getattr(fl_exc, "reason", str(fl_exc))
            parts = reason.split(":")
            idx = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            if idx is None or idx >= len(runtime):
                fl_refused.append(("?", parts[0], None, reason))
                break
            fl_refused.append((signature[runtime[idx]], parts[0], values[idx], reason))
            if attempt < retries:
                values[idx] = plain_value(rng, signature[runtime[idx]])
        if fl_exc is not None:
            if fl_exc.backend_submitted or launched:
                mismatches.append({"values": values, "grid": grid, "problems": [
                    f"fastlaunch raised after submitting: {fl_exc.reason!r}"]})
            elif ta_exc is not None:
                both_refused += 1
            continue
        if not launched:
            mismatches.append({"values": values, "grid": grid, "problems": ["fastlaunch returned without launching"]})
            continue
        entry = rt.entry(n0)
        if ta_exc is not None:
            fl_only.append({"values": values, "grid": grid, "ta": f"{type(ta_exc).__name__}: {ta_exc}",
                            "fl_bytes": entry.data.hex()})
            continue
        compared += 1
        for i in runtime:
            per_kind[fl_kind(signature[i])] += 1
        problems = compare(ref, ta, entry)
        if problems:
            mismatches.append({"values": values, "grid": grid, "problems": problems,
                               "expected": ta.data.hex(), "actual": entry.data.hex()})
    return Stats(len(rows), compared, both_refused, fl_refused, fl_only, mismatches, per_kind)


def format_mismatch(signature, constants, m):
    runtime = [i for i in sorted(signature) if i not in constants]
    vals = ", ".join(f"arg{i}:{signature[i]}={describe(v)}" for i, v in zip(runtime, m["values"]))
    out = [f"  grid={m['grid']} {vals}"] + [f"    {p}" for p in m["problems"]]
    if "expected" in m:
        out += [f"    Triton-Ascend: {m['expected']}", f"    fastlaunch:    {m['actual']}"]
    return "\n".join(out)


# ---- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rt():
    try:
        ta_reference.driver_source()
        ta_reference.reference({0: "i32"}, {}, ffts=False, force_simt_only=True)  # compiler check
    except ta_reference.Unavailable as e:
        reference_unavailable(f"Triton-Ascend reference unavailable: {e}")
    return ascend_standin.load(queue=False)


RESULTS: dict = {}


# ---- self-checks: the reference is right, and the comparison can fail -----------------------------------

def test_reference_matches_hand_packed_struct(rt):
    """The reference, checked against a layout written out by hand (research doc §A.1):
    ffts, syncBlockLock, workspace, then the args at natural 4/8 offsets, the grid, tail padding."""
    sig = _sig(["*fp32", "i32", "fp16", "i64", "*i8"])
    ref = ta_reference.reference(sig, {4: None}, ffts=True, force_simt_only=False)
    launch = ref.launch([0x1122334455667788, -5, 0.1, -2**40], (7, 3, 2), 0xABCDEF)
    want = struct.pack("<QQQQifqiii", 0xABCDEF, 0, 0, 0x1122334455667788, -5, 0.1, -2**40, 7, 3, 2)
    want += b"\0" * 4  # sizeof rounds up to 8
    assert launch.data == want, (launch.data.hex(), want.hex())
    assert (ref.size, launch.size, launch.blocks) == (64, 64, 42)
    assert "static_cast<float>(arg2)" in ref.struct_text and "arg4" not in ref.struct_text
    # Triton-Ascend's "f": a C cast of the double, so round to nearest even, overflow to inf.
    assert ref.launch([0, 0, FLT_MAX + 2.0 ** 103, 0], (1, 1, 1)).data[36:40] == struct.pack("<f", math.inf)
    assert ref.launch([0, 0, 1 + 2.0 ** -24, 0], (1, 1, 1)).data[36:40] == struct.pack("<f", 1.0)
    with pytest.raises(OverflowError):
        ref.launch([0, 2**31, 0.0, 0], (1, 1, 1))


def test_struct_text_is_the_generators():
    if not SIGNATURES:
        pytest.skip("no signatures")
    try:
        text = ta_reference.struct_for(*SIGNATURES["every_kind"], ffts=False, force_simt_only=True)
    except ta_reference.Unavailable as e:
        reference_unavailable(str(e))
    assert text.startswith("struct __attribute__((packed)) {") and text.endswith("};")
    assert "ffts_addr" not in text and "syncBlockLock" not in text
    assert ta_reference.struct_members(text) == [f"arg{i}" for i in (0, 1, 3, 4, 6, 7, 8, 9, 10, 11)] + [
        "gridX", "gridY", "gridZ"]
    assert "float arg7 __attribute__((aligned(4)));" in text  # fp16 travels as a 4-byte float
    assert "int32_t arg1 __attribute__((aligned(4)));" in text  # i1 as int32_t


def test_comparison_catches_a_wrong_byte(rt):
    sig, constants = SIGNATURES["every_kind"]
    ref = ta_reference.reference(sig, constants, ffts=True, force_simt_only=False)
    plan = make_plan(sig, constants, True, False, 0x1234)
    values = [0x1000, True, -3, 7, 2**64 - 1, 1.5, 2.5, 3.5, 0.1, DataPtr(0x2000)]
    ta = ref.launch(values, (2, 2, 1), 0x1234)
    n0 = rt.count()
    plan(*values, stream=STREAM, grid=(2, 2, 1))
    if rt.npu is not None:
        rt.drain()
    entry = rt.entry(n0)
    assert compare(ref, ta, entry) == []
    off = ref.members["arg9"][0]
    bad = bytearray(entry.data)
    bad[off] ^= 1
    problems = compare(ref, ta, entry._replace(data=bytes(bad)))
    assert len(problems) == 1 and problems[0].startswith(f"member arg9 @{off}:")
    pad = ref.layout()["padding"]
    if pad:
        bad = bytearray(entry.data)
        bad[pad[0]] = 0xAA
        assert compare(ref, ta, entry._replace(data=bytes(bad)))[0].startswith("padding bytes")
    assert compare(ref, ta, entry._replace(size=entry.size + 8, data=entry.data + bytes(8)))
    assert compare(ref, ta, entry._replace(blocks=5))


def test_comparison_catches_a_wrong_plan(rt):
    """The whole pipeline fails for a plan that packs differently: fp64 where the kernel has fp32."""
    sig, constants = _sig(["*fp32", "fp32", "i32"]), {}
    ref = ta_reference.reference(sig, constants, ffts=False, force_simt_only=False)
    plan = make_plan(sig, constants, False, False, 0, kinds=["ptr", "fp64", "i32"])
    rows = make_rows(random.Random(1), sig, constants, 50)
    stats = run_rows(rt, ref, plan, sig, constants, rows, 0)
    assert len(stats.mismatches) >= 40
    plan = make_plan(sig, constants, False, False, 0, kinds=["ptr", "u32", "i32"])  # same size, other bits
    stats = run_rows(rt, ref, plan, sig, constants, [([0, 1.5, 3], (1, 1, 1))], 0)
    assert stats.mismatches or stats.fl_refused


# ---- the comparison ------------------------------------------------------------------------------------

@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_packed_buffer_matches_triton_ascend(rt, combo):
    name, ffts, simt = combo
    sig, constants = SIGNATURES[name]
    rng = random.Random(f"{SEED}-{combo_id(combo)}")
    ffts_addr = rng.getrandbits(64) | 1
    ref = ta_reference.reference(sig, constants, ffts=ffts, force_simt_only=simt)
    plan = make_plan(sig, constants, ffts, simt, ffts_addr)
    assert plan.layout["size"] == ref.size, (plan.layout, ref.layout())
    rows = make_rows(rng, sig, constants, rows_for(sig, constants))
    stats = run_rows(rt, ref, plan, sig, constants, rows, ffts_addr, rng)
    RESULTS[combo_id(combo)] = (sig, constants, stats)
    report = []
    if stats.mismatches:
        report.append(f"{len(stats.mismatches)} rows differ, e.g.:")
        report += [format_mismatch(sig, constants, m) for m in stats.mismatches[:8]]
    if stats.fl_only:
        report.append(f"{len(stats.fl_only)} rows fastlaunch launched that Triton-Ascend refuses, e.g.:")
        report += [f"  {m['ta']}: {m['values']} grid={m['grid']}" for m in stats.fl_only[:8]]
    assert not report, f"{combo_id(combo)} ({len(rows)} rows, {stats.compared} compared):\n" + "\n".join(report)
    assert stats.compared >= len(rows) * 0.8


def test_summary(capsys):
    """Counts over every combination, and fastlaunch's refusals of values Triton-Ascend accepts."""
    if not RESULTS:
        pytest.skip("no comparison ran")
    total = collections.Counter()
    per_kind = collections.Counter()
    refusals = collections.defaultdict(list)
    for key, (sig, constants, s) in RESULTS.items():
        total.update(rows=s.rows, compared=s.compared, both_refused=s.both_refused, fl_refused=len(s.fl_refused),
                     fl_only=len(s.fl_only), mismatches=len(s.mismatches))
        per_kind.update(s.per_kind)
        for kind, code, value, reason in s.fl_refused:
            refusals[(kind, code)].append(value)
    lines = [f"ascend fidelity: {len(RESULTS)} combinations, {total['rows']} rows, {total['compared']} compared "
             f"byte for byte, {total['mismatches']} differing, {total['both_refused']} refused by both, "
             f"{total['fl_refused']} refused by fastlaunch only, {total['fl_only']} launched by fastlaunch only",
             "  argument values compared per kind: " + ", ".join(f"{k}={v}" for k, v in sorted(per_kind.items()))]
    if refusals:
        lines.append("  fastlaunch refuses (before submitting) values Triton-Ascend 3.2.0 accepts:")
        for (kind, code), values in sorted(refusals.items(), key=lambda kv: str(kv[0])):
            distinct = {}
            for v in values:  # numbers smallest magnitude first: where the refusals begin
                key = (0, abs(v), v < 0) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, repr(v))
                distinct.setdefault(key, describe(v))
            shown = [d for _, d in sorted(distinct.items())]
            lines.append(f"    {kind:6} {code:20} x{len(values):<5} {', '.join(shown[:6])}"
                         + (f" ... ({len(shown)} distinct)" if len(shown) > 6 else ""))
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    if len(RESULTS) == len(COMBOS):
        assert total["compared"] >= 20000
        assert set(per_kind) == set(SCALARS) | {"ptr"}
