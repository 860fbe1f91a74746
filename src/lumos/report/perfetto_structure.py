"""The structure of a replay in its Perfetto trace: step and parent-op spans, launch and
critical-path flow arrows, so that the replay's group reads like the recording above it.

===========================  ================================================================
events                       what they show
===========================  ================================================================
``X`` cat ``step``           each ProfilerStep as a span on its thread, as simulated
``X`` cat ``op``             each parent op (``aten::linear``, modules, user annotations) as a
                             span from its first child's start to its last child's end, as
                             simulated (so that spans on a thread nest; a step keeps its
                             recorded lead and tail, within the gaps to its neighbours)
``s``/``f`` cat ``launch``   an arrow from each runtime call to the GPU task it launched
``s``/``f`` cat              an arrow wherever the critical path (to the last task of the run)
``critical_path``            moves to another track: a launch, a wait for another stream or
                             thread, a collective across ranks
===========================  ================================================================

Times are the simulated ones, shifted like the tasks (see :mod:`lumos.report.perfetto`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.graph.model import AnnotationKind, DepKind
from lumos.report.json_columns import INT, STRING, US, format_rows
from lumos.report.perfetto_layout import RankTracks
from lumos.sim.result import SimResult

if TYPE_CHECKING:
    from lumos.report.perfetto_measured import PathTasks

__all__ = ["critical_path_events", "exact_us", "structure_events", "structure_rows"]

#: Per graph: its tracks (:mod:`lumos.report.perfetto_layout`), as the task events use them.
Tracks = Sequence[RankTracks]


#: Below this many ns, ``ns / 1000`` is within far less than 0.0005 of the exact decimal
#: (ulp < 2**-10), so rounding it to 3 decimals gives it back; from ``1000 * 2**50`` ns on its
#: float has at most 2 decimals (ulp >= 0.25), so rounding gives it back too.
_EXACT_BELOW_NS = 1 << 50
_EXACT_FROM_NS = 1000 << 50


def exact_us(ns: Any) -> Any:
    """Where ``round(ns / 1000, 3) == ns / 1000`` is certain (scalar or array of int64 ns)."""
    a = np.abs(ns)
    return (a < _EXACT_BELOW_NS) | (a >= _EXACT_FROM_NS)


def us_list(ns: Any) -> list[float]:
    """``round(ns / 1000, 3)`` per value of an int64 ns array, as Python floats (what the
    structure events hold): ``ns / 1000`` for the whole array where the rounding cannot change
    it (:func:`exact_us`), ``round`` only for the values in between (none for durations or
    epoch times; ``np.round`` differs beyond 2**53 / 1000)."""
    v = np.asarray(ns, dtype=np.int64)
    out = (v / 1000.0).tolist()
    for i in np.flatnonzero(~exact_us(v)).tolist():
        out[i] = round(int(v[i]) / 1000.0, 3)
    return out


def _us(ns: int) -> float:
    a = abs(ns)
    exact = a < _EXACT_BELOW_NS or a >= _EXACT_FROM_NS
    return ns / 1000.0 if exact else round(ns / 1000.0, 3)


def structure_events(result: SimResult, tracks: Tracks, path: PathTasks) -> list[dict[str, Any]]:
    """Spans and flow arrows (see the module docstring), deterministic order."""
    events: list[dict[str, Any]] = []
    flow_id = 0
    for gi, g in enumerate(result.graphs):
        tr = tracks[gi]
        shift = tr.shift
        a, t = g.annotations, g.tasks
        s, e = result.starts(gi), result.ends(gi)
        lo, hi = result.annotation_spans(gi)
        _, perm = g.processor_order()
        pos = np.empty(g.num_tasks, np.int64)
        pos[perm] = np.arange(g.num_tasks)
        proc_at = t.processor_idx[perm]
        for i in np.flatnonzero(a.first_task_idx >= 0).tolist():
            kind = int(a.kind[i])
            if kind == int(AnnotationKind.GPU_STEP):
                continue
            first, last = int(a.first_task_idx[i]), int(a.last_task_idx[i])
            start, end = int(lo[i]), int(hi[i])
            if kind != int(AnnotationKind.STEP):  # exactly its children: nested spans nest
                start, end = int(s[first]), int(e[last])
            k0, k1 = int(pos[first]), int(pos[last])
            if k0 > 0 and proc_at[k0 - 1] == proc_at[k0]:
                start = max(start, int(e[perm[k0 - 1]]))
            if k1 + 1 < len(perm) and proc_at[k1 + 1] == proc_at[k1]:
                end = min(end, int(s[perm[k1 + 1]]))
            q = int(a.processor_idx[i])
            events.append({
                "ph": "X", "name": g.names[int(a.name_idx[i])],
                "cat": "step" if kind == int(AnnotationKind.STEP) else "op",
                "pid": tr.pid, "tid": int(tr.tid[q]),
                "ts": _us(start + shift), "dur": _us(max(end - start, 0)),
                "args": {"rank": g.rank},
            })  # fmt: skip
        launch = np.flatnonzero(g.edges.kind == int(DepKind.LAUNCH))
        for src, dst in zip(g.edges.src[launch].tolist(), g.edges.dst[launch].tolist(),
                            strict=True):  # fmt: skip
            events.extend(_arrow(flow_id, "launch", _at(result, gi, src, tracks, int(s[src])),
                                 _at(result, gi, dst, tracks, int(s[dst]))))  # fmt: skip
            flow_id += 1
    return events + critical_path_events(result, tracks, flow_id, path)


def critical_path_events(
    result: SimResult, tracks: Tracks, flow_id: int, path: PathTasks
) -> list[dict[str, Any]]:
    """The arrows where the critical path (``path.cp``) moves to another track, ids from
    ``flow_id`` on."""
    events: list[dict[str, Any]] = []
    cp = path.cp
    if cp is not None and len(cp.tasks):
        tasks, graph_of = cp.tasks[::-1], cp.graph_of[::-1]
        local = tasks - result.task_offsets[graph_of]
        proc = np.empty(len(tasks), np.int64)
        for gi in np.unique(graph_of).tolist():
            on = graph_of == gi
            proc[on] = result.graphs[gi].tasks.processor_idx[local[on]]
        # the next task on the same track needs no arrow: the order says it already
        moves = np.flatnonzero((graph_of[:-1] != graph_of[1:]) | (proc[:-1] != proc[1:]))
        for k in moves.tolist():
            a_t, a_g = int(tasks[k]), int(graph_of[k])
            b_t, b_g = int(tasks[k + 1]), int(graph_of[k + 1])
            # an arrow leaves from inside its slice: the last instant (a zero-cost task's start)
            leave = max(int(result.start_ns[a_t]), int(result.end_ns[a_t]) - 1)
            src = _at(result, a_g, a_t - int(result.task_offsets[a_g]), tracks, leave)
            dst = _at(result, b_g, b_t - int(result.task_offsets[b_g]), tracks,
                      int(result.start_ns[b_t]))  # fmt: skip
            events.extend(_arrow(flow_id, "critical_path", src, dst))
            flow_id += 1
    return events


def _at(result: SimResult, gi: int, task: int, tracks: Tracks, ts_ns: int) -> dict[str, Any]:
    """Where a flow end sits: the task's track, at ``ts_ns`` (simulated, before the shift)."""
    q = int(result.graphs[gi].tasks.processor_idx[task])
    tr = tracks[gi]
    return {"pid": tr.pid, "tid": int(tr.tid[q]), "ts": _us(ts_ns + tr.shift)}


