"""tritonbench's launch_latency cases on the stand-in driver (cuda-stub), each launch form against
Triton alone, each mode n calls in a C loop, medians of repeats, side by side in one process; part of
`make bench`, rows under the backend `cuda-stub-latency`. The kernels and argument sets are the
operator's (tritonbench/operators/launch_latency): `nop()` with no argument; `nop_with_args` with 19
(5 tensors, 9 ints of value 1, 5 constexprs of value 32); and a 58-argument one (14 tensors, 26 ints,
18 constexprs) made the same way. Modes (triton-X is Triton alone, fastlaunch-X the same call with
fastlaunch.triton.enable()):

  X-jit       kernel[(1,)](*args), every argument positional
  X-jit-kw    the same with the constexprs by keyword (c1=32, ...)
  X-autotune  the kernel under @triton.autotune (two configs, key=[]), kernel[(1,)](*args) once tuned
  X-run       compiled.run(1, 1, 1, stream, function, packed_metadata, None, None, None, *args) on
              what kernel[grid] returned, `compiled.run` read on every call (Triton 3.7 on: a
              property)
  X-jit-checked  X-jit with every call checked against Triton's own choice of compiled kernel (its
              binder, key and kernel cache asked first: fastlaunch.triton_check), as on a Triton
              outside the proven set or with FASTLAUNCH_VERIFY=1; triton-jit-checked is Triton alone
              again, measured beside it

    PYTHONPATH=tools python -m fldev.latency_bench [--quick]

Prints the rows and issue 55's lines: fastlaunch-run and fastlaunch-jit-kw each at most 1.3x
fastlaunch-jit (the positional kernel[grid]) of the same case; issue 56's: a checked call at most
1.15x Triton alone on that call.
"""

from __future__ import annotations

import statistics
import sys
import tempfile

BACKEND = "cuda-stub-latency"
CASES = [("nop, no argument", 0, 0, 0), ("19 args: 5 tensors, 9 ints, 5 constexprs", 5, 9, 5),
         ("58 args: 14 tensors, 26 ints, 18 constexprs", 14, 26, 18)]
FORMS = ("jit", "jit-kw", "autotune", "run", "jit-checked")
MODES = tuple(f"{side}-{form}" for form in FORMS for side in ("triton", "fastlaunch"))
RATIO = 1.3  # issue 55: .run direct and the keyword form against the positional kernel[grid]
CHECKED = 1.15  # issue 56: a checked call against Triton alone on that call


def _source(nt, ni, nc):
    params = [f"t{i + 1}" for i in range(nt)] + [f"i{i + 1}" for i in range(ni)] + \
             [f"c{i + 1}: tl.constexpr" for i in range(nc)]
    sig = ", ".join(params)
    return ("import triton\nimport triton.language as tl\n\n\n"
            f"@triton.jit\ndef nop({sig}):\n    pass\n\n\n"
            "@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=[])\n"
            f"@triton.jit\ndef nop_tuned({sig}):\n    pass\n")


