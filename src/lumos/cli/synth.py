"""``lumos synth``: synthetic workloads (fit a model, sample from it, report fidelity)."""

from __future__ import annotations

import argparse

from lumos.cli.synth_model import add_fit, add_sample
from lumos.cli.synth_report import add_report

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``synth`` group."""
    p = sub.add_parser(
        "synth",
        help="synthetic workloads learned from traces",
        description="Fit a generative model on traces, sample new workloads, report how "
        "faithful a synthetic or obfuscated workload is to its source.",
    )
    group = p.add_subparsers(dest="synth_command", metavar="COMMAND", required=True)
    add_fit(group)
    add_sample(group)
    add_report(group)
