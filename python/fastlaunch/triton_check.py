"""What decides Triton's key in the Triton in use, recognised by content; the check of every JIT call
where it is not.

fastlaunch's JIT dispatcher computes Triton's key in C (what Triton specializes each argument on, the
options, the device) and launches the variant bound under it. That is proven equal to Triton's own
choice only on the Tritons the suite ran on. So:

- **Recognition.** The pieces of the Triton in use that decide which compiled kernel a call runs
  (PIECES: JITFunction.run, the binder's construction, the specialization, the key's computation, the
  backend's attribute parsing and option defaults, the Autotuner's and Heuristics' run) are found
  where Triton's own code finds them, and fingerprinted: each piece by where its code lives (a file
  of the triton package, a native function of libtriton, or anything else), each file by the hash of
  its content (a native library by the hash pip recorded for it, checked against its size). A
  monkeypatched piece, an edited file, a rebuilt libtriton or a new release gives a new fingerprint.
  The fingerprints the suite has proven are in proven_tritons.txt beside this module, one line each,
  written by `tools/test-versions` after a green run with the check on.
- **The check.** Where the fingerprint is not in that file (or FASTLAUNCH_VERIFY=1, or
  `enable(verify=True)`), every JIT call fastlaunch would launch first asks Triton which compiled
  kernel it would run: Triton's own statements, taken from its JITFunction.run (the keywords it
  adds, `self.device_caches[device]`, its binder, its key, its kernel cache lookup), run as a
  function with the call's arguments: nothing compiled, nothing launched. The same kernel: launched
  here. Another one: the kernel is handed to Triton for good (its dispatcher sends every call to
  Triton's run), the argument or option that differs named in `fastlaunch.report()`, a warning
  once; the call itself goes to Triton, which launches what it chose. None (Triton would compile):
  the call goes to Triton and what it returns is bound afresh. A JITFunction.run whose statements
  before its kernel lookup are not all of the forms above is not asked: its kernels are Triton's.
  Autotuners and heuristics on such a Triton are Triton's too (their own key is not checked); the
  JIT calls they make are checked.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import logging
import os
import sys
import textwrap
import threading
import warnings

log = logging.getLogger("fastlaunch")

PROVEN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proven_tritons.txt")

# The pieces that decide which compiled kernel a call runs, as (module, attribute path) where
# Triton's own code looks them up; absent ones are part of the fingerprint as absent.
PIECES = (
    ("triton.runtime.jit", "JITFunction.run"),
    ("triton.runtime.jit", "JITFunction.create_binder"),
    ("triton.runtime.jit", "JITFunction.__init__"),
    ("triton.runtime.jit", "KernelParam"),
    ("triton.runtime.jit", "create_function_from_signature"),
    ("triton.runtime.jit", "compute_cache_key"),
    ("triton.runtime.jit", "native_specialize_impl"),
    ("triton.runtime.jit", "specialize_impl"),
    ("triton.runtime.jit", "create_specialize_impl"),
    ("triton.runtime.jit", "mangle_type"),
    ("triton.runtime.jit", "_replace_jit_callables"),
    ("triton.runtime.jit", "KernelInterface.__getitem__"),
    ("triton.runtime.autotuner", "Autotuner.run"),
    ("triton.runtime.autotuner", "Autotuner.__init__"),
    ("triton.runtime.autotuner", "Heuristics.run"),
    ("triton.compiler.compiler", "make_backend"),
)
# Each installed backend's (CUDABackend, HIPBackend, ...) methods the binder and the options reach.
BACKEND_PIECES = ("get_arg_specialization", "parse_attr", "get_int_specialization", "get_tensor_specialization",
                  "parse_options", "supports_native_tensor_specialization")
VERIFY_DISAGREED = "verify_disagreed"

_lock = threading.Lock()
_cache: dict = {}  # the pieces' identities -> (fingerprint, detail)
_state = {"verify": False, "proven": None, "disagreements": {}, "warned": False}


def _resolve(module, path):
    obj = sys.modules.get(module)
    if obj is None:
        try:
            import importlib

            obj = importlib.import_module(module)
        except ImportError:
            return None
    for part in path.split("."):
        obj = inspect.getattr_static(obj, part, None) if not isinstance(obj, type(sys)) else getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _backend_classes():
    """The installed backends' compiler classes, by name (triton.backends.backends: no driver asked)."""
    try:
        from triton.backends import backends
    except ImportError:
        return []
    return [(name, getattr(b, "compiler", None)) for name, b in sorted(backends.items())]


