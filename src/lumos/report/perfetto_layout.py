"""Where each rank's events go in the Perfetto trace: two process groups per rank, its
recording (``measured``) above its replay (``predicted``), the same thread tracks in each.

======================  ==========================================================================
track                   what it is
======================  ==========================================================================
process ``pid``         the rank's replay, named ``rank R predicted (replay)``;
                        ``pid = (R + 1) * 1000``
process ``measured_pid``  the rank's recording, named ``rank R measured (recorded)``;
                        ``measured_pid = (R + 1) * 1000 + 1``; listed just above the replay
                        (``process_sort_index`` ``2 * i`` and ``2 * i + 1`` for the i-th rank)
thread ``tid[k]``       processor ``k`` of the rank in either group: its recorded tid (a tid that
                        another processor of the rank already has gets the next free number),
                        named ``thread T (view)`` or ``GPU D stream S (view)``, in processor order
thread ``path_tid``     in the replay's group only, first: ``critical path (predicted)``, a copy
                        of each of the rank's tasks on the critical path (see
                        :mod:`lumos.report.perfetto_measured`)
======================  ==========================================================================

Times: the replay is shifted by ``shift`` ns (to start where the recording started, by default,
so both groups line up on the recorded clock); the recording by ``measured_shift`` (0 then;
without alignment both start at 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_ranks import shared_clock_origin
from lumos.graph.model import ExecGraph, ProcessorKind
from lumos.graph.tables import Processors
from lumos.sim.result import SimResult

__all__ = ["RankTracks", "rank_tracks", "track_tids"]


@dataclass(frozen=True, eq=False)
class RankTracks:
    """The tracks of graph ``gi`` (rank ``rank``) of a replay; see the module docstring."""

    gi: int
    rank: int
    pid: int
    measured_pid: int
    tid: NDArray[np.int64]
    path_tid: int
    shift: int
    measured_shift: int
    meta: list[dict[str, Any]]
    measured_meta: list[dict[str, Any]]


def track_tids(p: Processors) -> tuple[NDArray[np.int64], int]:
    """Per processor its thread id in the rank's process (its recorded tid, or the next free
    number where another processor of the rank has that tid already), and a free tid after
    them all (the critical-path track's)."""
    tids = np.asarray(p.tid, dtype=np.int64).copy()
    nxt = int(tids.max()) + 1 if tids.size else 1
    seen: set[int] = set()
    for k, v in enumerate(tids.tolist()):
        if v in seen:
            tids[k] = nxt
            nxt += 1
        seen.add(int(tids[k]))
    return tids, nxt


def _meta(g: ExecGraph, pid: int, sort: int, tids: NDArray[np.int64], view: str,
          process: str) -> list[dict[str, Any]]:  # fmt: skip
    p = g.processors
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"rank {g.rank} {process}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": sort}},
    ]  # fmt: skip
    for k, tid in enumerate(tids.tolist()):
        where = f"GPU {int(p.device[k])} " if p.kind[k] == ProcessorKind.STREAM else ""
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": f"{where}{p.label[k]} ({view})"}})  # fmt: skip
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                    "args": {"sort_index": k + 1}})  # fmt: skip
    return out


def rank_tracks(result: SimResult, align_to_trace: bool = True) -> list[RankTracks]:
    """The tracks of every graph of ``result``, in order."""
    graphs = result.graphs
    # ranks recorded on one clock were simulated from a common origin (align_ranks): shift them
    # all by the earliest rank's start; ranks on separate clocks each start at their own
    common = shared_clock_origin(graphs)
    out = []
    for gi, g in enumerate(graphs):
        origin = int(g.tasks.ts_ns.min()) if g.num_tasks else 0
        if common is not None:
            origin = common
        shift, measured_shift = (origin, 0) if align_to_trace else (0, -origin)
        pid = (g.rank + 1) * 1000
        tids, path_tid = track_tids(g.processors)
        out.append(RankTracks(
            gi, g.rank, pid, pid + 1, tids, path_tid, shift, measured_shift,
            _meta(g, pid, 2 * gi + 1, tids, "predicted", "predicted (replay)"),
            _meta(g, pid + 1, 2 * gi, tids, "measured", "measured (recorded)"),
        ))  # fmt: skip
    return out
