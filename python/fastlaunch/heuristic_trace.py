"""A `@triton.heuristics` value's function read into a form the C dispatcher computes itself
(src/python/triton/heuristics.c), or left to be called as Triton calls it.

    read_heuristic(fn) -> (("none", name, negate) | ("const", value) |
                          ("program", expr, names, as_bool) | ("call",), guards)

The guards are (dict, name, value) triples: what the form read from modules (value _ABSENT for a
name that was not there); the form stands while every dict still maps each name to that value.

- `lambda args: args["x"] is not None` (and `is None`): recognised from the function's bytecode
  (the same six instructions on Python 3.10 to 3.13); the only form with `is`, which a trace
  cannot see.
- Integer arithmetic and comparisons over the mapping's values, `triton.cdiv`,
  `triton.next_power_of_2`, `min` and `max`: traced once over symbolic values, giving an expression
  of the grid language (src/grid.c) over the names read, its result a bool when it is a
  comparison. Module ints read on the way are constants, guarded.
- A constant.
Anything else (a call of another function, `and`/`or`/`if`, attributes of the values, a store, a
closure, defaults) is ("call",): the dispatcher calls the function with Triton's mapping. The C
side also calls it whenever a form does not hold for a call's values (an absent name, a value that
is not an exact int, an overflow), so a form only ever stands in for what the call would return.
"""

from __future__ import annotations

import dis
import types

from fastlaunch.grid_trace import ABSENT, NotTraceable, has_effects

_SKIP = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG"}


class _H:
    """A value known per call: arithmetic builds the grid language's text; a comparison's result is
    a bool (`is_bool`), anything else an int."""

    __slots__ = ("text", "is_bool")

    def __init__(self, text, is_bool=False):
        self.text, self.is_bool = text, is_bool

    @staticmethod
    def of(x):
        if isinstance(x, _H):
            return x.text
        if type(x) is int:  # noqa: E721 - a bool constant would change the result's type
            if not -(2**63) <= x < 2**63:
                raise NotTraceable("constant past 64 bits")
            return f"({x})" if x < 0 else str(x)
        raise NotTraceable(f"operand of type {type(x).__name__}")

    def _op(self, op, other, swap=False, is_bool=False):
        a, b = (_H.of(other), self.text) if swap else (self.text, _H.of(other))
        return _H(f"({a} {op} {b})", is_bool)

    def __add__(self, o): return self._op("+", o)
    def __radd__(self, o): return self._op("+", o, True)
    def __sub__(self, o): return self._op("-", o)
    def __rsub__(self, o): return self._op("-", o, True)
    def __mul__(self, o): return self._op("*", o)
    def __rmul__(self, o): return self._op("*", o, True)
    def __floordiv__(self, o): return self._op("//", o)
    def __rfloordiv__(self, o): return self._op("//", o, True)
    def __mod__(self, o): return self._op("%", o)
    def __rmod__(self, o): return self._op("%", o, True)
    def __lshift__(self, o): return self._op("<<", o)
    def __rlshift__(self, o): return self._op("<<", o, True)
    def __rshift__(self, o): return self._op(">>", o)
    def __rrshift__(self, o): return self._op(">>", o, True)
    def __neg__(self): return _H(f"(-{self.text})")
    def __pos__(self): return _H(self.text)
    def __eq__(self, o): return self._op("==", o, is_bool=True)
    def __ne__(self, o): return self._op("!=", o, is_bool=True)
    def __lt__(self, o): return self._op("<", o, is_bool=True)
    def __le__(self, o): return self._op("<=", o, is_bool=True)
    def __gt__(self, o): return self._op(">", o, is_bool=True)
    def __ge__(self, o): return self._op(">=", o, is_bool=True)

    def _refuse(self, *a, **k):
        raise NotTraceable("an operation the grid language does not have")

    __bool__ = __index__ = __int__ = __float__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _refuse
    __and__ = __or__ = __xor__ = __rand__ = __ror__ = __rxor__ = __abs__ = __invert__ = _refuse
    __str__ = __repr__ = __format__ = __hash__ = __len__ = __iter__ = __getitem__ = __call__ = _refuse
    __getattr__ = _refuse


class _Args:
    """The mapping during the trace: every name is a value read per call (numbered as first read)."""

    def __init__(self):
        self.names = []

    def __getitem__(self, name):
        if type(name) is not str:  # noqa: E721
            raise NotTraceable("a key that is not a str")
        if name not in self.names:
            self.names.append(name)
        return _H(f"${self.names.index(name)}")


