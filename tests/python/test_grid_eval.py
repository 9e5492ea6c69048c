"""The grid program language against Python.

Random expressions of the shapes Inductor writes (ceil division `-((a) // -(b))`, `//`, `%`, `+ - *`,
unary signs, min/max, shifts, literals and the usual numel/block names, parenthesized or relying on
precedence) are evaluated three ways:

* Python's own eval, the ground truth for values and for ZeroDivisionError / ValueError;
* a walk of Python's AST that computes every node with Python ints and reports the first node
  (in evaluation order) that fails or leaves int64: what fastlaunch must report instead;
* fastlaunch._C.grid_eval.

fastlaunch folds constant subexpressions that succeed when it compiles and keeps those that would
fail, so the first failure in evaluation order is the runtime reason (grid_overflow,
grid_div_by_zero, grid_negative_shift). A constant condition keeps only the branch it chooses. An
expression that reads no variable after that is evaluated once at compile time and, if it fails,
refused there (grid_expr_const_*).
"""

from __future__ import annotations

import ast
import collections
import random

import pytest

import fastlaunch
from fastlaunch import _C

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NAMES = ("xnumel", "ynumel", "znumel", "XBLOCK", "YBLOCK", "RSPLIT")
N_EXPRESSIONS = 12_000
PY_GLOBALS = {"__builtins__": {}, "min": min, "max": max}


# ---- the reference: a walk over Python's AST ----------------------------------------------------


class Fail(Exception):
    """The first failing node: kind is overflow, div_by_zero or negative_shift."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class TooBig(Exception):
    """An unbounded evaluation that Python could not finish (a shift by a huge count)."""


def children(node):
    """The operand nodes in Python's evaluation order."""
    if isinstance(node, ast.Expression):
        return [node.body]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Call):
        return list(node.args)
    if isinstance(node, (ast.Constant, ast.Name)):
        return []
    raise AssertionError(f"unexpected node {ast.dump(node)}")


