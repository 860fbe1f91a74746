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
"""

from __future__ import annotations

import json
import os
from typing import Any

from lumos._io import atomic_write
from lumos.graph.build_ranks import shared_clock_origin
from lumos.graph.model import ExecGraph, ProcessorKind, TaskKind, Workload
from lumos.report.perfetto_structure import structure_events
from lumos.sim.result import SimResult

__all__ = ["to_chrome_trace", "write_chrome_trace"]


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


def to_chrome_trace(
    graph: ExecGraph | Workload | None, result: SimResult, *, align_to_trace: bool = True
) -> dict[str, Any]:
    """The simulated run as a Chrome trace dict (``traceEvents``, ``displayTimeUnit``).

    ``graph`` may be None (the result's own workload is used) and is accepted for symmetry
    with other exporters; it must be the graph or workload that was simulated.
    """
    graphs = result.graphs
    if isinstance(graph, ExecGraph) and graph not in graphs:
        raise ValueError("to_chrome_trace: graph is not the one this result simulated")
    multi = len(graphs) > 1
    # ranks recorded on one clock were simulated from a common origin (align_ranks): shift them
    # all by the earliest rank's start; ranks on separate clocks each start at their own
    common = shared_clock_origin(graphs) if align_to_trace else None
    events: list[dict[str, Any]] = []
    tracks: list[tuple[dict[int, int], int]] = []
    kind_names = [k.name.lower() for k in TaskKind]
    for gi, g in enumerate(graphs):
        t = g.tasks
        p = g.processors
        starts, ends = result.starts(gi), result.ends(gi)
        shift = int(t.ts_ns.min()) if align_to_trace and g.num_tasks else 0
        if common is not None:
            shift = common
        track_pid: dict[int, int] = {}
        tracks.append((track_pid, shift))
        for pi in range(len(p)):
            raw, tid = int(p.pid[pi]), int(p.tid[pi])
            if raw not in track_pid:
                track_pid[raw] = (g.rank + 1) * 1000 + len(track_pid) if multi else raw
                pid = track_pid[raw]
                what = f"GPU {int(p.device[pi])}" if p.kind[pi] == ProcessorKind.STREAM else "host"
                pname = f"rank {g.rank} {what} (pid {raw})" if multi else f"{what} (pid {raw})"
                events.append(
                    {
                        "ph": "M",
                        "name": "process_name",
                        "pid": pid,
                        "tid": 0,
                        "args": {"name": pname},
                    }
                )
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": track_pid[raw],
                    "tid": tid,
                    "args": {"name": f"{p.label[pi]} (replay)"},
                }
            )
        _, perm = g.processor_order()
        proc = t.processor_idx
        for ti in perm.tolist():
            pi = int(proc[ti])
            s, e = int(starts[ti]), int(ends[ti])
            events.append(
                {
                    "ph": "X",
                    "name": g.names[int(t.name_idx[ti])],
                    "cat": kind_names[int(t.kind[ti])],
                    "pid": track_pid[int(p.pid[pi])],
                    "tid": int(p.tid[pi]),
                    "ts": _us(s + shift),
                    "dur": _us(e - s),
                    "args": {
                        "task_idx": ti,
                        "rank": g.rank,
                        "recorded_ts_us": _us(int(t.ts_ns[ti])),
                    },
                }
            )
    events.extend(structure_events(result, tracks))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "lumos replay", "makespan_ns": result.makespan_ns},
    }


def write_chrome_trace(
    path: str | os.PathLike[str],
    graph: ExecGraph | Workload | None,
    result: SimResult,
    *,
    align_to_trace: bool = True,
) -> None:
    """Write :func:`to_chrome_trace` to ``path`` atomically (compact JSON, stable key order)."""
    trace = to_chrome_trace(graph, result, align_to_trace=align_to_trace)
    with atomic_write(path) as f:
        json.dump(trace, f, separators=(",", ":"), sort_keys=True)
