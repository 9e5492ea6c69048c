"""torch.compile of launch-bound models three ways on a GPU (run by tools/gpu-check): stock
Inductor, Inductor with fastlaunch, and CUDA graphs (mode="reduce-overhead"). Checks that outputs
are equal, prints median step times and the share of launches that took the fast path, and writes
JSON to the path given as argument.

Parallel compile is on (compile_threads >= 2), as on any GPU machine by default: most kernels are
compiled in Inductor's worker processes and reach this process unpickled. Each variant compiles
from a fresh Inductor cache, so the fastlaunch variant does not reuse autotuners the stock one made.
"""

import json
import statistics
import sys
import time

import torch
import torch.nn as nn

import fastlaunch
from fastlaunch import inductor

STEPS = 300
FAST_SHARE_TARGET = 0.95


def fresh_cache():
    from torch._inductor import utils

    return getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache")


class MLP(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.l1, self.n1 = nn.Linear(d, 4 * d), nn.LayerNorm(4 * d)
        self.l2, self.n2 = nn.Linear(4 * d, d), nn.LayerNorm(d)

    def forward(self, x):
        x = self.n1(torch.nn.functional.gelu(self.l1(x)))
        return self.n2(torch.nn.functional.gelu(self.l2(x)))


class Decoder(nn.Module):
    def __init__(self, d=512, heads=8):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


def step_times(fn, x):
    for _ in range(20):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def fast_share():
    rows = fastlaunch.report(as_dict=True)
    fast = sum(r["fast"] for r in rows)
    return fast, fast + sum(r["stock"] for r in rows)


def run_model(name, model, x):
    out = {}
    with torch.no_grad():
        results = {}
        for variant in ("stock", "fastlaunch", "cudagraphs"):
            torch._dynamo.reset()
            if variant == "fastlaunch":
                inductor.enable()
            with fresh_cache()():
                compiled = torch.compile(model, mode="reduce-overhead" if variant == "cudagraphs" else None)
                y = compiled(x).clone()
                before = fast_share()
                t = step_times(compiled, x)
                after = fast_share()
            if variant == "fastlaunch":
                fastlaunch.report()
            results[variant] = y
            out[variant] = {"step_us_median": t}
            if variant == "fastlaunch":
                fast, total = after[0] - before[0], after[1] - before[1]
                out[variant]["fast_share"] = fast / total if total else 0.0
                out[variant]["launches"] = total
                inductor.disable()
        out["outputs_equal_stock_fastlaunch"] = bool(torch.equal(results["stock"], results["fastlaunch"]))
        out["outputs_close_cudagraphs"] = bool(torch.allclose(results["stock"], results["cudagraphs"], rtol=1e-5,
                                                              atol=1e-6))
    s, f, g = (out[v]["step_us_median"] for v in ("stock", "fastlaunch", "cudagraphs"))
    out["fastlaunch_step_reduction"] = 1 - f / s
    print(f"{name:10} stock {s:8.1f} us  fastlaunch {f:8.1f} us ({100 * (1 - f / s):.1f}% lower)  "
          f"cudagraphs {g:8.1f} us  fast-path share {100 * out['fastlaunch'].get('fast_share', 0):.1f}%  "
          f"equal {out['outputs_equal_stock_fastlaunch']}")
    share = out["fastlaunch"].get("fast_share", 0)
    print(f"{name:10} target fast-path share >= {100 * FAST_SHARE_TARGET:.0f}%: "
          f"{'met' if share >= FAST_SHARE_TARGET else 'MISSED'} ({100 * share:.1f}% of "
          f"{out['fastlaunch'].get('launches', 0)} launches, compile_threads "
          f"{torch._inductor.config.compile_threads})")
    return out


def main(path):
    torch.manual_seed(0)
    torch._inductor.config.compile_threads = max(2, torch._inductor.config.compile_threads)
    dev = "cuda"
    models = {"mlp": (MLP().to(dev).eval(), torch.randn(1, 512, device=dev)),
              "decoder": (Decoder().to(dev).eval(), torch.randn(1, 1, 512, device=dev))}
    report = {name: run_model(name, m, x) for name, (m, x) in models.items()}
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    ok = all(r["outputs_equal_stock_fastlaunch"] for r in report.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
