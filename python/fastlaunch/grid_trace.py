"""Grid callables compiled into grid programs: `trace_grid` runs a Triton grid callable (`lambda META:
(triton.cdiv(n, META["BLOCK"]),)`) once over symbolic values and returns the three expressions the C
grid compiler takes (src/grid.c), the variables they read per launch (the kernel's int arguments,
closure cells, module ints) and the guards under which the result stays true (the module
attributes and functions the body read). A body that does anything else raises NotTraceable, and
the kernel's grid is then called in Python on every launch.
"""

from __future__ import annotations

import dis
import types

class NotTraceable(Exception):
    pass


ABSENT = object()

# Instructions whose effect a trace would not reproduce (a store, an import, an identity test, a
# raise or a handler, a generator): a function holding one, or nested code, is called by Python,
# never traced (a grid callable that sets a launch hook or changes a global, a heuristic's value).
_EFFECTS = {"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR",
            "IMPORT_NAME", "IMPORT_FROM", "STORE_DEREF", "DELETE_DEREF", "IS_OP", "YIELD_VALUE", "RAISE_VARARGS",
            "SETUP_FINALLY", "PUSH_EXC_INFO", "BEFORE_WITH", "SETUP_WITH"}


def has_effects(code) -> bool:
    """Whether a trace of `code` could leave out what a call of it does (see _EFFECTS)."""
    return any(i.opname in _EFFECTS for i in dis.get_instructions(code)) or any(
        isinstance(c, types.CodeType) for c in code.co_consts)


