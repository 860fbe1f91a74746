"""How fast the same ops ran in two runs: per rank of run A, the ops (name and recorded "Input
Dims") that both runs executed at least 10 times, and the ratio of their median durations and
of the median gaps before them (A over the first rank of B), weighted by A's time in them.

    python benchmarks/op_speed.py RUN_A RUN_B

A what-if edits run A's trace and keeps its ops' speed; a ratio far from 1 says the other run's
ops ran at another speed (cores shared with other ranks, caches, clocks), which no edit of A's
trace can know.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from lumos.graph.kinds import DepKind, TaskKind
from lumos.graph.model import ExecGraph
from lumos.replay import build_workload

MIN_CALLS = 10


def op_times(g: ExecGraph) -> dict[tuple[str, str], np.ndarray]:
    """``(name, dims) -> [[duration, gap before], ...]`` of the CPU ops of ``g`` (ns)."""
    t, e = g.tasks, g.edges
    gap = np.zeros(g.num_tasks, dtype=np.int64)
    intra = e.kind == int(DepKind.INTRA_THREAD)
    gap[e.dst[intra]] = e.delay_ns[intra]
    out: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    dims = g.task_dims_idx
    for i in np.flatnonzero(t.kind == int(TaskKind.CPU_OP)).tolist():
        d = g.dims[dims[i]] if dims is not None and dims[i] >= 0 else ""
        out[(g.task_name(i), d)].append((int(t.dur_ns[i]), int(gap[i])))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_a")
    p.add_argument("run_b")
    args = p.parse_args(argv)
    wa, _ = build_workload([args.run_a])
    wb, _ = build_workload([args.run_b])
    ref = op_times(wb.graphs[0])
    for g in wa.graphs:
        mine = op_times(g)
        rows = [(np.median(a[:, 0]) / max(np.median(ref[k][:, 0]), 1.0),
                 np.median(a[:, 1]) / max(np.median(ref[k][:, 1]), 1.0), a[:, 0].sum())
                for k, a in mine.items()
                if len(a) >= MIN_CALLS and len(ref.get(k, ())) >= MIN_CALLS]  # fmt: skip
        if not rows:
            print(f"rank {g.rank}: no op both runs executed {MIN_CALLS} times")
            continue
        dur, gap, w = (np.asarray(c) for c in zip(*rows, strict=True))
        print(f"rank {g.rank}: {len(rows)} ops; A/B duration x{(dur * w).sum() / w.sum():.2f} "
              f"(median x{np.median(dur):.2f}), gap before x{(gap * w).sum() / w.sum():.2f} "
              f"(median x{np.median(gap):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
