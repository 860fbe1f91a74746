"""Chrome / Perfetto trace of a simulated run, to open beside the original in ui.perfetto.dev.

Each processor is a track: its ``pid`` / ``tid`` as recorded (a stream's pid is its device's
process, its tid the stream id), named with ``process_name`` / ``thread_name`` metadata. For a
multi-rank workload, recorded pids of different ranks may collide (device pids are 0..7 on every
host), so each rank's distinct pids are renumbered ``(rank + 1) * 1000 + k`` in order of first
appearance, and the recorded pid is kept in the process name.

Timestamps are microseconds (floats, ns precision kept to 3 decimals). By default the replay is
shifted to start where the recorded trace started (its first task's ``ts_ns``) so both traces
line up on the same time axis. Output is deterministic: events sorted by processor then order,
then the steps, parent ops and flow arrows of :mod:`lumos.report.perfetto_structure`.

:func:`write_chrome_trace` streams the file as compact JSON with sorted keys, the same events as
``json.dump(to_chrome_trace(...), separators=(",", ":"), sort_keys=True)``: task events, spans
and launch arrows are formatted a block of columns at a time by
:func:`lumos.report.json_columns.format_rows` (no Python object per event; a 2M-task replay
stays within the memory of its arrays). The text is byte for byte that of ``json.dump`` while
times are below ``2**50`` ns (13 days); beyond (epoch-based clocks), a time is written as the exact
decimal of its float, which parses to the same float but may have more digits than ``repr``.
A path ending in ``.gz`` is gzip-compressed (level 1: about a tenth of the size).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from itertools import chain
from typing import Any, Protocol

import numpy as np

from lumos._io import atomic_write
from lumos.graph.build_ranks import shared_clock_origin
from lumos.graph.model import DepKind, ExecGraph, ProcessorKind, TaskKind, Workload
from lumos.report.json_columns import INT, STRING, US, format_rows
from lumos.report.perfetto_memory import memory_counter_rows
from lumos.report.perfetto_structure import (
    critical_path_events,
    structure_events,
    structure_rows,
    us_list,
)
from lumos.sim.result import SimResult

__all__ = ["to_chrome_trace", "write_chrome_trace"]


_BLOCK = 1 << 16  # tasks formatted at a time


class _Sink(Protocol):
    """A binary file, plain or gzip."""

    def write(self, data: bytes, /) -> int: ...


def _tracks(result: SimResult, align_to_trace: bool) -> Iterator[tuple[int, Any]]:
    """Per graph: ``(gi, (metadata events, shift, pid of each processor, track pid by recorded
    pid))``."""
    graphs = result.graphs
    multi = len(graphs) > 1
    # ranks recorded on one clock were simulated from a common origin (align_ranks): shift them
    # all by the earliest rank's start; ranks on separate clocks each start at their own
    common = shared_clock_origin(graphs) if align_to_trace else None
    for gi, g in enumerate(graphs):
        t = g.tasks
        p = g.processors
        shift = int(t.ts_ns.min()) if align_to_trace and g.num_tasks else 0
        if common is not None:
            shift = common
        meta: list[dict[str, Any]] = []
        track_pid: dict[int, int] = {}
        for pi in range(len(p)):
            raw, tid = int(p.pid[pi]), int(p.tid[pi])
            if raw not in track_pid:
                track_pid[raw] = (g.rank + 1) * 1000 + len(track_pid) if multi else raw
                pid = track_pid[raw]
                what = f"GPU {int(p.device[pi])}" if p.kind[pi] == ProcessorKind.STREAM else "host"
                pname = f"rank {g.rank} {what} (pid {raw})" if multi else f"{what} (pid {raw})"
                meta.append(
                    {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                     "args": {"name": pname}}
                )  # fmt: skip
            meta.append(
                {"ph": "M", "name": "thread_name", "pid": track_pid[raw], "tid": tid,
                 "args": {"name": f"{p.label[pi]} (replay)"}}
            )  # fmt: skip
        proc_pid = np.array([track_pid[int(v)] for v in p.pid.tolist()], dtype=np.int64)
        yield gi, (meta, shift, proc_pid, track_pid)


def _task_blocks(
    result: SimResult, gi: int, shift: int, proc_pid: np.ndarray, perm: np.ndarray
) -> Iterator[list[tuple[Any, ...]]]:
    """Per task of graph ``gi`` in ``perm`` order: (task_idx, name_idx, kind, pid, tid, ts_us,
    dur_us, recorded_ts_us), as lists of a block of tasks (Python values, from vector ops)."""
    g = result.graphs[gi]
    t, p = g.tasks, g.processors
    starts, ends = result.starts(gi), result.ends(gi)
    for lo in range(0, perm.shape[0], _BLOCK):
        ti = perm[lo : lo + _BLOCK]
        pi = t.processor_idx[ti]
        s, e = starts[ti].astype(np.int64), ends[ti].astype(np.int64)
        yield list(zip(
            ti.tolist(), t.name_idx[ti].tolist(), t.kind[ti].tolist(), proc_pid[pi].tolist(),
            p.tid[pi].tolist(), us_list(s + shift), us_list(e - s), us_list(t.ts_ns[ti]), strict=True,
        ))  # fmt: skip


def to_chrome_trace(
    graph: ExecGraph | Workload | None, result: SimResult, *, align_to_trace: bool = True
) -> dict[str, Any]:
    """The simulated run as a Chrome trace dict (``traceEvents``, ``displayTimeUnit``).

    ``graph`` may be None (the result's own workload is used) and is accepted for symmetry
    with other exporters; it must be the graph or workload that was simulated.
    """
    _check(graph, result)
    events: list[dict[str, Any]] = []
    kind_names = [k.name.lower() for k in TaskKind]
    tracks: list[tuple[dict[int, int], int]] = []
    for gi, (meta, shift, proc_pid, track_pid) in _tracks(result, align_to_trace):
        g = result.graphs[gi]
        tracks.append((track_pid, shift))
        events += meta
        _, perm = g.processor_order()
        blocks = _task_blocks(result, gi, shift, proc_pid, perm)
        for ti, ni, kind, pid, tid, ts, dur, rec in chain.from_iterable(blocks):
            events.append(
                {"ph": "X", "name": g.names[ni], "cat": kind_names[kind], "pid": pid, "tid": tid,
                 "ts": ts, "dur": dur,
                 "args": {"task_idx": ti, "rank": g.rank, "recorded_ts_us": rec}}
            )  # fmt: skip
    events.extend(structure_events(result, tracks))
    for rows in memory_counter_rows(result, tracks):
        events.extend(json.loads(b"[" + rows[1:] + b"]"))
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": _other(result)}


def _check(graph: ExecGraph | Workload | None, result: SimResult) -> None:
    if isinstance(graph, ExecGraph) and graph not in result.graphs:
        raise ValueError("to_chrome_trace: graph is not the one this result simulated")


def _other(result: SimResult) -> dict[str, Any]:
    return {"producer": "lumos replay", "makespan_ns": result.makespan_ns}


def _write_events(f: _Sink, result: SimResult, align_to_trace: bool) -> None:
    encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
    kinds = [json.dumps(k.name.lower()).encode() for k in TaskKind]
    if len(result.graphs) > 1:  # rank by rank, shared structure formatted once
        _write_ranks(f, result, list(_tracks(result, align_to_trace)), encode)
        return
    sep = b""
    tracks: list[tuple[dict[int, int], int]] = []
    for gi, (meta, shift, proc_pid, track_pid) in _tracks(result, align_to_trace):
        g = result.graphs[gi]
        tracks.append((track_pid, shift))
        for ev in meta:
            f.write(sep + encode(ev).encode())
            sep = b","
        names = [json.dumps(s).encode() for s in g.names]
        t, p = g.tasks, g.processors
        starts, ends = result.starts(gi), result.ends(gi)
        _, perm = g.processor_order()
        for lo in range(0, perm.shape[0], _BLOCK):
            ti = perm[lo : lo + _BLOCK]
            pi = t.processor_idx[ti]
            s, e = starts[ti].astype(np.int64), ends[ti].astype(np.int64)
            consts = [
                b',{"args":{"rank":%d,"recorded_ts_us":' % g.rank,
                b',"task_idx":', b'},"cat":', b',"dur":', b',"name":', b',"ph":"X","pid":',
                b',"tid":', b',"ts":', b"}",
            ]  # fmt: skip
            fields = [
                (US, t.ts_ns[ti]), (INT, ti), (STRING, t.kind[ti]), (US, e - s),
                (STRING, t.name_idx[ti] + len(kinds)), (INT, proc_pid[pi]), (INT, p.tid[pi]),
                (US, s + shift),
            ]  # fmt: skip
            rows = format_rows(consts, fields, kinds + names)
            f.write(rows if sep else rows[1:])  # each row starts with its comma
            sep = b","
    for rows in chain(structure_rows(result, tracks), memory_counter_rows(result, tracks)):
        f.write(rows if sep else rows[1:])
        sep = b","


def _write_ranks(f: _Sink, result: SimResult, tracks: list[tuple[int, Any]], encode: Any) -> None:
    """:func:`_write_events` of a multi-rank replay (:mod:`lumos.report.perfetto_ranks`)."""
    from lumos.report.perfetto_ranks import rank_chunks

    structure: list[str] = []
    first = True
    shifts = [shift for _, (_, shift, _, _) in tracks]
    pids = [list(track_pid.values()) for _, (_, _, _, track_pid) in tracks]
    for (_, (meta, _, _, _)), (tasks, spans) in zip(tracks, rank_chunks(result, shifts, pids),
                                                    strict=True):  # fmt: skip
        for text in [*(encode(ev) for ev in meta), tasks]:
            if text:
                f.write((("" if first else ",") + text).encode())
                first = False
        if spans:
            structure.append(spans)
    cp = critical_path_events(
        result, [(tp, shift) for _, (_, shift, _, tp) in tracks], _launch_count(result)
    )
    for text in [*structure, *(encode(ev) for ev in cp)]:
        f.write((("" if first else ",") + text).encode())
        first = False
    counter_tracks = [(tp, shift) for _, (_, shift, _, tp) in tracks]
    for rows in memory_counter_rows(result, counter_tracks):
        f.write(rows if not first else rows[1:])
        first = False


def _launch_count(result: SimResult) -> int:
    return sum(int((g.edges.kind == int(DepKind.LAUNCH)).sum()) for g in result.graphs)


def write_chrome_trace(
    path: str | os.PathLike[str],
    graph: ExecGraph | Workload | None,
    result: SimResult,
    *,
    align_to_trace: bool = True,
) -> None:
    """Write :func:`to_chrome_trace` to ``path`` atomically, streamed (see the module
    docstring): compact JSON with sorted keys, gzip-compressed when ``path`` ends in ``.gz``."""
    _check(graph, result)
    if not str(path).endswith(".gz"):
        with atomic_write(path, "wb") as f:
            _write_doc(f, result, align_to_trace)
        return
    with (
        atomic_write(path, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
    ):
        _write_doc(gz, result, align_to_trace)


def _write_doc(f: _Sink, result: SimResult, align_to_trace: bool) -> None:
    other = json.dumps(_other(result), separators=(",", ":"), sort_keys=True)
    f.write(f'{{"displayTimeUnit":"ns","otherData":{other},"traceEvents":['.encode())
    _write_events(f, result, align_to_trace)
    f.write(b"]}")
