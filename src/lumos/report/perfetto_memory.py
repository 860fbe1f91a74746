"""The Perfetto trace's memory counter: a rank's allocated bytes over the simulated run.

One counter track per rank with memory events (``allocated bytes (cuda:0)``, say), in the
rank's predicted process group, its value the device's allocated total after each allocation or free of
the replay (:func:`lumos.report.memory.predicted_timeline`). Rows are formatted from columns
(:func:`lumos.report.json_columns.format_rows`), no Python object per event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np

from lumos.report.json_columns import INT, US, format_rows
from lumos.report.memory import predicted_timeline
from lumos.report.perfetto_layout import RankTracks
from lumos.sim.result import SimResult

__all__ = ["memory_counter_rows"]


def memory_counter_rows(result: SimResult, tracks: Sequence[RankTracks]) -> Iterator[bytes]:
    """Per graph of ``result`` with memory: its counter events as JSON rows, each starting with
    a comma, in the rank's predicted group (``tracks``: :mod:`lumos.report.perfetto_layout`)."""
    for tr in tracks:
        g = result.graphs[tr.gi]
        if g.memory is None or not len(g.processors):
            continue
        tl = predicted_timeline(g, result.starts(tr.gi), result.ends(tr.gi))
        if tl is None or not tl.t_ns.size:
            continue
        name = json.dumps(f"allocated bytes ({g.memory.device})").encode()
        consts = [b',{"args":{"allocated":', b'},"name":' + name + b',"ph":"C","pid":',
                  b',"ts":', b"}"]  # fmt: skip
        fields = [(INT, tl.level), (INT, np.full(tl.t_ns.size, tr.pid, dtype=np.int64)),
                  (US, tl.t_ns + tr.shift)]  # fmt: skip
        yield format_rows(consts, fields, [])
