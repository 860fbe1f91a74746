"""``lumos collect -o DIR [--steps N --warmup W --wait K --et] -- <command ...>``.

Runs the command (typically ``torchrun ... train.py``) with collection switched on through
``LUMOS_COLLECT_*`` environment variables; a script that wraps its loop in
:func:`lumos.collect.collector` records each rank's traces into ``DIR`` (the run directory), and this command
then writes ``DIR/run.json``. Exits with the command's own status.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lumos.collect._torch import require_torch


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "collect",
        help="run a training command with per-rank trace collection",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("-o", "--out", required=True, type=Path, metavar="DIR",
                   help="output directory: the run directory (traces and run.json)")  # fmt: skip
    p.add_argument("--steps", type=int, default=2, help="iterations to record (default 2)")
    p.add_argument("--warmup", type=int, default=1, help="profiler warm-up iterations (default 1)")
    p.add_argument("--wait", type=int, default=1, help="iterations skipped first (default 1)")
    p.add_argument("--et", action="store_true", help="also record PyTorch Execution Traces")
    p.add_argument("--stack", action="store_true", help="record Python stacks (slow)")
    p.add_argument("--no-memory", dest="memory", action="store_false",
                   help="do not record allocations and frees (recorded by default: profile_memory)")  # fmt: skip
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    from lumos.collect import CollectConfig, run_collect

    require_torch("lumos collect")
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    config = CollectConfig(
        run_dir=args.out, steps=args.steps, warmup=args.warmup, wait=args.wait,
        execution_trace=args.et, with_stack=args.stack, memory=args.memory,
    )  # fmt: skip
    result = run_collect(config, command)
    if result.manifest is not None:
        print(f"lumos: wrote {result.manifest}")
    if result.exit_code != 0:
        print(f"lumos: the command exited with status {result.exit_code}")
    return result.exit_code
