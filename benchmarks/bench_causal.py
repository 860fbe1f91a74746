"""What the causal replay predicts, on real traces and against a reference with known answers.

Run on demand:  python benchmarks/bench_causal.py [--seeds 0 1 2] [--no-real] [--no-reference]

1. Real traces (read in place, ``tests/REALDATA.md``): per trace, the replay's per-step |error|
   (mean / max), how each step's time on its thread splits into task / overhead / wait /
   unexplained (percent, :mod:`lumos.report.time_classes`), and the predicted change of every
   step when all compute kernels run 2x faster.
2. Reference model (``tests/refmodel``, an independent model of the CUDA runtime with known
   answers): each scenario's baseline trace is replayed with ``--scale`` for kernels x0.5 / x2,
   CPU-only ops x2 and NCCL transfer x3, and compared with the model's own trace of the changed
   run. Prints per-change |error| and the mean / max over all, next to what guessing
   "unchanged" would score.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from _realdata import trace_or_exit
from lumos.graph.build import build_graph
from lumos.graph.edits import scale_by_name
from lumos.graph.model import ExecGraph, TaskKind
from lumos.ingest.kineto import read_kineto
from lumos.report.time_classes import step_time_classes
from lumos.sim import simulate

REAL = [
    "gpu_bound_v100",
    "rccl_mi300",
    "v100_stream_wait_event",
    "nccl_a100",
    "alltoall_4streams",
    "legacy_2021_v100",
    "sendrecv_5streams_rank0",
    "sendrecv_5streams_rank1",
    "cuda_event_sync",
    "hip_mi250",
]
CLASSES = ("task_ns", "overhead_ns", "wait_ns", "unexplained_ns")


def _steps(g: ExecGraph) -> list[int]:
    return [s["predicted_ns"] for s in simulate(g).steps()]


def real_traces() -> None:
    print("| trace | steps | replay |error| mean / max % | task / overhead / wait / "
          "unexplained % | kernels x0.5: step change % |")  # fmt: skip
    print("|---|---|---|---|---|")
    for name in REAL:
        g = build_graph(read_kineto(trace_or_exit(name)))
        result = simulate(g).steps()
        base = [s["predicted_ns"] for s in result]
        errors = [abs(s["error"]) * 100 for s in result if s["error"] is not None]
        rows = step_time_classes(g)
        total = {c: sum(r[c] for r in rows) for c in CLASSES}
        span = sum(total.values()) or 1
        kernel = g.tasks.kind == int(TaskKind.KERNEL)
        fast = _steps(g.with_durations(np.where(kernel, g.tasks.dur_ns // 2, g.tasks.dur_ns)))
        change = " ".join(f"{(f / b - 1) * 100:+.0f}" for b, f in zip(base, fast, strict=True))
        shares = " / ".join(f"{total[c] / span * 100:.0f}" for c in CLASSES)
        print(f"| {name} | {len(base)} | {np.mean(errors):.2f} / {np.max(errors):.2f} | "
              f"{shares} | {change} |")  # fmt: skip


def reference(seeds: list[int]) -> None:
    from tests.refmodel import CHANGES, SCENARIOS, generate, step_durations, write_trace
    from tests.sim.test_causal_replay import CASES, scale_of

    print("\n| seed | change | mean |error| % | max |error| % | 'unchanged' mean % |")
    print("|---|---|---|---|---|")
    for seed in seeds:
        every: list[float] = []
        guess: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            graphs = {}
            for scenario in SCENARIOS:
                path = Path(tmp) / f"{scenario}.json.gz"
                write_trace(generate(scenario, seed=seed), path)
                graphs[scenario] = build_graph(read_kineto(path))
            for change in [c for c in CHANGES if c != "base"]:
                errs, unchanged = [], []
                for scenario, c in CASES:
                    if c != change:
                        continue
                    g, _ = scale_by_name(graphs[scenario], scale_of(scenario, change))
                    truth = step_durations(scenario, seed=seed, **CHANGES[change])
                    base = step_durations(scenario, seed=seed)
                    errs += [abs(p / t - 1) * 100 for p, t in zip(_steps(g), truth, strict=True)]
                    unchanged += [abs(b / t - 1) * 100 for b, t in zip(base, truth, strict=True)]
                print(f"| {seed} | {change} | {np.mean(errs):.2f} | {np.max(errs):.2f} | "
                      f"{np.mean(unchanged):.1f} |")  # fmt: skip
                every += errs
                guess += unchanged
        print(f"| {seed} | all | {np.mean(every):.2f} | {np.max(every):.2f} | "
              f"{np.mean(guess):.1f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    if not args.no_real:
        real_traces()
    if not args.no_reference:
        reference(args.seeds)


if __name__ == "__main__":
    main()