def _live_pieces():
    out = [(f"{m}:{p}", _resolve(m, p)) for m, p in PIECES]
    for name, cls in _backend_classes():
        out.append((f"backend:{name}", cls))
        for attr in BACKEND_PIECES:
            out.append((f"backend:{name}.{attr}", None if cls is None else getattr(cls, attr, None)))
    return out


def _triton_root():
    import triton

    return os.path.dirname(os.path.abspath(triton.__file__))


def _unwrap(obj):
    """The function under a static or class method, and Triton's own under fastlaunch's slots
    (RunSlot, TunerSlot, JitSubscript)."""
    from fastlaunch import _C

    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    if isinstance(obj, (_C.RunSlot, _C.TunerSlot)):
        return obj.stock
    if isinstance(obj, _C.JitSubscript):
        return obj.stock_getitem
    return obj


def _where(obj, root):
    """(kind, place, file or None): where a piece's code lives."""
    obj = _unwrap(obj)
    if obj is None:
        return "absent", "", None
    if isinstance(obj, (bool, int, str, float)):
        return "value", repr(obj), None
    if isinstance(obj, type):
        path = getattr(sys.modules.get(obj.__module__), "__file__", None)
        return "class", f"{obj.__module__}.{obj.__qualname__}", path
    code = getattr(obj, "__code__", None)
    if code is not None:
        return "python", f"{getattr(obj, '__qualname__', '?')}@{code.co_firstlineno}", code.co_filename
    if type(obj).__name__ in ("builtin_function_or_method", "nb_func", "nb_method", "cython_function_or_method"):
        path = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None)
        return "native", f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj.__name__)}", path
    return "opaque", type(obj).__qualname__, None


def _recorded_hashes():
    """{path relative to site-packages: (sha256 as pip recorded it, size)} of the triton distribution."""
    try:
        from importlib import metadata

        dist = metadata.distribution("triton")
        files = dist.files or ()
    except Exception:  # noqa: BLE001 - not installed by pip: nothing recorded
        return {}
    out = {}
    for f in files:
        if f.hash is not None and str(f).endswith((".so", ".pyd", ".dylib")):
            out[os.path.normpath(str(f.locate()))] = (f.hash.value, f.size)
    return out


def _file_hash(path, recorded):
    """The content hash of one file: a Python source read in full; a native library by what pip
    recorded (its size checked), else its size and modification time (never in the proven set)."""
    path = os.path.normpath(os.path.abspath(path))
    if path.endswith(".py"):
        try:
            with open(path, "rb") as f:
                return "sha256:" + hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return "unreadable"
    rec = recorded.get(path)
    try:
        st = os.stat(path)
    except OSError:
        return "unreadable"
    if rec is not None and rec[1] == st.st_size:
        return "recorded:" + rec[0]
    return f"unrecorded:{st.st_size}:{int(st.st_mtime)}"


def fingerprint():
    """(fingerprint, detail): the hex digest of the key-deciding pieces of the Triton in use, and the
    per-piece records it was made of. Computed once per set of live pieces."""
    pieces = _live_pieces()
    ident = tuple((name, id(obj)) for name, obj in pieces)
    hit = _cache.get(ident)
    if hit is not None and all(a is b for a, (_, b) in zip(hit[2], pieces)):
        return hit[0], hit[1]
    try:
        root = _triton_root()
    except ImportError:
        return None, []
    recorded = None
    records, files = [], {}
    for name, obj in pieces:
        kind, place, path = _where(obj, root)
        rel = None
        if path:
            path = os.path.abspath(path)
            inside = os.path.commonpath([path, root]) == root
            rel = os.path.relpath(path, root) if inside else f"outside:{os.path.basename(path)}"
            if rel not in files:
                if recorded is None and not path.endswith(".py"):
                    recorded = _recorded_hashes()
                files[rel] = _file_hash(path, recorded or {})
        records.append([name, kind, place, rel])
    detail = {"pieces": records, "files": sorted(files.items())}
    digest = hashlib.sha256(json.dumps(detail, sort_keys=True).encode()).hexdigest()[:32]
    _cache.clear()
    _cache[ident] = (digest, detail, [obj for _, obj in pieces])
    return digest, detail