def _arrow(fid: int, cat: str, src: dict[str, Any], dst: dict[str, Any]) -> list[dict[str, Any]]:
    name = cat.replace("_", " ")
    return [{**src, "ph": "s", "id": fid, "cat": cat, "name": name},
            {**dst, "ph": "f", "bp": "e", "id": fid, "cat": cat, "name": name}]  # fmt: skip


_SPAN = [b',{"args":{"rank":%d},"cat":', b',"dur":', b',"name":', b',"ph":"X","pid":', b',"tid":',
         b',"ts":', b"}"]  # fmt: skip
_LAUNCH = [b',{"cat":"launch","id":', b',"name":"launch","ph":"s","pid":', b',"tid":', b',"ts":',
           b'},{"bp":"e","cat":"launch","id":', b',"name":"launch","ph":"f","pid":', b',"tid":',
           b',"ts":', b"}"]  # fmt: skip


def structure_rows(result: SimResult, tracks: Tracks, path: PathTasks) -> Iterator[bytes]:
    """The events of :func:`structure_events` as compact JSON, sorted keys, each one preceded
    by a comma: spans and launch arrows formatted a column at a time
    (:func:`lumos.report.json_columns.format_rows`), then the critical-path arrows."""
    encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
    flow_id = 0
    for gi, g in enumerate(result.graphs):
        tr = tracks[gi]
        shift = tr.shift
        a, t = g.annotations, g.tasks
        proc_pid = np.full(len(g.processors), tr.pid, dtype=np.int64)
        s, e = result.starts(gi).astype(np.int64), result.ends(gi).astype(np.int64)
        lo, hi = result.annotation_spans(gi)
        _, perm = g.processor_order()
        n = g.num_tasks
        pos = np.empty(n, np.int64)
        pos[perm] = np.arange(n)
        proc_at = t.processor_idx[perm]
        sel = np.flatnonzero((a.first_task_idx >= 0) & (a.kind != int(AnnotationKind.GPU_STEP)))
        if sel.size:
            first, last = a.first_task_idx[sel], a.last_task_idx[sel]
            step = a.kind[sel] == int(AnnotationKind.STEP)
            start = np.where(step, lo[sel], s[first]).astype(np.int64)
            end = np.where(step, hi[sel], e[last]).astype(np.int64)
            k0, k1 = pos[first], pos[last]
            before, after = np.maximum(k0 - 1, 0), np.minimum(k1 + 1, n - 1)
            joined = (k0 > 0) & (proc_at[before] == proc_at[k0])
            start = np.where(joined, np.maximum(start, e[perm[before]]), start)
            joined = (k1 + 1 < n) & (proc_at[after] == proc_at[k1])
            end = np.where(joined, np.minimum(end, s[perm[after]]), end)
            q = a.processor_idx[sel]
            consts = [_SPAN[0] % g.rank, *_SPAN[1:]]
            fields = [
                (STRING, step.astype(np.int64)), (US, np.maximum(end - start, 0)),
                (STRING, a.name_idx[sel].astype(np.int64) + 2), (INT, proc_pid[q]),
                (INT, tr.tid[q]), (US, start + shift),
            ]  # fmt: skip
            names = [b'"op"', b'"step"', *(json.dumps(x).encode() for x in g.names)]
            yield format_rows(consts, fields, names)
        launch = np.flatnonzero(g.edges.kind == int(DepKind.LAUNCH))
        if launch.size:
            src, dst = g.edges.src[launch], g.edges.dst[launch]
            ids = flow_id + np.arange(launch.size, dtype=np.int64)
            ps, pd = t.processor_idx[src], t.processor_idx[dst]
            fields = [
                (INT, ids), (INT, proc_pid[ps]), (INT, tr.tid[ps]), (US, s[src] + shift),
                (INT, ids), (INT, proc_pid[pd]), (INT, tr.tid[pd]), (US, s[dst] + shift),
            ]  # fmt: skip
            yield format_rows(_LAUNCH, fields, [])
            flow_id += launch.size
    critical = critical_path_events(result, tracks, flow_id, path)
    if critical:
        yield b"".join(b"," + encode(ev).encode() for ev in critical)
