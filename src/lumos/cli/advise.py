"""``lumos advise TRACE... -o DIR``: what bounds the step, and which what-ifs pay."""

from __future__ import annotations

import argparse

from lumos.cli._args import add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.cost.topology import PRESETS
from lumos.ingest.detect import expand_paths
from lumos.replay import build_workload

__all__ = ["register"]

#: Progress ticks of one advise: the baseline, four scaled what-ifs, the straggler, the model.
_STAGES = 7


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``advise`` verb."""
    p = sub.add_parser(
        "advise",
        help="what bounds the step (host, compute, communication, a straggler) and which "
        "change pays",
        description="Replay the traces, say what bounds the step and why (shares of each "
        "rank's critical path by cause, the rank the others wait for, the ops and kernels "
        "responsible), then simulate the standard what-ifs (compute 2x, host overhead halved, "
        "communication 2x, communication overlapped, no straggler, micro-batches and dp x2 "
        "where the trace supports them), ranked by gain, each with the command that "
        "reproduces it. Writes DIR/advice.json and DIR/advice.md.",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto traces or a run directory")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: advice.json and advice.md")  # fmt: skip
    p.add_argument("--topology", default=None, metavar="NAME|FILE",
                   help=f"network for the dp what-if (a preset: {', '.join(PRESETS)}; or a "
                   "TOML topology file); without it dp is not tried")  # fmt: skip
    add_parallel_args(p)
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    """Advise, print the verdict and the opportunities, write the files."""
    from lumos.advise import advise, headline, write_advice

    n = len(expand_paths(args.paths))
    with progress_bar("building graphs", n) as advance:
        workload, _ = build_workload(
            args.paths, workers=args.workers, dask_address=args.dask, on_done=advance
        )
    comm_model = None
    if args.topology:
        from lumos.cli.estimate import comm_model_factory

        comm_model = comm_model_factory(args.topology, "auto")
    with progress_bar("simulating what-ifs", _STAGES) as advance:
        advice = advise(workload, list(args.paths), topology=args.topology,
                        comm_model=comm_model, on_done=lambda: advance(1))  # fmt: skip
    paths = write_advice(advice, args.out)
    doc = advice.to_dict()
    print(headline(doc))
    for o in doc["opportunities"]:
        print(f"  {o['name']:<20} {o['step_ns'] / 1e6:10.3f} ms  {o['gain_pct']:+6.1f} %   "
              f"{o['command']}")  # fmt: skip
    for x in doc["not_applicable"]:
        print(f"  ({x['name']}: {x['reason']})")
    print(f"wrote {paths['json']} and {paths['md']}")
    return 0
