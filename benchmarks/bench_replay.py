"""Replay of the recording, ablations and speed on real traces.

The step error printed is that of replaying each trace unchanged: the graph's delays are
calibrated on the same trace, so it shows the graph reproduces what it was built from, not that
it predicts anything (predictions of changed runs: ``bench_causal.py``, ``whatif_pairs.py``).

Run on demand:  python benchmarks/bench_replay.py [TRACE ...]
Default: every real third-party Kineto trace with ProfilerSteps that the tests replay, read in
place from ``LUMOS_REALDATA`` or ``../shared/realdata`` (see ``tests/REALDATA.md``).
``--example`` adds the bundled example (lumos's own 2-rank gloo recording, rank 0).
For each trace prints: per-step |error| (mean, max) of the full model; the mean predicted step
change when one dependency kind is dropped (what each kind is worth); and build_graph /
simulate throughput in tasks/s.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from _realdata import REPLAY_TRACES, trace_or_exit
from lumos.examples_data import example_trace_path
from lumos.graph.build import build_graph
from lumos.graph.model import AnnotationKind
from lumos.ingest.kineto import read_kineto
from lumos.replay import replay
from lumos.sim import simulate

# phenomenon names of tests/realdata.py (the replay traces of the tests)
DEFAULT = list(REPLAY_TRACES)
ABLATE = ("inter_stream", "sync", "launch", "inter_thread")


def step_times(graph, without: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    steps = replay(graph, without=without).result.steps()
    a = graph.annotations
    covered = (a.first_task_idx >= 0)[a.kind == AnnotationKind.STEP]
    steps = [s for s, c in zip(steps, covered, strict=True) if c]
    return (
        np.array([s["measured_ns"] for s in steps], dtype=float),
        np.array([s["predicted_ns"] for s in steps], dtype=float),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--example", action="store_true", help="also replay the bundled example")
    args = ap.parse_args()
    if not args.traces:
        args.traces = [trace_or_exit(name) for name in DEFAULT]
    if args.example:
        args.traces.append(example_trace_path())
    header = f"{'trace':<44}{'steps':>6}{'mean|err|':>10}{'max|err|':>10}"
    header += "".join(f"{'-' + a:>14}" for a in ABLATE) + f"{'build t/s':>12}{'sim t/s':>12}"
    print(header)
    errs_all = []
    for path in args.traces:
        trace = read_kineto(path)
        t0 = time.perf_counter()
        g = build_graph(trace)
        t_build = time.perf_counter() - t0
        simulate(g)  # untimed: first allocations, page faults
        t0 = time.perf_counter()
        simulate(g)
        t_sim = time.perf_counter() - t0
        meas, pred = step_times(g)
        if not len(meas):
            continue
        err = np.abs(pred - meas) / meas
        errs_all.extend(err.tolist())
        cols = [
            f"{path.name[:43]:<44}{len(meas):>6}{err.mean() * 100:>9.2f}%{err.max() * 100:>9.2f}%"
        ]
        for a in ABLATE:
            _, p2 = step_times(g, (a,))
            cols.append(f"{(p2.sum() / pred.sum() - 1) * 100:>13.1f}%")
        cols.append(f"{g.num_tasks / t_build:>12.0f}{g.num_tasks / max(t_sim, 1e-9):>12.0f}")
        print("".join(cols))
    e = np.array(errs_all)
    print(f"all steps: n={len(e)} mean |error| {e.mean() * 100:.3f}%  max {e.max() * 100:.3f}%")


if __name__ == "__main__":
    main()
