"""The Perfetto trace's memory counters: a rank's allocated bytes over the run.

Per rank with memory events, a counter track (``allocated bytes (cuda:0)``, say) in each of its
two process groups: in the predicted one the device's allocated total after each allocation or
free of the replay (:func:`lumos.report.memory.predicted_timeline`), in the measured one the
same as recorded (:func:`lumos.report.memory.measured_timeline`), so the two can be compared
one above the other. Rows are formatted from columns
(:func:`lumos.report.json_columns.format_rows`), no Python object per event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np

from lumos.graph.model import ExecGraph
from lumos.report.json_columns import INT, US, format_rows
from lumos.report.memory import Timeline, measured_timeline, predicted_timeline
from lumos.report.perfetto_layout import RankTracks
from lumos.sim.result import SimResult

__all__ = ["memory_counter_rows"]


def memory_counter_rows(
    result: SimResult, tracks: Sequence[RankTracks], recorded: Sequence[ExecGraph] | None = None
) -> Iterator[bytes]:
    """Per graph of ``result`` with memory: its counter events as JSON rows, each starting with
    a comma, in the rank's predicted group, then (with ``recorded``, the graphs as built from
    the traces) the recorded ones in its measured group (``tracks``:
    :mod:`lumos.report.perfetto_layout`)."""
    for tr in tracks:
        g = result.graphs[tr.gi]
        if g.memory is None or not len(g.processors):
            continue
        tl = predicted_timeline(g, result.starts(tr.gi), result.ends(tr.gi))
        yield from _rows(g, tl, tr.pid, tr.shift)
        if recorded is not None:
            rec = recorded[tr.gi]
            yield from _rows(rec, measured_timeline(rec), tr.measured_pid, tr.measured_shift)


def _rows(g: ExecGraph, tl: Timeline | None, pid: int, shift: int) -> Iterator[bytes]:
    if tl is None or not tl.t_ns.size or g.memory is None:
        return
    name = json.dumps(f"allocated bytes ({g.memory.device})").encode()
    consts = [b',{"args":{"allocated":', b'},"name":' + name + b',"ph":"C","pid":',
              b',"ts":', b"}"]  # fmt: skip
    fields = [(INT, tl.level), (INT, np.full(tl.t_ns.size, pid, dtype=np.int64)),
              (US, tl.t_ns + shift)]  # fmt: skip
    yield format_rows(consts, fields, [])
