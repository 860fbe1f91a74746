"""The Perfetto trace's memory counter: a rank's allocated bytes over the simulated run.

One counter track per rank with memory events (``allocated bytes (cuda:0)``, say), in the
rank's host process, its value the device's allocated total after each allocation or free of
the replay (:func:`lumos.report.memory.predicted_timeline`). Rows are formatted from columns
(:func:`lumos.report.json_columns.format_rows`), no Python object per event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

from lumos.graph.kinds import ProcessorKind
from lumos.report.json_columns import INT, US, format_rows
from lumos.report.memory import predicted_timeline
from lumos.sim.result import SimResult

__all__ = ["memory_counter_rows"]


def memory_counter_rows(
    result: SimResult, tracks: list[tuple[dict[int, int], int]]
) -> Iterator[bytes]:
    """Per graph of ``result`` with memory: its counter events as JSON rows, each starting with
    a comma. ``tracks``: per graph, (track pid by recorded pid, time shift) as the trace's
    other events use them."""
    for gi, (track_pid, shift) in enumerate(tracks):
        g = result.graphs[gi]
        if g.memory is None or not track_pid:
            continue
        tl = predicted_timeline(g, result.starts(gi), result.ends(gi))
        if tl is None or not tl.t_ns.size:
            continue
        name = json.dumps(f"allocated bytes ({g.memory.device})").encode()
        p = g.processors
        hosts = p.pid[p.kind != int(ProcessorKind.STREAM)]
        pid = track_pid.get(int(hosts[0]), min(track_pid.values())) if hosts.size else 0
        consts = [b',{"args":{"allocated":', b'},"name":' + name + b',"ph":"C","pid":',
                  b',"ts":', b"}"]  # fmt: skip
        fields = [(INT, tl.level), (INT, np.full(tl.t_ns.size, pid, dtype=np.int64)),
                  (US, tl.t_ns + shift)]  # fmt: skip
        yield format_rows(consts, fields, [])
