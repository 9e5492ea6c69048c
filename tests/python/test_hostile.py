"""Hostile and careless input reaching the extension: user code that mutates what is being read,
strings with NUL inside, values out of range, names no expression can use, a plan armed for faults
and then dropped. Each gets a clear refusal; nothing crashes, nothing is launched twice."""

import gc

import pytest

import fastlaunch
from fastlaunch import FastLaunchError, FastLaunchPlanUnavailable, Plan, _C


class ClearsOnIndex:
    """An int-like whose __index__ empties a list (the one being read, when it is)."""

    def __init__(self, value, victim):
        self.value, self.victim = value, victim

    def __index__(self):
        self.victim.clear()
        gc.collect()
        return self.value


def test_ignore_positions_mutated_while_read():
    lst = []
    lst.extend([ClearsOnIndex(1, lst), ClearsOnIndex(2, lst)])
    plan = Plan(None, ["i32"], backend="null", grid=(1,), ignore=lst)  # read from a tuple of its own
    assert plan.ignored == (1, 2) and plan.call_arg_count == 3


def test_grid_eval_with_names_and_values_mutated():
    """The values are read first (their __index__ may run anything), then the names, from tuples
    of its own: a callee that empties the names is seen as an expression naming nothing, never as
    freed memory."""
    names, values = ["n"], []
    values.append(ClearsOnIndex(7, names))
    with pytest.raises(FastLaunchError, match="grid_expr_unknown_name:n"):
        _C.grid_eval("n * 2", names, values)
    names2 = ["n"]
    values2 = [ClearsOnIndex(3, values)]  # clears an unrelated list
    assert _C.grid_eval("n + 1", names2, values2) == 4


@pytest.mark.parametrize("field,value", [
    ("grid_exprs", ["n\0 // 0 + garbage(", "1", "1"]),
    ("arg_names", ["p", "n\0x"]),
    ("kinds", ["ptr", "i32\0"]),
    ("backend", "null\0host"),
    ("name", "k\0"),
])
def test_embedded_nul_is_refused_not_cut(field, value):
    kw = {"kinds": ["ptr", "i32"], "backend": "null", "grid_exprs": ["n", "1", "1"], "arg_names": ["p", "n"]}
    kw[field] = value
    kinds = kw.pop("kinds")
    with pytest.raises((ValueError, FastLaunchPlanUnavailable)) as e:
        Plan(None, kinds, **kw)
    # Refused whole, naming the problem (a backend name with a NUL is simply no backend's name).
    assert "NUL" in str(e.value) or "unknown backend 'null\\x00host'" in str(e.value)


def test_out_of_range_values_say_out_of_range():
    s = _C.stream_create("null")
    plan = Plan(None, ["ptr"], backend="null", grid=(1,))
    for ptr in (2**64, -1):
        with pytest.raises(FastLaunchError) as e:
            plan(ptr, stream=s)
        assert e.value.reason == "ptr_out_of_range:0" and not e.value.backend_submitted
    for stream in (-1, 2**64):
        with pytest.raises(FastLaunchError) as e:
            plan(0x1000, stream=stream)
        assert e.value.reason == "stream_out_of_range"
    with pytest.raises(FastLaunchError) as e:
        plan(0x1000, stream="s")
    assert e.value.reason == "stream_invalid_type:str"
    assert _C.stream_count(s, "null") == 0
    _C.stream_destroy(s, "null")


@pytest.mark.parametrize("names,reason", [
    (["p", "if"], "arg_name_invalid:1:if"), (["p", "min"], "arg_name_invalid:1:min"),
    (["p", ""], "arg_name_invalid:1:"), (["p", "a b"], "arg_name_invalid:1:a b"),
    (["n", "n"], "arg_name_duplicate:1:n"),
])
def test_names_must_be_usable_and_unique(names, reason):
    with pytest.raises(FastLaunchPlanUnavailable) as e:
        Plan(None, ["ptr", "i32"], backend="null", grid_exprs=["1", "1", "1"], arg_names=names)
    assert e.value.reason == reason and e.value.stable
    with pytest.raises(TypeError, match="arg_names: expected a sequence of str"):
        Plan(None, ["ptr", "i32"], backend="null", grid=(1,), arg_names="ab")


def test_an_armed_plan_dropped_by_its_owner_stays_alive_until_disarmed():
    """fault_inject(plan=...) holds the plan: dropped by Python while armed, it is released only
    when disarmed (the C test checks the launches; here, no use after free in between)."""
    s = _C.stream_create("null")
    plan = Plan(None, ["i32"], backend="null", grid=(1,))
    plan(1, stream=s)
    _C.fault_inject("submit_lost", 1, 0, plan)
    del plan
    gc.collect()
    others = [Plan(None, ["i32"], backend="null", grid=(1,)) for _ in range(50)]  # reuse freed memory
    for p in others:
        p(1, stream=s)  # not armed: they launch
    _C.fault_inject("none")  # releases the core's reference
    assert _C.stream_count(s, "null") == 51
    _C.stream_destroy(s, "null")


