"""``lumos convert RUN_DIR_OR_FILES -o OUT_PREFIX``: per-rank Chakra ETs from a PyTorch run."""

from __future__ import annotations

import argparse

from lumos.cli._args import add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.convert import COMPAT_MODES, ConvertReport, convert, plan_run

__all__ = ["format_report", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert`` verb."""
    p = sub.add_parser(
        "convert",
        help="convert Kineto traces (and PyTorch ETs) to Chakra ETs, one per rank",
        description="Build each rank's execution graph (stream order, launches, inter-stream "
        "and sync edges) and write it as PREFIX.<rank>.et, with inputs/outputs from the "
        "rank's PyTorch ET when one is given. Also writes PREFIX.convert.json.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_FILES",
                   help="Kineto traces, PyTorch ETs, tar archives or a run directory")  # fmt: skip
    p.add_argument("-o", "--out", required=True, metavar="PREFIX",
                   help="output prefix: writes PREFIX.<rank>.et")  # fmt: skip
    p.add_argument("--compat", choices=COMPAT_MODES, default=None,
                   help="reproduce upstream's converter dependency structure (no stream order, "
                   "no sync or inter-stream edges, NCCL kernels without outgoing deps)")  # fmt: skip
    p.add_argument("--delay-nodes", action=argparse.BooleanOptionalAction, default=None,
                   help="write each edge delay (CPU gap, launch latency) as a synthetic "
                   "delay:<kind> node so Chakra tools that honour only data_deps (ASTRA-sim) "
                   "keep it (default: on, off with --compat)")  # fmt: skip
    p.add_argument("--target", choices=("chakra", "astra-sim"), default="chakra",
                   help="astra-sim: ETs that ASTRA-sim's analytical backend runs to completion "
                   "and schedules as lumos replays them (one chain per CPU/compute/comm slot, "
                   "collectives matched across ranks), plus network.yml, system.json and "
                   "remote_memory.json fitted to the run's collectives")  # fmt: skip
    add_parallel_args(p)
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


def _run_astra(args: argparse.Namespace) -> int:
    from lumos.convert_astra import convert_astra
    from lumos.errors import ConfigError
    from lumos.ingest.detect import expand_paths

    if args.compat or args.delay_nodes is not None:
        raise ConfigError("--target astra-sim writes its own structure: no --compat or "
                          "--delay-nodes")  # fmt: skip
    n = len([r for r in expand_paths(args.paths) if r.kind == "kineto"])
    with progress_bar("building graphs", n) as advance:
        rep = convert_astra(args.paths, args.out, workers=args.workers,
                            dask_address=args.dask, on_done=advance)  # fmt: skip
    net = rep.network
    print(f"{'rank':>5} {'nodes':>9} {'comm':>6} {'measured end ms':>16} {'replay end ms':>14}"
          "  output")  # fmt: skip
    for r in rep.ranks:
        print(f"{r.rank:>5} {r.nodes:>9} {r.collectives:>6} {r.measured_end_ns / 1e6:>16.3f} "
              f"{r.replay_end_ns / 1e6:>14.3f}  {r.output}")  # fmt: skip
    print(
        f"network: ring of {net['npus']}, {net['bw_bytes_per_s'] / 2**30:.3f} GB/s (2^30), "
        f"latency {net['latency_ns']} ns; fitted to {rep.fit.get('samples', 0)} collectives"
    )
    for code, d in rep.diagnostics.items():
        print(f"  {code}: {d['count']}" + (f" (e.g. {d['example']})" if d.get("example") else ""))
    print(
        f"wrote {len(rep.ranks)} Chakra ET(s), {', '.join(rep.configs)} and "
        f"{rep.out_prefix}.convert.json"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    """Convert, print the per-rank summary."""
    if args.target == "astra-sim":
        return _run_astra(args)
    jobs = plan_run(args.paths, args.out, args.compat, args.delay_nodes)
    with progress_bar("converting ranks", len(jobs)) as advance:
        report = convert(args.paths, args.out, compat=args.compat,
                         delay_nodes=args.delay_nodes, workers=args.workers,
                         dask_address=args.dask, on_done=advance, jobs=jobs)  # fmt: skip
    print(format_report(report))
    print(f"wrote {len(report.ranks)} Chakra ET(s) and {report.out_prefix}.convert.json")
    return 0
