"""``lumos analyze TRACE... -o DIR``: HTA/TraceLens-style tables of a recording and its replay."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from lumos.cli._args import add_edit_args, add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.ingest.detect import expand_paths
from lumos.replay import build_workload, parse_scale, replay
from lumos.report.table import FORMATS, Table, write_tables

__all__ = ["format_analysis", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``analyze`` verb."""
    p = sub.add_parser(
        "analyze",
        help="top kernels and ops, stream idle time, overlap, stragglers (CSV or JSON)",
        description="Analyze the recording and its replay (or a what-if: --scale, --without) "
        "and write the tables to DIR: steps, kernels and ops (count, total, mean, share, "
        "exposed time), streams (idle time split into host-bound, waiting on another stream, "
        "waiting on communication), collectives (overlap with compute, bandwidth), "
        "stragglers and rank_lateness (who is late at each collective), critical_path_ops, "
        "memory (peak allocated bytes per step and rank, resident vs allocated in the step, "
        "what the step held at its peak by phase and op; from [memory] events). "
        "Each row says its view: measured (the recording) or predicted (the simulation).",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto traces or a run directory")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: one table per file")  # fmt: skip
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="csv",
        help="csv: one DIR/<table>.csv each (default); json: one DIR/analysis.json",
    )
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="rows per table printed (default 10)"
    )
    add_edit_args(p)
    add_parallel_args(p)
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    """Build, replay (with the edits), analyze, print a summary, write the tables."""
    without = tuple(w.strip() for w in args.without.split(",") if w.strip())
    scale = parse_scale(args.scale)
    with progress_bar("building graphs", len(expand_paths(args.paths))) as advance:
        workload, sources = build_workload(
            args.paths, workers=args.workers, dask_address=args.dask, on_done=advance
        )
    rep = replay(workload, without=without, scale=scale, sources=sources)
    tables = rep.analysis()
    written = write_tables(tables, args.out, args.format)
    print(format_analysis(tables, max(args.top, 0)))
    where = written[0].parent
    print(f"wrote {len(written)} file(s) to {where}: " + ", ".join(p.name for p in written))
    return 0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:9.3f}"


def _rows(t: Table, view: str, rank: int) -> list[dict[str, Any]]:
    return [r for r in t.to_dicts() if r["view"] == view and r.get("rank", rank) == rank]


def _mib(b: float) -> str:
    return f"{b / (1 << 20):.1f} MiB"


def _memory_lines(t: Table | None, view: str, rank: int) -> list[str]:
    """The largest step peak of one rank and view: resident, allocated in the step, and what
    the step still held at its peak by op (from the ``memory`` table)."""
    rows = _rows(t, view, rank) if t is not None else []
    peaks = [r for r in rows if r["kind"] == "peak"]
    if not peaks:
        return []
    top = max(peaks, key=lambda r: r["bytes"])
    mine = [r for r in rows if r["step"] == top["step"]]
    value = {r["kind"]: r["bytes"] for r in mine if r["kind"] in ("resident", "allocated_in_step")}
    out = [f"  memory ({top['name']}): peak {_mib(top['bytes'])} in {top['step']} = resident "
           f"{_mib(value.get('resident', 0))} + allocated in the step "
           f"{_mib(value.get('allocated_in_step', 0))}"]  # fmt: skip
    ops = [r for r in mine if r["kind"] == "op"]
    if ops:
        out.append("    held at the peak: " + ", ".join(f"{r['name']} {_mib(r['bytes'])}"
                                                          for r in ops))  # fmt: skip
    return out


def format_analysis(tables: Mapping[str, Table], top: int = 10) -> str:
    """The printed summary: per rank and view, the top kernels and ops by total time, the
    streams' idle split; then the ranks by lateness at collectives and the top ops on the
    critical path. The files hold every row."""
    lines: list[str] = []
    ranks = sorted({r for r in tables["steps"].column("rank")} |
                   {r for r in tables["kernels"].column("rank")})  # fmt: skip
    views = list(dict.fromkeys(tables["kernels"].column("view")))
    for rank in ranks:
        for view in views:
            lines.append(f"rank {rank}, {view}")
            lines.append(f"  {'top kernels':<60}{'count':>7}{'total ms':>10}{'share':>7}"
                         f"{'exposed ms':>11}")  # fmt: skip
            for r in _rows(tables["kernels"], view, rank)[:top]:
                lines.append(f"  {str(r['kernel'])[:58]:<60}{r['count']:>7}{_ms(r['total_ns'])}"
                             f"{r['share'] * 100:6.1f}%{_ms(r['exposed_ns']):>11}")  # fmt: skip
            lines.append(f"  {'top ops (GPU time they launched)':<60}{'calls':>7}{'total ms':>10}"
                         f"{'share':>7}{'exposed ms':>11}")  # fmt: skip
            for r in _rows(tables["ops"], view, rank)[:top]:
                lines.append(f"  {str(r['op'])[:58]:<60}{r['calls']:>7}{_ms(r['gpu_ns'])}"
                             f"{r['share'] * 100:6.1f}%{_ms(r['exposed_ns']):>11}")  # fmt: skip
            lines.append(f"  {'stream idle ms':<22}{'idle':>9}{'host':>9}{'stream':>9}"
                         f"{'comm':>9}{'other':>9}")  # fmt: skip
            for r in _rows(tables["streams"], view, rank):
                lines.append(f"  {str(r['stream'])[:20]:<22}{_ms(r['idle_ns'])}"
                             f"{_ms(r['host_bound_ns'])}{_ms(r['other_stream_ns'])}"
                             f"{_ms(r['comm_wait_ns'])}{_ms(r['other_ns'])}")  # fmt: skip
            lines += _memory_lines(tables.get("memory"), view, rank)
    late = tables["rank_lateness"].to_dicts()
    if any(r["collectives"] for r in late):
        lines.append("lateness at collectives (arrival after the earliest rank)")
        lines.append(f"  {'view':<10}{'rank':>5}{'collectives':>12}{'times last':>11}"
                     f"{'late ms':>10}{'max ms':>10}")  # fmt: skip
        for r in late:
            lines.append(f"  {r['view']:<10}{r['rank']:>5}{r['collectives']:>12}"
                         f"{r['times_last']:>11}{_ms(r['late_ns']):>10}"
                         f"{_ms(r['max_late_ns']):>10}")  # fmt: skip
    lines.append("host = waiting for the launch (host-bound); stream = waiting on another "
                 "stream; comm = waiting on communication; exposed = not hidden behind the "
                 "other kind of work (compute vs communication)")  # fmt: skip
    return "\n".join(lines)
