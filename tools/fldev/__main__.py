"""``PYTHONPATH=tools python -m fldev bench ...``: the launch-path benchmark (what `make bench` runs)."""

from __future__ import annotations

import argparse
import sys


def _setup_bench(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", action="append", choices=["host", "null", "cuda"],
                        help="backend to measure (repeatable; default host)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats: under a minute on 2 cores")
    parser.add_argument("--args", choices=["tensor", "int"], default="tensor",
                        help="pointer arguments as torch tensors (default, when torch is installed) or raw "
                             "integer addresses (the launch path alone, without data_ptr() calls)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="draw a chart of cost per mode and case")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per launch with callgrind (null backend)")
    parser.add_argument("--_one", nargs=4, help=argparse.SUPPRESS)


def _cmd_bench(args: argparse.Namespace) -> int:
    """Measure what a launch costs through each path (floor, stock, seed, fastlaunch), side by side."""
    from fldev import bench

    if args._one:
        backend, case, mode, n = args._one
        bench.run_one(backend, case, mode, int(n))
        return 0
    backends = args.backend or ["host"]
    if "cuda" in backends:
        if backends != ["cuda"]:
            raise SystemExit("--backend cuda: measure cuda alone (it needs a GPU and its own modes)")
        from fldev import cuda_bench

        return cuda_bench.main(args.json)
    results = bench.run(backends, quick=args.quick, args=args.args)
    bench.table(results)
    if args.instructions:
        counts = bench.instructions("null", [bench.CASES[0][0]] if args.quick else None)
        print("\ninstructions per launch (callgrind, null backend):")
        for (case, mode), n in counts.items():
            print(f"  {case:20} {mode:20} {n:10.0f}")
        for r in results:
            if r["backend"] == "null" and (r["case"], r["mode"]) in counts:
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
