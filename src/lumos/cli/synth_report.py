"""``lumos synth report SOURCE CANDIDATE``: fidelity of a synthetic or obfuscated workload."""

from __future__ import annotations

import argparse
from pathlib import Path

from lumos.cli._args import add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.ingest.detect import expand_paths
from lumos.replay import build_workload

__all__ = ["add_report"]


def add_report(tools: argparse._SubParsersAction) -> None:
    """Add ``lumos synth report``."""
    r = tools.add_parser(
        "report",
        help="fidelity of a synthetic or obfuscated workload against its source",
        description="Replay SOURCE and CANDIDATE and compare them per rank-step: step time, "
        "the four-way breakdown, op-class counts, communication volume and message sizes, "
        "critical-path composition and graph statistics, each against its bound (step time 5 %, "
        "breakdown 5 points, classes with >= 1 % of the tasks 5 %, communication bytes 2 %). "
        "Each side is anything `lumos replay` reads: a Kineto trace, a run directory, Chakra "
        "ETs or their <prefix>. -o DIR writes fidelity.json, fidelity.csv and fidelity.html.",
    )
    r.add_argument("source", metavar="SOURCE", help="the workload the candidate imitates")
    r.add_argument("candidate", metavar="CANDIDATE", help="the synthetic or obfuscated workload")
    r.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="output directory: also write fidelity.json, fidelity.csv and "
                   "fidelity.html there")  # fmt: skip
    r.add_argument("--strict", action="store_true",
                   help="exit 1 when a bound is missed (default: report only)")  # fmt: skip
    add_parallel_args(r)
    r.set_defaults(func=run_report, out_kind="dir")


def _paths(where: str) -> list[str]:
    """``where`` as given, or the rank files of a Chakra ``<prefix>`` that is not a path."""
    if Path(where).exists():
        return [where]
    from lumos.chakra.io import rank_files

    return [str(f) for f in rank_files(where)[1].values()]


def run_report(args: argparse.Namespace) -> int:
    """Build both workloads, compare, print, write."""
    from lumos.synth.fidelity import compare
    from lumos.synth.fidelity_report import format_fidelity, write_fidelity

    sides = []
    for side, where in (("source", args.source), ("candidate", args.candidate)):
        paths = _paths(where)
        with progress_bar(f"building the {side}", len(expand_paths(list(paths)))) as advance:
            w, _ = build_workload(paths, workers=args.workers, dask_address=args.dask,
                                  on_done=advance)  # fmt: skip
        sides.append(w)
    fid = compare(sides[0], sides[1])
    print(format_fidelity(fid))
    if args.out is not None:
        files = write_fidelity(fid, args.out, (args.source, args.candidate))
        print("wrote " + ", ".join(str(p) for p in files.values()))
    return 1 if args.strict and not fid.ok else 0