def test_only_a_plan_made_while_its_backend_is_wrapped_can_be_armed():
    """The suite wraps every backend (conftest); a plan made while its backend is not wrapped has
    the backend's own table, and arming it says so instead of arming nothing."""
    _C.fault_wrap("null", False)
    try:
        plain = Plan(None, ["i32"], backend="null", grid=(1,))
    finally:
        _C.fault_wrap("null")
    with pytest.raises(FastLaunchError) as e:
        _C.fault_inject("pack", 1, 0, plain)
    assert e.value.reason == "fault_plan_not_wrapped:null"
    with pytest.raises(ValueError, match="backend"):
        _C.fault_wrap("gpu")
    s = _C.stream_create("null")
    plain(1, stream=s)  # it launches, unarmed
    assert _C.stream_count(s, "null") == 1
    _C.stream_destroy(s, "null")


class Callee:
    """A value whose hooks (__index__, __float__, data_ptr, __iter__) do one nasty thing first."""

    def __init__(self, action, target=None, value=5):
        self.action, self.target, self.value = action, target, value
        self.calls = 0

    def _act(self):
        self.calls += 1
        if self.action == "mutate" and self.target is not None:
            self.target.clear()
        elif self.action == "raise":
            raise ValueError("callee refused")
        elif self.action == "gc":
            gc.collect()
        elif self.action == "reenter" and self.target is not None and self.calls < 3:
            try:
                self.target()  # calls back into the extension from inside it
            except (FastLaunchError, TypeError, ValueError):
                pass

    def __index__(self):
        self._act()
        return self.value

    def __float__(self):
        self._act()
        return float(self.value)

    def data_ptr(self):
        self._act()
        return 0x1000 + self.value


ACTIONS = ["mutate", "raise", "gc", "reenter"]
EXPECTED = (FastLaunchError, FastLaunchPlanUnavailable, TypeError, ValueError, OverflowError)


class TestEveryPlaceThatCallsUserCode:
    """Each place where the extension runs the caller's code, driven by callees that mutate what is
    being read, raise, trigger a collection, or re-enter the extension. Every call ends in success
    or a documented exception; a launch runs at most once and never after a refusal."""

    @pytest.fixture
    def stream(self):
        s = _C.stream_create("null")
        yield s
        _C.stream_destroy(s, "null")

    @pytest.mark.parametrize("action", ACTIONS)
    @pytest.mark.parametrize("kind", ["i32", "u64", "fp32", "bf16", "ptr"])
    def test_launch_arguments(self, stream, action, kind):
        plan = Plan(None, ["ptr", kind], backend="null", grid=(1,))
        nested_ok = []

        def reenter():
            plan(0x2000, 1, stream=stream)  # a launch of its own, from inside the outer one
            nested_ok.append(1)

        args = [0x2000]
        callee = Callee(action, args if action == "mutate" else reenter)
        args.append(callee)
        before = _C.stream_count(stream, "null")
        try:
            plan(*list(args), stream=stream)
            ok = 1
        except EXPECTED:
            ok = 0
        # The outer launch ran once or not at all; each nested launch that returned ran once.
        assert _C.stream_count(stream, "null") - before == ok + len(nested_ok)
        assert callee.calls >= 1
        assert ok == 0 if action == "raise" else True

    @pytest.mark.parametrize("action", ACTIONS)
    def test_ignore_positions(self, action):
        lst = []
        lst.append(Callee(action, lst if action == "mutate" else (lambda: Plan(None, ["i32"], backend="null")),
                          value=1))
        try:
            plan = Plan(None, ["i32"], backend="null", grid=(1,), ignore=lst)
            assert plan.ignored == (1,)
        except EXPECTED:
            assert action == "raise"

    @pytest.mark.parametrize("action", ACTIONS)
    def test_name_and_expression_sequences(self, action):
        class Names:
            def __init__(self, items, callee):
                self.items, self.callee = items, callee

            def __iter__(self):
                self.callee._act()
                return iter(list(self.items))

            def __len__(self):
                return len(self.items)

        items = ["p", "n"]
        names = Names(items, Callee(action, items if action == "mutate" else (lambda: _C.grid_eval("1", [], []))))
        try:
            plan = Plan(None, ["ptr", "i32"], backend="null", grid_exprs=["n", "1", "1"], arg_names=names)
            assert plan.grid_mode == "program"
        except EXPECTED:
            assert action in ("raise", "mutate")

    @pytest.mark.parametrize("action", ACTIONS)
    def test_grid_eval_values(self, action):
        values = []
        values.append(Callee(action, values if action == "mutate" else (lambda: _C.grid_eval("2", [], []))))
        try:
            assert _C.grid_eval("n + 1", ["n"], values) == 6
        except EXPECTED:
            assert action == "raise"

    @pytest.mark.parametrize("action", ACTIONS)
    def test_finalized_entry_flags_and_fallback(self, stream, action):
        """The entry reads a flag object's attribute and calls the bound launch's entry_fallback:
        both user code."""
        plan = Plan(None, ["i32"], backend="null", grid=(1,))

        class Flag:
            calls = 0

            @property
            def on(self):
                Flag.calls += 1
                Callee(action, None)._act()
                return Flag.calls % 2 == 0

        class Bound:
            def entry_fallback(self, reason, stable, args, kwargs):
                return "stock"

        entry = fastlaunch.FinalizedLaunch(Bound(), plan, flags=((Flag(), "on", "flagged"),))
        for _ in range(4):
            before = _C.stream_count(stream, "null")
            try:
                out = entry(3, stream=stream)
            except EXPECTED:
                assert action == "raise"
                continue
            ran = _C.stream_count(stream, "null") - before
            assert (out is None and ran == 1) or (out == "stock" and ran == 0)
