"""Where each recorded step's time went on its own thread: work, overhead, waits, unexplained.

The causal model keeps a gap on a CPU thread as a fixed *delay* only when it is CPU overhead;
a gap that ended when something else ended is a *wait* that the simulation reproduces. This
module reports, per ProfilerStep, how the recording splits on the step's thread:

==============  ===========================================================================
class           what it holds
==============  ===========================================================================
task_ns         the tasks' intrinsic costs (a blocking call's own cost, not its wait)
overhead_ns     gaps kept as delays: CPU time the trace does not show (at most
                ``UNEXPLAINED_FACTOR`` times the thread's usual overhead)
wait_ns         gaps the graph explains by a dependency (a GPU task, another thread, a
                runtime synchronization): the simulation produces them
unexplained_ns  longer gaps kept as delays with no cause found
==============  ===========================================================================

The four add up to the step's span from its first to its last task; the measured step also
holds its tail (from the last task to the step's end).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_gaps import UNEXPLAINED_FACTOR, overhead_floor_ns
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph

__all__ = ["step_time_classes"]

_WAIT_KINDS = (int(DepKind.INTER_THREAD), int(DepKind.SYNC), int(DepKind.COLLECTIVE))


def step_time_classes(graph: ExecGraph) -> list[dict[str, Any]]:
    """Per STEP annotation: ``{name, task_ns, overhead_ns, wait_ns, unexplained_ns}``."""
    t, a, e = graph.tasks, graph.annotations, graph.edges
    waited = np.zeros(graph.num_tasks, dtype=bool)
    waited[e.dst[np.isin(e.kind, _WAIT_KINDS)]] = True
    waited[graph.waits.task_idx] = True
    intra = np.full(graph.num_tasks, 0, dtype=np.int64)
    sel = e.kind == int(DepKind.INTRA_THREAD)
    intra[e.dst[sel]] = e.delay_ns[sel]
    ptr, perm = graph.processor_order()
    pos = np.empty(graph.num_tasks, dtype=np.int64)
    pos[perm] = np.arange(graph.num_tasks)
    end = t.ts_ns + t.dur_ns
    out = []
    floors: dict[int, int] = {}
    for i in np.flatnonzero(a.kind == int(AnnotationKind.STEP)).tolist():
        row: dict[str, Any] = {"name": graph.names[int(a.name_idx[i])], "task_ns": 0,
                               "overhead_ns": 0, "wait_ns": 0, "unexplained_ns": 0}  # fmt: skip
        first, last, p = int(a.first_task_idx[i]), int(a.last_task_idx[i]), int(a.processor_idx[i])
        if first < 0 or t.processor_idx[last] != p:
            out.append(row)
            continue
        if p not in floors:
            tasks = perm[ptr[p] : ptr[p + 1]]
            floors[p] = overhead_floor_ns(t.ts_ns[tasks[1:]] - end[tasks[:-1]])
        tasks = perm[pos[first] : pos[last] + 1]
        gaps = np.maximum(t.ts_ns[tasks[1:]] - end[tasks[:-1]], 0)
        _classify(row, t.dur_ns[tasks], gaps, waited[tasks[1:]], intra[tasks[1:]], floors[p])
        out.append(row)
    return out


def _classify(
    row: dict[str, Any],
    dur: NDArray[np.int64],
    gaps: NDArray[np.int64],
    waited: NDArray[np.bool_],
    intra: NDArray[np.int64],
    floor: int,
) -> None:
    kept = np.minimum(intra, gaps)
    wait = np.where(waited, gaps - kept, 0)
    delay = np.where(waited, kept, gaps)
    long = delay > UNEXPLAINED_FACTOR * max(floor, 1)
    row["task_ns"] = int(dur.sum())
    row["wait_ns"] = int(wait.sum())
    row["overhead_ns"] = int(delay[~long].sum())
    row["unexplained_ns"] = int(delay[long].sum())
