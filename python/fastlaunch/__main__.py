"""Command line tools: ``python -m fastlaunch COMMAND ...``.

    python -m fastlaunch layout --abi npu --ffts ptr ptr i32
    python -m fastlaunch layout --abi cuda --hidden-ptrs 2 '*fp32' '*fp32' i32
    python -m fastlaunch tensor-reader --build     (ahead of time: a Dockerfile's RUN step)
    python -m fastlaunch triton-key                (the installed Triton's key: proven, or checked)

Each subcommand is one entry of SUBCOMMANDS below: a name mapped to (setup_fn, run_fn), where
setup_fn(parser) adds the subcommand's arguments to its argparse parser and run_fn(args) does the
work and returns the exit status. Usage errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, Optional, Sequence, Tuple

PROG = "python -m fastlaunch"
EXIT_USAGE = 2


class _UsageError(Exception):
    """A refusal of the user's input, reported as one line naming the argument (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (no usage block), exit status 2.
    add_subparsers() builds the subcommand parsers with the same class."""

    def error(self, message: str):  # noqa: D401 (argparse's signature)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _count(text: str) -> int:
    """argparse type: a non-negative integer (the C API takes unsigned counts, so -1 would wrap)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


# ---- layout --------------------------------------------------------------------------------------

_ABIS = ("host", "cuda", "npu", "hip")

# Option names that appear in the library's refusal reasons, mapped to the flag that sets them.
# The library's layout refusals (their code) that one flag causes.
_REFUSAL_FLAGS = {
    "npu_scratch_requires_simt_only": "--scratch",
    "npu_option_conflict": "--simt-only",
    "npu_ffts_unavailable": "--ffts",
}
_OPTION_FLAGS = (
    ("hidden_ptrs", "--hidden-ptrs"),
    ("npu_scratch", "--scratch"),
    ("scratch", "--scratch"),
    ("simt_only", "--simt-only"),
    ("dtdata", "--dtdata"),
    ("ffts", "--ffts"),
)


def _setup_layout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--abi", required=True, choices=_ABIS, help="the ABI of the packed buffer")
    parser.add_argument("--ffts", action="store_true", help="npu: a leading FFTS address slot")
    parser.add_argument("--simt-only", action="store_true",
                        help="npu: a pure-SIMT kernel (no sync-lock and workspace slots)")
    parser.add_argument("--dtdata", action="store_true", help="npu: a trailing DTData pointer")
    parser.add_argument("--scratch", type=_count, default=0, metavar="N",
                        help="npu: N pointer-width scratch slots after the grid (needs --simt-only)")
    parser.add_argument("--hidden-ptrs", type=_count, default=0, metavar="N",
                        help="cuda, hip: N trailing hidden pointer slots (Triton's scratch pointers)")
    parser.add_argument("--indent", type=_count, default=None, metavar="N",
                        help="indent the JSON by N spaces (default: one line)")
    parser.add_argument("kinds", nargs="+", metavar="KIND",
                        help="argument kinds: kind names (ptr, i32, fp16, ...) or Triton signature "
                             "entries (*fp32, i1, u1, ...)")


def _cmd_layout(args: argparse.Namespace) -> int:
    """Print where each argument sits in an ABI's packed argument buffer, as JSON."""
    from fastlaunch import layout

    try:
        # Only the options given: each ABI takes its own (the library refuses the others).
        options = {k: v for k, v in (("ffts", args.ffts), ("simt_only", args.simt_only), ("dtdata", args.dtdata),
                                     ("scratch", args.scratch), ("hidden_ptrs", args.hidden_ptrs)) if v}
        result = layout(args.abi, list(args.kinds), **options)
    except ValueError as exc:
        raise _UsageError(_name_layout_argument(exc, args)) from None
    print(json.dumps(result, indent=args.indent))
    return 0


