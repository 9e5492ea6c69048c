"""The JIT dispatcher's change detector (src/python/watch.c) on its own, with a stand-in policy: a
dict watched for some names only (a module's globals a kernel or its grid reads) is no change when
another key is written (a loop variable at module level), and is one when a watched name is; a dict
watched whole changes at any write. tools/watch-exhaust runs the same detector on 3.12 and 3.13."""

from __future__ import annotations

from fastlaunch import _C


class Policy:
    def __init__(self, whole, keyed):
        self.whole, self.keyed, self.n = whole, keyed, 0

    def revalidate(self):
        self.n += 1
        return (None, (lambda: 0), (lambda device: 0), (), self.whole, self.keyed)

    def bind(self, *a):
        pass


def dispatcher(policy):
    d = _C.JitDispatcher(None, lambda *a, **k: "stock", policy, param_names=(), param_const=(), defaults=(),
                         option_names=(), pre_run_hooks=[])

    def call():
        d(grid=(1,), warmup=False)  # no parameters: a miss, served by the stand-in's run
    return call


def test_a_keyed_dict_changes_only_for_its_names():
    g, knobs = {"N": 1, "i": 0}, {"flag": 0}
    p = Policy((knobs,), ((g, ("N", "absent")),))
    call = dispatcher(p)
    call()
    call()
    base = p.n
    for i in range(100):
        g["i"] = i  # as `for i in ...:` at module level writes it
        call()
    assert p.n == base, "a write to another key revalidated"
    g["N"] = 2
    call()
    assert p.n == base + 1
    g["absent"] = 1  # a watched name that was absent appears
    call()
    assert p.n == base + 2
    knobs["other"] = 1  # a dict watched whole: any write
    call()
    assert p.n == base + 3
    call()
    assert p.n == base + 3


def test_keyed_names_must_be_str():
    import pytest

    p = Policy((), (({"N": 1}, (1,)),))
    call = dispatcher(p)
    with pytest.raises(TypeError, match="names must be str"):
        call()


def test_a_colliding_key_that_calls_back_in_while_the_names_are_read():
    """A key of the watched dict whose hash collides with a watched name, its __eq__ calling the
    dispatcher again (which revalidates and replaces what the outer look is reading): the outer look
    ends on what it held, and the next call sees the name's change. Run under ASan by
    make reentry-sanitize's build as well (tests/python under PY_ASAN_RUN)."""
    calls = []

    class Collide:
        def __hash__(self):
            return hash("N")

        def __eq__(self, other):
            if calls and len(calls) < 3:
                calls.append("nested")
                p.whole = ()  # what the nested revalidation installs instead
                nested()
            return False
    g = {Collide(): 0, "N": 1, "i": 0}
    p = Policy((), ((g, ("N",)),))
    call = dispatcher(p)
    nested = call
    call()
    call()
    calls.append("armed")
    g["i"] = 1  # the dict's tag moves (3.11) / not a name of interest (3.12+)
    call()
    g["N"] = 2
    base = p.n
    call()
    assert p.n > base
    assert "nested" in calls, calls
