"""``lumos layers TRACE...``: the layers and the baseline configuration found in a trace."""

from __future__ import annotations

import argparse
import json

from lumos.cli._args import WORKERS_HELP, positive_int
from lumos.cli._progress import progress_bar
from lumos.ingest.detect import expand_paths

__all__ = ["parse_baseline", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``layers`` verb."""
    p = sub.add_parser(
        "layers",
        help="show the layers and model configuration found in a trace",
        description="Find the repeated layer blocks of each rank (forward, backward, optimizer; "
        "micro-batches of a pipeline stage) and the configuration they imply (layers, hidden, "
        "FFN, heads, sequence, micro-batch size and count, pp, dp), each with how it was found. "
        "The job decides: one layer count on every rank, or every rank declines with the "
        "reason (repeats that are loops, a backward that does not repeat per forward layer, "
        "counts that differ between steps or ranks, repeats covering under 10 % of the step). "
        "This is the baseline `lumos estimate` edits.",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto traces or a run directory")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--baseline", action="append", default=[], metavar="KEY=VALUE",
                   help="override a detected value (repeatable)")  # fmt: skip
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help=WORKERS_HELP)  # fmt: skip
    p.set_defaults(func=run)


def parse_baseline(specs: list[str]) -> dict[str, int]:
    """``["hidden=4096"]`` -> ``{"hidden": 4096}`` (ConfigError on bad input)."""
    from lumos.errors import ConfigError

    out = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        try:
            if not sep:
                raise ValueError
            out[key.strip()] = int(value)
        except ValueError:
            raise ConfigError(
                f"--baseline {spec!r}: expected KEY=INTEGER, e.g. hidden=4096"
            ) from None
    return out


def run(args: argparse.Namespace) -> int:
    """Detect and print."""
    from lumos.estimate.baseline import detect_baseline
    from lumos.estimate.layer_report import format_layers, layer_summary
    from lumos.replay import build_workload

    given = parse_baseline(args.baseline)
    n = len(expand_paths(args.paths))
    with progress_bar("building graphs", n) as advance:
        workload, _ = build_workload(args.paths, workers=args.workers, on_done=advance)
    doc = layer_summary(workload, detect_baseline(workload, given))
    print(json.dumps(doc, indent=1, sort_keys=True) if args.json else format_layers(doc))
    return 0
