"""Benchmark: simulate() throughput and memory on a synthetic graph.

Usage: python benchmarks/bench_sim.py [--tasks 5000000] [--repeat 3]

Prints the first call's time (a tiny graph: imports, first allocations),
graph generation time, steady-state tasks/s of simulate (best of --repeat), and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time

from lumos.graph.synthetic import random_graph
from lumos.report.metrics import critical_path, graph_breakdown, graph_sm_utilization
from lumos.sim import simulate


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    t0 = time.perf_counter()
    simulate(random_graph(1_000, seed=1))
    print(f"first call (tiny graph): {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    g = random_graph(args.tasks, seed=0)
    print(
        f"generate: {g.num_tasks:,} tasks, {g.num_edges:,} edges, {len(g.waits):,} waits "
        f"in {time.perf_counter() - t0:.2f} s; RSS {peak_rss_mb():.0f} MB"
    )
    t0 = time.perf_counter()
    g.validate()
    dt = time.perf_counter() - t0
    print(f"validate: {dt:.2f} s ({g.num_tasks / dt / 1e6:.2f} M tasks/s)")
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = simulate(g)
        best = min(best, time.perf_counter() - t0)
    print(
        f"simulate: best {best:.2f} s = {g.num_tasks / best / 1e6:.2f} M tasks/s; "
        f"makespan {r.makespan_ns / 1e9:.3f} s"
    )
    t0 = time.perf_counter()
    cp = critical_path(r)
    dt = time.perf_counter() - t0
    print(f"critical_path: {dt:.2f} s, {len(cp.tasks):,} tasks on the path")
    t0 = time.perf_counter()
    graph_breakdown(g, r.start_ns, r.end_ns, 0, r.makespan_ns)
    util = graph_sm_utilization(g, r.start_ns, r.end_ns, 0, r.makespan_ns)
    dt = time.perf_counter() - t0
    print(f"breakdown + SM utilization ({len(util):,} bins): {dt:.2f} s")
    print(f"peak RSS: {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