def proven_set(path=PROVEN_FILE):
    """{fingerprint: the rest of its line} from the proven file (read once; `reload_proven()` again)."""
    if _state["proven"] is None or path != PROVEN_FILE:
        found = {}
        try:
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#"):
                        fp, _, rest = line.partition(" ")
                        found[fp] = rest.strip()
        except OSError:
            pass
        if path != PROVEN_FILE:
            return found
        _state["proven"] = found
    return _state["proven"]


def reload_proven():
    _state["proven"] = None
    return proven_set()


def recognised():
    """(proven, fingerprint, what the proven file says of it)."""
    fp, _ = fingerprint()
    entry = proven_set().get(fp) if fp else None
    return entry is not None, fp, entry


def set_verify(on: bool) -> None:
    _state["verify"] = bool(on)


def verify_all() -> bool:
    return _state["verify"]


def checking() -> bool:
    """Whether JIT calls are checked now: FASTLAUNCH_VERIFY / enable(verify=True), or a Triton whose
    key-deciding pieces are not in the proven set."""
    return _state["verify"] or not recognised()[0]


def tuners_recognised() -> bool:
    """Whether fastlaunch's own Autotuner and Heuristics dispatchers may serve: the pieces proven."""
    return recognised()[0]


# ---- Triton's own choice ----

_PRELUDES: dict = {}  # JITFunction.run (the function object) -> (prelude or None, why)


def _names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_kwargs_store(stmt):
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)
            and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == "kwargs")


def _prelude_of(run):
    """Triton's JITFunction.run statements up to its kernel cache lookup, as a function
    (self, device, args, kwargs) -> its locals; or None and why, when any statement there is not one
    of the known forms."""
    try:
        src = textwrap.dedent(inspect.getsource(run))
        fdef = ast.parse(src).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None, "source_unreadable"
    if not isinstance(fdef, ast.FunctionDef):
        return None, "not_a_function"
    kept, seen = [], set()
    for stmt in fdef.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        tuple_names = [e.id for t in targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)]
        if _is_kwargs_store(stmt):
            kept.append(stmt)
        elif names in ({"device"}, {"stream"}):
            continue  # read by the dispatcher (the device is the check's argument)
        elif isinstance(stmt, ast.For) and "pre_run_hooks" in ast.unparse(stmt.iter):
            continue  # called by the dispatcher, before the check
        elif isinstance(stmt, ast.If) and "add_stages_inspection_hook" in ast.unparse(stmt.test):
            continue  # set: every call is Triton's (triton_jit's stock reason)
        elif tuple_names and ast.unparse(stmt.value) == "self.device_caches[device]":
            kept.append(stmt)
            seen.add("caches")
        elif (tuple_names and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
              and stmt.value.func.id == "binder"):
            kept.append(stmt)
            seen.add("binder")
        elif names == {"key"}:
            kept.append(stmt)
            seen.add("key")
        elif names and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func).endswith("kernel_cache.get"):
            kept.append(stmt)
            kernel_name = next(iter(names))
            if seen != {"caches", "binder", "key"}:
                return None, "prelude_incomplete"
            break
        else:
            return None, f"statement_unrecognised:{ast.unparse(stmt).splitlines()[0][:60]}"
    else:
        return None, "no_kernel_lookup"
    body = kept + [ast.Return(value=ast.Tuple(elts=[ast.Name(kernel_name, ast.Load()),
                                                    ast.Call(ast.Name("locals", ast.Load()), [], [])], ctx=ast.Load()))]
    args = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in ("self", "device", "args", "kwargs")], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    func = ast.FunctionDef(name="_triton_choice", args=args, body=body, decorator_list=[], returns=None,
                           type_comment=None, type_params=[])
    module = ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[]))
    try:
        code = compile(module, getattr(run, "__code__", None).co_filename, "exec")
    except (SyntaxError, ValueError, TypeError, AttributeError):
        return None, "prelude_uncompilable"
    ns: dict = {}
    exec(code, run.__globals__, ns)  # noqa: S102 - Triton's own statements, in its module's globals
    return ns["_triton_choice"], None


