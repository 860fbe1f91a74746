"""``SimResult``: predicted start/end of every task of a replay, plus the helpers reports need.

For a workload the per-task arrays are the graphs' tasks concatenated in rank order;
``task_offsets[i]:task_offsets[i+1]`` is graph ``i``'s slice (for one graph: all of it, so
``result.start_ns[t]`` is simply task ``t``'s start).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.model import AnnotationKind, ExecGraph, Workload

__all__ = ["SimResult"]


def _concat(parts: list[NDArray[Any]], dtype: Any) -> NDArray[Any]:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outcome of :func:`lumos.sim.simulate`.

    ``cause_kind`` / ``cause_ref`` say what determined each task's start (see
    :mod:`lumos.sim._kernel`: 0 none, 1 edge ``cause_ref`` (global edge index: graph ``i``'s
    edges start at ``edge_offsets[i]``), 2 processor predecessor, 3 runtime wait target,
    4 last-arriving collective participant; ``cause_ref`` is a global task index for 2-4).
    """

    def __repr__(self) -> str:
        return (f"SimResult({len(self.workload.graphs)} rank(s), {len(self.start_ns)} tasks, "
                f"makespan {self.makespan_ns / 1e6:.3f} ms)")  # fmt: skip

    workload: Workload
    start_ns: NDArray[np.int64]
    end_ns: NDArray[np.int64]
    task_offsets: NDArray[np.int64]
    cause_kind: NDArray[np.int8]
    cause_ref: NDArray[np.int64]
    edge_offsets: NDArray[np.int64]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("start_ns", "end_ns", "task_offsets", "cause_kind", "cause_ref"):
            getattr(self, name).flags.writeable = False

    # -- slicing -------------------------------------------------------------------------------

    @property
    def graphs(self) -> tuple[ExecGraph, ...]:
        return self.workload.graphs

    def graph_index(self, graph: ExecGraph | int) -> int:
        """Position of ``graph`` (an ExecGraph of this workload, or a rank) in the workload."""
        if isinstance(graph, ExecGraph):
            for i, g in enumerate(self.graphs):
                if g is graph:
                    return i
            graph = graph.rank
        for i, g in enumerate(self.graphs):
            if g.rank == graph:
                return i
        raise KeyError(f"rank {graph} is not part of this result")

    def starts(self, gi: int = 0) -> NDArray[np.int64]:
        """Predicted starts of graph ``gi``'s tasks (a view)."""
        return self.start_ns[self.task_offsets[gi] : self.task_offsets[gi + 1]]

    def ends(self, gi: int = 0) -> NDArray[np.int64]:
        """Predicted ends of graph ``gi``'s tasks (a view)."""
        return self.end_ns[self.task_offsets[gi] : self.task_offsets[gi + 1]]

    def global_tables(self) -> tuple[NDArray[np.int64], NDArray[np.int8], NDArray[np.int8]]:
        """``(edge_src, edge_kind, task_kind)`` over the whole workload, computed once: the
        global task index of each global edge's source, each edge's DepKind, each task's
        TaskKind (read-only; per-rank reports share them instead of concatenating again)."""
        if "global" not in self._cache:
            graphs, offsets = self.graphs, self.task_offsets
            tables = (
                _concat([g.edges.src.astype(np.int64) + offsets[i] for i, g in enumerate(graphs)],
                        np.int64),
                _concat([g.edges.kind for g in graphs], np.int8),
                _concat([g.tasks.kind for g in graphs], np.int8),
            )  # fmt: skip
            for a in tables:
                a.flags.writeable = False
            self._cache["global"] = tables
        return self._cache["global"]

    # -- summaries -----------------------------------------------------------------------------

    @property
    def makespan_ns(self) -> int:
        """Latest end over all tasks (the replay starts at 0)."""
        return int(self.end_ns.max()) if len(self.end_ns) else 0

    def busy_ns(self, gi: int = 0) -> NDArray[np.int64]:
        """Per processor of graph ``gi``: total predicted time running tasks."""
        g = self.graphs[gi]
        d = self.ends(gi) - self.starts(gi)
        return np.bincount(g.tasks.processor_idx, weights=d, minlength=len(g.processors)).astype(
            np.int64
        )

    def annotation_spans(self, gi: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Predicted ``(start, end)`` of graph ``gi``'s annotations (``-1`` for empty spans):
        ``[start(first) - lead_ns, end(last) + tail_ns]``."""
        a = self.graphs[gi].annotations
        has = a.first_task_idx >= 0
        s, e = self.starts(gi), self.ends(gi)
        first = np.maximum(a.first_task_idx, 0)
        last = np.maximum(a.last_task_idx, 0)
        lo = np.where(has, s[first] - a.lead_ns, -1) if len(s) else np.full(len(a), -1)
        hi = np.where(has, e[last] + a.tail_ns, -1) if len(e) else np.full(len(a), -1)
        return lo.astype(np.int64), hi.astype(np.int64)

    def steps(self, gi: int = 0) -> list[dict[str, Any]]:
        """Per STEP annotation of graph ``gi``: name, measured and predicted duration and the
        relative error ``(predicted - measured) / measured`` (None if measured is 0)."""
        g = self.graphs[gi]
        a = g.annotations
        lo, hi = self.annotation_spans(gi)
        out = []
        for i in np.flatnonzero(a.kind == AnnotationKind.STEP).tolist():
            measured = int(a.dur_ns[i])
            predicted = int(hi[i] - lo[i]) if a.first_task_idx[i] >= 0 else 0
            out.append(
                {
                    "name": g.names[int(a.name_idx[i])],
                    "measured_ns": measured,
                    "predicted_ns": predicted,
                    "error": (predicted - measured) / measured if measured else None,
                }
            )
        return out

    def to_dict(self, include_tasks: bool = False) -> dict[str, Any]:
        """JSON-ready summary (per rank: makespan, per-processor busy time, annotation spans;
        optionally every task's start/end)."""
        ranks = []
        for gi, g in enumerate(self.graphs):
            lo, hi = self.annotation_spans(gi)
            busy = self.busy_ns(gi)
            a = g.annotations
            entry: dict[str, Any] = {
                "rank": g.rank,
                "num_tasks": g.num_tasks,
                "makespan_ns": int(self.ends(gi).max()) if g.num_tasks else 0,
                "processors": [
                    {"label": g.processors.label[p], "busy_ns": int(busy[p])}
                    for p in range(len(g.processors))
                ],
                "annotations": [
                    {
                        "name": g.names[int(a.name_idx[i])],
                        "kind": AnnotationKind(int(a.kind[i])).name.lower(),
                        "start_ns": int(lo[i]),
                        "end_ns": int(hi[i]),
                    }
                    for i in np.flatnonzero(a.kind != AnnotationKind.USER).tolist()
                ],
                "steps": self.steps(gi),
            }
            if include_tasks:
                entry["start_ns"] = self.starts(gi).tolist()
                entry["end_ns"] = self.ends(gi).tolist()
            ranks.append(entry)
        return {
            "makespan_ns": self.makespan_ns,
            "ranks": ranks,
            "diagnostics": self.diagnostics.to_dict(),
        }

    def to_json(self, include_tasks: bool = False) -> str:
        """:meth:`to_dict` as canonical JSON: byte-identical for the same input."""
        return json.dumps(
            self.to_dict(include_tasks), sort_keys=True, separators=(",", ":"), allow_nan=False
        )
