"""Coupled simulation of a synthetic data-parallel job at 8 to 2048 ranks.

Run on demand:  python benchmarks/bench_scale.py [--ranks 8 64 512 2048] [--layers 48]
                python benchmarks/bench_scale.py --build 64   (per-rank graph building)

Each rank runs the same program (about 19k tasks with the default 48 layers): a main thread
launches forward and backward kernels onto a compute stream; after each layer's backward a
bucketed all-reduce on a communication stream waits (event) for that layer's last gradient
kernel; the optimizer waits for every bucket. Ranks share one graph's structure (the arrays are
shared, not copied: ranks that share structure share memory) and differ in their kernels'
durations (+-5 % jitter), so collectives really wait for the slowest rank. Prints, per size:
tasks, wall time of ``simulate`` (collective matching included), tasks/s and the peak resident
memory of the process (ru_maxrss: it only grows, so sizes run smallest first).

``--build N`` measures per-rank graph building instead: the 8 real DLRM ranks (realdata),
repeated to N traces, built one process, in local processes (``--workers``) and on a local Dask
cluster of as many workers (the path ``--dask ADDRESS`` takes), in tasks/s.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import _realdata  # noqa: F401  (puts the repository root on sys.path)
from lumos.graph.model import CommType, DepKind, ExecGraph, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import simulate

KERNELS_PER_LAYER = 200  # forward + backward kernels per layer, each with its launch call


def template(layers: int, world: int) -> ExecGraph:
    """One rank's program (rank 0); see the module docstring."""
    b = GraphBuilder(rank=0, world_size=world)
    th, compute, comm = b.thread(1), b.stream(7), b.stream(20)
    pg = b.process_group("0", tuple(range(world)))
    first = b.task(th, "step_begin", 1_000)
    last_grad = []
    for direction in ("fwd", "bwd"):
        for layer in range(layers):
            for k in range(KERNELS_PER_LAYER // 2):
                launch = b.task(th, "cudaLaunchKernel", 4_000, TaskKind.RUNTIME, gap_ns=6_000)
                kern = b.task(compute, f"{direction}_gemm_{k % 7}", 20_000 + 1_000 * (k % 11))
                b.edge(launch, kern, DepKind.LAUNCH, 5_000)
            if direction == "bwd":
                last_grad.append(kern)
                nccl_launch = b.task(th, "ncclAllReduce_launch", 5_000, TaskKind.RUNTIME)
                c = b.comm(CommType.ALL_REDUCE, 25 << 20, pg, seq_id=layer)
                nccl = b.task(comm, "ncclDevKernel_AllReduce", 900_000, TaskKind.COMM, comm=c)
                b.edge(nccl_launch, nccl, DepKind.LAUNCH, 5_000)
                b.edge(kern, nccl, DepKind.INTER_STREAM)
    opt_launch = b.task(th, "cudaLaunchKernel", 4_000, TaskKind.RUNTIME)
    opt = b.task(compute, "optimizer", 2_000_000)
    b.edge(opt_launch, opt, DepKind.LAUNCH, 5_000)
    b.edge(nccl, opt, DepKind.INTER_STREAM)
    b.annotate("ProfilerStep#1", th, first, opt_launch, dur_ns=0)
    return b.build()


def workload(layers: int, ranks: int, seed: int = 0) -> Workload:
    g = template(layers, ranks)
    rng = np.random.default_rng(seed)
    kernel = g.tasks.kind == int(TaskKind.KERNEL)
    graphs = []
    for r in range(ranks):
        jitter = rng.uniform(0.95, 1.05, size=int(kernel.sum()))
        dur = g.tasks.dur_ns.copy()
        dur[kernel] = np.rint(dur[kernel] * jitter).astype(np.int64)
        graphs.append(g.replace(rank=r, tasks=g.tasks.replace(dur_ns=dur)))
    return Workload(tuple(graphs))


def build(n: int, workers: int) -> None:
    """Per-rank graph building of N real traces: one process, processes, a local Dask cluster."""
    from _realdata import trace_or_exit
    from lumos.ingest.detect import expand_paths
    from lumos.parallel import map_ranks
    from lumos.replay import _build_one

    refs = [r for r in expand_paths([trace_or_exit("dlrm_kineto_8rank")]) if r.kind == "kineto"]
    refs = (refs * (n // len(refs) + 1))[:n]
    print(f"{'how':<22}{'traces':>8}{'tasks':>12}{'s':>8}{'tasks/s':>12}")

    def run(how: str, **kw: object) -> None:
        t0 = time.perf_counter()
        graphs = map_ranks(_build_one, refs, **kw)  # type: ignore[arg-type]
        dt = time.perf_counter() - t0
        tasks = sum(g.num_tasks for g in graphs)
        print(f"{how:<22}{n:>8}{tasks:>12}{dt:>8.1f}{tasks / dt:>12.0f}")

    run("one process", workers=1)
    run(f"{workers} processes", workers=workers)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("dask not installed: pip install -e '.[dask]'")
        return
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster) as client:  # fmt: skip
        del client
        run(f"dask, {workers} workers", dask_address=cluster.scheduler_address)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 512, 2048])
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--build", type=int, default=0, metavar="N")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.build:
        build(args.build, args.workers)
        return
    simulate(workload(1, 2))  # compile the simulator before timing
    print(f"{'ranks':>6}{'tasks':>12}{'build s':>9}{'simulate s':>12}{'tasks/s':>12}"
          f"{'peak RSS MB':>13}{'step ms':>9}")  # fmt: skip
    for ranks in sorted(args.ranks):
        t0 = time.perf_counter()
        w = workload(args.layers, ranks)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = simulate(w)
        t_sim = time.perf_counter() - t0
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        step = max(s["predicted_ns"] for gi in range(ranks) for s in result.steps(gi))
        print(f"{ranks:>6}{w.num_tasks:>12}{t_build:>9.1f}{t_sim:>12.1f}"
              f"{w.num_tasks / t_sim:>12.0f}{rss_mb:>13.0f}{step / 1e6:>9.2f}")  # fmt: skip
        del w, result


if __name__ == "__main__":
    main()
