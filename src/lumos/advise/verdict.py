"""What bounds the step: the critical path of each rank split by cause, and the rank others wait for.

A rank's step ends when its critical path ends (:func:`lumos.report.metrics.critical_path`):
the chain of tasks and waits that finished last. Every nanosecond of that path inside the rank's
replayed step window is given one cause:

=================  ===============================================================================
cause              what on the path
=================  ===============================================================================
``compute``        GPU kernels, copies and sets that are not communication (on a CPU-only job:
                   CPU ops, which are its compute)
``communication``  collective and point-to-point tasks (transfers; kernels and host spans)
``host``           on a GPU job, CPU ops and runtime calls; everywhere, the CPU time between ops
                   (intra- and inter-thread delays, thread occupancy) and launch latency: the GPU
                   waits for the CPU to launch work (on a CPU job, the part of a gap inside an
                   ``aten::`` op is that op computing: ``compute``)
``straggler``      work of another rank the path crossed into through a collective, from this
                   rank's arrival at that collective on, and waits for a peer: this rank waits
                   for another one (the other rank's work before the arrival counts by its kind)
``other``          the rest: waits between streams, for a synchronize, before the first task
=================  ===============================================================================

``shares`` are those parts over the path's length inside the window (they sum to 1). The job's
``bound`` is the largest share of the slowest rank (the one whose mean replayed step is
longest). The *late rank* comes from the recording: per collective matched across ranks, the
rank that arrived last and by how much (:func:`lumos.report.analysis_ranks.stragglers_table`);
it is named when its lateness per step is at least 2 % of the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.edits_class import cpu_op_gap_share, has_gpu_compute
from lumos.graph.model import DepKind, TaskKind, Workload
from lumos.report.analysis import _binding_edges, ready_times
from lumos.report.metrics import (
    GAP_CAUSES,
    critical_path,
    critical_path_by_kernel,
    critical_path_by_op,
)
from lumos.sim.result import SimResult

__all__ = ["CAUSES", "Verdict", "late_rank", "rank_shares", "verdict"]

CAUSES: tuple[str, ...] = ("host", "compute", "communication", "straggler", "other")
#: A late rank is named when it makes the others wait at least this share of a step.
LATE_SHARE = 0.02

_HOST_GAPS = {GAP_CAUSES.index(n) for n in ("intra_thread", "inter_thread", "launch", "processor")}
_INTRA = GAP_CAUSES.index("intra_thread")
_PEER_GAPS = {GAP_CAUSES.index(n) for n in ("collective", "p2p")}
_GPU_COMPUTE = (int(TaskKind.KERNEL), int(TaskKind.MEMCPY), int(TaskKind.MEMSET))
_COMM = (int(TaskKind.COMM), int(TaskKind.CPU_COMM))
_HOST_TASKS = (int(TaskKind.CPU_OP), int(TaskKind.RUNTIME))
assert DepKind.COLLECTIVE.name.lower() in GAP_CAUSES


@dataclass(frozen=True)
class Verdict:
    """``bound`` (one of :data:`CAUSES`), ``shares`` per rank, the ``slowest`` rank, the
    ``late`` rank (None if none; see :func:`late_rank`), the ops and kernels with most time on
    the slowest rank's critical path, and the ``device`` the job computes on (``gpu``, or
    ``cpu`` for a job with no GPU compute)."""

    bound: str
    shares: dict[int, dict[str, float]]
    slowest: int
    late: dict[str, Any] | None
    top_ops: list[dict[str, Any]]
    top_kernels: list[dict[str, Any]]
    device: str = "gpu"


def rank_shares(result: SimResult, gi: int, window: tuple[int, int]) -> dict[str, float]:
    """Shares of :data:`CAUSES` on graph ``gi``'s critical path inside ``window`` (ns).

    Where the path crosses into another rank through a collective, that rank's work up to
    this rank's arrival at the collective counts by its own kind (this rank was doing the
    same kind of work meanwhile); from the arrival on, it is ``straggler``: time this rank
    waited for the other one."""
    cp = critical_path(result, gi if len(result.graphs) > 1 else None)
    acc = dict.fromkeys(CAUSES, 0)
    if not len(cp.tasks):
        return {k: 0.0 for k in acc}
    _, _, kinds = result.global_tables()
    gpu = [has_gpu_compute(g) for g in result.graphs]
    in_op: dict[int, NDArray[np.float64]] = {}
    g = result.graphs[gi]
    ready = ready_times(g, result.starts(gi), result.ends(gi))
    offsets = result.task_offsets
    start = result.start_ns[cp.tasks].astype(np.int64)
    lo, hi = window
    arrival: int | None = None
    for task, owner, kind, run, gap, cause, t0 in zip(
        cp.tasks.tolist(), cp.graph_of.tolist(), kinds[cp.tasks].tolist(),
        cp.task_ns.tolist(), cp.gap_ns.tolist(), cp.gap_cause.tolist(), start.tolist(),
        strict=True,
    ):  # fmt: skip
        local = task - int(offsets[owner])
        if owner not in in_op:
            in_op[owner] = _gap_in_op(result, owner)
        share = float(in_op[owner][local]) if cause == _INTRA else 0.0
        split = t0 - gap + round(gap * (1.0 - share))  # an op's own work ends the gap
        parts = [(t0, t0 + run, _task_cause(kind, gpu[owner])),
                 (t0 - gap, split, _gap_cause(cause)), (split, t0, "compute")]  # fmt: skip
        if owner == gi:
            arrival = int(ready[local])  # where the path may leave this rank
        else:
            cut = arrival if arrival is not None else hi
            parts = [x for a, b, what in parts
                     for x in ((a, min(b, cut), what), (max(a, cut), b, "straggler"))]  # fmt: skip
        for a, b, what in parts:
            # the path's parts outside the window (earlier steps' tails, set-up) do not count
            acc[what] += max(0, min(b, hi) - max(a, lo))
    total = sum(acc.values())
    return {k: (v / total if total else 0.0) for k, v in acc.items()}


def _gap_in_op(result: SimResult, gi: int) -> NDArray[np.float64]:
    """Per task of graph ``gi``: the share of the gap before it (its releasing intra-thread
    edge's) that lies inside an ``aten::`` op on a CPU job (:func:`cpu_op_gap_share`)."""
    g = result.graphs[gi]
    share = cpu_op_gap_share(g)
    binding = _binding_edges(g, result.starts(gi), result.ends(gi))
    return np.where(binding >= 0, share[np.maximum(binding, 0)], 0.0)


def _task_cause(kind: int, gpu: bool) -> str:
    if kind in _COMM:
        return "communication"
    if kind in _GPU_COMPUTE or (not gpu and kind == int(TaskKind.CPU_OP)):
        return "compute"
    if kind in _HOST_TASKS:
        return "host"
    return "other"


def _gap_cause(cause: int) -> str:
    if cause in _HOST_GAPS:
        return "host"
    if cause in _PEER_GAPS:
        return "straggler"
    return "other"


def late_rank(workload: Workload, step_ns: int, steps: int) -> dict[str, Any] | None:
    """The rank the others wait for in the recording: most lateness in all (times last as a
    tie-break) over the collectives matched across ranks; ``{rank, times_last, collectives,
    late_ns, late_ns_per_step, share}``, or None with one rank, no matched collective, or a
    lateness per step under :data:`LATE_SHARE` of ``step_ns``."""
    if len(workload.graphs) < 2:
        return None
    from lumos.report.analysis_ranks import rank_lateness_table, stragglers_table
    from lumos.report.timeline import measured_timeline

    tl = measured_timeline(workload)
    lateness = rank_lateness_table(stragglers_table(tl), tl)
    if not lateness.rows:
        return None
    cols = lateness.columns
    best = max(lateness.rows, key=lambda r: (r[cols.index("late_ns")], r[cols.index("times_last")]))
    late_ns = int(best[cols.index("late_ns")])
    per_step = late_ns / max(steps, 1)
    if not step_ns or per_step < LATE_SHARE * step_ns:
        return None
    return {
        "rank": int(best[cols.index("rank")]),
        "times_last": int(best[cols.index("times_last")]),
        "collectives": int(best[cols.index("collectives")]),
        "late_ns": late_ns,
        "late_ns_per_step": round(per_step),
        "share": per_step / step_ns,
    }


def verdict(
    result: SimResult, summaries: list[dict[str, Any]], workload: Workload, step_ns: int
) -> Verdict:
    """The verdict on a replayed baseline (``summaries``: :func:`lumos.report.metrics.
    replay_summary` per graph of ``result``)."""
    shares: dict[int, dict[str, float]] = {}
    means = []
    for gi, sm in enumerate(summaries):
        pred = [st["predicted_ns"] for st in sm["steps"]]
        w = sm["window_ns"]["predicted"]
        means.append(float(np.mean(pred)) if pred else float(w[1] - w[0]))
        shares[int(sm["rank"])] = rank_shares(result, gi, (int(w[0]), int(w[1])))
    slow_gi = int(np.argmax(means))
    slowest = int(summaries[slow_gi]["rank"])
    steps = max(len(summaries[slow_gi]["steps"]), 1)
    late = late_rank(workload, step_ns, steps)
    mine = shares[slowest]
    bound = max(CAUSES, key=lambda k: (mine[k], -CAUSES.index(k)))
    if late is not None and bound != "straggler" and late["share"] > mine[bound]:
        bound = "straggler"
    cp = critical_path(result, slow_gi if len(result.graphs) > 1 else None)
    return Verdict(
        bound=bound,
        shares=shares,
        slowest=slowest,
        late=late,
        top_ops=critical_path_by_op(result, cp, slow_gi)[:5],
        top_kernels=critical_path_by_kernel(result, cp, slow_gi)[:5],
        device="gpu" if any(has_gpu_compute(g) for g in result.graphs) else "cpu",
    )
