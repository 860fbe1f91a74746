"""The Perfetto trace's recording and critical path: each rank's measured group, and the
critical-path track of its predicted group (:mod:`lumos.report.perfetto_layout`).

===========================  ================================================================
events                       what they show
===========================  ================================================================
``X`` in the measured group  each task as recorded: ``ts`` its recorded start, ``dur`` its
                             recorded duration (``ts_ns``, ``dur_ns`` of the graph as built
                             from the trace), ``cat`` its kind, args ``rank``, ``task_idx``;
                             each ProfilerStep (``cat`` ``step``) and parent op (``op``) as
                             its recorded span
``X`` cat ``critical_path``  on the ``critical path (predicted)`` thread of a rank's predicted
                             group: a copy of each of its tasks on the critical path of the
                             replay (to the last task of the run), from its simulated start for
                             the part of it that is on the path, args ``critical_path: true``,
                             ``rank``, ``task_idx``; the path read left to right, rank by rank
===========================  ================================================================

The replay's own events of those tasks carry ``critical_path: true`` too
(:mod:`lumos.report.perfetto`). Rows are formatted from columns
(:func:`lumos.report.json_columns.format_rows`), no Python object per event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import AnnotationKind, ExecGraph, TaskKind
from lumos.report.json_columns import INT, STRING, US, format_rows
from lumos.report.metrics import CriticalPath, critical_path
from lumos.report.perfetto_layout import RankTracks
from lumos.sim.result import SimResult

__all__ = ["PathTasks", "measured_rows", "path_rows", "path_tasks"]

_BLOCK = 1 << 16  # tasks formatted at a time


@dataclass(frozen=True, eq=False)
class PathTasks:
    """The replay's critical path: per graph, the local indices of its tasks on the path, in
    path order (earliest first), and the part of each that is on the path (ns)."""

    cp: CriticalPath | None
    local: tuple[NDArray[np.int64], ...]
    on_path_ns: tuple[NDArray[np.int64], ...]

    def mask(self, gi: int, n: int) -> NDArray[np.bool_]:
        """Whether each of graph ``gi``'s ``n`` tasks is on the path."""
        out = np.zeros(n, dtype=bool)
        out[self.local[gi]] = True
        return out


def path_tasks(result: SimResult) -> PathTasks:
    """The critical path of ``result`` (:func:`lumos.report.metrics.critical_path`) by graph."""
    n = len(result.graphs)
    empty = np.zeros(0, np.int64)
    if not n or not len(result.start_ns):
        return PathTasks(None, (empty,) * n, (empty,) * n)
    cp = critical_path(result)
    tasks, graph_of, on_ns = cp.tasks[::-1], cp.graph_of[::-1], cp.task_ns[::-1]
    local, part = [], []
    for gi in range(n):
        sel = np.flatnonzero(graph_of == gi)
        local.append((tasks[sel] - int(result.task_offsets[gi])).astype(np.int64))
        part.append(np.asarray(on_ns, dtype=np.int64)[sel])
    return PathTasks(cp, tuple(local), tuple(part))


def _names(g: ExecGraph, first: Sequence[bytes]) -> list[bytes]:
    return [*first, *(json.dumps(x).encode() for x in g.names)]


def measured_rows(
    result: SimResult, tracks: Sequence[RankTracks], recorded: Sequence[ExecGraph]
) -> Iterator[bytes]:
    """Per rank: its measured group's metadata, tasks (in processor order) and recorded step
    and op spans, as JSON rows (compact, sorted keys) each starting with a comma.
    ``recorded[gi]``: the graph as built from the trace (the measured times)."""
    encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
    kinds = [json.dumps(k.name.lower()).encode() for k in TaskKind]
    for tr in tracks:
        g, rec = result.graphs[tr.gi], recorded[tr.gi]
        yield b"".join(b"," + encode(ev).encode() for ev in tr.measured_meta)
        t = rec.tasks
        _, all_perm = g.processor_order()
        consts = [b',{"args":{"rank":%d,"task_idx":' % tr.rank, b'},"cat":', b',"dur":',
                  b',"name":', b',"ph":"X","pid":%d,"tid":' % tr.measured_pid, b',"ts":', b"}"]  # fmt: skip
        strings = _names(rec, kinds)
        for lo in range(0, all_perm.shape[0], _BLOCK):  # a block at a time: bounded memory
            perm = all_perm[lo : lo + _BLOCK]
            fields: list[tuple[int, np.ndarray]] = [
                (INT, perm), (STRING, t.kind[perm]), (US, t.dur_ns[perm]),
                (STRING, t.name_idx[perm].astype(np.int64) + len(kinds)),
                (INT, tr.tid[t.processor_idx[perm]]), (US, t.ts_ns[perm] + tr.measured_shift),
            ]  # fmt: skip
            yield format_rows(consts, fields, strings)
        a = rec.annotations
        sel = np.flatnonzero((a.first_task_idx >= 0) & (a.kind != int(AnnotationKind.GPU_STEP)))
        if sel.size:
            step = (a.kind[sel] == int(AnnotationKind.STEP)).astype(np.int64)
            consts = [b',{"args":{"rank":%d},"cat":' % tr.rank, b',"dur":', b',"name":',
                      b',"ph":"X","pid":%d,"tid":' % tr.measured_pid, b',"ts":', b"}"]  # fmt: skip
            fields = [
                (STRING, step), (US, np.maximum(a.dur_ns[sel], 0)),
                (STRING, a.name_idx[sel].astype(np.int64) + 2),
                (INT, tr.tid[a.processor_idx[sel]]), (US, a.ts_ns[sel] + tr.measured_shift),
            ]  # fmt: skip
            yield format_rows(consts, fields, _names(rec, [b'"op"', b'"step"']))


def path_rows(result: SimResult, tracks: Sequence[RankTracks], path: PathTasks) -> Iterator[bytes]:
    """Per rank the critical path visits: its ``critical path (predicted)`` thread (metadata,
    then a copy of each of its path tasks, see the module docstring), as JSON rows."""
    encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
    for tr in tracks:
        local = path.local[tr.gi]
        if not local.size:
            continue
        g = result.graphs[tr.gi]
        meta = [{"ph": "M", "name": "thread_name", "pid": tr.pid, "tid": tr.path_tid,
                 "args": {"name": "critical path (predicted)"}},
                {"ph": "M", "name": "thread_sort_index", "pid": tr.pid, "tid": tr.path_tid,
                 "args": {"sort_index": 0}}]  # fmt: skip
        yield b"".join(b"," + encode(ev).encode() for ev in meta)
        start = result.starts(tr.gi)[local].astype(np.int64)
        consts = [b',{"args":{"critical_path":true,"rank":%d,"task_idx":' % tr.rank,
                  b'},"cat":"critical_path","dur":', b',"name":',
                  b',"ph":"X","pid":%d,"tid":%d,"ts":' % (tr.pid, tr.path_tid), b"}"]  # fmt: skip
        fields: list[tuple[int, np.ndarray]] = [(INT, local), (US, path.on_path_ns[tr.gi]), (STRING, g.tasks.name_idx[local]),
                  (US, start + tr.shift)]  # fmt: skip
        yield format_rows(consts, fields, _names(g, []))
