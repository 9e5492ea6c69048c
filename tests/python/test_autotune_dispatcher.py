"""The Autotuner's C dispatcher (src/python/triton/autotune.c) on its own: a stand-in Autotuner, policy and
inner kernel in Python, so every decision is visible without Triton or a driver. What it does with
Triton's real Autotuner is checked by test_triton_jit.py (jit_checks, jit_fidelity, public_fidelity)."""

from __future__ import annotations

import pytest

from fastlaunch import _C


class Config:
    def __init__(self, **kw):
        self.kw = kw


class StandInAutotuner:
    def __init__(self):
        self.configs = [Config(BLOCK=64), Config(BLOCK=128)]
        self.cache = {}
        self.best_config = None
        self.nargs = None


class Policy:
    """Binds every missed key to configs[1], as Triton's tuner would after benchmarking."""

    def __init__(self, at, inner):
        self.at, self.inner, self.dispatcher = at, inner, None
        self.revalidations = 0

    def revalidate(self):
        self.revalidations += 1
        return (None, (self.at.cache,), self.inner)

    def bind(self, key, args, kwargs):
        cfg = self.at.configs[1]
        self.at.cache[key] = cfg
        self.dispatcher._insert(key, cfg, ("BLOCK",), (cfg.kw["BLOCK"],), (), None)


def make():
    calls = []
    at = StandInAutotuner()

    def stock_run(*args, **kwargs):
        calls.append(("triton", args, kwargs))
        at.best_config = at.configs[1]
        return "triton"

    def inner(*args, **kwargs):
        calls.append(("inner", args, kwargs))
        return "inner"

    policy = Policy(at, inner)
    d = _C.AutotuneDispatcher(at, stock_run, policy, arg_names=("x", "n", "BLOCK"), key_params=(1,),
                              configs=at.configs)
    policy.dispatcher = d
    return d, at, policy, calls


def test_a_bound_key_runs_the_inner_kernel_with_the_config_and_the_rest_goes_to_triton():
    d, at, policy, calls = make()
    assert d(1, 5, grid=(2,), warmup=False) == "triton"  # first call of the key: Triton tunes
    at.best_config = None
    assert d(1, 5, grid=(2,), warmup=False) == "inner"
    assert calls[-1] == ("inner", (1, 5), {"grid": (2,), "warmup": False, "BLOCK": 128})
    assert at.best_config is at.configs[1] and at.nargs is None
    assert d(1, 6, grid=(2,), warmup=False) == "triton"  # another key
    assert d(1, 5.0, grid=(2,), warmup=False) == "triton"  # 5.0 == 5 for Triton: finer here, never coarser
    assert d(1, 5, grid=(2,), warmup=True) == "triton"
    assert d(1, 5, grid=(2,), warmup=False, BLOCK=32) == "triton"  # a keyword a config sets
    assert d(1, n=5, grid=(2,), warmup=False) == "inner"  # n by keyword: Triton's key is the same tuple
    assert calls[-1] == ("inner", (1,), {"n": 5, "grid": (2,), "warmup": False, "BLOCK": 128})
    c = d.counts
    assert c["fast"] == 2 and c["stock"] == 5, c
    assert c["stock_reasons"] == {"first_call_of_key": 3, "warmup": 1, "keyword_set_by_config": 1}, c


def test_a_changed_cache_is_seen_at_the_next_call():
    d, at, policy, calls = make()
    d(1, 5, grid=(1,), warmup=False)
    d(1, 5, grid=(1,), warmup=False)
    n = policy.revalidations
    at.cache.clear()
    d.clear()  # what the real policy does when the cache no longer holds a bound key's config
    assert d(1, 5, grid=(1,), warmup=False) == "triton"
    assert policy.revalidations == n + 1


def test_an_exception_from_the_inner_kernel_leaves_nargs_as_triton_does():
    d, at, policy, calls = make()
    d(1, 5, grid=(1,), warmup=False)

    def failing(*args, **kwargs):
        raise ValueError("inner failed")

    policy.inner = failing
    d.invalidate()
    with pytest.raises(ValueError, match="inner failed"):
        d(7, 5, grid=(1,), warmup=False)
    assert at.nargs == {"x": 7, "n": 5}
    policy.inner = lambda *a, **k: "inner"
    d.invalidate()
    assert d(7, 5, grid=(1,), warmup=False) == "inner" and at.nargs is None


def test_bad_construction_and_bindings_name_the_argument():
    at = StandInAutotuner()
    with pytest.raises(TypeError, match=r"arg_names\[1\]: expected a str"):
        _C.AutotuneDispatcher(at, print, None, arg_names=("x", 3), key_params=(), configs=[])
    with pytest.raises(ValueError, match=r"key_params\[0\]: not an index into arg_names"):
        _C.AutotuneDispatcher(at, print, None, arg_names=("x",), key_params=(4,), configs=[])
    d, at, policy, calls = make()
    with pytest.raises(ValueError, match=r"_insert\(\): 1 names for 2 values"):
        d._insert(b"\0" * 8, at.configs[0], ("BLOCK",), (1, 2), (), None)
    with pytest.raises(ValueError, match=r"_insert\(\): a key of 3 bytes"):
        d._insert(b"abc", at.configs[0], (), (), (), None)
    policy.revalidate = lambda: ("bad",)
    with pytest.raises(TypeError, match=r"revalidate\(\): expected \(reason, watched, inner\)"):
        d(1, 5, grid=(1,), warmup=False)
    policy.revalidate = lambda: (None, ("not a dict",), print)
    with pytest.raises(TypeError, match=r"watched\[0\]: expected a dict"):
        d(1, 5, grid=(1,), warmup=False)


def test_an_inner_call_that_clears_the_table_completes_with_the_configs_values():
    """Clearing the table from inside the inner call: the call completes with the config's values
    and the table is empty after it. (A Python inner owns its keyword values once called; for the
    JIT dispatcher, which borrows them, the dispatcher holds the entry's values through the call.
    That case is not reachable from a Python stand-in, so this test cannot show it.)"""
    d, at, policy, calls = make()
    seen = []

    def bind(key, args, kwargs):
        cfg = at.configs[1]
        d._insert(key, cfg, ("BLOCK",), (bytearray(b"only-ref"),), (), None)  # the tuple holds the only reference

    def inner(*args, **kwargs):
        d.clear()
        seen.append(bytes(kwargs["BLOCK"]))
        return "inner"

    policy.bind = bind
    policy.inner = inner
    d.invalidate()
    assert d(1, 5, grid=(1,), warmup=False) == "triton"
    assert d(1, 5, grid=(1,), warmup=False) == "inner"
    assert seen == [b"only-ref"] and d.counts["variants"] == 0
