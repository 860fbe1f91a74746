"""Chrome / Perfetto trace of a replay beside its recording, one file for ui.perfetto.dev.

Each rank has two process groups (:mod:`lumos.report.perfetto_layout`): ``rank R measured
(recorded)``, every task at its recorded time, and ``rank R predicted (replay)``, every task as
simulated, with the same thread tracks (its threads and GPU streams) in the same order, so the
recording and the replay compare on one screen. The replay's group also holds a
``critical path (predicted)`` track with a copy of each of the rank's tasks on the critical
path, and the replay's events of those tasks carry ``critical_path: true``
(:mod:`lumos.report.perfetto_measured`).

Timestamps are microseconds (floats, ns precision kept to 3 decimals). By default the replay is
shifted to start where the recorded trace started (its first task's ``ts_ns``) so both groups
line up on the recorded time axis. Output is deterministic: the replay's events sorted by
processor then order, then its steps, parent ops and flow arrows
(:mod:`lumos.report.perfetto_structure`), memory counters, then each rank's recording, then the
critical-path tracks.

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
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, Protocol

import numpy as np

from lumos._io import atomic_write
from lumos.graph.model import DepKind, ExecGraph, TaskKind, Workload
from lumos.report.json_columns import INT, STRING, US, format_rows
from lumos.report.perfetto_layout import RankTracks, rank_tracks
from lumos.report.perfetto_measured import PathTasks, measured_rows, path_rows, path_tasks
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
_ON_PATH = [b"", b'"critical_path":true,']


class _Sink(Protocol):
    """A binary file, plain or gzip."""

    def write(self, data: bytes, /) -> int: ...


def _task_blocks(
    result: SimResult, tr: RankTracks, perm: np.ndarray
) -> Iterator[list[tuple[Any, ...]]]:
    """Per task of graph ``tr.gi`` in ``perm`` order: (task_idx, name_idx, kind, tid, ts_us,
    dur_us, recorded_ts_us), as lists of a block of tasks (Python values, from vector ops)."""
    g = result.graphs[tr.gi]
    t = g.tasks
    starts, ends = result.starts(tr.gi), result.ends(tr.gi)
    for lo in range(0, perm.shape[0], _BLOCK):
        ti = perm[lo : lo + _BLOCK]
        s, e = starts[ti].astype(np.int64), ends[ti].astype(np.int64)
        yield list(zip(
            ti.tolist(), t.name_idx[ti].tolist(), t.kind[ti].tolist(),
            tr.tid[t.processor_idx[ti]].tolist(), us_list(s + tr.shift), us_list(e - s),
            us_list(t.ts_ns[ti]), strict=True,
        ))  # fmt: skip


def to_chrome_trace(
    graph: ExecGraph | Workload | None,
    result: SimResult,
    *,
    align_to_trace: bool = True,
    recorded: Workload | None = None,
) -> dict[str, Any]:
    """The replay beside its recording as a Chrome trace dict (``traceEvents``,
    ``displayTimeUnit``, ``otherData``).

    ``graph`` may be None (the result's own workload is used) and is accepted for symmetry
    with other exporters; it must be the graph or workload that was simulated. ``recorded``:
    the workload as built from the traces when ``result`` simulated an edited copy of it
    (``--scale``, ``--without``; same tasks): the measured groups' times come from it.
    """
    rec = _check(graph, result, recorded)
    events: list[dict[str, Any]] = []
    kind_names = [k.name.lower() for k in TaskKind]
    tracks = rank_tracks(result, align_to_trace)
    path = path_tasks(result)
    for tr in tracks:
        g = result.graphs[tr.gi]
        events += tr.meta
        _, perm = g.processor_order()
        on_path = path.mask(tr.gi, g.num_tasks)
        for ti, ni, kind, tid, ts, dur, rec_us in chain.from_iterable(
            _task_blocks(result, tr, perm)
        ):
            args = {"task_idx": ti, "rank": g.rank, "recorded_ts_us": rec_us}
            if on_path[ti]:
                args["critical_path"] = True
            events.append(
                {"ph": "X", "name": g.names[ni], "cat": kind_names[kind], "pid": tr.pid,
                 "tid": tid, "ts": ts, "dur": dur, "args": args}
            )  # fmt: skip
    events.extend(structure_events(result, tracks, path))
    for rows in _tail_rows(result, tracks, rec, path):
        events.extend(json.loads(b"[" + rows[1:] + b"]"))
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": _other(result)}


def _check(
    graph: ExecGraph | Workload | None, result: SimResult, recorded: Workload | None
) -> Sequence[ExecGraph]:
    """The recorded graphs (``recorded``'s, else the result's), checked against the result."""
    if isinstance(graph, ExecGraph) and graph not in result.graphs:
        raise ValueError("to_chrome_trace: graph is not the one this result simulated")
    if recorded is None:
        return result.graphs
    rec = recorded.graphs
    if [g.num_tasks for g in rec] != [g.num_tasks for g in result.graphs]:
        raise ValueError("to_chrome_trace: recorded is not the workload this result replayed")
    return rec


def _other(result: SimResult) -> dict[str, Any]:
    return {"producer": "lumos replay", "makespan_ns": result.makespan_ns}


def _tail_rows(
    result: SimResult, tracks: list[RankTracks], recorded: Sequence[ExecGraph], path: PathTasks
) -> Iterator[bytes]:
    """What follows the replay's own events: memory counters, each rank's recording, the
    critical-path tracks."""
    yield from memory_counter_rows(result, tracks, recorded)
    yield from measured_rows(result, tracks, recorded)
    yield from path_rows(result, tracks, path)


def _write_events(
    f: _Sink, result: SimResult, align_to_trace: bool, recorded: Sequence[ExecGraph]
) -> None:
    encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
    kinds = [json.dumps(k.name.lower()).encode() for k in TaskKind]
    tracks = rank_tracks(result, align_to_trace)
    path = path_tasks(result)
    if len(result.graphs) > 1:  # rank by rank, shared structure formatted once
        _write_ranks(f, result, tracks, path, encode)
    else:
        _write_single(f, result, tracks, path, encode, kinds)
    first = not result.graphs
    for rows in _tail_rows(result, tracks, recorded, path):
        f.write(rows[1:] if first else rows)
        first = first and not rows


def _write_single(
    f: _Sink, result: SimResult, tracks: list[RankTracks], path: PathTasks, encode: Any,
    kinds: list[bytes],
) -> None:  # fmt: skip
    sep = b""
    for tr in tracks:
        g = result.graphs[tr.gi]
        for ev in tr.meta:
            f.write(sep + encode(ev).encode())
            sep = b","
        names = [json.dumps(s).encode() for s in g.names]
        t = g.tasks
        starts, ends = result.starts(tr.gi), result.ends(tr.gi)
        on_path = path.mask(tr.gi, g.num_tasks).astype(np.int64)
        _, perm = g.processor_order()
        for lo in range(0, perm.shape[0], _BLOCK):
            ti = perm[lo : lo + _BLOCK]
            s, e = starts[ti].astype(np.int64), ends[ti].astype(np.int64)
            consts = [
                b',{"args":{', b'"rank":%d,"recorded_ts_us":' % g.rank,
                b',"task_idx":', b'},"cat":', b',"dur":', b',"name":',
                b',"ph":"X","pid":%d,"tid":' % tr.pid, b',"ts":', b"}",
            ]  # fmt: skip
            fields: list[tuple[int, np.ndarray]] = [
                (STRING, on_path[ti]), (US, t.ts_ns[ti]), (INT, ti), (STRING, t.kind[ti] + 2),
                (US, e - s), (STRING, t.name_idx[ti] + 2 + len(kinds)),
                (INT, tr.tid[t.processor_idx[ti]]), (US, s + tr.shift),
            ]  # fmt: skip
            rows = format_rows(consts, fields, _ON_PATH + kinds + names)
            f.write(rows if sep else rows[1:])  # each row starts with its comma
            sep = b","
    for rows in structure_rows(result, tracks, path):
        f.write(rows if sep else rows[1:])
        sep = b","


def _write_ranks(
    f: _Sink, result: SimResult, tracks: list[RankTracks], path: PathTasks, encode: Any
) -> None:
    """:func:`_write_events` of a multi-rank replay (:mod:`lumos.report.perfetto_ranks`)."""
    from lumos.report.perfetto_ranks import rank_chunks

    structure: list[str] = []
    first = True
    for tr, (tasks, spans) in zip(tracks, rank_chunks(result, tracks, path.local), strict=True):
        for text in [*(encode(ev) for ev in tr.meta), tasks]:
            if text:
                f.write((("" if first else ",") + text).encode())
                first = False
        if spans:
            structure.append(spans)
    cp = critical_path_events(result, tracks, _launch_count(result), path)
    for text in [*structure, *(encode(ev) for ev in cp)]:
        f.write((("" if first else ",") + text).encode())
        first = False


def _launch_count(result: SimResult) -> int:
    return sum(int((g.edges.kind == int(DepKind.LAUNCH)).sum()) for g in result.graphs)


def write_chrome_trace(
    path: str | os.PathLike[str],
    graph: ExecGraph | Workload | None,
    result: SimResult,
    *,
    align_to_trace: bool = True,
    recorded: Workload | None = None,
) -> None:
    """Write :func:`to_chrome_trace` to ``path`` atomically, streamed (see the module
    docstring): compact JSON with sorted keys, gzip-compressed when ``path`` ends in ``.gz``."""
    rec = _check(graph, result, recorded)
    if not str(path).endswith(".gz"):
        with atomic_write(path, "wb") as f:
            _write_doc(f, result, align_to_trace, rec)
        return
    with (
        atomic_write(path, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
    ):
        _write_doc(gz, result, align_to_trace, rec)


def _write_doc(
    f: _Sink, result: SimResult, align_to_trace: bool, recorded: Sequence[ExecGraph]
) -> None:
    other = json.dumps(_other(result), separators=(",", ":"), sort_keys=True)
    f.write(f'{{"displayTimeUnit":"ns","otherData":{other},"traceEvents":['.encode())
    _write_events(f, result, align_to_trace, recorded)
    f.write(b"]}")
