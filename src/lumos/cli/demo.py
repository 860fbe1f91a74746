"""``lumos demo [-o DIR]``: collect the bundled workload on 2 CPU ranks, replay it, report.

Shows progress on a terminal (nothing when output is piped) and ends with where the report is.
Without torch it replays the bundled recording of the same workload instead, and says so.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="collect the bundled GPT workload on 2 CPU ranks, replay it and write a report "
        "(without torch: replay the bundled recording of it)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("-o", "--out", type=Path, default=Path("lumos-demo"),
                   metavar="DIR", help="output directory (default: ./lumos-demo)")  # fmt: skip
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

    from lumos.examples.demo import run_demo

    console = Console(stderr=True)
    t0 = time.monotonic()
    if console.is_terminal:
        columns = (SpinnerColumn(finished_text="[green]✓"), TextColumn("{task.description}"),
                   TimeElapsedColumn())  # fmt: skip
        with Progress(*columns, console=console) as bar:
            current: list[TaskID] = []

            def progress(msg: str) -> None:
                # One line per stage: the previous stage is done when the next one starts.
                for task in current:
                    bar.update(task, total=1, completed=1)
                current[:] = [bar.add_task(msg, total=None)]

            result = run_demo(args.out, progress)
            for task in current:
                bar.update(task, total=1, completed=1)
    else:
        result = run_demo(args.out)
    elapsed = time.monotonic() - t0
    if result.bundled_because:
        print(f"lumos: {result.bundled_because}")
    if result.replay is not None:
        _print_results(result.replay)
    if result.bundled_because:
        print(f"lumos: replayed the bundled recording, copied to {result.run_dir} "
              f"({elapsed:.0f} s); manifest {result.manifest}")  # fmt: skip
    else:
        print(f"lumos: collected {result.run_dir} ({elapsed:.0f} s); manifest {result.manifest}")
    if result.report is not None:
        print(f"lumos: report {result.report}")
    if result.stopped_because:
        print(f"lumos: demo stopped after collection: {result.stopped_because}")
    return 0


def _print_results(replay_json: Path) -> None:
    """The replay table and the what-if table, as ``lumos replay`` prints them."""
    import json

    from lumos.cli.replay import format_replay

    doc = json.loads(replay_json.read_text())
    print(format_replay(doc))
    rows = doc.get("what_if") or []
    if rows:
        mem = any(r.get("peak_memory_bytes") is not None for r in rows)
        print(
            f"  {'what if':<32}{'step ms':>10}{'speedup':>9}" + (f"{'peak MiB':>10}" if mem else "")
        )
        for r in rows:
            peak = r.get("peak_memory_bytes")
            tail = (
                (f"{peak / (1 << 20):>10.1f}" if peak is not None else f"{'-':>10}") if mem else ""
            )
            print(f"  {r['scenario']:<32}{r['step_ns'] / 1e6:>10.3f}{r['speedup']:>8.2f}x" + tail)