class Case:
    def __init__(self, name, nt, ni, nc, directory):
        import torch

        import fastlaunch.triton as flt
        from fldev import cuda_stub
        from fldev.stub_bench import module_from_source
        from fastlaunch import triton_compiled

        self.name = name
        tag = f"{nt}_{ni}_{nc}"
        mine = module_from_source(directory, f"lat_{tag}", _source(nt, ni, nc))
        theirs = module_from_source(directory, f"lat_{tag}_stock", _source(nt, ni, nc))
        flt.enable()
        flt.exclude(theirs.nop)  # Triton alone
        flt.exclude(theirs.nop_tuned)
        self.tensors = [torch.zeros(1) for _ in range(nt)]
        self.pos = tuple(self.tensors) + (1,) * ni  # tritonbench's: ints of value 1, constexprs of 32
        self.consts = {f"c{i + 1}": 32 for i in range(nc)}
        self.args = self.pos + tuple(self.consts.values())
        self.kernels = {"triton": theirs, "fastlaunch": mine}
        mine.bench_args = self.args
        self.compiled = {}
        for side, mod in self.kernels.items():
            for _ in range(3):
                mod.nop[(1,)](*self.args)
                mod.nop[(1,)](*self.pos, **self.consts)
                mod.nop_tuned[(1,)](*self.args)
            self.compiled[side] = mod.nop[(1,)](*self.args)
        # Triton alone's kept kernel: its class's own `run` property and __getitem__ (fastlaunch's are on
        # the base class while it serves).
        ck = self.compiled["triton"]
        stock_prop = triton_compiled._state.get("run_property")
        ns = {"__getitem__": triton_compiled._state["getitem"][2]}
        if stock_prop is not None:
            ns["run"] = stock_prop
        ck.__class__ = type("TritonCompiledKernel", (type(ck),), ns)
        self.run_args = {side: (1, 1, 1, cuda_stub.STREAM, k.function, k.packed_metadata, None, None, None) + self.args
                         for side, k in self.compiled.items()}
        for side in self.kernels:
            for _ in range(3):
                self.compiled[side].run(*self.run_args[side])
        c = mine.nop.run.counts
        assert c["fast"] >= 5, f"{name}: the JIT dispatcher did not serve: {c}"
        assert not hasattr(theirs.nop.run, "counts"), f"{name}: Triton's side is fastlaunch's"
        assert type(vars(self.compiled["fastlaunch"]).get("_run", vars(self.compiled["fastlaunch"]).get("run"))).__name__ \
            == "CompiledRun", f"{name}: compiled.run is not served"

    def loop(self, mode, n):
        """n calls of one mode in a C loop: nanoseconds."""
        from fastlaunch import _C

        side, form = mode.split("-", 1)
        mod = self.kernels[side]
        if form == "jit-checked" and side == "fastlaunch":
            return self.checked_loop(mod, n)
        if form in ("jit", "jit-checked"):
            return _C.bench_subscript_loop(mod.nop, (1,), self.args, {}, n)
        if form == "jit-kw":
            return _C.bench_subscript_loop(mod.nop, (1,), self.pos, self.consts, n)
        if form == "autotune":
            return _C.bench_subscript_loop(mod.nop_tuned, (1,), self.args, {}, n)
        return _C.bench_attr_loop(self.compiled[side], "run", self.run_args[side], {}, n)


    @staticmethod
    def checked_loop(mod, n):
        """kernel[(1,)](*args) with every call checked (enable(verify=True)), then as before."""
        from fastlaunch import _C, triton_check, triton_jit

        was = triton_check.verify_all()
        triton_jit.enable(verify=True)  # already enabled: the setting read again at the next call
        try:
            _C.bench_subscript_loop(mod.nop, (1,), mod.bench_args, {}, 3)  # revalidated outside the timed loop
            t = _C.bench_subscript_loop(mod.nop, (1,), mod.bench_args, {}, n)
            assert mod.nop.run.counts["checked"] >= n, mod.nop.run.counts
            return t
        finally:
            triton_jit.enable(verify=was)
            _C.bench_subscript_loop(mod.nop, (1,), mod.bench_args, {}, 3)


def _cases(names=None):
    directory = tempfile.mkdtemp(prefix="fl-latency-bench-")
    return [Case(n, t, i, c, directory) for n, t, i, c in CASES if names is None or n in names]


