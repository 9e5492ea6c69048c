"""``PYTHONPATH=tools python -m fldev bench ...``: the launch-path benchmark (what `make bench` runs)."""

from __future__ import annotations

import argparse
import sys


def _setup_bench(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", action="append", choices=["host", "null", "cuda-stub", "npu-stub", "hip-stub", "cuda"],
                        help="backend to measure (repeatable; default host)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats: under a minute on 2 cores")
    parser.add_argument("--args", choices=["tensor", "int"], default="tensor",
                        help="pointer arguments as torch tensors (default, when torch is installed) or raw "
                             "integer addresses (the launch path alone, without data_ptr() calls)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="draw a chart of cost per mode and case")
    parser.add_argument("--instructions-for", action="append", default=[], metavar="BACKEND",
                        help="count instructions with callgrind for this backend only (repeatable)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per launch with callgrind (null, cuda-stub, npu-stub, hip-stub)")
    parser.add_argument("--_one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--_stub", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--_npu", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--_hip", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--_tma", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--_latency", metavar="JSON", help=argparse.SUPPRESS)


def _child_rows(flag, quick):
    """A bench part run in a process of its own (`fldev bench FLAG FILE`: the stand-in driver becomes
    its libcuda): the rows it wrote."""
    import json
    import subprocess
    import tempfile

    from fldev import bench

    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        cmd = [sys.executable, "-m", "fldev", "bench", flag, tmp.name] + (["--quick"] if quick else [])
        subprocess.run(cmd, check=True, env=bench._with_tools_path())
        with open(tmp.name) as f:
            return json.load(f)


def _cmd_bench(args: argparse.Namespace) -> int:
    """Measure what a launch costs through each path (floor, stock, seed, fastlaunch), side by side."""
    from fldev import bench

    if args._one:
        backend, case, mode, n = args._one
        if backend == "cuda-stub":
            from fldev import stub_bench

            stub_bench.run_one(case, mode, int(n))
        elif backend == "cuda-stub-tma":
            from fldev import tma_bench

            tma_bench.run_one(mode, int(n))
        elif backend == "cuda-stub-latency":
            from fldev import latency_bench

            latency_bench.run_one(case, mode, int(n))
        elif backend == "npu-stub":
            from fldev import npu_bench

            npu_bench.run_one(case, mode, int(n))
        elif backend == "hip-stub":
            from fldev import hip_bench

            hip_bench.run_one(case, mode, int(n))
        else:
            bench.run_one(backend, case, mode, int(n))
        return 0
    if args._stub:
        # The cuda-stub backend in a process of its own: the stub becomes its libcuda.
        import json

        from fldev import stub_bench

        results = stub_bench.run(quick=args.quick)
        with open(args._stub, "w") as f:
            json.dump(results, f)
        return 0
    if args._tma:
        # Descriptors and scratch over the stub (cuda-stub-tma), in a fresh process of their own.
        import json

        from fldev import tma_bench

        with open(args._tma, "w") as f:
            json.dump(tma_bench.rows(quick=args.quick), f)
        return 0
    if args._latency:
        # tritonbench's launch_latency cases over the stub (cuda-stub-latency), in a process of their own.
        import json

        from fldev import latency_bench

        with open(args._latency, "w") as f:
            json.dump(latency_bench.rows(quick=args.quick), f)
        return 0
    if args._npu:
        # The npu-stub backend in a process of its own: the stand-ins are its runtime and torch_npu.
        import json

        from fldev import npu_bench

        with open(args._npu, "w") as f:
            json.dump(npu_bench.run(quick=args.quick), f)
        return 0
    if args._hip:
        # The hip-stub backend in a process of its own: the stand-in becomes its libamdhip64.
        import json

        from fldev import hip_bench

        with open(args._hip, "w") as f:
            json.dump(hip_bench.run(quick=args.quick), f)
        return 0
    backends = args.backend or ["host"]
    if "cuda" in backends:
        if backends != ["cuda"]:
            raise SystemExit("--backend cuda: measure cuda alone (it needs a GPU and its own modes)")
        from fldev import cuda_bench

        return cuda_bench.main(args.json)
    stub = "cuda-stub" in backends
    npu = "npu-stub" in backends
    results = bench.run([b for b in backends if b not in ("cuda-stub", "npu-stub", "hip-stub")], quick=args.quick,
                        args=args.args)
    if results:
        bench.table(results)
    if stub:
        import json
        import subprocess
        import tempfile

        from fldev import stub_bench

        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            cmd = [sys.executable, "-m", "fldev", "bench", "--_stub", tmp.name] + (["--quick"] if args.quick else [])
            subprocess.run(cmd, check=True, env=bench._with_tools_path())
            stub_results = json.load(open(tmp.name))
        print()
        stub_bench.table(stub_results)
        results += stub_results
        from fldev import tma_bench

        tma_results = _child_rows("--_tma", args.quick)
        print(f"\n{tma_bench.BACKEND}, {tma_bench.CASE}: "
              + ", ".join(f"{r['mode']} {r['ns_median']:.1f} ns" for r in tma_results))
        results += tma_results
        from fldev import latency_bench

        latency_results = _child_rows("--_latency", args.quick)
        print()
        latency_bench.table(latency_results)
        results += latency_results
    if npu:
        import json
        import subprocess
        import tempfile

        from fldev import npu_bench

        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            cmd = [sys.executable, "-m", "fldev", "bench", "--_npu", tmp.name] + (["--quick"] if args.quick else [])
            subprocess.run(cmd, check=True, env=bench._with_tools_path())
            npu_results = json.load(open(tmp.name))
        print()
        npu_bench.table(npu_results, cuda=[r for r in results if r["backend"] == "cuda-stub"])
        results += npu_results
    if "hip-stub" in backends:
        import json
        import subprocess
        import tempfile

        from fldev import hip_bench

        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            cmd = [sys.executable, "-m", "fldev", "bench", "--_hip", tmp.name] + (["--quick"] if args.quick else [])
            subprocess.run(cmd, check=True, env=bench._with_tools_path())
            hip_results = json.load(open(tmp.name))
        print()
        hip_bench.table(hip_results)
        results += hip_results
    if args.args == "tensor":
        unpack = bench.unpack_rows(quick=args.quick)
        if unpack:
            d, p = (r["ns_median"] for r in unpack)
            print(f"\nper tensor, in a C loop: tensor door {d:.2f} ns, data_ptr() {p:.2f} ns")
            results += unpack
    if args.instructions or args.instructions_for:
        chosen = args.instructions_for or [b for b in ("null", "cuda-stub", "npu-stub", "hip-stub")
                                           if b in backends] or ["null"]
        from fldev import tma_bench

        from fldev import latency_bench

        if "cuda-stub" in chosen and any(r["backend"] == tma_bench.BACKEND for r in results):
            chosen = chosen + [tma_bench.BACKEND]  # descriptors and scratch: the stub's own rows
        if "cuda-stub" in chosen and any(r["backend"] == latency_bench.BACKEND for r in results):
            chosen = chosen + [latency_bench.BACKEND]  # the launch forms on tritonbench's cases
        for backend in chosen:
            cases = (bench.CASES[0][0] if backend == "null" else tma_bench.CASE if backend == tma_bench.BACKEND
                     else None if backend == latency_bench.BACKEND else "2 tensors + 1 int")
            counts = bench.instructions(backend, [cases] if cases and (args.quick or backend != "null") else None)
            print(f"\ninstructions per launch (callgrind, {backend} backend):")
            for (case, mode), n in counts.items():
                print(f"  {case:20} {mode:20} {n:10.0f}")
            for r in results:
                if r["backend"] == backend and (r["case"], r["mode"]) in counts:
                    r["instructions"] = round(counts[(r["case"], r["mode"])])
    if args.json:
        bench.write_json(results, args.json)
    if args.plot:
        bench.plot(results, args.plot)
    return 0



def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fldev")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help=(_cmd_bench.__doc__ or "").strip().splitlines()[0])
    _setup_bench(b)
    args = parser.parse_args(argv)
    return int(_cmd_bench(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