def _name_layout_argument(exc: ValueError, args: argparse.Namespace) -> str:
    """Turns a ValueError of fastlaunch.layout into a message naming the command-line argument."""
    message = str(exc)
    index = getattr(exc, "index", None)  # a kind's error carries the entry's index
    if index is not None and getattr(exc, "reason", "").startswith("kinds["):
        text = args.kinds[index] if index < len(args.kinds) else "?"
        return f"argument KIND #{index + 1} ({text!r}): {message.split(': ', 1)[-1]}"
    argument = getattr(exc, "argument", None)  # the parameter or option the error is about
    if argument == "abi":
        return f"argument --abi: {message[4:].strip()}"
    flag = dict(_OPTION_FLAGS).get(argument) or _REFUSAL_FLAGS.get(getattr(exc, "code", None))
    if flag:
        return f"argument {flag}: {message}"
    return message


# ---- tensor-reader --------------------------------------------------------------------------------

def _setup_tensor_reader(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--build", action="store_true",
                        help="build it now when it is not built for the installed torch (a container's build step)")


def _cmd_tensor_reader(args: argparse.Namespace) -> int:
    """How tensor arguments are read (torch's C++ tensor, or data_ptr()); --build builds the reader ahead of time.

    The reader is compiled once per torch build into fastlaunch's cache (FASTLAUNCH_CACHE_DIR, else
    ~/.cache/fastlaunch). Without --build it reports what a launch would use now. Exit status 1 when
    tensors would be read through data_ptr()."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print("tensor arguments: read through data_ptr(): torch is not installed")
        return 1
    import torch

    from fastlaunch import _door

    if args.build:
        path, why = _door.find(torch, wait=True)
        print(f"tensor reader: {path}" if path else f"tensor reader: {why}")
        if path is None:
            return 1
    import fastlaunch

    in_use, why = fastlaunch.tensor_reader()
    how = "read from torch's C++ tensor (fastlaunch._tensor)" if in_use else "read through data_ptr()"
    print(f"tensor arguments: {how}: {why}")
    return 0 if in_use else 1


def _setup_triton_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="the fingerprint's pieces and files as JSON")


def _cmd_triton_key(args: argparse.Namespace) -> int:
    """Whether the installed Triton's key-deciding code is in fastlaunch's proven set (else every JIT call is checked).

    Prints the fingerprint of the pieces of Triton that decide which compiled kernel a call runs
    (fastlaunch/triton_check.py) and what the proven set (fastlaunch/proven_tritons.txt) says of it.
    Exit status 1 when it is not in the set (fastlaunch then checks every JIT call against Triton's
    own choice), 2 without Triton."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        print("triton is not installed")
        return EXIT_USAGE
    import triton

    from fastlaunch import triton_check

    fp, detail = triton_check.fingerprint()
    proven, _, entry = triton_check.recognised()
    if args.json:
        print(json.dumps({"fingerprint": fp, "proven": proven, "entry": entry, "triton": triton.__version__,
                          "detail": detail}, indent=1))
    else:
        where = f"proven: {entry}" if proven else "not in the proven set: every JIT call is checked against Triton"
        print(f"triton {triton.__version__}: fingerprint {fp}: {where}")
    return 0 if proven else 1


# ---- the subcommand table ------------------------------------------------------------------------
#
# To add a subcommand, write setup_fn(parser) and run_fn(args) -> int and add one entry here. The
# first line of run_fn's docstring becomes the subcommand's help. A run_fn reports a usage error by
# raising _UsageError (one line on stderr, exit status 2); other exceptions propagate.

SUBCOMMANDS: Dict[str, Tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "layout": (_setup_layout, _cmd_layout),
    "tensor-reader": (_setup_tensor_reader, _cmd_tensor_reader),
    "triton-key": (_setup_triton_key, _cmd_triton_key),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="fastlaunch command line tools.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name, (setup_fn, run_fn) in SUBCOMMANDS.items():
        doc = (run_fn.__doc__ or "").strip()
        sub = subparsers.add_parser(name, help=doc.splitlines()[0] if doc else None, description=doc or None)
        setup_fn(sub)
        sub.set_defaults(_run=run_fn)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        return int(args._run(args) or 0)
    except _UsageError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`... | head`): as other command-line tools, stop quietly. stdout is
        # pointed at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