def _minmax(name, real):
    def f(*args, **kwargs):
        if kwargs or len(args) < 2 or any(isinstance(a, _H) and a.is_bool for a in args):
            raise NotTraceable(f"{name}() of this form")  # an iterable, keywords, or bools (which one it returns)
        if not any(isinstance(a, _H) for a in args):
            return real(*args)
        text = _H.of(args[-1])
        for a in reversed(args[:-1]):
            text = f"{name}({_H.of(a)}, {text})"
        return _H(text)
    return f


def _npow2(n):
    if isinstance(n, _H):
        return _H(f"next_power_of_2({n.text})")
    raise NotTraceable("next_power_of_2 of a constant")


def _functions():
    """The functions a traced heuristic may call, by identity: Triton's cdiv (its own code runs over
    the symbolic values) and next_power_of_2 (the grid language's, the same on int64)."""
    import triton

    out = {}
    cdiv = getattr(triton, "cdiv", None)
    if cdiv is not None:
        out[id(cdiv)] = (cdiv, getattr(cdiv, "fn", cdiv))
    npow2 = getattr(triton, "next_power_of_2", None)
    if npow2 is not None:
        out[id(npow2)] = (npow2, _npow2)
    return out


class _Module:
    def __init__(self, module, watched):
        object.__setattr__(self, "_m", module)
        object.__setattr__(self, "_w", watched)

    def __getattr__(self, name):
        m, watched = object.__getattribute__(self, "_m"), object.__getattribute__(self, "_w")
        value = vars(m).get(name, ABSENT)
        watched.append((vars(m), name, value))
        if value is ABSENT:
            raise NotTraceable(f"{m.__name__}.{name}")
        return _value(value, watched, f"{m.__name__}.{name}")


def _value(value, watched, what):
    if isinstance(value, types.ModuleType):
        return _Module(value, watched)
    if type(value) is int:  # noqa: E721 - a module int: a constant while its dict is unchanged
        return value
    known = _functions().get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    raise NotTraceable(f"{what} is not a value a heuristic's form may read")


class _Globals(dict):
    def __init__(self, real, watched):
        super().__init__()
        dict.__setitem__(self, "__builtins__", {"min": _minmax("min", min), "max": _minmax("max", max)})
        self._real, self._watched = real, watched

    def __getitem__(self, name):
        value = self._real.get(name, ABSENT)
        self._watched.append((self._real, name, value))
        if value is ABSENT:
            raise KeyError(name)  # then the builtins
        return _value(value, self._watched, name)


def _none_test(code):
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in _SKIP]
    if (len(ops) == 6 and ops[0] == ("LOAD_FAST", code.co_varnames[0]) and ops[1][0] == "LOAD_CONST" and
            type(ops[1][1]) is str and ops[2][0] == "BINARY_SUBSCR" and ops[3] == ("LOAD_CONST", None) and  # noqa: E721
            ops[4][0] == "IS_OP" and ops[5][0] == "RETURN_VALUE"):
        return ops[1][1], bool(ops[4][1])
    return None


def read_heuristic(fn):
    """(form, watched dicts) of one value's function; ("call",) when it has no form."""
    if not isinstance(fn, types.FunctionType):
        return ("call",), ()
    code = fn.__code__
    if (fn.__defaults__ or fn.__kwdefaults__ or fn.__closure__ or code.co_argcount != 1 or code.co_kwonlyargcount or
            code.co_flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200)):  # *args, **kw, generators, coroutines
        return ("call",), ()
    test = _none_test(code)
    if test is not None:
        return ("none", test[0], test[1]), ()
    if has_effects(code):
        return ("call",), ()
    watched = []
    args = _Args()
    traced = types.FunctionType(code, _Globals(fn.__globals__, watched), fn.__name__)
    try:
        result = traced(args)
    except NotTraceable:
        return ("call",), ()
    except Exception:  # noqa: BLE001 - whatever the function would raise, it raises when called
        return ("call",), ()
    guards = tuple(watched)
    if isinstance(result, _H):
        if len(args.names) > 8:
            return ("call",), ()
        return ("program", result.text, tuple(args.names), result.is_bool), guards
    if isinstance(result, (int, float, str, type(None))) and not args.names:
        return ("const", result), guards  # the same object the function returns
    return ("call",), ()


def guards_hold(guards):
    return all(d.get(name, ABSENT) is value for d, name, value in guards)
