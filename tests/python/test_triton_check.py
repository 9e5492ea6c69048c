"""fastlaunch.triton_check in this process: the fingerprint of Triton's key-deciding pieces, the proven
set, the prelude taken from JITFunction.run (recognised on the installed Triton and on the forms of
3.3 to 3.9, refused by name on any other), what a disagreement names, and the settings' bad values.
The check's behaviour on calls is tests/python/test_next_triton.py's (a process of its own)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

from fastlaunch import config, triton_check  # noqa: E402


def test_the_installed_triton_is_fingerprinted_and_proven():
    fp, detail = triton_check.fingerprint()
    assert isinstance(fp, str) and len(fp) == 32
    names = [p[0] for p in detail["pieces"]]
    assert "triton.runtime.jit:JITFunction.run" in names and "triton.runtime.jit:compute_cache_key" in names
    assert any(f == "runtime/jit.py" and h.startswith("sha256:") for f, h in detail["files"])
    proven, fp2, entry = triton_check.recognised()
    assert fp2 == fp
    if os.environ.get("FASTLAUNCH_VERIFY_LOG"):
        return  # tools/test-versions proving this Triton: its line is written after this run
    assert proven, f"this Triton ({fp}) is not in {triton_check.PROVEN_FILE}: tools/test-versions proves it"
    assert not triton_check.checking() or triton_check.verify_all()


def test_a_replaced_piece_changes_the_fingerprint(monkeypatch):
    from triton.runtime import jit

    fp, _ = triton_check.fingerprint()

    def compute_cache_key(kernel_key_cache, specialization, options):  # a user's patch, in this file
        return str(specialization) + str(options)

    monkeypatch.setattr(jit, "compute_cache_key", compute_cache_key)
    patched, detail = triton_check.fingerprint()
    assert patched != fp
    piece = next(p for p in detail["pieces"] if p[0] == "triton.runtime.jit:compute_cache_key")
    assert piece[1] == "python" and piece[3].startswith("outside:")
    assert not triton_check.recognised()[0] and triton_check.checking()
    monkeypatch.undo()
    assert triton_check.fingerprint()[0] == fp


def test_the_proven_file_is_read_by_its_first_word(tmp_path):
    f = tmp_path / "proven.txt"
    f.write_text("# a comment\n\nabc123 triton 9.9 python 3.99: by hand\n")
    assert triton_check.proven_set(str(f)) == {"abc123": "triton 9.9 python 3.99: by hand"}
    assert triton_check.proven_set(str(tmp_path / "absent.txt")) == {}


def test_the_cli_says_whether_it_is_proven():
    proc = subprocess.run([sys.executable, "-m", "fastlaunch", "triton-key"], capture_output=True, text=True)
    proven = triton_check.recognised()[0]
    assert proc.returncode == (0 if proven else 1), proc.stdout + proc.stderr
    assert triton_check.fingerprint()[0] in proc.stdout
    assert ("proven:" in proc.stdout) == proven and ("every JIT call is checked" in proc.stdout) != proven


RUN_34 = '''
def run(self, *args, grid, warmup, **kwargs):
    kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
    # parse options
    device = driver.active.get_current_device()
    stream = driver.active.get_current_stream(device)
    for hook in self.pre_run_hooks:
        hook(*args, **kwargs)
    kernel_cache, target, backend, binder = self.device_caches[device]
    bound_args, specialization, options = binder(*args, **kwargs)
    key = str(specialization) + str(options)
    kernel = kernel_cache.get(key, None)
    if kernel is None:
        kernel = self.compile()
    return kernel
'''


def _run_from(src):
    from types import SimpleNamespace

    ns = {"knobs": SimpleNamespace(runtime=SimpleNamespace(debug=False))}
    exec(textwrap.dedent(src), ns)  # noqa: S102 - a run of the form a Triton release has
    return ns["run"]


def test_the_prelude_of_the_installed_triton_and_of_3_4_are_recognised(monkeypatch):
    import inspect

    choice, why = triton_check.prelude()
    assert choice is not None and why is None
    monkeypatch.setattr(inspect, "getsource", lambda obj: RUN_34)
    choice, why = triton_check._prelude_of(_run_from(RUN_34))
    assert why is None

    class Fn:  # the statements run as Triton's: its binder, its key, its cache
        debug = False
        pre_run_hooks = []
        device_caches = {0: ({"[('i32', '')]{'debug': False}": "K"}, None, None,
                             lambda *a, **k: ({}, [("i32", "")], dict(k)))}
    kernel, seen = choice(Fn(), 0, (7,), {})
    assert kernel == "K" and seen["key"] == "[('i32', '')]{'debug': False}"


@pytest.mark.parametrize("extra, why", [
    ("    kwargs['debug'] = True\n    args = args[::-1]\n", "statement_unrecognised"),
    ("", None),
])
def test_a_run_with_another_statement_before_its_lookup_is_refused_by_name(monkeypatch, extra, why):
    import inspect

    src = RUN_34.replace("    kernel_cache, target, backend, binder", extra + "    kernel_cache, target, backend, binder")
    monkeypatch.setattr(inspect, "getsource", lambda obj: src)
    choice, reason = triton_check._prelude_of(_run_from(src))
    if why is None:
        assert choice is not None and reason is None
    else:
        assert choice is None and reason.startswith(why) and "args = args" in reason


def test_a_run_without_its_cache_lookup_is_refused(monkeypatch):
    import inspect

    src = RUN_34.replace("    kernel = kernel_cache.get(key, None)\n", "")
    monkeypatch.setattr(inspect, "getsource", lambda obj: src)
    choice, reason = triton_check._prelude_of(_run_from(src))
    assert choice is None and reason


class _Fn:
    class _P:
        def __init__(self, name):
            self.name = name
    params = [_P("x_ptr"), _P("n"), _P("BLOCK")]


def test_a_disagreement_names_the_argument_or_the_option():
    spec = [("*fp32", "D"), ("i32", "D"), ("constexpr", 64)]
    other = [("*fp32", "D"), ("i32", "DD"), ("constexpr", 64)]
    assert triton_check.difference(_Fn, (spec, {"debug": False}), (other, "{'debug': False}")).startswith("argument n")
    opts = triton_check.difference(_Fn, (spec, {"debug": False, "num_warps": 8}), (spec, "{'debug': False}"))
    assert opts.startswith("option num_warps")
    assert triton_check.difference(_Fn, (spec, {}), None).startswith("key computation")
    assert "entries" in triton_check.difference(_Fn, (spec[:2], {}), (spec, "{}"))


def test_verify_settings_bad_values_are_named():
    with pytest.warns(UserWarning, match="FASTLAUNCH_VERIFY"):
        assert config.read({"FASTLAUNCH_VERIFY": "maybe"}).verify is False
    assert config.read({"FASTLAUNCH_VERIFY": "1"}).verify is True
    assert config.read({"FASTLAUNCH_VERIFY_LOG": "/tmp/x.jsonl"}).verify_log == "/tmp/x.jsonl"
    import fastlaunch.triton as flt

    with pytest.raises(TypeError, match="verify"):
        flt.enable(verify="yes")
