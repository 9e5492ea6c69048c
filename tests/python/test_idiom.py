"""CPython's idiom for the extension: every public callable of fastlaunch._C has a signature that
inspect reads (text signatures in the docstrings, as CPython's own C modules write them)."""

import inspect

import fastlaunch
from fastlaunch import _C


def test_every_public_callable_has_a_signature():
    callables = {n: getattr(_C, n) for n in dir(_C) if not n.startswith("_") and callable(getattr(_C, n))}
    assert len(callables) >= 20
    missing = {}
    for name, obj in callables.items():
        try:
            inspect.signature(obj)
        except (ValueError, TypeError) as exc:
            missing[name] = str(exc)
    assert missing == {}
    assert list(inspect.signature(_C.Plan).parameters)[:3] == ["kernel", "kinds", "backend"]
    assert list(inspect.signature(fastlaunch.layout).parameters) == ["abi", "kinds", "options"]
    assert str(inspect.signature(_C.FastLaunchError)) == "(reason, /, *, backend_submitted=False, stable=None)"