def evaluate(node, env, bounded: bool) -> int:
    """Python's integer semantics; with bounded, any intermediate outside int64 raises
    Fail('overflow'). Division by zero and negative shift counts raise Fail in both modes."""

    def check(v: int) -> int:
        if bounded and not INT64_MIN <= v <= INT64_MAX:
            raise Fail("overflow")
        return v

    if isinstance(node, ast.Expression):
        return evaluate(node.body, env, bounded)
    if isinstance(node, ast.Constant):
        assert type(node.value) is int
        return check(node.value)
    if isinstance(node, ast.Name):
        return check(env[node.id])
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, env, bounded)
        if isinstance(node.op, ast.USub):
            return check(-v)
        assert isinstance(node.op, ast.UAdd)
        return v
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name) and node.func.id in ("min", "max") and len(node.args) >= 2
        values = [evaluate(a, env, bounded) for a in node.args]
        return check(min(values) if node.func.id == "min" else max(values))
    assert isinstance(node, ast.BinOp), ast.dump(node)
    a = evaluate(node.left, env, bounded)
    b = evaluate(node.right, env, bounded)
    op = node.op
    if isinstance(op, ast.Add):
        return check(a + b)
    if isinstance(op, ast.Sub):
        return check(a - b)
    if isinstance(op, ast.Mult):
        return check(a * b)
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        if b == 0:
            raise Fail("div_by_zero")
        return check(a // b if isinstance(op, ast.FloorDiv) else a % b)
    if isinstance(op, (ast.LShift, ast.RShift)):
        if b < 0:
            raise Fail("negative_shift")
        if isinstance(op, ast.RShift):
            return check(a >> b)
        if a == 0:
            return 0
        if b >= 256:  # |a << b| >= 2**256: far outside int64, and maybe too big for Python
            if bounded:
                raise Fail("overflow")
            raise TooBig()
        return check(a << b)
    raise AssertionError(f"unexpected operator {ast.dump(op)}")


def is_constant(node) -> bool:
    """True when no name occurs in the subexpression (min/max are calls, not names)."""
    if isinstance(node, ast.Name):
        return False
    return all(is_constant(c) for c in children(node))


def reads_variable(node) -> bool:
    """True when the compiled program still reads a name: a constant condition that evaluates
    keeps only its chosen branch, as fastlaunch's folding does."""
    if isinstance(node, ast.Name):
        return False if node.id in ("min", "max") else True
    if isinstance(node, ast.IfExp) and is_constant(node.test):
        try:
            chosen = node.body if evaluate(node.test, {}, True) else node.orelse
        except Fail:
            return any(reads_variable(c) for c in children(node))
        return reads_variable(chosen)
    return any(reads_variable(c) for c in children(node))


def expected_outcome(expr: str, env):
    """('value', v) or ('error', reason prefix) for fastlaunch."""
    tree = ast.parse(expr, mode="eval")
    if not reads_variable(tree):
        try:
            return "value", evaluate(tree, {}, True)
        except Fail as f:
            return "error", f"grid_expr_const_{f.kind}"
    try:
        return "value", evaluate(tree, env, True)
    except Fail as f:
        return "error", f"grid_{f.kind}"


def python_outcome(expr: str, env):
    """What Python itself says: ('value', v), ('error', 'div_by_zero' / 'negative_shift'), or None
    when the evaluation would not finish in reasonable memory."""
    tree = ast.parse(expr, mode="eval")
    try:
        evaluate(tree, env, False)  # only to find the shifts Python could not finish
    except TooBig:
        return None
    except Fail:
        pass
    try:
        return "value", eval(expr, PY_GLOBALS, dict(env))  # noqa: S307 (generated arithmetic only)
    except ZeroDivisionError:
        return "error", "div_by_zero"
    except ValueError as exc:
        assert "negative shift count" in str(exc)
        return "error", "negative_shift"


def fastlaunch_outcome(expr: str, env):
    try:
        return "value", _C.grid_eval(expr, list(env), list(env.values()))
    except fastlaunch.FastLaunchError as exc:
        return "error", exc.reason


# ---- the generator ------------------------------------------------------------------------------


def gen_literal(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.55:
        return rng.choice((0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096))
    if r < 0.75:
        return rng.randint(0, 100_000)
    if r < 0.87:
        return 2**31 + rng.randint(-2, 2)
    if r < 0.96:
        return 2**62 + rng.randint(-2, 2)
    return INT64_MAX - rng.randint(0, 2)


def gen_value(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.55:
        return rng.randint(1, 5000)
    if r < 0.63:
        return 0
    if r < 0.73:
        return -rng.randint(1, 5000)
    if r < 0.83:
        return rng.choice((2**31 - 1, 2**31, 2**31 + 1, -(2**31), 2**32))
    if r < 0.93:
        return rng.choice((2**62 - 1, 2**62, 2**62 + 1, -(2**62)))
    return rng.choice((INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1))


def gen_leaf(rng: random.Random) -> str:
    return rng.choice(NAMES) if rng.random() < 0.6 else str(gen_literal(rng))


def maybe_paren(rng: random.Random, text: str) -> str:
    """Parentheses half of the time, so that precedence and associativity get exercised."""
    return f"({text})" if rng.random() < 0.5 else text


FORMS = ("cdiv", "floordiv", "mod", "add", "sub", "mul", "neg", "pos", "min", "max", "shl", "shr")
WEIGHTS = (5, 3, 2, 4, 3, 3, 1, 0.3, 2, 2, 1, 1)


def gen_expr(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.2:
        return gen_leaf(rng)
    form = rng.choices(FORMS, WEIGHTS)[0]
    sub = lambda: gen_expr(rng, depth - 1)  # noqa: E731
    if form == "cdiv":  # Inductor's ceil division, exactly as it prints it
        return f"-(({sub()}) // -({sub()}))"
    if form in ("neg", "pos"):
        return ("-" if form == "neg" else "+") + maybe_paren(rng, sub())
    if form in ("min", "max"):  # never one argument: Python refuses min(x)
        args = [sub() for _ in range(rng.choice((2, 2, 2, 3, 4)))]
        return f"{form}({', '.join(args)})"
    if form in ("shl", "shr"):
        op = "<<" if form == "shl" else ">>"
        if rng.random() < 0.85:
            count = str(rng.randint(0, 20))  # small non-negative counts, as in real grids
        else:
            count = maybe_paren(rng, sub())  # anything: negative, huge, failing
        return f"{maybe_paren(rng, sub())} {op} {count}"
    op = {"floordiv": "//", "mod": "%", "add": "+", "sub": "-", "mul": "*"}[form]
    return f"{maybe_paren(rng, sub())} {op} {maybe_paren(rng, sub())}"


# ---- the tests ----------------------------------------------------------------------------------


def test_random_expressions_agree_with_python():
    rng = random.Random(20260514)
    stats = collections.Counter()
    mismatches = []
    for i in range(N_EXPRESSIONS):
        expr = gen_expr(rng, rng.randint(1, 5))
        env = {name: gen_value(rng) for name in NAMES}
        want = expected_outcome(expr, env)
        got = fastlaunch_outcome(expr, env)
        py = python_outcome(expr, env)

        # The reference agrees with Python: the same value wherever no intermediate left int64;
        # the same error where the first failure is Python's own (not an int64 overflow); and some
        # Python error wherever a constant part fails (Python may meet another failure first).
        if want[0] == "value":
            assert py == want, (expr, env, py, want)
        elif py is not None and want[1] in ("grid_div_by_zero", "grid_negative_shift"):
            assert py == ("error", want[1][len("grid_"):]), (expr, env, py, want)
            stats["python_" + py[1]] += 1
        elif py is not None and want[1] in ("grid_expr_const_div_by_zero", "grid_expr_const_negative_shift"):
            assert py[0] == "error", (expr, env, py, want)

        if want[0] == "value":
            ok = got == want
            stats["value"] += 1
        else:
            ok = got[0] == "error" and got[1].startswith(want[1])
            stats[want[1]] += 1
        if not ok and len(mismatches) < 10:
            mismatches.append((i, expr, env, want, got))
    assert not mismatches, "\n".join(map(repr, mismatches))

    # The generator reaches every outcome, and most expressions evaluate.
    assert stats["value"] >= N_EXPRESSIONS * 0.4, stats
    for reason in ("grid_overflow", "grid_div_by_zero", "grid_negative_shift", "grid_expr_const_overflow",
                   "grid_expr_const_div_by_zero", "python_div_by_zero", "python_negative_shift"):
        assert stats[reason] >= 10, (reason, stats)


INDUCTOR_GRIDS = [
    # Grid1D, Grid2D, CooperativeReductionGrid and two combo-kernel shapes, as Inductor prints them.
    ("-((xnumel) // -(256))", "xnumel"),
    ("-((ynumel) // -(32))", "ynumel"),
    ("16", None),
    ("(max(-((xnumel_0) // -(128)), 4096)) * 2", "xnumel_0"),
    ("-((xnumel_0) // -(128)) + 4096", "xnumel_0"),
]


@pytest.mark.parametrize("expr,name", INDUCTOR_GRIDS)
def test_inductor_grids(expr, name):
    values = [0, 1, 2, 127, 128, 129, 255, 256, 257, 1000, 4095, 4096, 65535, 65536, 10**6, 2**31 - 1, 2**31,
              2**40 + 3, 2**62, INT64_MAX - 1000]
    names = [name] if name else []
    for v in values:
        env = {name: v} if name else {}
        want = eval(expr, PY_GLOBALS, env)  # noqa: S307
        assert _C.grid_eval(expr, names, [v] if name else []) == want, (expr, v)


def test_inductor_grid_values():
    assert _C.grid_eval("-((xnumel) // -(256))", ["xnumel"], [1000]) == 4
    assert _C.grid_eval("-((xnumel) // -(256))", ["xnumel"], [1024]) == 4
    assert _C.grid_eval("-((xnumel) // -(256))", ["xnumel"], [1025]) == 5
    assert _C.grid_eval("16", [], []) == 16
    assert _C.grid_eval("(max(-((xnumel_0) // -(128)), 4096)) * 2", ["xnumel_0"], [10**6]) == 2 * 7813
    assert _C.grid_eval("(max(-((xnumel_0) // -(128)), 4096)) * 2", ["xnumel_0"], [1000]) == 8192
    assert _C.grid_eval("-((xnumel_0) // -(128)) + 4096", ["xnumel_0"], [129]) == 4098


def test_int64_edges():
    assert _C.grid_eval("-9223372036854775807 - 1", [], []) == INT64_MIN
    assert _C.grid_eval("9223372036854775807", [], []) == INT64_MAX
    with pytest.raises(fastlaunch.FastLaunchError) as info:
        _C.grid_eval("-9223372036854775808", [], [])
    assert info.value.reason.startswith("grid_expr_literal_overflow")
    cases = [
        ("-x", [INT64_MIN], "grid_overflow"),
        ("x // -1", [INT64_MIN], "grid_overflow"),
        ("-((x) // -(y))", [1, INT64_MIN], "grid_overflow"),  # -(y) itself overflows
        ("x + 1", [INT64_MAX], "grid_overflow"),
        ("x - 1", [INT64_MIN], "grid_overflow"),
        ("x * 2", [2**62], "grid_overflow"),
        ("x << 1", [2**62], "grid_overflow"),
        ("x << 64", [1], "grid_overflow"),
        ("x * 4 // 4", [2**62], "grid_overflow"),  # Python's result fits; the intermediate does not
        ("x // y", [1, 0], "grid_div_by_zero"),
        ("x % y", [1, 0], "grid_div_by_zero"),
        ("-((x) // -(y))", [5, 0], "grid_div_by_zero"),
        ("x << y", [1, -1], "grid_negative_shift"),
        ("x >> y", [0, -1], "grid_negative_shift"),
        # A failing constant part is kept, not folded: it fails when it runs, in evaluation order.
        ("x + (1 // 0)", [1], "grid_div_by_zero"),
        ("x + (9223372036854775807 + 1)", [1], "grid_overflow"),
        ("x << -(1)", [1], "grid_negative_shift"),
        ("x + (1 << -1)", [1], "grid_negative_shift"),
        ("x // y + 2 // 0", [1, 0], "grid_div_by_zero"),
        # Without a variable left, the failure is found when compiling.
        ("(1 << -1) + 2", [1], "grid_expr_const_negative_shift"),
        ("x if 0 else 1 // 0", [1], "grid_expr_const_div_by_zero"),
        ("9223372036854775807 + 1", [1], "grid_expr_const_overflow"),
    ]
    for expr, values, reason in cases:
        with pytest.raises(fastlaunch.FastLaunchError) as info:
            _C.grid_eval(expr, ["x", "y"][: len(values)], values)
        assert info.value.reason.startswith(reason), (expr, values, info.value.reason)
    ok = [
        ("x % -1", [INT64_MIN], 0),
        ("x // 1", [INT64_MIN], INT64_MIN),
        ("-1 << 63", [], INT64_MIN),
        ("x >> 100", [-5], -1),
        ("x >> 100", [5], 0),
        ("0 << 1000", [], 0),
        ("x << 1000", [0], 0),
        ("-x - 1", [INT64_MAX], INT64_MIN),
        ("-((x) // -(y))", [INT64_MIN, -2], 2**62),
        ("x * 4 // 8", [2**60], 2**59),
    ]
    for expr, values, want in ok:
        assert _C.grid_eval(expr, ["x", "y"][: len(values)], values) == want, expr
        assert eval(expr, PY_GLOBALS, dict(zip(["x", "y"], values))) == want, expr  # noqa: S307


def test_reference_matches_python_on_small_values():
    """A sanity check of the AST reference itself: with values too small to overflow, it agrees
    with eval everywhere (values and error kinds)."""
    rng = random.Random(11)
    for _ in range(2000):
        expr = gen_expr(rng, rng.randint(1, 3))
        env = {name: rng.randint(-50, 50) for name in NAMES}
        tree = ast.parse(expr, mode="eval")
        try:
            ref = ("value", evaluate(tree, env, False))
        except Fail as f:
            ref = ("error", f.kind)
        except TooBig:
            continue
        assert python_outcome(expr, env) == ref, expr
