"""Arguments several verbs share: parallelism (``--workers``, ``--dask``) and what-if edits."""

from __future__ import annotations

import argparse

from lumos.parallel import default_workers
from lumos.replay import ABLATIONS

__all__ = ["WORKERS_HELP", "add_edit_args", "add_parallel_args", "positive_int"]

#: The help of ``--workers``, with the default this machine gives.
WORKERS_HELP = (
    f"parallel processes for ranks (default: {default_workers()}, the CPUs available, at most 8)"
)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (argparse prints one line and exits 2 otherwise)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {n}")
    return n


def add_parallel_args(p: argparse.ArgumentParser) -> None:
    """``--workers N`` (>= 1; its default shown) and ``--dask ADDRESS``."""
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help=WORKERS_HELP,
    )
    p.add_argument("--dask", default=None, metavar="ADDRESS", help="Dask scheduler to use")


def add_edit_args(p: argparse.ArgumentParser) -> None:
    """``--without KINDS`` and ``--scale REGEX=FACTOR`` (the what-if edits of a replay)."""
    p.add_argument(
        "--without",
        default="",
        metavar="KINDS",
        help=f"comma-separated dependency kinds to drop ({', '.join(ABLATIONS)})",
    )
    p.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="REGEX=FACTOR",
        help="multiply the duration of tasks whose name matches REGEX (repeatable); REGEX may "
        "be a class: @compute (GPU kernels that are not communication; CPU ops on a CPU job), "
        "@comm (collective and p2p transfers), @host (CPU ops, runtime calls, CPU gaps and "
        "launch latency)",
    )
