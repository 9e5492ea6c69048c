"""`import fastlaunch` with every dict watcher id taken (CPython 3.12+): other code's watchers fill
the interpreter's slots before the import, as PyDict_AddWatcher hands them out, until it refuses.
Then: the import works; a host plan launches; the dispatchers' change detector is the fallback
(3.12: dict version tags, checked here through an AutotuneDispatcher with a stand-in policy whose
watched dict changes) or none (3.13+: the JIT reported off in report(), Inductor's entry still
serving). Prints one JSON line; exits 1 when a check fails.

    python tools/fldev/watch_exhaust.py        (a venv with fastlaunch installed; no torch needed)
"""

from __future__ import annotations

import ctypes
import io
import json
import sys


def take_every_watcher():
    cb_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.py_object, ctypes.py_object, ctypes.py_object)
    add = ctypes.pythonapi.PyDict_AddWatcher
    add.argtypes, add.restype = [cb_type], ctypes.c_int
    keep, ids = [], []
    while True:
        cb = cb_type(lambda *a: 0)
        try:
            ids.append(add(cb))
        except RuntimeError:  # "no more dict watcher IDs available"
            break
        keep.append(cb)
    return keep, ids


def main():
    keep, ids = take_every_watcher() if sys.version_info >= (3, 12) else ([], [])
    out = {"python": sys.version.split()[0], "watchers_taken": ids, "checks": {}}
    checks = out["checks"]
    import fastlaunch  # must not fail
    from fastlaunch import _C

    detector, why = _C.watch_detector()
    out["detector"], out["why"] = detector, why
    if sys.version_info < (3, 12):
        want = "version_tags"  # no watchers before 3.12
    else:
        want = "version_tags" if sys.version_info < (3, 13) else None  # every id was taken
    checks["detector"] = detector == want and (why is not None) == (sys.version_info >= (3, 12))

    # A host plan: the launch path needs no detector.
    import fastlaunch.host as host

    src = ("typedef struct { long *p; long n; } args;\n"
           "void add1(const void *a, const fl_host_program *prog) {\n"
           "  const args *x = a; (void)prog; for (long i = 0; i < x->n; i++) x->p[i] += 1; }\n")
    k = host.compile(src, "add1")
    buf = (ctypes.c_long * 4)()
    plan = fastlaunch.Plan(k, ["ptr", "i64"], grid=(1,))
    s = host.Stream()
    plan(ctypes.addressof(buf), 4, stream=s.handle)
    s.synchronize()
    s.close()
    checks["host_plan"] = list(buf) == [1, 1, 1, 1]

    # Inductor's entry (a launcher generated as Inductor generates it, stand-ins over host kernels):
    # bound, promoted, every call launched once.
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from fastlaunch.bind import bind
    from fldev import standins

    src = ("typedef struct { int32_t *counts; int64_t id; int32_t n; int32_t B; } count_args;\n"
           "void count_launch(const void *a, const fl_host_program *p) {\n"
           "  const count_args *x = a;\n"
           "  if (p->pid[0] == 0 && p->pid[1] == 0 && p->pid[2] == 0) x->counts[x->id] += 1; }\n")
    kc = host.compile(src, "count_launch")
    launcher = standins.make_launcher(kc, ["ptr", "i64", "i32", "i32"], def_args=["counts", "cid", "xnumel"],
                                      grid=("-((xnumel) // -(XBLOCK))", "1", "1"), constants={"XBLOCK": 64},
                                      name="count")
    at = standins.Autotuner([launcher], name="count_exhaust")
    bound = bind(at, standins.HostAdapter())
    counts = (ctypes.c_int32 * 8)()
    s = host.Stream()
    for cid in range(5):
        at.run(ctypes.addressof(counts), cid, 1000, stream=s.handle)
    s.synchronize()
    s.close()
    c = bound.counts()
    checks["inductor_entry"] = list(counts)[:5] == [1] * 5 and c["fast"] == 4 and c["promotions"] == 1
    out["inductor"] = {k: c[k] for k in ("fast", "stock", "promotions")}

    # The dispatchers' detector: a watched dict's change is seen (3.12's fallback), or every call
    # revalidates (none).
    class At:
        configs = [object(), object()]
        cache, best_config, nargs = {}, None, None

    class Policy:
        revalidations = 0

        def revalidate(self):
            Policy.revalidations += 1
            return (None, (At.cache,), lambda *a, **k: "inner")

        def bind(self, key, args, kwargs):
            self.d._insert(key, At.configs[1], ("BLOCK",), (128,), (), None)
    pol = Policy()
    pol.d = d = _C.AutotuneDispatcher(At, lambda *a, **k: "triton", pol, arg_names=("x", "n"), key_params=(1,),
                                      configs=At.configs)
    for _ in range(3):
        d(1, 5, grid=(1,), warmup=False)
    before = Policy.revalidations
    d(1, 5, grid=(1,), warmup=False)
    unchanged = Policy.revalidations - before
    At.cache["k"] = 1
    d(1, 5, grid=(1,), warmup=False)
    changed = Policy.revalidations - before - unchanged
    checks["change_seen"] = changed == 1
    checks["quiet_when_unchanged"] = unchanged == (1 if detector is None else 0)

    # The JIT: off with its reason where there is no detector (before Triton is even imported).
    from fastlaunch import triton_jit

    if detector is None:
        triton_jit.enable()
        text = io.StringIO()
        fastlaunch.report(file=text)
        checks["jit_off_named"] = bool(triton_jit._state["off"]) and not triton_jit._state["enabled"] and \
            "not served: no dict change detector" in text.getvalue()
        out["jit_off"] = triton_jit._state["off"]
        out["report"] = text.getvalue()[-400:]
    print(json.dumps(out))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
