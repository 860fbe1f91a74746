"""Speed and memory of synthetic workloads: fit a model, then sample many ranks of it.

    python benchmarks/bench_synth.py [TRACE] [--ranks 1024] [--steps 4] [--workers N]

Fits a model on TRACE (default: the ``nccl_a100`` realdata trace, about 6,200 tasks per step, so
``--steps 4`` gives about 25,000 nodes per rank), then writes ``--ranks`` ranks of it as Chakra
ETs into a temporary folder (deleted afterwards) the way ``lumos synth sample`` does, and prints
the time per stage, ranks/s, nodes/s, MB/s written and the peak memory of this process and of
the largest worker (ru_maxrss). Run on demand, not in CI.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

from _realdata import trace_or_exit
from lumos.synth.files import write_sample
from lumos.synth.fit import fit_model
from lumos.synth.sample import plan_sample


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", help="a trace or run folder to fit on")
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args()
    src = args.trace or str(trace_or_exit("nccl_a100"))
    t0 = time.perf_counter()
    model = fit_model([src], workers=args.workers)
    t_fit = time.perf_counter() - t0
    plan = plan_sample(model, ranks=args.ranks, steps=args.steps, seed=1)
    out = Path(tempfile.mkdtemp(prefix="lumos-bench-synth-"))
    try:
        t0 = time.perf_counter()
        done = write_sample(plan, out / "s", workers=args.workers)
        t_sample = time.perf_counter() - t0
        nodes = sum(f["nodes"] for f in done["files"])
        size = sum(Path(f["path"]).stat().st_size for f in done["files"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"fit: {t_fit:.2f} s on {src}")
    print(
        f"sample: {args.ranks} ranks x {nodes // args.ranks} nodes = {nodes} nodes in "
        f"{t_sample:.2f} s: {args.ranks / t_sample:.0f} ranks/s, {nodes / t_sample:,.0f} nodes/s, "
        f"{size / 1e6 / t_sample:.0f} MB/s ({size / 1e6:.0f} MB)"
    )
    print(f"peak memory: this process {me:.0f} MB, largest worker {kids:.0f} MB")


if __name__ == "__main__":
    main()