class _Sym:
    """A value known only at launch time, during a trace of a grid callable: arithmetic builds the
    expression text of fastlaunch's grid language (Python's integer semantics)."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    @staticmethod
    def of(x):
        if isinstance(x, _Sym):
            return x.text
        if isinstance(x, int):
            x = int(x)
            if not -(2**63) <= x < 2**63:
                raise NotTraceable("constant past 64 bits")
            return f"({x})" if x < 0 else str(x)
        raise NotTraceable(f"operand of type {type(x).__name__}")

    def _bin(self, op, other, swap=False):
        a, b = (_Sym.of(other), self.text) if swap else (self.text, _Sym.of(other))
        return _Sym(f"({a} {op} {b})")

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __lshift__(self, o): return self._bin("<<", o)
    def __rlshift__(self, o): return self._bin("<<", o, True)
    def __rshift__(self, o): return self._bin(">>", o)
    def __rrshift__(self, o): return self._bin(">>", o, True)
    def __neg__(self): return _Sym(f"(-{self.text})")
    def __pos__(self): return self

    def _refuse(self, *a, **k):
        raise NotTraceable("an operation the grid language does not have")

    # Anything that would turn the value into a constant of the trace ends it.
    __bool__ = __index__ = __int__ = __float__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __and__ = __or__ = __xor__ = __abs__ = _refuse
    __str__ = __repr__ = __format__ = __hash__ = __len__ = __iter__ = __getitem__ = __call__ = _refuse


class _Poison:
    """A value the grid program cannot read per launch: any use ends the trace."""

    def __init__(self, what):
        object.__setattr__(self, "_what", what)

    def __getattr__(self, name):
        raise NotTraceable(f"{object.__getattribute__(self, '_what')} used")

    def _refuse(self, *a, **k):
        raise NotTraceable(f"{object.__getattribute__(self, '_what')} used")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = _refuse
    __mod__ = __rmod__ = __truediv__ = __bool__ = __index__ = __int__ = __len__ = __getitem__ = _refuse
    __call__ = __iter__ = __neg__ = _refuse


def _sym_minmax(name, real):
    def f(*args, **kwargs):
        if kwargs or len(args) < 2:
            if not any(isinstance(a, _Sym) for a in args) and not kwargs:
                return real(*args)
            raise NotTraceable(f"{name}() with an iterable or keywords")
        if not any(isinstance(a, _Sym) for a in args):
            return real(*args)
        text = _Sym.of(args[-1])
        for a in reversed(args[:-1]):
            text = f"{name}({_Sym.of(a)}, {text})"
        return _Sym(text)
    return f


# The only builtins a traced grid sees: any other name ends the trace.
_SYM_BUILTINS = {"min": _sym_minmax("min", min), "max": _sym_minmax("max", max)}


class _Meta:
    """The mapping a grid callable gets during a trace: runtime ints are variables (numbered as
    they are first read), constexprs their values for this variant, anything else poison."""

    def __init__(self, values, sources):
        self._values, self._sources = values, sources

    def __getitem__(self, name):
        v = self._values[name]
        if isinstance(v, tuple) and len(v) == 2 and v[0] is ABSENT:  # a runtime int parameter
            return _Sym(f"${_source(self._sources, ('arg', v[1]))}")
        return v

    def get(self, name, default=None):
        return self[name] if name in self._values else default

    def __contains__(self, name):
        return name in self._values


class _ModuleView:
    """A module as a traced grid reads it: functions and submodules (guarded: the launch checks
    they are still the same objects), nothing else."""

    def __init__(self, module, guards):
        object.__setattr__(self, "_m", module)
        object.__setattr__(self, "_g", guards)

    def __getattr__(self, name):
        m = object.__getattribute__(self, "_m")
        g = vars(m)
        value = g.get(name, ABSENT)
        if value is ABSENT:
            raise NotTraceable(f"module attribute {name} not in the module's dict")
        object.__getattribute__(self, "_g").append((g, name, value))
        return _guarded_value(value, object.__getattribute__(self, "_g"), f"{m.__name__}.{name}")


def _pure_functions():
    """The functions a traced grid may call: Triton's cdiv (a plain function, or from Triton 3.5 on
    a constexpr_function whose plain function runs when Python calls it). Any other call ends the
    trace: its body is not checked, and could make a launch-time value a constant."""
    import triton

    out = {}
    for f in (getattr(triton, "cdiv", None),):
        inner = getattr(f, "fn", None) if type(f).__name__ == "ConstexprFunction" else f
        if isinstance(inner, types.FunctionType):
            out[id(f)] = (f, inner)
    return out


def _guarded_value(value, guards, what):
    if isinstance(value, types.ModuleType):
        return _ModuleView(value, guards)
    pure = _pure_functions().get(id(value))
    if pure is not None and pure[0] is value:
        if pure[1] is not value:
            guards.append((vars(value), "fn", pure[1]))
        return pure[1]
    return _Poison(what)


class _Globals(dict):
    """The traced function's globals: ints become variables read per launch, functions and
    modules are guarded, anything else is poison."""

    def __init__(self, real, sources, guards):
        super().__init__()
        dict.__setitem__(self, "__builtins__", _SYM_BUILTINS)
        self._real, self._sources, self._guards = real, sources, guards

    def __getitem__(self, name):
        value = self._real.get(name, ABSENT)
        if value is ABSENT:
            self._guards.append((self._real, name, ABSENT))
            raise KeyError(name)  # then the builtins, as at run time while the name stays absent
        if isinstance(value, int) and not isinstance(value, bool):
            return _Sym(f"${_source(self._sources, ('global', name))}")
        self._guards.append((self._real, name, value))
        return _guarded_value(value, self._guards, name)


def _source(sources, src):
    if src not in sources:
        sources.append(src)
    return sources.index(src)


def trace_grid(grid, fn, bound):
    """(three expressions, their variable sources, guards) for a grid callable whose body is
    integer arithmetic over META, closure cells holding ints and module ints; NotTraceable
    otherwise. Constexprs of this variant are folded in."""
    if not isinstance(grid, types.FunctionType):
        raise NotTraceable("not a Python function")
    code = grid.__code__
    if grid.__defaults__ or grid.__kwdefaults__ or code.co_argcount != 1 or code.co_kwonlyargcount:
        raise NotTraceable("a signature other than (META)")
    if has_effects(code):
        raise NotTraceable("a store, an import, an identity test or nested code")
    sources, guards = [], []
    meta = {}
    for i, p in enumerate(fn.params):
        if p.name not in bound:
            continue
        v = bound[p.name]
        if p.is_constexpr:
            meta[p.name] = v if isinstance(v, (int, float, type(None))) else _Poison(p.name)
        elif isinstance(v, int):  # ints and bools: read per launch
            meta[p.name] = (ABSENT, i)
        else:
            meta[p.name] = _Poison(p.name)
    cells = []
    for j, cell in enumerate(grid.__closure__ or ()):
        try:
            content = cell.cell_contents
        except ValueError:
            raise NotTraceable("an empty closure cell") from None
        if isinstance(content, int) and not isinstance(content, bool):
            cells.append(types.CellType(_Sym(f"${_source(sources, ('cell', j))}")))
        else:
            cells.append(types.CellType(_Poison(code.co_freevars[j])))
    g = _Globals(grid.__globals__, sources, guards)
    traced = types.FunctionType(code, g, grid.__name__, None, tuple(cells) or None)
    try:
        result = traced(_Meta(meta, sources))
    except NotTraceable:
        raise
    except Exception as exc:
        raise NotTraceable(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(result, (tuple, list)) or not 1 <= len(result) <= 3:
        raise NotTraceable("the result is not a tuple of 1 to 3 values")
    exprs = tuple(_Sym.of(x) for x in result) + ("1",) * (3 - len(result))
    if len(sources) > 16:
        raise NotTraceable("more than 16 variables")
    return exprs, tuple(sources), guards


def answered_grid(answer, meta=None):
    """The grid Triton's run gets when fastlaunch called the caller's grid callable and hands the
    call back: the callable is not called twice; Triton reads the same answer, and its mapping gets
    what the callable wrote to fastlaunch's (`meta`), which is what Triton then launches."""
    if meta is None:
        return lambda _meta: answer

    def replay(m):
        m.clear()
        m.update(meta)
        return answer
    return replay


def bind_arguments(fn, args, kwargs):
    """The mapping Triton gives a grid callable: each of fn's parameters by name."""
    out = {}
    params = list(fn.params)
    for i, p in enumerate(params):
        if i < len(args):
            out[p.name] = args[i]
        elif p.name in kwargs:
            out[p.name] = kwargs[p.name]
        elif p.has_default:
            out[p.name] = p.default
    return out
