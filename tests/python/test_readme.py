"""Every code block of the README runs as written: each Python block saved as a file and run by a
fresh interpreter in an empty directory, each shell command either run here or, when it cannot run inside `make test`
(installing, `make` itself), named with the check that runs it. `text` blocks are sample output."""

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "README.md")) as f:
    README = f.read()
BLOCKS = [(m.group(1), m.group(2), README.count("\n", 0, m.start()) + 1)
          for m in re.finditer(r"^```(\w*)\n(.*?)^```$", README, re.S | re.M)]

# Commands `make test` cannot run from inside itself, and the check that runs each.
ELSEWHERE = {
    "pip install .": "tools/check-install (make check-install): pip install of a fresh clone, build isolation on",
    "make test": "the command running this test",
    "make bench": ".ci and the Makefile's bench target",
    "make test-versions": "tools/test-versions",
    "make test-freethreaded": "tools/test-freethreaded",
    "make check-install": "tools/check-install",
}


def test_every_block_is_known():
    assert {lang for lang, _, _ in BLOCKS} <= {"python", "sh", "text"}
    assert sum(lang == "python" for lang, _, _ in BLOCKS) >= 4


@pytest.mark.parametrize("code,line", [(c, n) for lang, c, n in BLOCKS if lang == "python"],
                         ids=lambda v: f"line{v}" if isinstance(v, int) else None)
def test_python_block_runs(code, line, tmp_path):
    script = tmp_path / "example.py"  # a file, as a user saves it (Triton reads a kernel's source from it)
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, f"README.md line {line}:\n{proc.stderr[-3000:]}"
    if re.search(r"^fastlaunch\.report\(\)", code, re.M):  # called at top level: its tensor line is printed
        assert "tensor arguments:" in proc.stdout


@pytest.mark.parametrize("code,line", [(c, n) for lang, c, n in BLOCKS if lang == "sh"],
                         ids=lambda v: f"line{v}" if isinstance(v, int) else None)
def test_shell_block_runs_or_is_checked_elsewhere(code, line, tmp_path):
    for command in (ln.split("#", 1)[0].strip() for ln in code.splitlines()):
        if not command:
            continue
        if command in ELSEWHERE:
            target = command.split()[-1]
            if command.startswith("make"):
                with open(os.path.join(ROOT, "Makefile")) as f:
                    assert re.search(rf"^{re.escape(target)}:", f.read(), re.M), f"no `{target}` target"
            continue
        words = shlex.split(command)
        assert words[0] == "python", f"README.md line {line}: `{command}` is neither run here nor checked elsewhere"
        proc = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip(), f"README.md line {line}: {command}: {proc.stderr}"


def test_the_first_screen_holds_install_and_quick_start():
    first = "\n".join(README.splitlines()[:60])
    assert "## Install" in first and "pip install ." in first and "## Quick start" in first
    assert "fastlaunch.inductor.enable()" in first