def rows(quick=False, stub=None):
    """The modes' rows (bench.json's form), every case: medians of repeats of a C loop of calls."""
    from fldev import cuda_stub

    stub = stub or cuda_stub.load()
    stub.count_only()
    repeats, n = (5, 2000) if quick else (9, 5000)
    out = []
    for ci, case in enumerate(_cases()):
        print(f"[{BACKEND}] {case.name} ({ci + 1}/{len(CASES)})", file=sys.stderr, flush=True)
        samples = {m: [] for m in MODES}
        for _ in range(repeats):
            for m in MODES:
                slow = (m.startswith("triton-") and not m.endswith("-run")) or m.endswith("-checked")
                nm = max(200, n // 20) if slow else n
                samples[m].append(case.loop(m, nm) / nm)
        for m in MODES:
            out.append({"backend": BACKEND, "case": case.name, "mode": m,
                        "ns_median": round(statistics.median(samples[m]), 1), "ns_min": round(min(samples[m]), 1),
                        "repeats": repeats, "iterations": n, "pointer_args": "torch tensors"})
    return out


def run_one(case_name, mode, n):
    """One mode of one case, n calls in the C loop (the callgrind child)."""
    from fldev import cuda_stub

    cuda_stub.load().count_only()
    (case,) = _cases([case_name])
    case.loop(mode, 50)  # warm-up outside the counted C loop
    case.loop(mode, n)


def lines(table):
    """(sentence, met) for issue 55's lines, from rows keyed (backend, case, mode): per case, the
    keyword form and .run called directly against the positional kernel[grid] (time, and callgrind
    instructions where counted), and fastlaunch against Triton alone per form (reported)."""
    out = []
    for name, *_ in CASES:
        get = {m: table.get((BACKEND, name, m)) for m in MODES}
        if any(v is None for v in get.values()):
            continue
        base = get["fastlaunch-jit"]
        for form in ("jit-kw", "run"):
            r = get[f"fastlaunch-{form}"]
            t = r["ns_median"] / base["ns_median"]
            ins = (r.get("instructions"), base.get("instructions"))
            i = ins[0] / ins[1] if all(ins) else None
            what = f"; instructions {ins[0]:,} / {ins[1]:,} = {i:.2f}x" if i else ""
            out.append((f"{BACKEND}, {name}: fastlaunch-{form} <= {RATIO}x fastlaunch-jit: {r['ns_median']:.1f} / "
                        f"{base['ns_median']:.1f} ns = {t:.2f}x{what}", t <= RATIO and (i is None or i <= RATIO)))
        served = [f for f in FORMS if f != "jit-checked"]
        against = ", ".join(f"{form} {get[f'triton-{form}']['ns_median'] / get[f'fastlaunch-{form}']['ns_median']:.1f}x"
                            for form in served)
        out.append((f"{BACKEND}, {name}: Triton alone / fastlaunch, per form: {against} (each >= 2x)",
                    all(get[f"triton-{f}"]["ns_median"] >= 2 * get[f"fastlaunch-{f}"]["ns_median"] for f in served)))
        c, t = get["fastlaunch-jit-checked"]["ns_median"], get["triton-jit-checked"]["ns_median"]
        out.append((f"{BACKEND}, {name}: a checked call <= {CHECKED}x Triton alone on it: fastlaunch-jit-checked / "
                    f"triton-jit-checked = {c:.1f} / {t:.1f} ns = {c / t:.2f}x", c <= CHECKED * t))
    return out


def table(results, out=sys.stdout):
    """Rows as a narrow table: per case, each form's Triton alone and fastlaunch in ns."""
    print(f"{BACKEND} (tritonbench launch_latency cases), ns per call, medians:", file=out)
    print(f"  {'case':46} {'form':11} {'Triton':>10} {'fastlaunch':>11} {'ratio':>7}", file=out)
    by = {(r["case"], r["mode"]): r for r in results if r["backend"] == BACKEND}
    for name, *_ in CASES:
        for form in FORMS:
            t, f = by.get((name, f"triton-{form}")), by.get((name, f"fastlaunch-{form}"))
            if t and f:
                print(f"  {name:46} {form:11} {t['ns_median']:10.1f} {f['ns_median']:11.1f} "
                      f"{t['ns_median'] / f['ns_median']:6.1f}x", file=out)


def main(argv):
    result = rows(quick="--quick" in argv)
    table(result)
    t = {(r["backend"], r["case"], r["mode"]): r for r in result}
    for text, met in lines(t):
        print(f"  {'met' if met else 'MISSED'}: {text}")
    return 0 if all(m for _, m in lines(t)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
