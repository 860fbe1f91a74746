"""``lumos diff A B``: two recordings or replays side by side, largest changes first."""

from __future__ import annotations

import argparse
from pathlib import Path

from lumos.cli._args import add_parallel_args
from lumos.errors import InputError
from lumos.replay import build_workload
from lumos.report.analysis_ranks import TABLES, analyze
from lumos.report.diff import DIFF_TABLES, diff_runs, side_view
from lumos.report.table import FORMATS, Table, read_tables, write_tables

__all__ = ["format_diff", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``diff`` verb."""
    p = sub.add_parser(
        "diff",
        help="compare two traces or replays: steps, kernel classes, kernels, ops",
        description="Compare run A with run B, largest changes first: per step, per kernel "
        "class (gemm, comm, elementwise, ...), per kernel and per op (GPU time summed over "
        "ranks). A and B are each a Kineto trace (or a run directory of them: the recording "
        "is compared), or a folder of analysis tables written by `lumos analyze -o DIR` or "
        "`lumos replay --analysis -o DIR` (its replay, or what-if, is compared). A recording "
        "A against a replay or what-if B is compared through A's own replay: what B changed, "
        "then apart what replaying A removed (waits a recorded collective holds).",
    )
    p.add_argument("a", metavar="A", help="trace, run directory or analysis folder")
    p.add_argument("b", metavar="B", help="trace, run directory or analysis folder")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="output directory: also write the tables there")  # fmt: skip
    p.add_argument("--format", choices=FORMATS, default="csv", help="file format (default csv)")
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="rows per table printed (default 10)"
    )
    add_parallel_args(p)
    p.set_defaults(func=run, out_kind="dir")


def _tables_folder(path: Path) -> Path | None:
    for d in (path / "analysis", path):
        if (d / "analysis.json").is_file() or (d / "kernels.csv").is_file():
            return d
    return None


def load_side(where: str, workers: int | None, dask: str | None) -> tuple[dict[str, Table], str]:
    """The analysis tables of one side and the view to compare."""
    p = Path(where)
    folder = _tables_folder(p) if p.is_dir() else None
    if folder is not None:
        tables = read_tables(folder, TABLES)
        return tables, side_view(tables)
    if p.is_dir() and (p / "replay.json").is_file():
        raise InputError(where, "a replay folder without analysis tables: rerun "
                         "`lumos replay ... --analysis`")  # fmt: skip
    workload, _ = build_workload([where], workers=workers, dask_address=dask)
    return analyze(workload), "measured"


def run(args: argparse.Namespace) -> int:
    """Load both sides, compare, print, write.

    A recording against a replay or what-if (B's tables hold the ``predicted`` view) mixes two
    things: what the what-if changed, and what replaying removed (a recorded collective also
    holds its wait for the other ranks; the replay starts it when the last one arrives). So A
    is replayed unchanged too, B is compared with that replay (the what-if), and the replay
    with A's recording is printed apart (``replay_*`` tables with ``-o``)."""
    a, view_a = load_side(args.a, args.workers, args.dask)
    b, view_b = load_side(args.b, args.workers, args.dask)
    top = max(args.top, 0)
    removed: dict[str, Table] = {}
    if view_a == "measured" and view_b == "predicted" and _tables_folder(Path(args.a)) is None:
        from lumos.replay import replay

        workload, _ = build_workload([args.a], workers=args.workers, dask_address=args.dask)
        a = analyze(workload, replay(workload).result)
        removed = diff_runs(a, "measured", a, "predicted")
        view_a = "predicted"
        print(f"A = {args.a}, replayed unchanged (predicted)\nB = {args.b} ({view_b})\n"
              "what B changed against A's replay:")  # fmt: skip
    else:
        print(f"A = {args.a} ({view_a})\nB = {args.b} ({view_b})")
    tables = diff_runs(a, view_a, b, view_b)
    print(format_diff(tables, top))
    if removed:
        print("\nnot the what-if: A's replay against A's recording (waits the replay removes)")
        print(format_diff(removed, min(top, 5)))
    if args.out is not None:
        out = {**tables, **{f"replay_{k}": Table(f"replay_{k}", t.columns, t.rows)
                            for k, t in removed.items()}}  # fmt: skip
        written = write_tables(out, args.out, args.format)
        print(f"wrote {len(written)} file(s) to {written[0].parent}")
    return 0


def format_diff(tables: dict[str, Table], top: int = 10) -> str:
    """The top rows of each diff table, in milliseconds, largest change first."""
    lines: list[str] = []
    for name in DIFF_TABLES:
        t = tables[name]
        keys = t.columns[: t.columns.index("a_ns")]
        scope = "per rank and step" if name == "steps" else "total over every step and rank"
        lines.append(f"{name.replace('_', ' ')} ({len(t.rows)} rows, {scope}, largest change "
                     "first)")  # fmt: skip
        lines.append(f"  {' / '.join(keys):<62}{'A ms':>10}{'B ms':>10}{'B-A ms':>10}"
                     f"{'change':>9}")  # fmt: skip
        for r in t.to_dicts()[:top]:
            label = " / ".join(str(r[k]) for k in keys)
            ch = "-" if r["change"] is None else f"{r['change'] * 100:+.1f}%"
            lines.append(f"  {label[:60]:<62}{r['a_ns'] / 1e6:10.3f}{r['b_ns'] / 1e6:10.3f}"
                         f"{r['delta_ns'] / 1e6:+10.3f}{ch:>9}")  # fmt: skip
    return "\n".join(lines)