def prelude():
    """(function or None, why) for the JITFunction.run in use."""
    from triton.runtime.jit import JITFunction

    run = JITFunction.__dict__.get("run")
    run = getattr(run, "stock", run)  # under fastlaunch's RunSlot: Triton's own
    hit = _PRELUDES.get(run)
    if hit is None:
        with _lock:
            hit = _PRELUDES.get(run)
            if hit is None:
                hit = _PRELUDES[run] = _prelude_of(run) if isinstance(run, type(_prelude_of)) else (None, "run_not_a_function")
    return hit


_PRE_RUN: list = []  # [names or None], once read


def pre_run_names():
    """The keywords Triton's JITFunction.run adds before it calls the pre-run hooks, read from its
    code once: `debug` (always first), then `kwargs["<name>"] = knobs.compilation.<name>` lines (none
    in 3.5; instrumentation_mode from 3.6; fpsan_homomorphic_casts in 3.9). None when its code has
    any other form, or cannot be read."""
    if not _PRE_RUN:
        import inspect
        import re

        from triton.runtime.jit import JITFunction

        names = None
        try:
            run = JITFunction.__dict__["run"]
            head = inspect.getsource(getattr(run, "stock", run)).split("self.pre_run_hooks")[0]
            found = re.findall(r'kwargs\["(\w+)"\]\s*=\s*(.+)', head)
            if found and found[0] == ("debug", 'kwargs.get("debug", self.debug) or knobs.runtime.debug'):
                rest = [(n, e.strip()) for n, e in found[1:]]
                if all(e == f"knobs.compilation.{n}" for n, e in rest):
                    names = tuple(n for n, _ in rest)
        except (OSError, TypeError, KeyError):
            pass
        _PRE_RUN.append(names)
    return _PRE_RUN[0]


def ask(policy, device, args, kwargs, kernels, unread=False):
    """A checked call (the policy's check): the index of the kernel among `kernels` (the variants bound
    for the call: one, or one per alignment of tensor-likes not read yet) Triton would run for it; else
    why the call is Triton's: VERIFY_DISAGREED (Triton chose another compiled kernel: the kernel handed
    back for good, the difference named), ("verify_triton_compiles",) (Triton would compile: the table
    cleared, what its run returns bound afresh), or "verify_triton_compiling" (a compile in flight);
    -1 where `unread` (the kernels are one per alignment of tensor-likes whose pointers are not read
    yet) and Triton chose another kernel: the dispatcher reads them and asks again for theirs."""
    choice, _ = prelude()
    chosen, seen = choice(policy.fn, device, args, kwargs)
    for i, kernel in enumerate(kernels):
        if chosen is kernel:
            return i
    if unread and chosen is not None:
        return -1
    d = policy.dispatcher() if policy.dispatcher else None
    if chosen is None:
        if d is not None:
            d.clear()  # Triton's cache lost it (or never had it under this key): bound again after
        return ("verify_triton_compiles",)
    if not hasattr(chosen, "function"):  # a compile in flight (Triton's async mode): its own
        return "verify_triton_compiling"
    what = difference(policy.fn, (seen.get("specialization"), seen.get("options")),
                      _bound_specialization(policy.fn, device, kernels[0]))
    policy.handed = VERIFY_DISAGREED
    disagreement(policy.fn, f"jit:{policy.fn.__name__}", what)
    if d is not None:
        d.clear()
        d.invalidate()
    return VERIFY_DISAGREED


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _bound_specialization(fn, device, kernel):
    """(specialization, options text) under which Triton keeps `kernel`, found back through its
    caches: its key cache (3.5 on: (tuple(specialization), str(options)) -> key), or its key read as
    str(specialization) + str(options) (3.3, 3.4); None where neither holds."""
    try:
        caches = fn.device_caches[device]
        key = next(k for k, v in list(caches[0].items()) if v is kernel)
        if isinstance(caches[1], dict):
            spec, opts = next(k for k, v in list(caches[1].items()) if v == key)
            return list(spec), opts
        cut = key.rfind("]{") + 1
        spec = _literal(key[:cut]) if cut > 0 else None
        return (list(spec), key[cut:]) if isinstance(spec, list) else None
    except (StopIteration, TypeError, ValueError, IndexError, AttributeError, KeyError):
        return None


