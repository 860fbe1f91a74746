"""``Timeline``: one way a workload ran, recorded or simulated, as per-task start/end arrays.

The analysis tables (:mod:`lumos.report.analysis`) take a timeline, so the same code measures
the recording (``measured``: recorded ``ts_ns`` and ``ts_ns + dur_ns``) and any replay or
what-if (``predicted``: the simulator's starts and ends). Each rank's *window* is the span the
replay compares: from its first ProfilerStep's start to its last one's end (the whole run when
the trace has no step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import START
from lumos.graph.model import AnnotationKind, ExecGraph, Workload
from lumos.sim.result import SimResult

__all__ = ["Timeline", "measured_timeline", "measured_window", "predicted_timeline",
           "predicted_window"]  # fmt: skip


@dataclass(frozen=True, eq=False)
class Timeline:
    """Per graph of ``workload``: every task's start and end, the window, and the steps
    (``(name, duration_ns)`` per ProfilerStep). ``view`` is ``measured`` or ``predicted``."""

    view: str
    workload: Workload
    starts: tuple[NDArray[np.int64], ...]
    ends: tuple[NDArray[np.int64], ...]
    windows: tuple[tuple[int, int], ...]
    steps: tuple[tuple[tuple[str, int], ...], ...]

    @property
    def graphs(self) -> tuple[ExecGraph, ...]:
        return self.workload.graphs


def _span(ts: NDArray[np.int64], end: NDArray[np.int64]) -> tuple[int, int] | None:
    return (int(ts.min()), int(end.max())) if len(ts) else None


def _run(graph: ExecGraph) -> NDArray[np.bool_]:
    """The tasks of the run: every task but the processors' zero-cost ``<start>`` anchors."""
    return graph.tasks.event_idx != START


def measured_window(graph: ExecGraph) -> tuple[int, int]:
    """First step start to last step end, as recorded (the run's tasks when there is no step)."""
    a, t = graph.annotations, graph.tasks
    st = a.kind == int(AnnotationKind.STEP)
    w = _span(a.ts_ns[st], a.ts_ns[st] + a.dur_ns[st])
    if w is None:
        run = _run(graph)
        w = _span(t.ts_ns[run], (t.ts_ns + t.dur_ns)[run]) or (0, 0)
    return w


def predicted_window(result: SimResult, gi: int) -> tuple[int, int]:
    """First step start to last step end, as simulated (the run's first start to its last end
    without steps: a rank that began after the others in a job begins later in the replay)."""
    g = result.graphs[gi]
    a = g.annotations
    lo, hi = result.annotation_spans(gi)
    has = (a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0)
    w = _span(lo[has], hi[has])
    if w is None:
        run = _run(g)
        w = _span(result.starts(gi)[run], result.ends(gi)[run]) or (0, 0)
    return w


def measured_timeline(workload: Workload) -> Timeline:
    """The recording: recorded starts and ``start + dur_ns`` (intrinsic costs, so a blocking
    call ends where its own work ends and its ``[wait]`` task holds the rest)."""
    gs = workload.graphs
    steps = []
    for g in gs:
        a = g.annotations
        st = np.flatnonzero(a.kind == int(AnnotationKind.STEP)).tolist()
        steps.append(tuple((g.names[int(a.name_idx[i])], int(a.dur_ns[i])) for i in st))
    return Timeline(
        "measured",
        workload,
        tuple(g.tasks.ts_ns for g in gs),
        tuple(g.tasks.ts_ns + g.tasks.dur_ns for g in gs),
        tuple(measured_window(g) for g in gs),
        tuple(steps),
    )


def predicted_timeline(result: SimResult) -> Timeline:
    """A simulated run (a replay or a what-if)."""
    n = len(result.graphs)
    steps = tuple(
        tuple((s["name"], int(s["predicted_ns"])) for s in result.steps(gi)) for gi in range(n)
    )
    return Timeline(
        "predicted",
        result.workload,
        tuple(result.starts(gi) for gi in range(n)),
        tuple(result.ends(gi) for gi in range(n)),
        tuple(predicted_window(result, gi) for gi in range(n)),
        steps,
    )
