"""Instructions per launch (callgrind) on the free-threaded interpreter against the same CPython
source built with the GIL (issue 41): the same cases of the cuda-stub bench, the collection toggled on
the extension's C loop only, each interpreter with its own venv (torch 2.12.0, Triton 3.7.0) and
fastlaunch built into it. Prints one JSON line with each mode's counts and the ratio.

    PYTHONPATH=tools python -m fldev.ft_instructions FT_PYTHON GIL_PYTHON [N]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CASE = "2 tensors + 1 int"
MODES = ["fastlaunch", "fastlaunch-dyngrid", "fastlaunch-jit"]  # a FinalizedLaunch; Inductor's entry; kernel[grid]
LIMIT = 1.3


def count(python, mode, n, gil_off):
    tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=tools)
    if gil_off:
        env["PYTHON_GIL"] = "0"
    with tempfile.TemporaryDirectory() as d:
        cg = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=fl_bench_loop",
               "--toggle-collect=fl_bench_loop_subscript", f"--callgrind-out-file={cg}", python, "-m", "fldev",
               "bench", "--_one", "cuda-stub", CASE, mode, str(n)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"callgrind run failed ({python}, {mode}): {proc.stderr[-2000:]}")
        with open(cg) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1]) / n
    raise SystemExit("callgrind wrote no total")


def main(ft_python, gil_python, n=2000):
    out = {"case": CASE, "limit": LIMIT, "modes": {}}
    for mode in MODES:
        ft, gil = count(ft_python, mode, n, True), count(gil_python, mode, n, False)
        out["modes"][mode] = {"free_threaded": round(ft), "gil": round(gil), "ratio": round(ft / gil, 3),
                              "met": ft / gil <= LIMIT}
        print(f"[ft_instructions] {mode}: free-threaded {ft:.0f}, GIL {gil:.0f}, {ft / gil:.3f}x", file=sys.stderr)
    print(json.dumps(out))
    return 0 if all(m["met"] for m in out["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:4])))
