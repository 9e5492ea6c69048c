"""A torch fastlaunch has never met never gets a wrong launch from the Inductor adapter
(fastlaunch.inductor_facts): a simulated next torch, whose launcher generator
(TritonCompileResult._gen_launcher_code, patched in this process) writes a launcher that passes one
argument more, computes its grid otherwise, or passes two arguments in the other order, has each call
site refused with the fact that no longer holds named in report(); every call
then runs torch's own launcher, with the results torch alone gives."""

import pytest
import torch
from torch._inductor.runtime import triton_heuristics as th

import fastlaunch
import fastlaunch.host as host
from fastlaunch import inductor, inductor_facts
from fastlaunch.bind import sites
from test_inductor import _disabled_after, host_kernels, make_autotuner, resolver, tensors  # noqa: F401

pytestmark = pytest.mark.inductor

RESULT = next((c for c in (getattr(th, "TritonCompileResult", None),) if c is not None and
               hasattr(c, "_gen_launcher_code")), None)


def _swap(args, a, b):
    i, j = args.index(a), args.index(b)
    args = list(args)
    args[i], args[j] = args[j], args[i]
    return args


# name -> (what the next torch's launcher does differently: runner_args -> runner_args, the fact named)
CHANGES = {
    "gains_an_argument": (lambda r: list(r) + ["xnumel"], "launcher.runner_args"),
    "grid_form": (lambda r: ["grid_0 * 2" if a == "grid_0" else a for a in r], "launcher.grid"),
    "arguments_reordered": (lambda r: _swap(r, "in_ptr0", "out_ptr0"), "launcher.runner_args"),
}


def _outputs(host_kernels, bind):
    """Each call's output, through the autotuner as Inductor's wrapper calls it."""
    if bind:
        inductor.enable(inductor.InductorAdapter(backend="host", kernel_resolver=resolver(host_kernels)))
    at = make_autotuner(host_kernels)
    s = host.Stream()
    outs = []
    for n in (1000, 4096, 5000, 1, 3000):
        x, out = tensors(n)
        at.run(x, out, n, stream=s.handle)
        outs.append((x, out))
    s.synchronize()
    s.close()
    return outs, at


def _row(at):
    rows = [s.counts() for s in sites() if s.autotuner is at]
    assert len(rows) == 1, rows
    return rows[0]


@pytest.mark.skipif(RESULT is None, reason="this torch has no TritonCompileResult._gen_launcher_code to patch")
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_launcher_is_refused_by_name(host_kernels, monkeypatch, change):  # noqa: F811
    transform, fact = CHANGES[change]
    assert fact in inductor_facts.FACTS
    original = RESULT._gen_launcher_code

    def next_torch(self, scope, def_args, runner_args, *rest, **kwargs):
        return original(self, scope, def_args, transform(runner_args), *rest, **kwargs)

    monkeypatch.setattr(RESULT, "_gen_launcher_code", next_torch)
    alone, _ = _outputs(host_kernels, bind=False)
    served, at = _outputs(host_kernels, bind=True)
    row = _row(at)
    assert row["fast"] == 0 and row["promotions"] == 0, row  # nothing launched by fastlaunch
    assert any(k.startswith(f"torch_launcher_unrecognised:{fact}") for k in row["refusals"]), row
    for (x0, o0), (x1, o1) in zip(alone, served):  # every launch torch's own: the same results
        assert torch.equal(x0, x1) and torch.equal(o0, o1)


def test_the_launcher_torch_generates_now_is_recognised(host_kernels):  # noqa: F811
    """The control: the same autotuner with the launcher this torch writes is promoted."""
    _, at = _outputs(host_kernels, bind=True)
    row = _row(at)
    assert row["promotions"] == 1 and row["fast"] == 4, row
    assert not any(k.startswith("torch_launcher_unrecognised") for k in row["refusals"]), row


def test_the_facts_are_listed_in_one_place():
    assert len(inductor_facts.FACTS) >= 8
    for fact in ("launcher.runner_prefix", "launcher.runner_args", "launcher.grid", "autotuner.triton_meta"):
        assert fact in inductor_facts.FACTS
    with pytest.raises(AssertionError):
        inductor_facts.refuse("not.a.fact")


def test_fastlaunch_report_names_the_refused_fact(host_kernels, monkeypatch, capsys):  # noqa: F811
    if RESULT is None:
        pytest.skip("this torch has no TritonCompileResult._gen_launcher_code to patch")
    original = RESULT._gen_launcher_code
    monkeypatch.setattr(RESULT, "_gen_launcher_code",
                        lambda self, scope, d, r, *a, **k: original(self, scope, d, list(r) + ["xnumel"], *a, **k))
    _outputs(host_kernels, bind=True)
    fastlaunch.report()
    assert "torch_launcher_unrecognised:launcher.runner_args" in capsys.readouterr().out
