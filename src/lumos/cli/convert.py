"""``lumos convert RUN_DIR_OR_FILES -o OUT_PREFIX``: per-rank Chakra ETs from a PyTorch run."""

from __future__ import annotations

import argparse

from lumos.cli._progress import progress_bar
from lumos.convert import COMPAT_MODES, ConvertReport, convert, plan_run

__all__ = ["format_report", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert`` verb."""
    p = sub.add_parser(
        "convert",
        help="convert Kineto traces (and PyTorch ETs) to Chakra ETs, one per rank",
        description="Build each rank's execution graph (stream order, launches, inter-stream "
        "and sync edges) and write it as OUT_PREFIX.<rank>.et, with inputs/outputs from the "
        "rank's PyTorch ET when one is given. Also writes OUT_PREFIX.convert.json.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_FILES",
                   help="Kineto traces, PyTorch ETs, tar archives or a run directory")  # fmt: skip
    p.add_argument("-o", "--out", required=True, metavar="OUT_PREFIX",
                   help="output prefix: files OUT_PREFIX.<rank>.et")  # fmt: skip
    p.add_argument("--compat", choices=COMPAT_MODES, default=None,
                   help="reproduce upstream's converter dependency structure (no stream order, "
                   "no sync or inter-stream edges, NCCL kernels without outgoing deps)")  # fmt: skip
    p.add_argument("--delay-nodes", action=argparse.BooleanOptionalAction, default=None,
                   help="write each edge delay (CPU gap, launch latency) as a synthetic "
                   "delay:<kind> node so Chakra tools that honour only data_deps (ASTRA-sim) "
                   "keep it (default: on, off with --compat)")  # fmt: skip
    p.add_argument("--workers", type=int, default=None, help="parallel processes for ranks")
    p.add_argument("--dask", default=None, metavar="ADDRESS", help="Dask scheduler to use")
    p.set_defaults(func=run, out_kind="prefix")


def format_report(report: ConvertReport) -> str:
    """One line per rank: tasks, edges, nodes, ET match rate."""
    lines = [f"{'rank':>5} {'tasks':>9} {'edges':>9} {'waits':>6} {'nodes':>9} "
             f"{'ET match':>9}  output"]  # fmt: skip
    for r in report.ranks:
        rate = "-" if r.match_rate is None else f"{r.match_rate * 100:8.1f}%"
        lines.append(
            f"{r.rank:>5} {r.tasks:>9} {r.edges:>9} {r.waits:>6} {r.nodes:>9} {rate:>9}  {r.output}"
        )
    if report.compat:
        lines.append(f"(--compat {report.compat}: upstream's dependency structure)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Convert, print the per-rank summary."""
    jobs = plan_run(args.paths, args.out, args.compat, args.delay_nodes)
    with progress_bar("converting ranks", len(jobs)) as advance:
        report = convert(args.paths, args.out, compat=args.compat,
                         delay_nodes=args.delay_nodes, workers=args.workers,
                         dask_address=args.dask, on_done=advance, jobs=jobs)  # fmt: skip
    print(format_report(report))
    print(f"wrote {len(report.ranks)} Chakra ET(s) and {report.out_prefix}.convert.json")
    return 0
