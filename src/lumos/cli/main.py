"""Entry point of the ``lumos`` command: subcommand registry and the one-line error contract.

Each verb lives in its own module under :mod:`lumos.cli` exposing ``register(subparsers)``, which
adds a parser and sets ``func`` to a callable taking the parsed namespace and returning an exit
code. A :class:`~lumos.errors.LumosError` becomes one line on stderr and exit code 1; ``-v`` adds
the traceback. A verb that writes sets ``out_kind`` (``dir``, ``file`` or ``prefix``, see
:func:`lumos._io.check_writable`) and its ``-o`` path is checked before any work. Ctrl-C exits
130 and SIGTERM 143, each with one line, after the outputs being written were rolled back
(temporary files removed, earlier outputs left as they were).
"""

from __future__ import annotations

import argparse
import importlib
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from lumos._version import __version__
from lumos.errors import LumosError

# Modules under lumos.cli, one per verb (or verb group), in the order `lumos --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "collect",
    "demo",
    "report",
    "info",
    "replay",
    "analyze",
    "diff",
    "estimate",
    "advise",
    "layers",
    "link",
    "chakra",
    "convert",
    "comm",
    "synth",
    "bench",
)
#: Each verb's one-line help, so that ``lumos --help`` and ``lumos --version`` import no verb
#: module (``tests/unit/test_cli_polish.py`` keeps them equal to the verbs' own help lines).
VERB_HELP: dict[str, str] = {
    "collect": "run a training command with per-rank trace collection",
    "demo": "collect the bundled GPT workload on 2 CPU ranks, replay it and write a report "
    "(without torch: replay the bundled recording of it)",
    "report": "HTML report (and SVG/PNG figures) of a replay result",
    "info": "summarize Kineto, PyTorch ET or Chakra traces",
    "replay": "replay traces in the simulator; predicted vs measured step time",
    "analyze": "top kernels and ops, stream idle time, overlap, stragglers (CSV or JSON)",
    "diff": "compare two traces or replays: steps, kernel classes, kernels, ops",
    "estimate": "what-if: predict step time for another configuration",
    "advise": "what bounds the step (host, compute, communication, a straggler) and which "
    "change pays",
    "layers": "show the layers and model configuration found in a trace",
    "link": "link a PyTorch ET to its Kineto trace and report the match rate per rank",
    "chakra": "read, check, convert and generate MLCommons Chakra ETs",
    "convert": "convert Kineto traces (and PyTorch ETs) to Chakra ETs, one per rank",
    "comm": "predict a collective's time (alpha-beta or ASTRA-sim-compatible); calibrate",
    "synth": "synthetic workloads learned from traces",
    "bench": "execute a PyTorch or Chakra ET on this machine: a benchmark from a trace",
}


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every verb registered, or only ``verb`` (the others listed by
    name and help, their modules not imported)."""
    parser = argparse.ArgumentParser(
        prog="lumos",
        description="Trace-driven performance modeling of distributed training: "
        "read PyTorch traces, build an execution graph, replay and estimate.",
    )
    parser.add_argument("--version", action="version", version=f"lumos {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show tracebacks and debug detail"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if verb is None or name == verb:
            module = importlib.import_module(f"lumos.cli.{name}")
            module.register(sub)
        else:
            sub.add_parser(name, help=VERB_HELP[name])
    for verb_parser in sub.choices.values():
        _verbose_anywhere(verb_parser)
        _plain_help(verb_parser)
    return parser


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb the command line names (its first word that is one), or None."""
    return next((a for a in argv if a in VERB_HELP), None)


_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str | None) -> str | None:
    """Help text without reStructuredText markup (docstrings double as help).

    >>> plain("wraps :func:`lumos.collect.collector`; see ``run.json``")
    'wraps lumos.collect.collector; see run.json'
    """
    if text is None:
        return None
    return _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text))


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Strip markup from a verb's description and its options' help, nested verbs too."""
    parser.description = plain(parser.description)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _plain_help(child)
            for choice in action._choices_actions:
                choice.help = plain(choice.help)


def _verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``-v`` after the verb too (``lumos replay ... -v``), down to nested verbs; its
    default is suppressed so that ``lumos -v replay ...`` keeps working."""
    if not any("-v" in a.option_strings for a in parser._actions):
        parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                            help="show tracebacks and debug detail")  # fmt: skip
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _verbose_anywhere(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code. Only the named verb's module is imported."""
    words = list(sys.argv[1:] if argv is None else argv)
    verb = _verb_of(words)
    parser = build_parser(verb if verb is not None else "")
    args = parser.parse_args(words)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        with _sigterm_raises():
            _check_output(args)
            if getattr(args, "dask", None):
                from lumos.parallel import check_dask

                check_dask(args.dask)
            return int(args.func(args) or 0)
    except _Terminated:
        print("lumos: terminated", file=sys.stderr)
        return 143
    except LumosError as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"lumos: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lumos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


class _Terminated(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that every ``finally`` and rollback runs."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_output(args: argparse.Namespace) -> None:
    """The verb's output path (``-o``), checked before the work starts."""
    kind = getattr(args, "out_kind", None)
    if kind is None:
        return
    value = getattr(
        args, "out", None
    )  # every verb's -o is dest "out" (tests/unit/test_output_option.py)
    if value is not None and str(value) != "-":
        from lumos._io import check_writable

        check_writable(value, kind)
