"""``lumos synth fit`` and ``lumos synth sample``: learn a workload family, draw new workloads."""

from __future__ import annotations

import argparse

from lumos.cli._args import add_parallel_args, positive_int
from lumos.cli._progress import progress_bar

__all__ = ["add_fit", "add_sample"]


def add_fit(group: argparse._SubParsersAction) -> None:
    """Add ``synth fit``."""
    p = group.add_parser(
        "fit",
        help="fit a synthetic workload model on traces",
        description="Learn a name-free generative model of a workload family: each step's "
        "dependency skeleton per rank (launches, syncs, stream overlap, collective placement and "
        "sizes), its layer blocks, and fitted distributions of every op's duration and every "
        "gap. Each argument is one source (a trace, or a folder or archive of one job's ranks: "
        "one configuration); the model says what it was fitted on in counts, never names.",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE_OR_RUN",
                   help="Kineto traces, Chakra ETs, run folders or tar archives")  # fmt: skip
    p.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="output file: the model (JSON, e.g. model.json)")  # fmt: skip
    add_parallel_args(p)
    p.set_defaults(func=run_fit, out_kind="file")


def add_sample(group: argparse._SubParsersAction) -> None:
    """Add ``synth sample``."""
    p = group.add_parser(
        "sample",
        help="draw a synthetic workload from a model as Chakra ETs",
        description="Draw a workload from a model fitted by `lumos synth fit` and write it as "
        "PREFIX.<rank>.et (and PREFIX.sample.json). Different seeds give different but "
        "statistically equivalent workloads; the same seed gives the same bytes.",
    )
    p.add_argument("model", metavar="MODEL.json", help="a model written by `lumos synth fit`")
    p.add_argument("-o", "--out", required=True, metavar="PREFIX",
                   help="output prefix: writes PREFIX.<rank>.et")  # fmt: skip
    p.add_argument("--ranks", type=positive_int, default=None, metavar="N",
                   help="ranks to draw (default: the source's)")  # fmt: skip
    p.add_argument("--layers", type=positive_int, default=None, metavar="L",
                   help="layers per rank (default: the source's; layer blocks are copied or "
                   "dropped)")  # fmt: skip
    p.add_argument("--steps", type=positive_int, default=None, metavar="S",
                   help="training steps (default: the source's)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="pick the fitted configuration with this value (hidden=256; "
                   "repeatable)")  # fmt: skip
    p.add_argument(
        "--target",
        choices=("chakra", "astra-sim"),
        default="chakra",
        help="astra-sim: ETs ASTRA-sim's analytical backend runs, with network.yml, "
        "system.json and remote_memory.json (as `lumos convert --target astra-sim`)",
    )
    add_parallel_args(p)
    p.set_defaults(func=run_sample, out_kind="prefix")


def run_fit(args: argparse.Namespace) -> int:
    """Fit and write the model."""
    from lumos.ingest.detect import expand_paths
    from lumos.synth.files import write_model
    from lumos.synth.fit import fit_model

    n = len(expand_paths(args.paths))
    with progress_bar("building graphs", n) as advance:
        model = fit_model(args.paths, workers=args.workers, dask_address=args.dask,
                          on_done=advance)  # fmt: skip
    path = write_model(model, args.out)
    f = model["fitted_on"]
    for i, m in enumerate(model["members"]):
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(m["config"].items())) or "no layers found"
        print(
            f"source {i}: {len(m['ranks'])} rank(s) of {m['world_size']}, "
            f"{len(m['skeletons'])} rank class(es), step {m['step_ns'] / 1e6:.3f} ms; {cfg}"
        )
    print(
        f"fitted on {f['sources']} source(s), {f['ranks']} rank(s), {f['steps']} step(s), "
        f"{f['tasks']} tasks, {f['symbols']} op symbols; wrote {path}"
    )
    return 0


def run_sample(args: argparse.Namespace) -> int:
    """Draw and write."""
    from lumos.cli.layers import parse_baseline
    from lumos.synth.files import read_model, write_sample
    from lumos.synth.sample import plan_sample

    model = read_model(args.model)
    config = parse_baseline(args.set)
    if args.layers is not None:
        config["layers"] = args.layers
    plan = plan_sample(model, ranks=args.ranks, steps=args.steps, config=config,
                       seed=args.seed)  # fmt: skip
    with progress_bar("writing ranks", len(plan.ranks)) as advance:
        done = write_sample(plan, args.out, target=args.target, workers=args.workers,
                            dask_address=args.dask, on_done=advance)  # fmt: skip
    nodes = sum(f["nodes"] for f in done["files"])
    print(
        f"wrote {len(done['files'])} Chakra ET(s) ({nodes} nodes, {plan.steps} step(s), "
        f"seed {plan.seed}) and {args.out}.sample.json"
    )
    return 0