def difference(fn, now, then):
    """What differs between the call's (specialization, options) and the bound variant's: the
    argument or option by name, else the key's computation."""
    if then is None or now is None:  # the bound key is not Triton's (specialization, options) key
        return "key computation (the bound variant's key is not made of its specialization and options)"
    spec_now, opts_now = now
    spec_then, opts_then = then
    names = [p.name for p in getattr(fn, "params", ())]
    for i, (a, b) in enumerate(zip(spec_now, spec_then)):
        if a != b:
            name = names[i] if i < len(names) else f"#{i}"
            return f"argument {name}: {a!r} now, {b!r} when bound"
    if len(spec_now) != len(spec_then):
        return f"specialization: {len(spec_now)} entries now, {len(spec_then)} when bound"
    if str(opts_now) != str(opts_then):
        a, b = opts_now, _literal(opts_then) if isinstance(opts_then, str) else opts_then
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                if a.get(k, "<absent>") != b.get(k, "<absent>"):
                    return f"option {k}: {a.get(k, '<absent>')!r} now, {b.get(k, '<absent>')!r} when bound"
        return f"options: {opts_now} now, {opts_then} when bound"
    return "key computation (same specialization and options, another key)"


def disagreement(fn, name, what):
    """Records a kernel handed back: named in report(), warned about once per process."""
    with _lock:
        _state["disagreements"][name] = what
        first = not _state["warned"]
        _state["warned"] = True
    msg = (f"fastlaunch: Triton chose another compiled kernel than fastlaunch for {name} ({what}); "
           f"that kernel is Triton's from now on (fastlaunch.report() lists every such kernel)")
    log.warning(msg)
    if first:
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    import fastlaunch

    path = fastlaunch._config.verify_log
    if path:
        try:
            with open(path, "a") as f:
                f.write(json.dumps({"fingerprint": fingerprint()[0], "kernel": name, "what": what,
                                    "pid": os.getpid()}) + "\n")
        except OSError as exc:
            log.warning("fastlaunch: FASTLAUNCH_VERIFY_LOG=%s not written: %s", path, exc)


def disagreements():
    return dict(_state["disagreements"])


def report_lines():
    """The report's lines on recognition and the check."""
    try:
        proven, fp, entry = recognised()
    except Exception as exc:  # noqa: BLE001 - report() never raises for this
        return [f"  Triton's key: not fingerprinted ({type(exc).__name__}: {exc})"]
    if fp is None:
        return []
    if proven:
        line = f"  Triton's key: recognised (fingerprint {fp[:12]}, proven on {entry})"
    else:
        line = f"  Triton's key: NOT in the proven set (fingerprint {fp[:12]}): every JIT call is checked against Triton"
    if _state["verify"]:
        line += "; FASTLAUNCH_VERIFY: every JIT call is checked against Triton"
    out = [line]
    for name, what in sorted(disagreements().items()):
        out.append(f"  handed to Triton (it chose another compiled kernel): {name}: {what}")
    return out


def record_line(fp, facts):
    """One line of the proven file."""
    return f"{fp} {facts}"
